"""Accepted, never finished: a task the worker's store holds that is neither terminal nor
interrupted and has no live execution in this process.

What it relies on in a2a-sdk (docs/worker.md): the task store (``TaskStore.list`` with a status
filter, page by page, per owner: once with an anonymous caller, once per caller this process has
served), and the executor the request handler was built with, which this module wraps in a
transparent proxy to know which tasks have an ``execute`` running. A task is found

- at start-up and on every check when this process never ran it (``not_run_here``: its store
  rehydrated it after a restart), and
- when its last execution here ended (returned, raised or was cancelled) before the previous
  check began and left it neither terminal nor interrupted (``execution_ended``): a whole
  period for a2a-sdk to write what the execution enqueued before the store is believed.

Each task is reported once until an execution of it starts again. Failures are counted, never
raised: the worker goes on serving whatever the check meets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections import OrderedDict
from typing import Any

import wrapt
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import Link, SpanContext, SpanKind
from opentelemetry.util.types import AttributeValue

from otel_a2a import semconv as sc
from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.instrumentation.server import attributes as at

_log = logging.getLogger("otel_a2a")
LISTED_STATES = (1, 2)  # SUBMITTED, WORKING: a status filter of 0 would mean "any"
PAGE_SIZE = 100
MAX_OWNERS = 64  # callers whose tasks are listed (the store scopes tasks by owner)


class Bounded(OrderedDict[str, Any]):
    """A dict that forgets its oldest entries past ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class TrackedExecutor(wrapt.ObjectProxy):  # type: ignore[type-arg]  # wrapt 1 has no ObjectProxy[...]
    """The application's ``AgentExecutor``, unchanged, telling its watch which tasks have an
    execution running (the only thing a2a-sdk does not say through a public API)."""

    def __init__(self, executor: Any, watch: Watch) -> None:
        super().__init__(executor)
        self._self_watch = watch

    async def execute(self, context: Any, event_queue: Any) -> None:
        task_id = getattr(context, "task_id", None) or ""
        watch = self._self_watch
        watch.started(task_id)
        try:
            await self.__wrapped__.execute(context, event_queue)
        finally:
            watch.ended(task_id)


