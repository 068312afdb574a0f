"""Work met inside otel-a2a's own work (``otel_a2a/instrumentation/reentry.py``): a garbage
collection there runs finalisers that may end a span, take a decision, send or read an A2A
request while this thread holds the ledger's lock. None of it may wait on that lock: spans
are deferred to the next drain, decisions and requests go through unjudged, counted.

The collections are real: a lock that collects once while held stands for an allocation in
the critical section, which can trigger one at any time."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from otel_a2a import liveness_decision
from otel_a2a.instrumentation.reentry import GUARD
from otel_a2a.instrumentation.runtime import Runtime
from tests.instrumentation.conftest import Clock, Harness, divergences
from tests.support.fake_agent import FakeAgent


@pytest.fixture
def rt(otel: Harness) -> Runtime:
    """The runtime the ``otel`` harness installed."""
    from otel_a2a.instrumentation import runtime

    current = runtime.current()
    assert current is not None
    return current


class CollectingLock:
    """The ledger's lock, which runs one real garbage collection while held once armed."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.armed = False

    def __enter__(self) -> CollectingLock:
        self._lock.__enter__()
        if self.armed:
            self.armed = False
            gc.collect()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


@pytest.fixture
def ledger_lock(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> Iterator[CollectingLock]:
    """Armed, the next critical section of the ledger collects; no other collection runs
    meanwhile (an automatic one could take the garbage early)."""
    lock = CollectingLock(rt.detector.ledger._lock)
    monkeypatch.setattr(rt.detector.ledger, "_lock", lock)
    gc.disable()
    try:
        yield lock
    finally:
        gc.enable()


def finalised(cleanup: Callable[[], object]) -> None:
    """Garbage whose finaliser runs ``cleanup``: a suspended generator in a reference cycle,
    closed by the next collection."""

    def worker() -> Iterator[None]:
        try:
            yield
        finally:
            cleanup()

    gen = worker()
    next(gen)
    cycle: list[object] = [gen]
    cycle.append(cycle)


def in_a_thread(work: Callable[[], object]) -> None:
    """Run ``work`` in a thread; fail (instead of hanging) if it deadlocks."""
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10), "deadlocked on the ledger's lock"


def foreign_span(otel: Harness, task_id: str, **attributes: str) -> Callable[[], None]:
    """A span of another instrumentation carrying a task state; returns its ``end``."""
    tracer = otel.tracer_provider.get_tracer("other.instrumentation")
    return tracer.start_span("server", attributes={"a2a.task.id": task_id, **attributes}).end


def test_a_span_a_collection_ends_inside_otel_a2a_work_waits_for_the_next_drain(
    rt: Runtime, otel: Harness, ledger_lock: CollectingLock
) -> None:
    """A generator suspended inside a span, collected while this thread records a response
    under the ledger's lock, ends its span right there: observing it then would wait on that
    lock for ever. It is observed by the next call into otel-a2a instead."""
    finalised(foreign_span(otel, "tG", **{"otel_a2a.task.state.raw": "Working"}))
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        ledger_lock.armed = True
        in_a_thread(lambda: agent.rpc(client, "GetTask", {"id": "t1"}))
        assert not ledger_lock.armed and otel.spans("server"), "no collection ran"
        assert rt.detector.ledger.get("t1") is not None
        assert rt.detector.ledger.get("tG") is None  # deferred, not yet observed
        agent.rpc(client, "GetTask", {"id": "t1"})  # the next request drains first
    observed = rt.detector.ledger.get("tG")
    assert observed is not None and observed.raw == "Working"
    assert (
        otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="non_canonical_state") == 1
    )


def test_a_span_a_collection_ends_outside_otel_a2a_work_is_observed_at_once(
    rt: Runtime, otel: Harness
) -> None:
    """Nothing of otel-a2a's is held then: no reason to wait."""
    finalised(foreign_span(otel, "tC", **{"otel_a2a.task.state.raw": "TASK_STATE_WORKING"}))
    gc.collect()
    assert otel.spans("server"), "the collector did not close the generator"
    observed = rt.detector.ledger.get("tC")
    assert observed is not None and observed.raw == "TASK_STATE_WORKING"


def test_a_collection_inside_a_metric_callback_defers_too(
    rt: Runtime, otel: Harness, ledger_lock: CollectingLock
) -> None:
    """The stale-task gauge walks the ledger under its lock, in the metric reader's thread."""
    finalised(foreign_span(otel, "tM", **{"a2a.task.state": "TASK_STATE_WORKING"}))
    ledger_lock.armed = True
    in_a_thread(otel.reader.get_metrics_data)
    assert not ledger_lock.armed and otel.spans("server"), "no collection ran"
    assert rt.detector.ledger.get("tM") is None
    with liveness_decision("tM"):  # a decision drains first: judged on the deferred span
        pass
    assert divergences(otel.span("liveness_decision")) == []


