"""Per-request cost of a 2 KB ``GetTask`` over ``httpx.MockTransport``, side by side in one run.

(a) bare httpx; (b) + opentelemetry-instrumentation-httpx with the SDK (``instrument_client``,
``TracerProvider`` with a ``BatchSpanProcessor`` to a no-op exporter, ``MeterProvider`` with an
``InMemoryMetricReader``); (c) (b) + otel_a2a (``A2AInstrumentor().instrument(...)``).

(b) and (c) use separate clients and separate providers, so (b) never sees the span processor
otel_a2a adds to its provider. ``A2AInstrumentor`` patches ``httpx.Client.send`` process-wide,
so it is instrumented only while (c) is timed and uninstrumented for (a) and (b). Rounds
interleave the three configurations (order rotated each round); each figure is the median over
rounds. Target: otel_a2a's increment (c - b) <= 50% of the httpx instrumentation's (b - a),
as counted in instructions (``bench_instructions``).

The floor rows time :func:`floor_span`: the one span the span contract requires, alone
(docs/semantic-conventions.md). Two more configurations, interleaved with the others, split
(c)'s increment where it runs: (c) without otel-a2a's span, and (c) with the response body
left unread by otel-a2a (each part left out alone). Wall-clock on a
shared machine is noisy; ``bench_instructions`` gives the same ratios counted in instructions.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence

import httpx
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer

from bench import Row, check, median
from bench._payload import BASE, PATH, REQUEST_HEADERS, RESPONSE_HEADERS, get_task_response
from bench._payload import request_body as make_request_body
from otel_a2a.instrumentation import A2AInstrumentor, DivergenceSpanProcessor, runtime
from otel_a2a.instrumentation.http_exchange import HttpExchange
from otel_a2a.semconv import SCOPE
from otel_a2a.version import __version__

SIZE = 2048
REQUESTS = 300  # per sample: short samples, many rounds, so drift hits all three alike
ROUNDS = 31
WARMUP = 300
TARGET_PCT = 50.0


class CountingExporter(SpanExporter):
    """A no-op exporter that only counts span names (to prove the spans exist)."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.names.update(s.name for s in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Setup:
    def __init__(self, body: bytes, instrumented: bool) -> None:
        self.exporter = CountingExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        transport = httpx.MockTransport(
            lambda request: httpx.Response(200, headers=RESPONSE_HEADERS, content=body)
        )
        self.client = httpx.Client(transport=transport, base_url=BASE)
        if instrumented:
            HTTPXClientInstrumentor.instrument_client(
                self.client,
                tracer_provider=self.tracer_provider,
                meter_provider=self.meter_provider,
            )

    def close(self) -> None:
        self.client.close()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _sampler(client: httpx.Client, request_body: bytes) -> Callable[[int], float]:
    post = client.post

    def sample(n: int) -> float:
        """Microseconds per request over ``n`` requests."""
        gc.collect()
        start = time.perf_counter()
        for _ in range(n):
            response = post(PATH, content=request_body, headers=REQUEST_HEADERS)
            response.content  # noqa: B018 (read, as an application would)
        return (time.perf_counter() - start) / n * 1e6

    return sample


def floor_span(body: bytes, divergence: bool = True) -> tuple[Callable[[], None], int]:
    """Start and end one SDK span exactly like otel-a2a's for this ``GetTask``: the cost no
    implementation of the span contract through the SDK's API can avoid.

    Name, kind and attributes are taken from the span of one real request; all attributes are
    given at start (cheaper than setting those learnt from the response later, as the API asks
    of the instrumentation and otel-a2a does). Same scope
    and processors as (c): a ``BatchSpanProcessor`` and, unless ``divergence`` is false (the
    bare SDK span), the ``DivergenceSpanProcessor``.
    """
    exporter = InMemorySpanExporter()
    capture = TracerProvider()
    capture.add_span_processor(SimpleSpanProcessor(exporter))
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=RESPONSE_HEADERS, content=body)
    )
    instrumentor = A2AInstrumentor()
    instrumentor.instrument(tracer_provider=capture)
    try:
        with httpx.Client(transport=transport, base_url=BASE) as client:
            client.post(PATH, content=make_request_body(), headers=REQUEST_HEADERS).read()
    finally:
        instrumentor.uninstrument()
    span = exporter.get_finished_spans()[0]
    name, kind, attributes = span.name, span.kind, dict(span.attributes or {})
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(CountingExporter()))
    if divergence:
        provider.add_span_processor(DivergenceSpanProcessor())
    tracer = provider.get_tracer(SCOPE, __version__)

    def one_span() -> None:
        tracer.start_span(name, kind=kind, attributes=attributes).end()

    return one_span, len(attributes)


def _without_span(sample: Callable[[int], float]) -> Callable[[int], float]:
    """``sample`` with otel-a2a's span left out (its runtime given a no-op tracer), all else
    as in (c): what the span costs where it runs, among the rest of the request."""

    def timed(n: int) -> float:
        rt = runtime.current()
        assert rt is not None
        tracer, rt.tracer = rt.tracer, NoOpTracer()
        try:
            return sample(n)
        finally:
            rt.tracer = tracer

    return timed


