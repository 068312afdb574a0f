"""The demo's a2a-sdk worker: a2a-sdk 1.3 on Starlette and uvicorn, tasks in SQLite.

    python demo/python_worker.py --port N --store DIR [--card-version V] [--heartbeat S]
        [--job-seconds S] [--card-max-age S] [--forget] [--spans FILE]

Prints ``READY <base_url>`` once it listens on 127.0.0.1 (``N`` = 0 picks a free port) and
serves the card at ``/.well-known/agent-card.json`` (a2a-sdk's weak ``ETag``, ``If-None-Match``,
``Cache-Control: public, max-age=<card-max-age>``), v1.0 JSON-RPC at ``/a2a/jsonrpc`` and
HTTP+JSON at ``/a2a/rest``, each with its v0.3 compat layer.

Tasks live in ``DIR/tasks.db`` (a2a-sdk's ``DatabaseTaskStore`` on aiosqlite), durable across a
restart; ``--forget`` starts with an empty store. Unlike the demo's Node and JVM workers it does
not fail what it finds in flight after a restart: a2a-sdk keeps such a task as it was
(``working``) with nothing executing it, which is what otel-a2a's worker side reports
(``otel_a2a.task.unfinished``).

otel-a2a instruments it with ``A2AInstrumentor`` (``--spans FILE``: spans as OTLP JSON lines,
the analyzer's input, and log records as JSON lines in ``FILE.logs``), or by
``OTEL_A2A_ENABLED=true`` without ``--spans`` (as ``otel-a2a demo --worker python`` starts it).
Its card carries the heartbeat extension through ``OTEL_A2A_SERVE_HEARTBEAT``: with ``--spans``
set to ``--heartbeat`` unless given; without, the worker touches no ``OTEL_*`` setting (the
environment gives it, read at interpreter start under ``OTEL_A2A_ENABLED``).

The executor follows the first word of the message text:

- ``job [N]`` (and any other text): submitted, working, a working update every heartbeat/2 s,
  completed with an artifact after ``N`` or ``--job-seconds`` s; canceled by CancelTask. A
  follow-up message to the running job is noted (a working update) and the job goes on; since
  a2a-sdk runs one task's requests one after the other, the job's execution hands the job over
  to the follow-up's (see :class:`Jobs`): the first request's stream ends there, the task
  still working;
- ``echo ...``: submitted, working, completed at once;
- ``raise``: submitted, working, then the executor raises (a2a-sdk fails the task);
- ``vanish``: submitted, working, then the executor returns without a final state.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"


class ExecutorRaised(RuntimeError):
    """What ``raise`` makes the executor raise."""


def _spans_to(path: Path, service: str) -> dict[str, Any]:
    """Providers writing spans (OTLP JSON lines) to ``path`` and log records (JSON lines) to
    ``path.logs``, flushed per record: a worker killed mid-task loses none."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class OtlpJsonLines(SpanExporter):
        def __init__(self, out: IO[str]) -> None:
            self.out = out

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            line = MessageToJson(encode_spans(spans), indent=None)
            self.out.write(line.replace("\n", "") + "\n")
            self.out.flush()
            return SpanExportResult.SUCCESS

    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OtlpJsonLines(open(path, "a", encoding="utf-8")))  # noqa: SIM115
    )
    logs = open(Path(f"{path}.logs"), "a", encoding="utf-8")  # noqa: SIM115
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(
            ConsoleLogRecordExporter(
                out=logs, formatter=lambda r: r.to_json(indent=None).replace("\n", "") + "\n"
            )
        )
    )
    return {
        "tracer_provider": tracer_provider,
        "logger_provider": logger_provider,
        "meter_provider": MeterProvider(resource=resource),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--store", type=Path, required=True, help="folder of tasks.db")
    parser.add_argument("--card-version", default="1.0.0")
    parser.add_argument("--heartbeat", type=float, default=30.0)
    parser.add_argument("--job-seconds", type=float, default=600.0)
    parser.add_argument("--card-max-age", type=float, default=300.0)
    parser.add_argument("--forget", action="store_true", help="start with an empty store")
    parser.add_argument("--spans", type=Path, help="OTLP JSON lines of this worker's spans")
    parser.add_argument("--service-name", default="a2a-python-worker")
    args = parser.parse_args(argv)

    if args.spans is not None:  # otherwise the worker leaves OpenTelemetry to its environment
        os.environ.setdefault("OTEL_A2A_SERVE_HEARTBEAT", f"{args.heartbeat:g}")
        from otel_a2a.instrumentation import A2AInstrumentor

        A2AInstrumentor().instrument(**_spans_to(args.spans, args.service_name))

    args.store.mkdir(parents=True, exist_ok=True)
    database = args.store / "tasks.db"
    if args.forget:
        database.unlink(missing_ok=True)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", args.port))
    except OSError as exc:
        print(f"cannot listen on port {args.port}: {exc}", file=sys.stderr)
        return 1
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args, database, sock, base_url))
    return 0