def test_a_request_a_collection_sends_inside_otel_a2a_work_goes_unobserved_and_counted(
    rt: Runtime, otel: Harness, ledger_lock: CollectingLock
) -> None:
    """A finaliser's A2A request (a CancelTask in a generator's cleanup) would wait on the
    ledger's lock for its response: it goes through as if uninstrumented, counted."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING", "t2": "TASK_STATE_WORKING"})
    replies: list[httpx.Response] = []
    with agent.client() as client:
        finalised(lambda: replies.append(agent.rpc(client, "GetTask", {"id": "t2"})))
        ledger_lock.armed = True
        in_a_thread(lambda: agent.rpc(client, "GetTask", {"id": "t1"}))
        assert [r.json()["result"]["id"] for r in replies] == ["t2"]  # the host got its answer
        assert rt.detector.ledger.get("t2") is None
        assert len(otel.spans("GetTask")) == 1
        agent.rpc(client, "GetTask", {"id": "t1"})  # the next request counts it
    assert otel.total("otel_a2a.instrumentation.errors", error__type="reentrant_call") == 1
    assert len(otel.spans("GetTask")) == 2


def test_a_decision_a_collection_takes_inside_otel_a2a_work_is_not_judged_but_counted(
    otel: Harness, ledger_lock: CollectingLock
) -> None:
    """Judging records metrics, whose SDK locks this thread may hold there as well."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    decisions: list[liveness_decision] = []

    def decide() -> None:
        with liveness_decision("t1") as decision:
            decisions.append(decision)

    with agent.client() as client:
        finalised(decide)
        ledger_lock.armed = True
        in_a_thread(lambda: agent.rpc(client, "GetTask", {"id": "t1"}))
        assert len(decisions) == 1 and decisions[0].verdict is None
        assert otel.spans("liveness_decision") == []
        with liveness_decision("t1") as judged:  # the next decision counts it
            pass
    assert judged.verdict is not None and judged.verdict.ok
    assert otel.total("otel_a2a.instrumentation.errors", error__type="reentrant_call") == 1


@pytest.fixture
def inside() -> Iterator[Callable[[bool], None]]:
    """Enter otel-a2a's work in this thread (True), as a collection there finds it, or leave
    it (False)."""
    entered = False

    def set_inside(on: bool) -> None:
        nonlocal entered
        if on:
            assert GUARD.enter()
        else:
            GUARD.leave()
        entered = on

    try:
        yield set_inside
    finally:
        if entered:
            GUARD.leave()


def test_work_deferred_beyond_the_bound_is_counted_not_kept(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(GUARD, "max_deferred", 2)
    inside(True)
    for i in range(5):
        foreign_span(otel, f"tO{i}", **{"a2a.task.state": "TASK_STATE_WORKING"})()
    inside(False)
    assert GUARD.pending() == 2
    foreign_span(otel, "tP")()  # the next hook call drains first
    assert [rt.detector.ledger.get(f"tO{i}") is not None for i in range(5)] == [True] * 2 + [
        False
    ] * 3
    assert otel.total("otel_a2a.instrumentation.errors", error__type="deferred_overflow") == 3
    assert GUARD.pending() == 0 and GUARD._dropped == 0


def test_otel_a2a_work_in_one_thread_leaves_the_others_alone(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None]
) -> None:
    inside(True)
    other = threading.Thread(
        target=foreign_span(otel, "tB", **{"a2a.task.state": "TASK_STATE_COMPLETED"})
    )
    other.start()
    other.join(10)
    assert rt.detector.ledger.get("tB") is not None  # observed at once, in its own thread
    assert GUARD.pending() == 0


def test_a_deferred_span_is_observed_at_the_time_it_ended(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None], clock: Clock
) -> None:
    """A response observed after the span but before the drain is newer: it wins (no false
    terminal_regression from the older state drained late)."""
    from otel_a2a.protocol import StateReading, TaskReport, TaskState

    inside(True)
    foreign_span(otel, "tT", **{"a2a.task.state": "TASK_STATE_WORKING"})()
    inside(False)
    clock.advance(1)  # a response read meanwhile, in another thread
    done = StateReading("TASK_STATE_COMPLETED", TaskState.COMPLETED, True, True)
    report = TaskReport("tT", None, done, "task")
    rt.observe(None, rt.peer_of("http://agent.test"), [report], "GetTask", clock())
    with liveness_decision("tT", assumed_state="completed"):  # drains first
        pass
    observed = rt.detector.ledger.get("tT")
    assert observed is not None and observed.state is TaskState.COMPLETED
    assert (
        otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="terminal_regression") == 0
    )
    assert divergences(otel.span("liveness_decision")) == []


