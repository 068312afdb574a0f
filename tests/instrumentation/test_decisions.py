"""Explicit liveness decisions: ``liveness_decision``, enforce mode, and the span processor."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_a2a import DivergenceReason, TaskStateDivergenceError, liveness_decision
from otel_a2a.detect import Verdict
from otel_a2a.instrumentation import DivergenceSpanProcessor, processor
from tests.instrumentation.conftest import Harness, divergences, make_harness
from tests.support.fake_agent import FakeAgent


@pytest.fixture
def enforcing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setenv("OTEL_A2A_MODE", "enforce")
    harness, instrumentor = make_harness()
    try:
        yield harness
    finally:
        instrumentor.uninstrument()


def test_observe_mode_reports_and_runs_the_block(otel: Harness) -> None:
    ran = []
    with liveness_decision("t-unknown") as decision:
        ran.append(True)
    assert ran == [True]
    assert decision.verdict is not None
    assert decision.verdict.reason is DivergenceReason.NO_OBSERVATION
    span = otel.span("liveness_decision")
    assert divergences(span) == ["no_observation"]
    attrs = dict(span.attributes or {})
    assert attrs["otel_a2a.liveness.decision"] is True
    assert attrs["otel_a2a.decision.assumed_state"] == "working"
    assert "otel_a2a.agent.url" not in attrs  # never seen, no agent given: no URL to record
    assert otel.total("otel_a2a.divergence", a2a__method__name="liveness_decision") == 1
    # counted under a label no agent's card name collides with (cf. ``_OTHER``)
    assert otel.total("otel_a2a.divergence", otel_a2a__agent__name="_UNKNOWN") == 1


def test_enforce_raises_before_the_block(enforcing: Harness) -> None:
    ran = []
    with pytest.raises(TaskStateDivergenceError) as info, liveness_decision("t-unknown"):
        ran.append(True)
    assert ran == []
    assert info.value.reason is DivergenceReason.NO_OBSERVATION
    assert len(enforcing.spans("liveness_decision")) == 1


def test_enforce_lets_an_authoritative_decision_through(enforcing: Harness) -> None:
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})

    @liveness_decision("t1")
    def act() -> str:
        return "acted"

    assert act() == "acted"
    assert divergences(enforcing.span("liveness_decision")) == []
    assert (
        enforcing.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="authoritative")
        == 1
    )


def test_a_decision_that_assumes_the_end_is_authorised_by_a_terminal_state(
    enforcing: Harness,
) -> None:
    agent = FakeAgent(states={"t1": "TASK_STATE_COMPLETED"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
    with liveness_decision("t1", assumed_state="completed"):
        pass  # e.g. fetching the artifacts of a task known to be done
    with pytest.raises(TaskStateDivergenceError) as info, liveness_decision("t1"):
        pass
    assert info.value.reason is DivergenceReason.TERMINAL_STATE
    first, second = enforcing.spans("liveness_decision")
    assert divergences(first) == [] and divergences(second) == ["terminal_state"]
    # the same on a foreign span, judged by the span processor
    tracer = enforcing.tracer_provider.get_tracer("my.orchestrator")
    marks = {"otel_a2a.liveness.decision": True, "a2a.task.id": "t1"}
    for name, assumed in (("collect", "TASK_STATE_COMPLETED"), ("wait", "working")):
        attributes = {**marks, "otel_a2a.decision.assumed_state": assumed}
        with tracer.start_as_current_span(name, attributes=attributes):
            pass
    assert divergences(enforcing.span("collect")) == []
    assert divergences(enforcing.span("wait")) == ["terminal_state"]


def test_one_instance_entered_again_while_open(otel: Harness) -> None:
    """Nested, and shared by concurrent asyncio tasks: every span ends, no context leaks."""
    from opentelemetry import trace

    guard = liveness_decision("t1")
    with guard:
        outer = trace.get_current_span()
        with guard:
            assert trace.get_current_span() is not outer
        assert trace.get_current_span() is outer
    assert not trace.get_current_span().is_recording()

    async def worker(gate: asyncio.Event) -> bool:
        async with guard:
            await gate.wait()
        return trace.get_current_span().is_recording()

    async def main() -> list[bool]:
        gate = asyncio.Event()
        tasks = [asyncio.create_task(worker(gate)) for _ in range(2)]
        await asyncio.sleep(0)  # both inside the block
        gate.set()
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(main()) == [False, False]
    assert len(otel.spans("liveness_decision")) == 4  # all ended


def test_one_instance_shared_by_threads_acts_on_each_entrys_own_verdict(
    enforcing: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread A's decision diverges; thread B enters the same instance and decides ok while A
    is between deciding and acting (forced at A's context attach): A still raises, B runs."""
    from otel_a2a.instrumentation import decision, runtime

    rt = runtime.current()
    assert rt is not None
    shared = liveness_decision("t1")
    real_attach = decision.context.attach
    outcomes: list[str] = []
    a_between = [True]

    def b_enters() -> None:
        with shared:
            outcomes.append("B ran")

    def attach(ctx: object) -> object:
        if a_between:  # A decided (no observation) and has not acted yet
            a_between.clear()
            monkeypatch.setattr(rt.detector, "decide", lambda task_id, *a, **k: _ok(task_id))
            thread = threading.Thread(target=b_enters)
            thread.start()
            thread.join(timeout=30)
            assert outcomes == ["B ran"]
        return real_attach(ctx)  # type: ignore[arg-type]

    monkeypatch.setattr(decision.context, "attach", attach)
    with pytest.raises(TaskStateDivergenceError) as info, shared:
        outcomes.append("A ran")
    assert info.value.reason is DivergenceReason.NO_OBSERVATION
    assert outcomes == ["B ran"]