async def _serve(args: argparse.Namespace, database: Path, sock: Any, base_url: str) -> None:
    import uvicorn
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine
    from starlette.applications import Starlette

    engine = create_async_engine(f"sqlite+aiosqlite:///{database}")
    store = DatabaseTaskStore(engine)
    await store.initialize()
    card = _card(base_url, args.card_version)
    jobs = Jobs()
    handler = DefaultRequestHandler(
        agent_executor=_executor(jobs, args.heartbeat, args.job_seconds),
        task_store=store,
        agent_card=card,
        request_context_builder=_context_builder(jobs),
    )
    app = Starlette(
        routes=[
            *create_agent_card_routes(card, cache_control=f"public, max-age={args.card_max_age:g}"),
            *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH, enable_v0_3_compat=True),
            *create_rest_routes(handler, path_prefix=REST_PATH, enable_v0_3_compat=True),
        ]
    )

    class Ready(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit:
                sys.stdout.write(f"READY {base_url}\n")
                sys.stdout.flush()

    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    try:
        await Ready(config).serve(sockets=[sock])
    finally:
        await handler.aclose()
        await engine.dispose()


def _card(base_url: str, version: str) -> Any:
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    return AgentCard(
        name="a2a-python-worker",
        description="The demo's a2a-sdk worker: long jobs in a SQLite task store",
        version=version,
        supported_interfaces=[
            AgentInterface(protocol_binding=b, protocol_version=v, url=base_url + p)
            for v in ("1.0", "0.3")
            for b, p in (("JSONRPC", JSONRPC_PATH), ("HTTP+JSON", REST_PATH))
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="job",
                name="Long job",
                description="job / echo / raise / vanish",
                tags=["demo"],
            )
        ],
    )


class Jobs:
    """The jobs running here, by task: what a follow-up message hands over.

    a2a-sdk runs the requests of one task one after the other: a follow-up to a running job
    would wait for the whole job. So a follow-up releases the job's execution, which returns
    with the task still working (its stream ends there), and the follow-up's execution takes
    the job over until its deadline, as the Node and JVM workers go on with theirs.
    """

    def __init__(self) -> None:
        self._released: dict[str, asyncio.Future[None]] = {}
        self._deadlines: dict[str, float] = {}

    def run(self, task_id: str, deadline: float) -> asyncio.Future[None]:
        """The job of ``task_id`` runs until ``deadline`` (loop time): the future that a
        follow-up sets."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._released[task_id], self._deadlines[task_id] = future, deadline
        return future

    def release(self, task_id: str) -> None:
        """A message for ``task_id`` arrived: its running job's execution hands it over."""
        future = self._released.get(task_id)
        if future is not None and not future.done():
            future.set_result(None)

    def end(self, task_id: str, *, handed_over: bool) -> None:
        """The job's execution returns: the deadline stays for the next one if handed over."""
        self._released.pop(task_id, None)
        if not handed_over:
            self._deadlines.pop(task_id, None)

    def take_over(self, task_id: str) -> float | None:
        """The deadline of the job this execution takes over, or None."""
        return self._deadlines.pop(task_id, None)


def _context_builder(jobs: Jobs) -> Any:
    from a2a.server.agent_execution import RequestContext
    from a2a.server.agent_execution.simple_request_context_builder import (
        SimpleRequestContextBuilder,
    )
    from a2a.server.context import ServerCallContext
    from a2a.types import SendMessageRequest, Task

    class FollowUpReleases(SimpleRequestContextBuilder):
        """Releases the running job of the task a message names: the builder is the one hook
        of a2a-sdk that sees every message before it waits for the task's running request."""

        async def build(
            self,
            context: ServerCallContext,
            params: SendMessageRequest | None = None,
            task_id: str | None = None,
            context_id: str | None = None,
            task: Task | None = None,
        ) -> RequestContext:
            if task_id:
                jobs.release(task_id)
            return await super().build(
                context=context, params=params, task_id=task_id, context_id=context_id, task=task
            )

    return FollowUpReleases()


def _executor(jobs: Jobs, heartbeat: float, job_seconds: float) -> Any:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.tasks import TaskUpdater
    from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

    def text(words: str, task_id: str, context_id: str) -> Message:
        return Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_AGENT,
            parts=[Part(text=words)],
            task_id=task_id,
            context_id=context_id,
        )

    class JobExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id, context_id = context.task_id or "", context.context_id or ""
            updater = TaskUpdater(event_queue, task_id, context_id)
            said = context.get_user_input()
            words = said.split()
            word = words[0].lower() if words else ""
            seconds = 0.0 if word == "echo" else job_seconds
            if word == "job" and len(words) > 1:
                with contextlib.suppress(ValueError):
                    seconds = float(words[1])
            taken = jobs.take_over(task_id)
            deadline = asyncio.get_running_loop().time() + seconds if taken is None else taken
            # registered before the task is stored: no follow-up can name it before that
            released = jobs.run(task_id, deadline)
            handed_over = False
            try:
                if taken is not None:  # a follow-up to the running job: noted, the job goes on
                    noted = text(f"noted: {said[:80]}", task_id, context_id)
                    await updater.update_status(TaskState.TASK_STATE_WORKING, noted)
                else:
                    if context.current_task is None:
                        await event_queue.enqueue_event(
                            Task(
                                id=task_id,
                                context_id=context_id,
                                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                            )
                        )
                    await updater.start_work()
                    if word == "raise":
                        raise ExecutorRaised("the executor raised, as asked")
                    if word == "vanish":
                        return
                handed_over = await self._work(updater, deadline, released)
            finally:
                jobs.end(task_id, handed_over=handed_over)
            if not handed_over:
                await updater.add_artifact([Part(text="job done")], name="result")
                await updater.complete(text("done", task_id, context_id))

        async def _work(
            self, updater: TaskUpdater, deadline: float, released: asyncio.Future[None]
        ) -> bool:
            """A working update every heartbeat/2 s until ``deadline``; True when a follow-up
            took the job over first (the task left working for it)."""
            loop = asyncio.get_running_loop()
            while loop.time() < deadline:
                step = min(heartbeat / 2, deadline - loop.time())
                await asyncio.wait([released], timeout=step)
                if released.done():
                    return True
                if loop.time() < deadline:
                    await updater.update_status(TaskState.TASK_STATE_WORKING)
            return False

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()

    return JobExecutor()


if __name__ == "__main__":
    raise SystemExit(main())