def test_a_deferred_span_keeps_only_bounded_text_it_is_read_for(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None]
) -> None:
    """No span kept alive, no peer's long value held whole; an overlong task id is no id."""
    inside(True)
    foreign_span(otel, "tR", **{"otel_a2a.task.state.raw": "W" * 5000, "other": "x"})()
    foreign_span(otel, "x" * 2000, **{"a2a.task.state": "TASK_STATE_WORKING"})()
    inside(False)
    assert GUARD.pending() == 2  # the span, and the error of the overlong id
    item = GUARD._queue.get_nowait()
    (kept,) = [arg for arg in item.args if isinstance(arg, dict)]  # type: ignore[attr-defined]
    assert kept == {"otel_a2a.task.state.raw": "W" * 1024}
    GUARD._queue.put(item)
    GUARD.drain()
    assert rt.detector.ledger.get("tR") is not None
    assert otel.total("otel_a2a.instrumentation.errors", error__type="task_id_too_long") == 1


def test_a_decision_span_started_inside_otel_a2a_work_is_not_judged_but_counted(
    otel: Harness, inside: Callable[[bool], None]
) -> None:
    tracer = otel.tracer_provider.get_tracer("my.orchestrator")
    inside(True)
    with tracer.start_as_current_span(
        "wait_on_task", attributes={"otel_a2a.liveness.decision": True, "a2a.task.id": "tX"}
    ):
        pass
    inside(False)
    assert divergences(otel.span("wait_on_task")) == []
    assert otel.total("otel_a2a.instrumentation.errors") == 0  # recorded by the next drain
    with liveness_decision("tY"):
        pass
    assert otel.total("otel_a2a.instrumentation.errors", error__type="reentrant_call") == 1
    assert divergences(otel.span("liveness_decision")) == ["no_observation"]


def test_a_response_read_inside_otel_a2a_work_is_not_observed(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None]
) -> None:
    """Opened outside, read inside (by a finaliser): observing it would take the ledger's
    lock. Its state is not observed, counted; its span ends at the next drain."""
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
        inside(True)
        content = response.read()
        response.close()
        inside(False)
        assert content == task  # the application gets its bytes
        assert otel.spans("GetTask") == []
        GUARD.drain()
        assert rt.detector.ledger.get("t1") is None
        span = otel.span("GetTask")
        assert span.end_time is not None and "a2a.task.state" not in (span.attributes or {})
    assert otel.total("otel_a2a.instrumentation.errors", error__type="reentrant_call") == 1


def test_uninstrument_runs_what_was_deferred(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None]
) -> None:
    from otel_a2a.instrumentation import A2AInstrumentor

    inside(True)
    foreign_span(otel, "tU", **{"a2a.task.state": "TASK_STATE_WORKING"})()
    with liveness_decision("tU"):
        pass
    inside(False)
    A2AInstrumentor().uninstrument()
    assert GUARD.pending() == 0
    assert rt.detector.ledger.get("tU") is not None  # that runtime's, not the next one's
    assert otel.total("otel_a2a.instrumentation.errors", error__type="reentrant_call") == 1
    A2AInstrumentor().instrument(tracer_provider=otel.tracer_provider)


def test_an_entry_runs_a_bounded_batch_of_what_waits(
    rt: Runtime, otel: Harness, inside: Callable[[bool], None]
) -> None:
    """An unrelated request never runs all of a long queue inline: one batch per entry; the
    rest waits for the drain thread (or the next entries)."""
    inside(True)
    for i in range(GUARD.batch * 3):
        foreign_span(otel, f"tQ{i}", **{"a2a.task.state": "TASK_STATE_WORKING"})()
    inside(False)
    assert GUARD.pending() == GUARD.batch * 3
    with liveness_decision("tZ"):
        pass
    assert GUARD.pending() == GUARD.batch * 2
    GUARD.drain()
    assert GUARD.pending() == 0
    assert all(rt.detector.ledger.get(f"tQ{i}") is not None for i in range(GUARD.batch * 3))


def test_an_idle_process_still_ends_a_dropped_response_span(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A response dropped unread defers its span's end; with no later request, the drain
    thread ends it ``interval`` seconds on."""
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    ended = threading.Event()

    class Watch(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            if span.name == "GetTask":
                ended.set()

    otel.tracer_provider.add_span_processor(Watch())
    task = b'{"jsonrpc":"2.0","id":1,"result":{"id":"t1","status":{"state":"TASK_STATE_WORKING"}}}'
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=iter([task])))
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
    with httpx.Client(transport=transport, base_url="http://agent.test") as client:
        request = client.build_request("POST", "/a2a", json=body, headers={"A2A-Version": "1.0"})
        monkeypatch.setattr(GUARD, "interval", 0.01)
        client.send(request, stream=True)  # dropped unread, unclosed
        gc.collect()
        assert ended.wait(10), "the drain thread did not end the span"
    assert otel.span("GetTask").end_time is not None
