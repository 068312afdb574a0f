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
"""

from __future__ import annotations

import gc
import os
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
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
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
            spans = [s for s in exporter.get_finished_spans() if s.name.startswith("A2A ")]
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
    return rows
