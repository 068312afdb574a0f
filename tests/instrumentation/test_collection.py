"""Garbage collections (``otel_a2a/instrumentation/collection.py``): a finaliser may end a
span, take a decision, send or read an A2A request while its thread holds otel-a2a's or the
SDK's locks. Nothing it reaches may take a lock or record a metric then: spans are set aside
and observed later, decisions and requests go on unjudged, errors are counted afterwards."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from otel_a2a import liveness_decision
from otel_a2a.instrumentation import collection
from otel_a2a.instrumentation.runtime import Runtime
from tests.instrumentation.conftest import Clock, Harness, divergences
from tests.support.fake_agent import FakeAgent


def pretend_collecting(on: bool) -> None:
    """Pretend the garbage collector runs in this thread, or stop pretending. A real
    collection meanwhile would reset the flag (its callback ends it): none may run."""
    if on:
        gc.disable()
        collection._collecting_thread = threading.get_ident()
    else:
        collection._collecting_thread = None
        gc.enable()


@pytest.fixture
def rt(otel: Harness) -> Runtime:
    """The runtime the ``otel`` harness installed."""
    from otel_a2a.instrumentation import runtime

    current = runtime.current()
    assert current is not None
    return current


def test_a_foreign_span_the_collector_ends_under_the_ledger_lock_is_set_aside(
    rt: Runtime, otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generator suspended inside a span, collected while this thread holds the ledger's
    lock, ends its span right there: observing it then would wait on that lock for ever.
    During a collection it is set aside, and observed by the next hook call or request."""
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    span = tracer.start_span(
        "server", attributes={"a2a.task.id": "tG", "a2a.task.state.raw": "Working"}
    )
    done = threading.Event()

    def end_in_a_collection() -> None:
        with rt.detector.ledger._lock:  # where the collection ran
            pretend_collecting(True)
            try:
                span.end()
            finally:
                pretend_collecting(False)
        done.set()

    threading.Thread(target=end_in_a_collection, daemon=True).start()
    assert done.wait(10), "deadlocked on the ledger's lock"
    assert rt.detector.ledger.get("tG") is None  # set aside, not yet observed
    with tracer.start_as_current_span("next", attributes={"a2a.task.id": "tH"}):
        pass  # the next hook call observes it
    observed = rt.detector.ledger.get("tG")
    assert observed is not None and observed.raw == "Working"
    assert otel.total("a2a.divergence", a2a__divergence__reason="non_canonical_state") == 1


def test_the_collection_flag_follows_the_real_garbage_collector(rt: Runtime, otel: Harness) -> None:
    """A generator in a reference cycle, suspended inside a span, is closed by ``gc``: its
    span ends during the collection and is observed by the next hook call."""
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")

    def worker() -> Iterator[None]:
        span = tracer.start_span(
            "server", attributes={"a2a.task.id": "tC", "a2a.task.state.raw": "TASK_STATE_WORKING"}
        )
        try:
            yield
        finally:
            span.end()

    gen = worker()
    next(gen)
    cycle: list[object] = [gen]
    cycle.append(cycle)
    del gen, cycle
    gc.collect()
    assert otel.spans("server"), "the collector did not close the generator"
    assert rt.detector.ledger.get("tC") is None  # set aside during the collection
    with tracer.start_as_current_span("next", attributes={"a2a.task.id": "tD"}):
        pass
    observed = rt.detector.ledger.get("tC")
    assert observed is not None and observed.raw == "TASK_STATE_WORKING"