def _ok(task_id: str) -> Verdict:
    from otel_a2a.detect.verdict import Evidence

    return Verdict(None, Evidence(task_id, None, None, None, None, None, None, 30.0))


def test_exit_in_another_context_still_ends_the_span(otel: Harness) -> None:
    """Starlette runs each step of a sync generator in a fresh context copy: a block entered in
    one step and left in another must still end its span."""
    import contextvars

    guard = liveness_decision("t1")
    contextvars.copy_context().run(guard.__enter__)
    guard.__exit__(None, None, None)
    assert len(otel.spans("liveness_decision")) == 1


def test_async_decorator(enforcing: Harness) -> None:
    @liveness_decision("t-missing", assumed_state="input-required")
    async def act() -> str:
        return "acted"

    with pytest.raises(TaskStateDivergenceError):
        asyncio.run(act())


def test_processor_judges_foreign_spans_while_live(otel: Harness) -> None:
    tracer = otel.tracer_provider.get_tracer("my.orchestrator")
    with tracer.start_as_current_span(
        "wait_on_task", attributes={"otel_a2a.liveness.decision": True, "a2a.task.id": "tX"}
    ):
        pass
    span = otel.span("wait_on_task")
    assert divergences(span) == ["no_observation"]
    # ordinary spans are left alone
    with tracer.start_as_current_span("unrelated", attributes={"a2a.task.id": "tX"}):
        pass
    assert divergences(otel.span("unrelated")) == []
    assert otel.total("otel_a2a.liveness.decisions") == 1


def test_processor_turns_foreign_states_into_observations(otel: Harness) -> None:
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    with tracer.start_as_current_span(
        "server", attributes={"a2a.task.id": "tY", "otel_a2a.task.state.raw": "Working"}
    ):
        pass
    assert (
        otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="non_canonical_state") == 1
    )
    with liveness_decision("tY"):
        pass
    assert divergences(otel.span("liveness_decision")) == []


def test_processor_added_once_to_the_provider_in_use(otel: Harness) -> None:
    from otel_a2a.instrumentation import A2AInstrumentor

    for _ in range(2):  # instrumenting again on the same provider adds no second processor
        A2AInstrumentor().uninstrument()
        A2AInstrumentor().instrument(tracer_provider=otel.tracer_provider)
    processors = otel.tracer_provider._active_span_processor._span_processors
    assert sum(isinstance(p, DivergenceSpanProcessor) for p in processors) == 1


def test_without_instrumentation_the_block_just_runs() -> None:
    with liveness_decision("t1") as decision:
        pass
    assert decision.verdict is None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(DivergenceSpanProcessor())  # inert without a runtime
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("x").start_as_current_span(
        "s", attributes={"otel_a2a.liveness.decision": True, "a2a.task.id": "t"}
    ):
        pass
    [span] = exporter.get_finished_spans()
    assert span.events == ()


