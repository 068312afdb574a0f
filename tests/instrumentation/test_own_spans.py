"""otel-a2a's spans get their attributes straight into the SDK span only where nothing can tell:
the same span either way, and an application's sampler, span processor or limits see and act
on them as the API gives them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import sampling as s
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from otel_a2a.instrumentation import A2AInstrumentor, own_spans, runtime
from tests.instrumentation.conftest import Harness, make_harness
from tests.support.fake_agent import FakeAgent


class StartRecorder(SpanProcessor):
    """An application's processor that reads attributes when a span starts."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.seen[span.name] = dict(span.attributes or {})


class RecordingSampler(s.Sampler):
    """An application's sampler that decides on the attributes given at start."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> s.SamplingResult:
        self.seen[name] = dict(attributes or {})
        return s.SamplingResult(s.Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "RecordingSampler"


def _get_task(harness: Harness) -> dict[str, Any]:
    """One card fetch and one GetTask; the GetTask span's attributes."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
    spans = harness.spans("GetTask")
    return dict(spans[-1].attributes or {})


def _unread(harness: Harness) -> bool:
    rt = runtime.current()
    assert rt is not None
    return own_spans._start_unread(rt.tracer)


@pytest.fixture
def sampled() -> Iterator[tuple[Harness, RecordingSampler]]:
    sampler = RecordingSampler()
    harness, instrumentor = make_harness(sampler)
    try:
        yield harness, sampler
    finally:
        instrumentor.uninstrument()


def test_this_sdk_is_laid_out_as_written_into() -> None:
    assert own_spans.SDK_SPAN is not None  # else every span would take the API's path
    assert own_spans._checked_sdk()  # the release CI installs was read: the writes are on
    assert own_spans._WRITABLE is own_spans.SDK_SPAN


def _conversation() -> list[tuple[str, list[tuple[str, Any]]]]:
    """A card fetch, a GetTask, a follow-up and a card fetched again under a new etag, through
    a harness of its own; each span's attributes in their order."""
    harness, instrumentor = make_harness()
    try:
        agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
        with agent.client() as client:
            client.get("/.well-known/agent-card.json")
            agent.rpc(client, "GetTask", {"id": "t1"})
            message = {"messageId": "m1", "role": "ROLE_USER", "taskId": "t1", "parts": []}
            agent.rpc(client, "SendMessage", {"message": message})
            agent.etag = 'W/"v2"'
            client.get("/.well-known/agent-card.json")
            agent.rpc(client, "GetTask", {"id": "t1"})
    finally:
        instrumentor.uninstrument()
    return [(x.name, list((x.attributes or {}).items())) for x in harness.spans()]


