"""An in-memory OpenTelemetry SDK around each test, and a fake A2A agent for MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from otel_a2a.instrumentation import A2AInstrumentor


@dataclass
class Harness:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    logs: InMemoryLogRecordExporter = field(default_factory=InMemoryLogRecordExporter)

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        found = self.spans(name)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, value)`` per data point; value is the sum, count or gauge value."""
        data = self.reader.get_metrics_data()
        result: list[tuple[dict[str, Any], Any]] = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != metric:
                        continue
                    for p in m.data.data_points:
                        value = getattr(p, "value", None)
                        if value is None:
                            value = p.count  # type: ignore[attr-defined]
                        result.append((dict(p.attributes or {}), value))
        return result

    def total(self, metric: str, **match: Any) -> float:
        want = {k.replace("__", "."): v for k, v in match.items()}
        return sum(
            v for attrs, v in self.points(metric) if all(attrs.get(k) == x for k, x in want.items())
        )


def divergences(span: ReadableSpan) -> list[str]:
    return [
        str(e.attributes["a2a.divergence.reason"])
        for e in span.events
        if e.name == "a2a.divergence" and e.attributes
    ]


def make_harness(sampler: Sampler | None = None) -> tuple[Harness, A2AInstrumentor]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=sampler) if sampler else TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    processor: LogRecordProcessor = SimpleLogRecordProcessor(logs)
    logger_provider.add_log_record_processor(processor)
    instrumentor = A2AInstrumentor()
    instrumentor.instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )
    return Harness(exporter, reader, tracer_provider, logs), instrumentor


@pytest.fixture
def otel() -> Iterator[Harness]:
    harness, instrumentor = make_harness()
    try:
        yield harness
    finally:
        instrumentor.uninstrument()


class Clock:
    """A monotonic clock the test moves by hand (no sleeps)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    import otel_a2a.instrumentation.exchange as exchange_mod
    import otel_a2a.instrumentation.runtime as runtime_mod

    fake = Clock()
    monkeypatch.setattr(exchange_mod.time, "monotonic", fake)
    assert runtime_mod.time.monotonic is fake
    return fake


class AheadClock:
    """The real monotonic clock plus an offset the test moves forward by hand: a heartbeat
    passes without sleeping while asyncio's own timers and timeouts keep running. Move it
    between event loops (``asyncio.run`` calls) only: a jump inside one fires its timeouts."""

    def __init__(self, real: Callable[[], float]) -> None:
        self._real = real
        self.offset = 0.0

    def __call__(self) -> float:
        return self._real() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def ahead(monkeypatch: pytest.MonkeyPatch) -> AheadClock:
    import time

    fake = AheadClock(time.monotonic)
    monkeypatch.setattr(time, "monotonic", fake)
    return fake


V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
STATES_V1 = {
    "working": "TASK_STATE_WORKING",
    "completed": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
}


@dataclass
class FakeAgent:
    """A minimal A2A v1.0 JSON-RPC agent behind ``httpx.MockTransport``.

    ``states[task_id]`` is the wire spelling GetTask returns; a missing task answers -32001.
    """

    base: str = "http://agent.test"
    etag: str = 'W/"v1"'
    heartbeat: float = 30.0
    states: dict[str, str] = field(default_factory=dict)
    sse: list[bytes] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    def card(self) -> dict[str, Any]:
        return {
            "name": "Fake Agent",
            "description": "test",
            "version": "1.0.0",
            "supportedInterfaces": [
                {"url": f"{self.base}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {
                "streaming": True,
                "extensions": [
                    {
                        "uri": "urn:otel-a2a:heartbeat:v1",
                        "params": {"intervalSeconds": self.heartbeat},
                    }
                ],
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }

    def task(self, task_id: str) -> dict[str, Any]:
        return {
            "id": task_id,
            "contextId": "ctx-1",
            "status": {"state": self.states[task_id]},
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "secret"}]}],
        }

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/.well-known/agent-card.json":
            if request.headers.get("if-none-match") == self.etag:
                return httpx.Response(304, headers={"ETag": self.etag})
            return httpx.Response(
                200, json=self.card(), headers={"ETag": self.etag, "Cache-Control": "max-age=60"}
            )
        body = json.loads(request.content)
        method, params, rid = body["method"], body.get("params", {}), body.get("id")
        if method == "GetExtendedAgentCard":
            extended = {**self.card(), "name": "Fake Agent (extended)", "version": "1.0.1"}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": rid, "result": extended})
        if method in ("SendStreamingMessage", "SubscribeToTask"):
            return httpx.Response(
                200, headers={"Content-Type": "text/event-stream"}, content=iter(self.sse)
            )
        task_id = params.get("id") or params.get("message", {}).get("taskId") or "task-new"
        if method == "SendMessage" and task_id not in self.states:
            self.states[task_id] = "TASK_STATE_WORKING"
        if task_id not in self.states:
            return httpx.Response(
                200,
                json={
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32001, "message": "Task not found"},
                },
            )
        result: dict[str, Any] = self.task(task_id)
        if method == "SendMessage":
            result = {"task": result}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": rid, "result": result})

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handler), base_url=self.base)

    def rpc(
        self, client: httpx.Client, method: str, params: dict[str, Any], **kwargs: Any
    ) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return client.post("/a2a", json=body, headers={"A2A-Version": "1.0"}, **kwargs)


AgentFactory = Callable[..., FakeAgent]