@pytest.mark.parametrize(
    ("attributes", "reasons"),
    [
        ({"a2a.task.state": "TASK_STATE_WORKING", "a2a.protocol.version": "1.0"}, []),
        ({"otel_a2a.task.state.raw": "TASK_STATE_WORKING"}, []),  # exact in v1.0: no version said
        ({"otel_a2a.task.state.raw": "working"}, []),  # exact in v0.3 JSON-RPC
        ({"otel_a2a.task.state.raw": "Working"}, ["non_canonical_state"]),  # exact nowhere
        (
            {
                "otel_a2a.task.state.raw": "working",
                "a2a.protocol.version": "1.0",
                "otel_a2a.binding": "JSONRPC",
            },
            ["non_canonical_state"],  # v0.3's spelling on a v1.0 exchange
        ),
        ({"a2a.task.state": "paused"}, ["unknown_state"]),
    ],
)
def test_processor_judges_foreign_spellings_only_as_far_as_the_span_says(
    otel: Harness, attributes: dict[str, str], reasons: list[str]
) -> None:
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    with tracer.start_as_current_span("server", attributes={"a2a.task.id": "tZ", **attributes}):
        pass
    found = [
        (attrs["otel_a2a.divergence.reason"], attrs["a2a.method.name"])
        for attrs, value in otel.points("otel_a2a.divergence")
        if value
    ]
    assert found == [(reason, "unknown") for reason in reasons]


def test_processor_neither_judges_nor_tracks_an_overlong_task_id(otel: Harness) -> None:
    """Ids read off foreign spans have the wire path's bound (1,024 characters): observations
    and decisions with longer ids (up to 1 MiB) leave the ledger as it was, each span counted
    once; an id at the bound is kept and judged."""
    from otel_a2a.instrumentation import runtime
    from otel_a2a.protocol import MAX_ID_LEN

    rt = runtime.current()
    assert rt is not None
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    for i, length in enumerate((MAX_ID_LEN + 1, 4096, 1 << 20)):
        huge = f"{i}".ljust(length, "x")
        with tracer.start_as_current_span("server", attributes={"a2a.task.id": huge}) as span:
            span.set_attribute("a2a.task.state", "working")
        decision = {"otel_a2a.liveness.decision": True, "a2a.task.id": huge}
        with tracer.start_as_current_span("wait_on_task", attributes=decision):
            pass
    assert len(rt.detector.ledger) == 0
    assert otel.total("otel_a2a.liveness.decisions") == 0
    assert otel.total("otel_a2a.instrumentation.errors", error__type="task_id_too_long") == 6
    at_bound = "y" * MAX_ID_LEN
    with tracer.start_as_current_span(
        "server", attributes={"a2a.task.id": at_bound, "a2a.task.state": "TASK_STATE_WORKING"}
    ):
        pass
    decision = {"otel_a2a.liveness.decision": True, "a2a.task.id": at_bound}
    with tracer.start_as_current_span("wait_on_task", attributes=decision):
        pass
    assert rt.detector.ledger.get(at_bound) is not None
    assert (
        otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="authoritative") == 1
    )


def test_a_processor_the_application_added_too_judges_nothing_twice(otel: Harness) -> None:
    """The docstring says to add it; otel-a2a adds its own as well: one span, one verdict."""
    otel.tracer_provider.add_span_processor(DivergenceSpanProcessor())
    tracer = otel.tracer_provider.get_tracer("my.orchestrator")
    with tracer.start_as_current_span(
        "wait_on_task", attributes={"otel_a2a.liveness.decision": True, "a2a.task.id": "tX"}
    ):
        pass
    assert divergences(otel.span("wait_on_task")) == ["no_observation"]
    assert otel.total("otel_a2a.liveness.decisions") == 1
    assert otel.total("otel_a2a.divergence") == 1
    with tracer.start_as_current_span(
        "server", attributes={"a2a.task.id": "tY", "otel_a2a.task.state.raw": "Working"}
    ):
        pass
    assert (
        otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="non_canonical_state") == 1
    )
    # a second span, judged too: only a repeat of the same span is skipped
    with tracer.start_as_current_span(
        "wait_again", attributes={"otel_a2a.liveness.decision": True, "a2a.task.id": "tX"}
    ):
        pass
    assert otel.total("otel_a2a.liveness.decisions") == 2