class Watch:
    """The accepted-never-finished check of one request handler."""

    def __init__(
        self,
        rt: Runtime,
        handler: Any,
        card: Any,
        interval: float,
        cluster: bool,
    ) -> None:
        self.rt = rt
        self.interval = interval
        self.card = card
        self.cluster = cluster  # a store shared by replicas: their executions are not seen here
        self.active = True
        self._handler = weakref.ref(handler)
        limit = rt.settings.max_tracked_tasks
        self.live: dict[str, int] = {}  # task id: executions running
        self.ended_at: Bounded = Bounded(limit)  # task id: checks begun when its last ended
        self.reported: Bounded = Bounded(limit)  # task id: the state reported
        self.last_span: Bounded = Bounded(limit)  # task id: its last server span
        self.owners: Bounded = Bounded(MAX_OWNERS)  # (user name, tenant): the caller
        self.checks = 0
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # execution tracking (the event loop's thread)
    def started(self, task_id: str) -> None:
        self.live[task_id] = self.live.get(task_id, 0) + 1
        self.reported.pop(task_id, None)

    def ended(self, task_id: str) -> None:
        left = self.live.get(task_id, 1) - 1
        if left > 0:
            self.live[task_id] = left
        else:
            self.live.pop(task_id, None)
        self.ended_at[task_id] = self.checks

    def served(self, call_context: Any, task_id: str, span_context: SpanContext) -> None:
        """A request of this handler: its caller's tasks are listed from now on, its task's
        last span is linked from a finding, and the check starts if it has not yet."""
        try:
            user = call_context.user
            key = f"{getattr(user, 'user_name', '')}\x00{getattr(call_context, 'tenant', '')}"
            if key not in self.owners:
                self.owners[key] = (user, getattr(call_context, "tenant", ""))
        except Exception as exc:
            self.rt.error(exc)
        if task_id and span_context.is_valid:
            self.last_span[task_id] = span_context
        self.start()

    # the check
    def start(self) -> None:
        """Start the periodic check on the running event loop (once; none outside a loop,
        then the first request starts it). Its task runs in an empty context: a finding is
        not part of the request that happened to start the check."""
        if self._task is not None or self.cluster or not self.active:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._loop = loop
        self._task = loop.create_task(self._run(), context=contextvars.Context())

    def stop(self) -> None:
        """Stop the check (``uninstrument``, from any thread)."""
        self.active = False
        task, loop = self._task, self._loop
        if task is None or loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(task.cancel)

    async def _run(self) -> None:
        from otel_a2a.instrumentation.server.setup import set_up

        try:
            await set_up(self.rt)
        except Exception as exc:
            self.rt.error(exc)
        while self.active and self._handler() is not None:
            try:
                await self.scan()
            except Exception as exc:  # a store that fails: counted, tried again next period
                self.rt.error(exc)
            await asyncio.sleep(self.interval)

    async def scan(self) -> None:
        """One check over the tasks the store holds in a state that is neither terminal nor
        interrupted."""
        from a2a.server.context import ServerCallContext
        from a2a.types.a2a_pb2 import ListTasksRequest

        handler = self._handler()
        if handler is None:
            return
        store = handler.task_store
        del handler
        self.checks += 1
        contexts = [ServerCallContext()]
        contexts += [ServerCallContext(user=u, tenant=t) for u, t in list(self.owners.values())]
        seen: set[str] = set()
        for call_context in contexts:
            for state in LISTED_STATES:
                token = ""
                for _ in range(max(1, self.rt.settings.max_tracked_tasks // PAGE_SIZE)):
                    request = ListTasksRequest(status=state, page_size=PAGE_SIZE)  # type: ignore[arg-type]
                    if token:
                        request.page_token = token
                    page = await store.list(request, call_context)
                    for task in page.tasks:
                        if task.id not in seen:
                            seen.add(task.id)
                            self._judge(task)
                    token = page.next_page_token
                    if not token:
                        break

    def _judge(self, task: Any) -> None:
        task_id = task.id
        state = task.status.state
        if not self.active or self.live.get(task_id) or state in at.TERMINAL | at.INTERRUPTED:
            return
        ended = self.ended_at.get(task_id)
        if ended is not None and ended >= self.checks - 1:
            return  # ended since the previous check began: what it enqueued may be unwritten
        name = at.state_name(state)
        if self.reported.get(task_id) == name:
            return
        self.reported[task_id] = name
        cause = sc.CAUSE_NOT_RUN_HERE if ended is None else sc.CAUSE_EXECUTION_ENDED
        self.report(task_id, task.context_id, name, cause)

    def report(self, task_id: str, context_id: str, state: str, cause: str) -> None:
        """The finding: span (linked to the task's last server span), span event, log record,
        ``otel_a2a.task.unfinished`` metric."""
        rt = self.rt
        attrs: dict[str, AttributeValue] = {
            sc.TASK_ID: task_id,
            sc.TASK_STATE: state,
            sc.UNFINISHED_CAUSE: cause,
        }
        if context_id:
            attrs[sc.CONTEXT_ID] = context_id
        agent = at.card_attributes(self.card)
        last = self.last_span.get(task_id)
        links = [Link(last)] if last is not None else []
        with rt.tracer.start_as_current_span(
            sc.EVENT_TASK_UNFINISHED,
            kind=SpanKind.INTERNAL,
            attributes={**attrs, **agent},
            links=links,
        ) as span:
            span.add_event(sc.EVENT_TASK_UNFINISHED, attrs)
            rt.events.emit(
                event_name=sc.EVENT_TASK_UNFINISHED,
                body=f"A2A task accepted, never finished: {task_id} {state} ({cause})",
                severity_number=SeverityNumber.WARN,
                severity_text="WARN",
                attributes={**attrs, **agent},
                context=trace.set_span_in_context(span),
            )
        labels: dict[str, AttributeValue] = {sc.UNFINISHED_CAUSE: cause, sc.TASK_STATE: state}
        if sc.AGENT_NAME in agent:
            labels[sc.AGENT_NAME] = agent[sc.AGENT_NAME]
        rt.metrics.unfinished.add(1, labels)
        _log.debug("otel-a2a: task %s accepted, never finished (%s, %s)", task_id, state, cause)
