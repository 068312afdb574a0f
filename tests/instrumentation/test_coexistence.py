"""otel-a2a next to the other tracing a real application has, against the real Python peer.

- ``opentelemetry-instrumentation-httpx`` (it patches the transports, so only a real transport
  is traced), for httpx and for httpx2: its HTTP span is a child of our ``A2A …`` span whichever
  was instrumented first;
- a2a-sdk's own tracing (scope ``a2a-python-sdk``, on by default with opentelemetry-api): both
  sets of spans export and detection is unchanged;
- ``uninstrument()``: no A2A span, no metric, and the original ``httpx`` methods are back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import httpx
import httpx2
import pytest
from a2a.client import A2ACardResolver
from a2a.types import GetTaskRequest
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from otel_a2a.instrumentation import A2AInstrumentor
from tests.instrumentation.conftest import Harness, divergences, make_harness
from tests.instrumentation.test_real_peers import (
    Mode,
    canonical,
    card_url,
    clients,
    message,
    only_task,
    run,
)

JSONRPC = Mode("JSONRPC", "1.0")
HTTPX_SCOPE = "opentelemetry.instrumentation.httpx"
SDK_SCOPE = "a2a-python-sdk"


def _original(cls: type, name: str) -> Callable[..., Any]:
    """The undecorated method, even if something instrumented it before this module loaded."""
    method: Callable[..., Any] = vars(cls)[name]
    return getattr(method, "__wrapped__", method)


# what the two instrumentations patch, in httpx and in httpx2
_PATCHED = [
    ("Client", "send"),
    ("AsyncClient", "send"),
    ("HTTPTransport", "handle_request"),
    ("AsyncHTTPTransport", "handle_async_request"),
]
ORIGINALS = {
    (getattr(lib, cls), name): _original(getattr(lib, cls), name)
    for lib in (httpx, httpx2)
    for cls, name in _PATCHED
}


def _restored() -> bool:
    return all(vars(cls)[name] is original for (cls, name), original in ORIGINALS.items())


def _providers() -> tuple[Harness, MeterProvider]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return Harness(exporter, reader, tracer_provider), MeterProvider(metric_readers=[reader])


def _scope(spans: list[ReadableSpan], scope: str) -> list[ReadableSpan]:
    return [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == scope]


def _a2a(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return _scope(spans, "otel_a2a")


async def _exchange(base: str, lib: ModuleType = httpx) -> dict[str, Any]:
    """Card, SendMessage, GetTask and a streamed SendStreamingMessage with the a2a-sdk client."""
    async with lib.AsyncClient(timeout=10.0) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client, streaming = await clients(http, card, JSONRPC)
        done = await only_task(client.send_message(message("echo coexist")))
        got = await client.get_task(GetTaskRequest(id=done.id))
        streamed = [e async for e in streaming.send_message(message("echo streamed"))]
    return locals()


# -- (a) opentelemetry-instrumentation-httpx ---------------------------------------------------


@pytest.fixture
def both_instrumented(request: pytest.FixtureRequest, http_lib: ModuleType) -> Iterator[Harness]:
    harness, meter_provider = _providers()
    theirs = HTTPXClientInstrumentor() if http_lib is httpx else HTTPX2ClientInstrumentor()
    ours = A2AInstrumentor()
    steps = {
        "a2a": lambda: ours.instrument(
            tracer_provider=harness.tracer_provider, meter_provider=meter_provider
        ),
        "httpx": lambda: theirs.instrument(tracer_provider=harness.tracer_provider),
    }
    try:
        for name in request.param:
            steps[name]()
        yield harness
    finally:
        theirs.uninstrument()
        ours.uninstrument()
    assert _restored()


@pytest.mark.parametrize(
    "both_instrumented",
    [
        pytest.param(("a2a", "httpx"), id="a2a-first"),
        pytest.param(("httpx", "a2a"), id="httpx-first"),
    ],
    indirect=True,
)
def test_httpx_span_is_a_child_of_the_a2a_span(
    both_instrumented: Harness, http_lib: ModuleType, python_peer: str
) -> None:
    otel = both_instrumented
    seen = run(_exchange(python_peer, http_lib))
    with http_lib.Client(timeout=10.0) as sync_client:  # the sync path too
        assert sync_client.get(card_url(python_peer)).status_code == 200

    spans = otel.spans()
    ours, http = _a2a(spans), _scope(spans, HTTPX_SCOPE)
    assert [s.name for s in ours] == [
        "GetAgentCard",
        "SendMessage",
        "GetTask",
        "SendStreamingMessage",
        "GetAgentCard",
    ]
    # one HTTP span per A2A operation, each the child of its operation's span, same trace
    assert len(http) == len(ours)
    by_id = {s.context.span_id: s for s in ours}
    for span in http:
        assert span.parent is not None and span.parent.span_id in by_id, span.name
        parent = by_id[span.parent.span_id]
        assert parent.context.trace_id == span.context.trace_id
        assert span.kind.name == parent.kind.name == "CLIENT"
    assert sorted(s.parent.span_id for s in http if s.parent) == sorted(by_id)
    http_ids = {s.context.span_id for s in http}
    assert all(s.parent is None or s.parent.span_id not in http_ids for s in ours)
    # our observation is unaffected by the HTTP layer being traced too
    get = otel.span("GetTask")
    assert (get.attributes or {})["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert (get.attributes or {})["a2a.task.id"] == seen["done"].id
    stream = otel.span("SendStreamingMessage")
    assert [e.name for e in stream.events] == ["otel_a2a.task.status", "otel_a2a.task.status"]
    assert otel.total("otel_a2a.task.get.redundant") == 1


# -- (b) a2a-sdk's own tracing ------------------------------------------------------------------


@pytest.fixture
def global_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """The harness's provider as the global one (where a2a-sdk's tracer looks), then restored."""
    from a2a.utils import telemetry

    assert telemetry.otel_installed and telemetry.otel_enabled, (
        "a2a-sdk tracing is off (OTEL_INSTRUMENTATION_A2A_SDK_ENABLED?)"
    )
    harness, instrumentor = make_harness()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    trace.set_tracer_provider(harness.tracer_provider)
    try:
        yield harness
    finally:
        instrumentor.uninstrument()


def test_a2a_sdk_tracing_coexists(global_provider: Harness, python_peer: str) -> None:
    otel = global_provider

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card = await A2ACardResolver(http, python_peer).get_agent_card()
            client, _ = await clients(http, card, JSONRPC)
            done = await only_task(client.send_message(message("echo sdk")))
            got = await client.get_task(GetTaskRequest(id=done.id))
            with suppress_instrumentation():  # a task this process never observes
                elsewhere = await only_task(client.send_message(message("input elsewhere")))
            followed = await only_task(client.send_message(message("echo here", elsewhere)))
        return locals()

    seen = run(scenario())
    assert canonical(seen["got"].status.state) == "completed"
    assert canonical(seen["followed"].status.state) == "completed"

    spans = otel.spans()
    ours, sdk = _a2a(spans), _scope(spans, SDK_SCOPE)
    assert [s.name for s in ours] == [
        "GetAgentCard",
        "SendMessage",
        "GetTask",
        "SendMessage",
    ]
    sdk_names = {s.name for s in sdk}
    assert "a2a.client.transports.jsonrpc.JsonRpcTransport.send_message" in sdk_names
    assert "a2a.client.transports.jsonrpc.JsonRpcTransport.get_task" in sdk_names
    # every task operation of ours runs inside a span of the SDK's transport, same trace
    sdk_by_id = {s.context.span_id: s for s in sdk}
    for span in ours[1:]:
        assert span.parent is not None and span.parent.span_id in sdk_by_id, span.name
        assert sdk_by_id[span.parent.span_id].context.trace_id == span.context.trace_id
    # the SDK's spans are left alone: no A2A attributes, no judgement
    for span in sdk:
        assert not any(k.startswith("a2a.") for k in span.attributes or {}), span.name
        assert divergences(span) == []
    # detection is unchanged
    get = otel.span("GetTask")
    assert (get.attributes or {})["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert (get.attributes or {})["otel_a2a.observation.authoritative"] is True
    first, follow_up = otel.spans("SendMessage")
    assert divergences(first) == []
    assert divergences(follow_up) == ["no_observation"]
    assert otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="no_observation") == 1
    assert otel.total("otel_a2a.divergence") == 1
    assert otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="divergent") == 1
    assert otel.total("otel_a2a.task.get.redundant") == 1


# -- (c) uninstrument ---------------------------------------------------------------------------


def test_uninstrument_stops_everything(http_lib: ModuleType, python_peer: str) -> None:
    otel, instrumentor = make_harness()
    try:
        send = ORIGINALS[http_lib.Client, "send"]
        assert vars(http_lib.Client)["send"] is not send  # wrapped while instrumented
        run(_exchange(python_peer, http_lib))
        assert len(_a2a(otel.spans())) == 4
        assert otel.total("otel_a2a.task.get.redundant") >= 1
    finally:
        instrumentor.uninstrument()
    assert _restored()
    assert http_lib.Client.send is send
    assert http_lib.AsyncClient.send is ORIGINALS[http_lib.AsyncClient, "send"]

    otel.exporter.clear()

    async def scenario() -> None:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            card = await A2ACardResolver(http, python_peer).get_agent_card()
            client, _ = await clients(http, card, JSONRPC)
            waiting = await only_task(client.send_message(message("input later")))
            # instrumented, this follow-up to an unseen task would be a divergent decision
            await only_task(client.send_message(message("echo now", waiting)))
            await client.get_task(GetTaskRequest(id=waiting.id))

    run(scenario())
    assert otel.spans() == []
    assert otel.total("otel_a2a.liveness.decisions") == 0
    assert otel.total("otel_a2a.divergence") == 0
    assert otel.total("otel_a2a.task.get.redundant") == 0  # no runtime: observables report nothing
    assert otel.total("otel_a2a.task.tracked") == 0
