"""One command of a CLI that runs one process per command, instrumented (``tests/instrumentation
/test_shared_ledger.py``): an a2a-sdk client against a real peer, otel-a2a instrumenting it
with in-memory exporters, ``OTEL_A2A_*`` read from the environment as in any application.

Run: ``python -m tests.support.ledger_client get BASE`` creates a task waiting for input out
of otel-a2a's sight, then polls it (``GetTask``); ``... follow BASE TASK CONTEXT`` sends a
follow-up message on a task (a liveness decision). Prints one JSON line: the task, its state,
each span with its divergence reasons, the decisions by outcome, the internal errors.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import GetTaskRequest, Task, TaskState
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_a2a.instrumentation import A2AInstrumentor
from tests.instrumentation.test_real_peers import Mode, for_mode, message, only_task

MODE = Mode("JSONRPC", "1.0")


async def command(name: str, base: str, task: Task) -> tuple[Task | None, str | None]:
    """The command's task as last seen, and the error it ended with (if any)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        config = ClientConfig(
            streaming=False, supported_protocol_bindings=[MODE.binding], httpx_client=http
        )
        client = await create_client(for_mode(card, MODE), client_config=config)
        if name == "get":
            with suppress_instrumentation():  # created by someone else
                task = await only_task(client.send_message(message("input please")))
            return await client.get_task(GetTaskRequest(id=task.id)), None
        try:
            return await only_task(client.send_message(message("echo done", task))), None
        except Exception as exc:  # a follow-up on a finished task is refused by the peer
            return None, type(exc).__name__


def points(reader: InMemoryMetricReader, metric: str) -> list[tuple[dict[str, Any], Any]]:
    data = reader.get_metrics_data()
    return [
        (dict(p.attributes or {}), p.value)
        for rm in (data.resource_metrics if data else [])
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == metric
        for p in m.data.data_points  # type: ignore[union-attr]
    ]


def main(name: str, base: str, task_id: str = "", context_id: str = "") -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    A2AInstrumentor().instrument(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    task, error = asyncio.run(command(name, base, Task(id=task_id, context_id=context_id)))
    spans = [
        [
            span.name,
            [
                str(e.attributes["otel_a2a.divergence.reason"])
                for e in span.events
                if e.name == "otel_a2a.divergence" and e.attributes
            ],
        ]
        for span in exporter.get_finished_spans()
    ]
    out = {
        "task_id": task.id if task else None,
        "context_id": task.context_id if task else None,
        "state": TaskState.Name(task.status.state) if task else None,
        "error": error,
        "spans": spans,
        "decisions": {
            str(a["otel_a2a.decision.outcome"]): v
            for a, v in points(reader, "otel_a2a.liveness.decisions")
        },
        "errors": {
            str(a["error.type"]): v for a, v in points(reader, "otel_a2a.instrumentation.errors")
        },
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
