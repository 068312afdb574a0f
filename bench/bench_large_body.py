"""A 50 MB ``GetTask`` response (long history, status first) over ``httpx.MockTransport``.

For ``stream=False`` (httpx reads the body for the application) and ``stream=True``
(the application iterates ``iter_bytes()`` and keeps nothing): the task state must be observed
(span attribute ``a2a.task.state`` and the ledger), and the extra peak memory the
instrumentation causes must stay <= 8 MiB. Peak memory is tracemalloc's peak for the same
request with and without ``A2AInstrumentor`` (the body itself is allocated before tracing
starts); the figure is the instrumented peak minus the uninstrumented one, median of repeats.

``stream=True`` is measured with 64 KiB chunks (what httpcore yields from a socket) and with
the whole body as one chunk (what ``MockTransport`` yields for ``content=bytes``).
``OTEL_A2A_MAX_BODY_BYTES`` is left at its default (4 MiB).

A gzip SSE stream of 16 MiB of status-update frames (about 64 KiB on the wire) is read with and
without the instrumentation: the CPU time of the read (``time.process_time``, median of
repeats), otel-a2a inflating and parsing only the first 4 MiB of it.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import time
import tracemalloc
from collections.abc import Callable, Iterator

import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench import Row, check, median
from bench._payload import (
    BASE,
    CONTEXT_ID,
    PATH,
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    TASK_ID,
    get_task_response,
    request_body,
)
from otel_a2a.instrumentation import A2AInstrumentor, runtime

SIZE = 50 * 1024 * 1024  # 50 MiB (52.4 MB)
CHUNK = 64 * 1024
REPEAT = 3
TARGET_MIB = 8.0
MIB = 1024 * 1024
EXPECTED_STATE = "working"  # canonical value of TASK_STATE_WORKING

Handler = Callable[[httpx.Request], httpx.Response]


def _chunks(body: bytes) -> Iterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(body), CHUNK):
        yield bytes(view[start : start + CHUNK])


def _peak(client: httpx.Client, req: bytes, stream: bool) -> int:
    """tracemalloc peak (bytes above the starting level) of one request read to the end."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    if stream:
        with client.stream("POST", PATH, content=req, headers=REQUEST_HEADERS) as response:
            for _ in response.iter_bytes():
                pass
    else:
        response = client.post(PATH, content=req, headers=REQUEST_HEADERS)
        assert len(response.content) == SIZE
    response.close()
    del response
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


SSE_BOMB = 16 * MIB
SSE_HEADERS = {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}


def _sse_bomb() -> tuple[bytes, bytes]:
    """The request and the gzip wire bytes of a 16 MiB stream of status-update frames."""
    update = {"taskId": TASK_ID, "contextId": CONTEXT_ID, "status": {"state": "TASK_STATE_WORKING"}}
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": update}}
    frame = b"data: " + json.dumps(reply, separators=(",", ":")).encode() + b"\n\n"
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "go"}]}
    req = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    return json.dumps(req).encode(), gzip.compress(frame * (SSE_BOMB // len(frame)), 9)


def _read_cpu(client: httpx.Client, req: bytes) -> float:
    """CPU seconds of one streamed read to the end (the application decodes every byte)."""
    started = time.process_time()
    with client.stream("POST", PATH, content=req, headers=REQUEST_HEADERS) as response:
        for _ in response.iter_bytes():
            pass
    return time.process_time() - started


def _sse_bomb_rows(
    tracer_provider: TracerProvider, meter_provider: MeterProvider, reader: InMemoryMetricReader
) -> list[Row]:
    req, wire = _sse_bomb()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE_HEADERS, content=_chunks(wire))

    client = httpx.Client(transport=httpx.MockTransport(handler), base_url=BASE)
    bare: list[float] = []
    instrumented: list[float] = []
    instrumentor = A2AInstrumentor()
    for _ in range(REPEAT):
        bare.append(_read_cpu(client, req))
        instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        try:
            instrumented.append(_read_cpu(client, req))
        finally:
            instrumentor.uninstrument()
    client.close()
    stops = _errors(reader, "inflated_stream_limit")
    label = f"gzip SSE stream, {SSE_BOMB // MIB} MiB from {len(wire) / 1024:.0f} KiB"
    return [
        Row(f"{label}: CPU of the read, uninstrumented (s)", f"{median(bare):.2f}"),
        Row(f"{label}: CPU of the read, instrumented (s)", f"{median(instrumented):.2f}"),
        Row(
            f"{label}: stopped at the limit (inflated_stream_limit errors)",
            f"{stops:.0f}",
            f"{REPEAT}",
            stops == REPEAT,
        ),
    ]


def _errors(reader: InMemoryMetricReader, error_type: str) -> float:
    """The ``otel_a2a.instrumentation.errors`` counted so far with this ``error.type``."""
    data = reader.get_metrics_data()
    total = 0.0
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != "otel_a2a.instrumentation.errors":
                    continue
                for point in metric.data.data_points:
                    if (point.attributes or {}).get("error.type") == error_type:
                        total += getattr(point, "value", 0)
    return total


def run() -> list[Row]:
    assert "OTEL_A2A_MAX_BODY_BYTES" not in os.environ, "benchmark assumes the 4 MiB default"
    body = get_task_response(SIZE)
    req = request_body()

    def whole(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=RESPONSE_HEADERS, content=body)

    def chunked(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=RESPONSE_HEADERS, content=_chunks(body))

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentor = A2AInstrumentor()

    cases: list[tuple[str, Handler, bool]] = [
        ("stream=False", whole, False),
        ("stream=True, iter_bytes, 64 KiB chunks", chunked, True),
        ("stream=True, iter_bytes, one 50 MiB chunk", whole, True),
    ]
    rows: list[Row] = []
    for label, handler, stream in cases:
        client = httpx.Client(transport=httpx.MockTransport(handler), base_url=BASE)
        extra: list[int] = []
        bare_peaks: list[int] = []
        states: set[str] = set()
        ledger_states: set[str] = set()
        for _ in range(REPEAT):
            bare = _peak(client, req, stream)
            instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
            try:
                exporter.clear()
                instrumented = _peak(client, req, stream)
                rt = runtime.current()
                assert rt is not None
                seen = rt.detector.ledger.get(TASK_ID)
                ledger_states.add(seen.state.value if seen is not None else "not tracked")
            finally:
                instrumentor.uninstrument()
            spans = [
                s
                for s in exporter.get_finished_spans()
                if (s.attributes or {}).get("a2a.method.name")
            ]
            states.update(str((s.attributes or {}).get("a2a.task.state")) for s in spans)
            if not spans:
                states.add("no A2A span ended")
            extra.append(instrumented - bare)
            bare_peaks.append(bare)
        client.close()
        ok = states == {EXPECTED_STATE} and ledger_states == {EXPECTED_STATE}
        rows.append(
            Row(
                f"large body {label}: state observed (span, ledger)",
                f"{'/'.join(sorted(states))}, {'/'.join(sorted(ledger_states))}",
                EXPECTED_STATE,
                ok,
            )
        )
        rows.append(
            check(
                f"large body {label}: extra peak memory (MiB)",
                median(extra) / MIB,
                ".2f",
                TARGET_MIB,
            )
        )
        rows.append(
            Row("  uninstrumented peak, same request (MiB)", f"{median(bare_peaks) / MIB:.2f}")
        )
    rows.insert(0, Row("large body: GetTask response size (MiB)", f"{len(body) / MIB:.1f}"))
    rows.extend(_sse_bomb_rows(tracer_provider, meter_provider, reader))
    return rows
