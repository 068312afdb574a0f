"""Applications started with ``OTEL_A2A_ENABLED=true``, one per case (``python startup_cases.py
CASE``), against an A2A agent behind ``httpx.MockTransport``. Each prints one JSON line of what
it saw; the console exporters print the rest. Only the cases that name otel_a2a import it."""

from __future__ import annotations

import atexit
import json
import sys
import threading
from typing import Any

import httpx


def _agent(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    task = {"id": body["params"]["id"], "contextId": "c1", "status": {"state": "working"}}
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": task})


def _client() -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(_agent), base_url="http://agent.test")


def _call(client: httpx.Client, method: str = "tasks/get", task_id: str = "t1") -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": task_id}}
    return client.post("/a2a", json=body).json()["result"]["status"]["state"]


def _app_tracing() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _app_metrics() -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def _metric_names(reader: Any) -> list[str]:
    data = reader.get_metrics_data()
    return sorted(
        {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    )


def _report(**seen: object) -> None:
    print(json.dumps(seen), flush=True)


def plain_first() -> None:
    """Plain HTTP before any A2A, then the application installs its own tracing."""
    from opentelemetry import trace

    plain = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={})))
    plain.get("http://config.internal/settings.json")
    provider, exporter = _app_tracing()
    trace.set_tracer_provider(provider)
    _call(_client())
    _report(
        own=trace.get_tracer_provider() is provider,
        spans=[s.name for s in exporter.get_finished_spans()],
    )


def concurrent_first() -> None:
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        client = _client()
        barrier.wait()
        _call(client, task_id=f"t{i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _report(done=True)


def meter_only() -> None:
    from opentelemetry import metrics, trace

    provider, reader = _app_metrics()
    metrics.set_meter_provider(provider)
    _call(_client())
    _report(
        tracer_provider=type(trace.get_tracer_provider()).__name__,
        metrics=_metric_names(reader),
    )


def explicit_providers() -> None:
    from opentelemetry import trace

    from otel_a2a import A2AInstrumentor

    tracer_provider, exporter = _app_tracing()
    meter_provider, reader = _app_metrics()
    A2AInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    _call(_client())
    _report(
        spans=[s.name for s in exporter.get_finished_spans()],
        metrics=_metric_names(reader),
        global_tracer_provider=type(trace.get_tracer_provider()).__name__,
    )


def reinstrumented() -> None:
    from otel_a2a import A2AInstrumentor

    A2AInstrumentor().uninstrument()
    A2AInstrumentor().instrument()
    _report(state=_call(_client()))


def exit_handler() -> None:
    client = _client()
    atexit.register(lambda: _call(client, "tasks/cancel"))  # registered before any A2A call
    _report(state=_call(client))


def basic() -> None:
    _report(state=_call(_client()))


if __name__ == "__main__":
    globals()[sys.argv[1]]()