def test_two_processors_under_a_concurrent_multi_span_processor_judge_once() -> None:
    """``ConcurrentMultiSpanProcessor`` runs the processors of one span on pool threads at
    once: the once-only rule must hold across threads, not per thread."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor

    from otel_a2a.instrumentation import A2AInstrumentor

    provider = TracerProvider(active_span_processor=ConcurrentMultiSpanProcessor(4))
    for _ in range(3):  # the application's, twice over; otel-a2a adds its own
        provider.add_span_processor(DivergenceSpanProcessor())
    reader = InMemoryMetricReader()
    instrumentor = A2AInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    try:
        tracer = provider.get_tracer("my.orchestrator")
        for i in range(50):
            attributes = {"otel_a2a.liveness.decision": True, "a2a.task.id": f"t{i}"}
            with tracer.start_as_current_span("wait_on_task", attributes=attributes):
                pass
        data = reader.get_metrics_data()
        assert data is not None
        decisions = sum(
            point.value
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "otel_a2a.liveness.decisions"
            for point in m.data.data_points  # type: ignore[union-attr]
        )
        assert decisions == 50
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def test_a_span_ending_while_its_processor_holds_the_judged_set_does_not_deadlock(
    otel: Harness,
) -> None:
    """Adding to the set of judged spans may run the garbage collector, which may finalise a
    generator suspended inside a span and end it right there, in the same thread."""
    from otel_a2a.instrumentation import runtime

    rt = runtime.current()
    assert rt is not None
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    span = tracer.start_span(
        "server", attributes={"a2a.task.id": "tQ", "a2a.task.state": "TASK_STATE_WORKING"}
    )
    done = threading.Event()

    def end_while_held() -> None:
        with rt.judged_lock:  # where the collector would have run
            span.end()
        done.set()

    threading.Thread(target=end_while_held, daemon=True).start()  # a hang must not hang pytest
    assert done.wait(10), "deadlocked on the processor's own lock"
    assert otel.spans("server")


def test_foreign_spans_met_while_one_of_ours_starts_or_ends_are_still_judged(
    otel: Harness,
) -> None:
    """The hooks leave otel-a2a's own spans alone at once while one starts or ends; a span of
    another tracer started or ended right then (here by an application's processor) is not
    mistaken for one of them."""
    from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

    from otel_a2a.instrumentation import runtime

    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    observed = tracer.start_span(
        "server", attributes={"a2a.task.id": "tO", "otel_a2a.task.state.raw": "working"}
    )

    class Meddler(SpanProcessor):
        def on_start(self, span: Span, parent_context: object = None) -> None:
            if span.name == "liveness_decision":  # inside otel-a2a's work: counted
                attributes = {"otel_a2a.liveness.decision": True, "a2a.task.id": "tS"}
                tracer.start_span("wait", attributes=attributes).end()

        def on_end(self, span: ReadableSpan) -> None:
            if span.name == "liveness_decision":
                observed.end()

    otel.tracer_provider.add_span_processor(Meddler())
    with liveness_decision("tD"):
        pass
    rt = runtime.current()
    assert rt is not None
    assert rt.detector.ledger.get("tO") is not None  # ended while ours ended: observed
    assert otel.total("otel_a2a.instrumentation.errors", error__type="reentrant_call") == 1


def test_the_processor_reads_the_attributes_the_public_view_shows(otel: Harness) -> None:
    """The processor reads ``span.attributes`` (copied out of the SDK's read-only view, where
    a missing key is cheaper), at the start and at the end, of the SDK's spans and any other."""
    from opentelemetry.sdk.trace import ReadableSpan

    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    span = tracer.start_span("s", attributes={"a2a.task.id": "tA", "n": 1})
    assert isinstance(span, ReadableSpan)
    span.set_attribute("a2a.task.state", "working")
    assert processor._attributes(span) == span.attributes
    span.end()
    ended = otel.span("s")
    assert processor._attributes(ended) == dict(ended.attributes or {})

    class Foreign(ReadableSpan):  # not the SDK's own class
        pass

    foreign = Foreign("f", attributes={"a2a.task.id": "tF"})
    assert processor._attributes(foreign) == {"a2a.task.id": "tF"}