def test_spans_set_aside_beyond_the_bound_are_counted_not_kept(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_a2a.instrumentation import processor

    monkeypatch.setattr(processor, "_MAX_SET_ASIDE", 2)
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    collecting(True)
    for i in range(5):
        attributes = {"a2a.task.id": f"tO{i}", "a2a.task.state": "working"}
        tracer.start_span("server", attributes=attributes).end()
    collecting(False)
    assert len(processor._set_aside) == 2
    with tracer.start_as_current_span("next", attributes={"a2a.task.id": "tP"}):
        pass
    assert [rt.detector.ledger.get(f"tO{i}") is not None for i in range(5)] == [True] * 2 + [
        False
    ] * 3
    assert otel.total("a2a.instrumentation.errors", error__type="set_aside_overflow") == 3
    assert not processor.set_aside_pending()


@pytest.fixture
def collecting() -> Iterator[Callable[[bool], None]]:
    """Pretend the garbage collector runs in this thread (True) or not (False)."""
    from otel_a2a.instrumentation import processor

    try:
        yield pretend_collecting
    finally:
        pretend_collecting(False)
        processor.clear_set_aside()


def test_a_collection_in_one_thread_leaves_the_others_alone(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None]
) -> None:
    from otel_a2a.instrumentation import processor

    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    collecting(True)
    other = threading.Thread(
        target=lambda: tracer.start_span(
            "server", attributes={"a2a.task.id": "tB", "a2a.task.state": "completed"}
        ).end()
    )
    other.start()
    other.join(10)
    assert rt.detector.ledger.get("tB") is not None  # observed at once, in its own thread
    assert not processor._set_aside


def test_a_span_set_aside_is_observed_at_the_time_it_ended(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None], clock: Clock
) -> None:
    """A response observed after the collection but before the drain is newer: it wins (no
    false terminal_regression from the older state drained late)."""
    from otel_a2a.instrumentation import processor
    from otel_a2a.protocol import StateReading, TaskReport, TaskState

    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    collecting(True)
    tracer.start_span("old", attributes={"a2a.task.id": "tT", "a2a.task.state": "working"}).end()
    collecting(False)
    ((_, kept, _),) = processor._set_aside
    assert set(kept) == {"a2a.task.state"}  # only what is read later: no span kept alive
    clock.advance(1)  # a response read meanwhile (an exchange drains only as a request starts)
    done = StateReading("TASK_STATE_COMPLETED", TaskState.COMPLETED, True, True)
    report = TaskReport("tT", None, done, "task")
    rt.detector.on_reports("http://agent.test", [report], "GetTask", clock())
    with liveness_decision("tT", assumed_state="completed"):  # drains first
        pass
    observed = rt.detector.ledger.get("tT")
    assert observed is not None and observed.state is TaskState.COMPLETED
    assert otel.total("a2a.divergence", a2a__divergence__reason="terminal_regression") == 0
    assert divergences(otel.span("A2A liveness_decision")) == []


def test_a_decision_taken_during_a_collection_is_not_judged_but_counted(
    otel: Harness, collecting: Callable[[bool], None]
) -> None:
    """Judging would record metrics, whose SDK locks the collecting thread may hold."""
    tracer = otel.tracer_provider.get_tracer("my.orchestrator")
    collecting(True)
    with tracer.start_as_current_span(
        "wait_on_task", attributes={"a2a.liveness.decision": True, "a2a.task.id": "tX"}
    ):
        pass
    with liveness_decision("tX") as decision:
        pass
    collecting(False)
    assert decision.verdict is None and otel.spans("A2A liveness_decision") == []
    assert divergences(otel.span("wait_on_task")) == []
    with liveness_decision("tY"):  # the next decision counts what could not be counted
        pass
    assert otel.total("a2a.instrumentation.errors", error__type="decision_during_collection") == 2


def test_uninstrument_drops_what_was_set_aside(
    otel: Harness, collecting: Callable[[bool], None]
) -> None:
    from otel_a2a.instrumentation import A2AInstrumentor, processor

    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    collecting(True)
    tracer.start_span("s", attributes={"a2a.task.id": "tU", "a2a.task.state": "working"}).end()
    collecting(False)
    assert processor.set_aside_pending()
    A2AInstrumentor().uninstrument()
    assert not processor.set_aside_pending()
    A2AInstrumentor().instrument(tracer_provider=otel.tracer_provider)