def test_both_paths_make_the_same_span(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same attributes in the same order, span by span, written directly or through
    the API."""
    direct = _conversation()
    monkeypatch.setattr(own_spans, "_WRITABLE", None)
    through_api = _conversation()
    assert direct == through_api
    assert [name for name, _ in direct].count("GetTask") == 2
    last = dict(direct[-1][1])
    assert last["a2a.task.state"] == "working" and last["otel_a2a.card.etag"] == 'W/"v2"'


def test_an_application_processor_sees_the_start_attributes(otel: Harness) -> None:
    assert _unread(otel)  # the SDK's simple processor and ours: attributes go in directly
    recorder = StartRecorder()
    otel.tracer_provider.add_span_processor(recorder)
    assert not _unread(otel)  # now an application's processor reads them at start
    attrs = _get_task(otel)
    assert attrs["a2a.task.state"] == "working" and attrs["a2a.task.id"] == "t1"
    started = recorder.seen["GetTask"]
    assert started["a2a.task.id"] == "t1" and started["rpc.system.name"] == "a2a"
    assert "a2a.task.state" not in started  # known only from the response


def test_a_sampler_set_on_the_tracer_later_is_seen_and_uninstrument_forgets() -> None:
    harness, instrumentor = make_harness()
    try:
        rt = runtime.current()
        assert rt is not None and _unread(harness)
        sampler = RecordingSampler()
        rt.tracer.sampler = sampler  # type: ignore[attr-defined]
        assert not _unread(harness)
        _get_task(harness)
        assert sampler.seen["GetTask"]["a2a.task.id"] == "t1"
    finally:
        instrumentor.uninstrument()
    assert own_spans._quiet[0] is None  # nothing of that provider is kept


def test_an_application_sampler_sees_the_start_attributes(
    sampled: tuple[Harness, RecordingSampler],
) -> None:
    harness, sampler = sampled
    assert not _unread(harness)
    attrs = _get_task(harness)
    assert sampler.seen["GetTask"]["a2a.task.id"] == "t1"
    assert sampler.seen["GetTask"]["a2a.method.name"] == "GetTask"
    assert attrs["otel_a2a.task.state.raw"] == "TASK_STATE_WORKING"


@pytest.mark.parametrize(
    ("limits", "expect"),
    [
        (SpanLimits(max_span_attribute_length=3), {"a2a.task.id": "t1", "rpc.system.name": "a2a"}),
        (SpanLimits(max_span_attributes=4), None),
    ],
    ids=["value-length", "count"],
)
def test_the_application_span_limits_hold(
    limits: SpanLimits, expect: Mapping[str, str] | None
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = A2AInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
        with agent.client() as client:
            agent.rpc(client, "GetTask", {"id": "t1"})
    finally:
        instrumentor.uninstrument()
    (span,) = [x for x in exporter.get_finished_spans() if x.name == "GetTask"]
    attrs = dict(span.attributes or {})
    if expect is None:  # the count limit: the oldest dropped, and counted
        assert len(attrs) == 4 and span.dropped_attributes > 0
        assert attrs["http.response.status_code"] == 200  # the last set
    else:
        assert attrs["otel_a2a.task.state.raw"] == "TAS"  # truncated like every other value
        assert attrs["otel_a2a.binding"] == "JSO"
        for key, value in expect.items():
            assert attrs[key] == value


def test_nothing_is_written_once_the_span_ended(
    otel: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    rt = runtime.current()
    assert rt is not None
    span = own_spans.start(rt.tracer, "GetTask", SpanKind.CLIENT, {"a2a.task.id": "t9"})
    own_spans.end(span)
    own_spans.set_attributes(span, {"a2a.task.state": "failed"})
    assert isinstance(span, ReadableSpan)
    assert dict(span.attributes or {}) == {"a2a.task.id": "t9"}
    assert dict(otel.span("GetTask").attributes or {}) == {"a2a.task.id": "t9"}
    assert "Setting attribute on ended span" in caplog.text  # as the SDK says it


def test_a_key_set_again_moves_last_under_a_count_limit() -> None:
    """The SDK deletes a key set again and adds it last, so the count limit drops another
    key than the first one set: written directly, the same keys survive."""
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=5))
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    tracer = provider.get_tracer("otel_a2a")
    assert own_spans._start_unread(tracer)
    start: dict[str, own_spans.Value] = {"a": "1", "b": "2", "c": "3"}
    kept = []
    for direct in (True, False):
        span = (
            own_spans.start(tracer, "s", SpanKind.CLIENT, start)
            if direct
            else tracer.start_span("s", attributes=start)
        )
        if direct:
            own_spans.set_attributes(span, {"a": "1'", "b": "2'"})
        else:
            span.set_attributes({"a": "1'", "b": "2'"})
        for key in "def":
            span.set_attribute(key, key)
        assert isinstance(span, ReadableSpan)
        kept.append((list((span.attributes or {}).items()), span.dropped_attributes))
    survivors = [("a", "1'"), ("b", "2'"), ("d", "d"), ("e", "e"), ("f", "f")]
    assert kept[0] == kept[1] == (survivors, 1)  # "c", set once and first, was dropped


class OwnSampler(s.StaticSampler):
    """An application's subclass of an SDK sampler: it may read attributes."""


@pytest.mark.parametrize(
    ("sampler", "sdk"),
    [
        (s.DEFAULT_ON, True),
        (s.DEFAULT_OFF, True),
        (s.ALWAYS_OFF, True),
        (s.TraceIdRatioBased(0.1), True),
        (s.ParentBasedTraceIdRatio(0.5), True),
        (s.ParentBased(s.ALWAYS_ON, remote_parent_sampled=s.TraceIdRatioBased(0.5)), True),
        (s.ParentBased(OwnSampler(s.Decision.RECORD_AND_SAMPLE)), False),
        (OwnSampler(s.Decision.RECORD_AND_SAMPLE), False),
        (RecordingSampler(), False),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, bool) else str(v),
)
def test_only_the_sdk_samplers_count_as_reading_no_attributes(sampler: object, sdk: bool) -> None:
    assert own_spans._sdk_sampler(sampler) is sdk