def _without_reading(sample: Callable[[int], float]) -> Callable[[int], float]:
    """``sample`` with the response body left unread by otel-a2a (its facts neither extracted
    nor recorded), all else as in (c)."""

    def timed(n: int) -> float:
        HttpExchange._observe_body = _unread  # type: ignore[method-assign]
        try:
            return sample(n)
        finally:
            HttpExchange._observe_body = _observe_body  # type: ignore[method-assign]

    return timed


_observe_body = HttpExchange._observe_body


def _unread(self: HttpExchange, body: bytes) -> None:
    return None


def _span_floor(body: bytes) -> tuple[float, int]:
    """Microseconds per floor span (median over rounds), and its attribute count."""
    one_span, count = floor_span(body)
    samples = []
    for _ in range(ROUNDS):
        gc.collect()
        start = time.perf_counter()
        for _ in range(REQUESTS):
            one_span()
        samples.append((time.perf_counter() - start) / REQUESTS * 1e6)
    return median(samples), count


def _quartiles(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{q1:.0f}-{q3:.0f}"


def run() -> list[Row]:
    body = get_task_response(SIZE)
    request_body = make_request_body()
    bare = Setup(body, instrumented=False)
    httpx_only = Setup(body, instrumented=True)
    full = Setup(body, instrumented=True)
    instrumentor = A2AInstrumentor()
    assert not instrumentor.is_instrumented_by_opentelemetry, "otel_a2a already instrumented"

    def with_a2a(sample: Callable[[int], float]) -> Callable[[int], float]:
        def timed(n: int) -> float:
            instrumentor.instrument(
                tracer_provider=full.tracer_provider, meter_provider=full.meter_provider
            )
            try:
                return sample(n)
            finally:
                instrumentor.uninstrument()

        return timed

    configs: list[tuple[str, Callable[[int], float]]] = [
        ("a", _sampler(bare.client, request_body)),
        ("b", _sampler(httpx_only.client, request_body)),
        ("c", with_a2a(_sampler(full.client, request_body))),
        ("c-span", with_a2a(_without_span(_sampler(full.client, request_body)))),
        ("c-read", with_a2a(_without_reading(_sampler(full.client, request_body)))),
    ]
    for _, sample in configs:
        sample(WARMUP)

    results: dict[str, list[float]] = {key: [] for key, _ in configs}
    for round_no in range(ROUNDS):
        shift = round_no % len(configs)
        for key, sample in configs[shift:] + configs[:shift]:
            results[key].append(sample(REQUESTS))

    floor, floor_attributes = _span_floor(body)
    for setup in (bare, httpx_only, full):
        setup.tracer_provider.force_flush()
    b_names, c_names = httpx_only.exporter.names, full.exporter.names
    total = WARMUP + ROUNDS * REQUESTS
    [http_span] = b_names
    assert b_names[http_span] == total, b_names  # one HTTP span per request
    # (c) and its two variants: an HTTP span per request; an A2A span too, but without it
    a2a_span = next(n for n in c_names if n != http_span)
    assert c_names == {http_span: 3 * total, a2a_span: 2 * total}, c_names
    for setup in (bare, httpx_only, full):
        setup.close()

    a, b, c = (median(results[k]) for k in "abc")
    span, reading = c - median(results["c-span"]), c - median(results["c-read"])
    ratios = [
        (rc - rb) / (rb - ra) * 100
        for ra, rb, rc in zip(results["a"], results["b"], results["c"], strict=True)
    ]
    pct = (c - b) / (b - a) * 100
    lo_a, lo_b, lo_c = (min(results[k]) for k in "abc")
    pct_min = (lo_c - lo_b) / (lo_b - lo_a) * 100
    return [
        Row("overhead: (a) bare httpx, 2 KB GetTask (us/request)", f"{a:.1f}"),
        Row("overhead: (b) + httpx instrumentation + SDK (us/request)", f"{b:.1f}"),
        Row("overhead: (c) (b) + otel_a2a (us/request)", f"{c:.1f}"),
        Row("  httpx instrumentation increment b - a (us)", f"{b - a:.1f}"),
        Row("  otel_a2a increment c - b (us)", f"{c - b:.1f}"),
        check("overhead: otel_a2a increment / httpx increment (%)", pct, ".0f", TARGET_PCT),
        Row("  same ratio from each configuration's fastest sample (%)", f"{pct_min:.0f}"),
        Row(
            f"  per-round ratio, median (quartiles) over {ROUNDS} rounds (%)",
            f"{median(ratios):.0f} ({_quartiles(ratios)})",
        ),
        Row(f"  spans per request in (c): HTTP + {a2a_span!r}", "2"),
        Row(
            f"  floor: our GetTask span alone ({floor_attributes} attributes), start + end (us)",
            f"{floor:.1f}",
        ),
        Row(
            "  floor as % of the httpx increment (the span the contract requires)",
            f"{floor / (b - a) * 100:.0f}",
        ),
        Row("  in (c), otel-a2a's span, start to end through the API (us)", f"{span:.1f}"),
        Row("  in (c), reading the response and recording what it says (us)", f"{reading:.1f}"),
        Row(
            "  in (c), the rest: the request recognised, wrappers, poll check, processor (us)",
            f"{c - b - span - reading:.1f}",
        ),
    ]