def test_a_request_sent_during_a_collection_goes_unobserved_and_is_counted(
    otel: Harness, collecting: Callable[[bool], None]
) -> None:
    """A finaliser's A2A request (a CancelTask in a generator's cleanup) would take the
    ledger's lock and record metrics: it goes through as if uninstrumented, counted."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        collecting(True)
        response = agent.rpc(client, "GetTask", {"id": "t1"})
        collecting(False)
        assert response.json()["result"]["status"]["state"] == "TASK_STATE_WORKING"
        assert otel.spans() == []
        agent.rpc(client, "GetTask", {"id": "t1"})  # the next request counts it
    assert otel.total("a2a.instrumentation.errors", error__type="request_during_collection") == 1
    assert len(otel.spans("A2A GetTask")) == 1


def test_an_internal_error_during_a_collection_is_counted_afterwards(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None]
) -> None:
    from otel_a2a.instrumentation import processor

    collecting(True)
    rt.error(RuntimeError("in a finaliser"))
    processor.observe_set_aside(rt)  # inside the collection: nothing drained
    collecting(False)
    assert otel.total("a2a.instrumentation.errors") == 0
    processor.observe_set_aside(rt)
    assert otel.total("a2a.instrumentation.errors", error__type="RuntimeError") == 1


def test_the_next_a2a_request_observes_what_was_set_aside(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None]
) -> None:
    from otel_a2a.instrumentation import processor

    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    collecting(True)
    long_raw = "W" * 5000
    tracer.start_span("s", attributes={"a2a.task.id": "tR", "a2a.task.state.raw": long_raw}).end()
    tracer.start_span(
        "s", attributes={"a2a.task.id": "x" * 2000, "a2a.task.state": "working"}
    ).end()
    collecting(False)
    ((task_id, kept, _),) = processor._set_aside  # the overlong id was not kept
    assert task_id == "tR" and len(str(kept["a2a.task.state.raw"])) == 1024
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        agent.rpc(client, "GetTask", {"id": "t1"})
    assert rt.detector.ledger.get("tR") is not None
    assert otel.total("a2a.instrumentation.errors", error__type="task_id_too_long") == 1


def test_a_response_a_finaliser_reads_during_a_collection_is_not_observed(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None]
) -> None:
    """Opened before the collection, read by a finaliser inside it: observing it would take
    the ledger's lock. Its span ends; its state is not observed; it is counted."""
    task = (
        b'{"jsonrpc":"2.0","id":1,"result":{"id":"t1","contextId":"c",'
        b'"status":{"state":"TASK_STATE_WORKING"}}}'
    )

    def streamed(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=iter([task]))  # read as the application reads

    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
    transport = httpx.MockTransport(streamed)
    with httpx.Client(transport=transport, base_url="http://agent.test") as client:
        request = client.build_request("POST", "/a2a", json=body, headers={"A2A-Version": "1.0"})
        response = client.send(request, stream=True)
        collecting(True)
        content = response.read()
        response.close()
        collecting(False)
        assert content == task  # the application gets its bytes
        assert rt.detector.ledger.get("t1") is None
        span = otel.span("A2A GetTask")
        assert span.end_time is not None and "a2a.task.state" not in (span.attributes or {})
        client.post("/a2a", json=body, headers={"A2A-Version": "1.0"}).read()  # counts it
    assert otel.total("a2a.instrumentation.errors", error__type="response_during_collection") == 1


def test_errors_held_for_later_are_recorded_at_uninstrument(
    rt: Runtime, otel: Harness, collecting: Callable[[bool], None]
) -> None:
    from otel_a2a.instrumentation import A2AInstrumentor

    collecting(True)
    rt.error("in_a_finaliser")
    collecting(False)
    A2AInstrumentor().uninstrument()
    assert otel.total("a2a.instrumentation.errors", error__type="in_a_finaliser") == 1
    A2AInstrumentor().instrument(tracer_provider=otel.tracer_provider)
