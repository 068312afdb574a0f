"""``liveness_decision``: mark application code that assumes a task is still live."""

from __future__ import annotations

import functools
import inspect
import logging
import uuid
from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, TypeVar, cast

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from otel_a2a import semconv as sc
from otel_a2a.detect import TaskStateDivergenceError, Verdict, assumes_live
from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT

F = TypeVar("F", bound=Callable[..., Any])
_log = logging.getLogger("otel_a2a")
INVALID_ARGUMENT = "invalid_decision_argument"  # error.type of a decision refused for its types

# The decisions entered and not yet exited in this context, innermost last: one instance may be
# entered again while open (nested, or by concurrent asyncio tasks, each in its own context),
# so what an exit must end and detach cannot live on the instance.
_OPEN: ContextVar[tuple[tuple[object, Span, Token[Context]], ...]] = ContextVar(
    "otel_a2a_open_decisions", default=()
)


class liveness_decision:
    """Open a ``liveness_decision`` span and judge the decision before the block runs.

    Usable as ``with``/``async with`` block and as a decorator of sync or async functions.
    In ``enforce`` mode (``OTEL_A2A_MODE=enforce``) a divergent decision raises
    :class:`TaskStateDivergenceError` before the block runs. ``agent`` is the agent's URL
    (any URL under its interface); by default the agent where the task was last observed.
    ``assumed_state`` is the state the block relies on: a terminal one (``completed``, say)
    does not assume the task live, so a terminal observation authorises it instead of
    reporting ``terminal_state``. Without instrumentation the block just runs.
    """

    def __init__(self, task_id: str, *, agent: str | None = None, assumed_state: str = "working"):
        self.task_id = task_id
        self.agent = agent
        self.assumed_state = assumed_state
        self.verdict: Verdict | None = None
        # the last entry, for an exit in another context than its enter (a sync generator
        # under Starlette runs each step in a fresh copy): the stack cannot be found there
        self._last: tuple[Span, Token[Context]] | None = None

    def __enter__(self) -> liveness_decision:
        rt = runtime.current()
        if rt is None:
            return self
        if not GUARD.enter():  # inside otel-a2a's own work: not judged (see there)
            GUARD.defer(functools.partial(rt.error, REENTRANT))
            return self
        try:
            task_id, assumed_state = (
                _text(rt, "task_id", self.task_id),
                _text(rt, "assumed_state", self.assumed_state),
            )
            if task_id is None or assumed_state is None:
                return self  # refused, warned and counted: the block runs unjudged
            agent = rt.resolve_agent(task_id, self.agent)
            peer = rt.peer_of(agent)
            attributes: dict[str, str | bool] = {
                sc.LIVENESS_DECISION: True,
                sc.TASK_ID: task_id,
                sc.ASSUMED_STATE: assumed_state,
            }
            if agent != runtime.UNKNOWN_AGENT:  # a URL, or nothing
                attributes[sc.AGENT_URL] = agent
            if peer.etag is not None:
                attributes[sc.CARD_ETAG] = peer.etag
            span = rt.tracer.start_span(
                sc.OP_DECISION, kind=SpanKind.INTERNAL, attributes=attributes
            )
            # this entry's own verdict: another thread may enter the same instance meanwhile
            verdict = rt.decide(
                span,
                task_id,
                peer,
                sc.OP_DECISION,
                assumes_live=assumes_live(assumed_state),
            )
            self.verdict = verdict  # the latest, for the caller to read
            token = context.attach(trace.set_span_in_context(span))
            _OPEN.set((*_OPEN.get(), (self, span, token)))
            self._last = (span, token)
        except Exception as exc:
            rt.error(exc)
            return self
        finally:
            GUARD.leave()
        if rt.settings.enforce and not verdict.ok:
            error = TaskStateDivergenceError(verdict)
            self.__exit__(type(error), error, None)
            raise error
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack = _OPEN.get()
        for i in range(len(stack) - 1, -1, -1):  # this instance's innermost entry
            if stack[i][0] is self:
                _OPEN.set(stack[:i] + stack[i + 1 :])
                _, span, token = stack[i]
                if self._last is not None and self._last[0] is span:
                    self._last = None
                break
        else:
            if self._last is None:
                return  # entered without instrumentation, or its start failed
            (span, token), self._last = self._last, None
        context.detach(token)  # from another context: OpenTelemetry logs it, never raises
        try:
            if exc_type is not None:
                span.set_status(Status(StatusCode.ERROR, exc_type.__qualname__))
            span.end()  # runs every span processor, the application's too
        except Exception as err:
            rt = runtime.current()
            if rt is not None:
                rt.error(err)

    async def __aenter__(self) -> liveness_decision:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def _fresh(self) -> liveness_decision:
        return liveness_decision(self.task_id, agent=self.agent, assumed_state=self.assumed_state)

    def __call__(self, func: F) -> F:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with self._fresh():
                    return await func(*args, **kwargs)

            return cast(F, async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return func(*args, **kwargs)

        return cast(F, wrapper)


def _text(rt: runtime.Runtime, name: str, value: object) -> str | None:
    """``value`` as the text an attribute of the decision span holds: a string as it is, a
    ``uuid.UUID`` or an integer as its ``str`` (ids are often kept as such); anything else
    is refused (None), with one warning per argument (per runtime) and a count: a value of
    another type would cost the application the spans exported with it (an exporter refuses
    the batch)."""
    if isinstance(value, str):
        return value
    if isinstance(value, uuid.UUID) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    rt.error(INVALID_ARGUMENT)
    if name not in rt.warned:
        rt.warned.add(name)
        _log.warning(
            "otel-a2a: liveness_decision(%s=...) takes a str (or a UUID or an int), not %s: "
            "the decision is not judged",
            name,
            type(value).__name__,
        )
    return None
