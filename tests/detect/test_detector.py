"""Detector: the seeded incident's timeline and every call the instrumentation makes."""

from __future__ import annotations

import math
import threading

import pytest

from otel_a2a.detect import Detector
from otel_a2a.detect.detector import ERROR_REPLY
from otel_a2a.detect.verdict import DivergenceReason as R
from otel_a2a.protocol.model import Binding, Operation, TaskReport
from otel_a2a.protocol.states import (
    NOT_CANCELABLE,
    StateClass,
    StateReading,
    TaskState,
    read_state,
)

from .helpers import make_card

CARD_URL = "http://worker:9001/.well-known/agent-card.json"
AGENT = "http://worker:9001"


def report(task_id: str, raw: object, version: str = "1.0", kind: str = "task") -> TaskReport:
    return TaskReport(task_id, "ctx", read_state(raw, version, Binding.JSONRPC), kind)


def detector(**kw: object) -> Detector:
    det = Detector(max_tasks=100, default_heartbeat=30.0, **kw)  # type: ignore[arg-type]
    det.on_card(CARD_URL, make_card('"v1"', interfaces=(AGENT + "/a2a",)))
    return det


def test_on_card_reports_agent_and_etag_changes() -> None:
    det = Detector(10, 30.0, {})
    first = det.on_card(CARD_URL, make_card('"v1"'))
    assert (first.agent, first.etag, first.etag_changed) == (AGENT, '"v1"', False)
    assert (first.heartbeat, first.heartbeat_source) == (30.0, "default")
    not_modified = det.on_card(CARD_URL, None)
    assert (not_modified.etag, not_modified.etag_changed) == ('"v1"', False)
    changed = det.on_card(CARD_URL, make_card('"v2"'))
    assert changed.etag_changed and changed.etag == '"v2"'


def test_seed_timeline_heartbeat_gap_then_terminal_state() -> None:
    det = detector()
    assert det.decide("t1", det.agent(AGENT), 1.0).reason is R.NO_OBSERVATION
    assert (
        det.on_reports(
            det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.SEND_MESSAGE, 10.0
        )
        == []
    )
    assert det.decide("t1", det.agent(AGENT), 20.0).ok
    # the worker restarts silently; nothing is observed for longer than the heartbeat
    verdict = det.decide("t1", det.agent(AGENT), 45.0)
    assert verdict.reason is R.HEARTBEAT_GAP and verdict.evidence.age == 35.0
    assert det.stale_by_agent(45.0) == {AGENT: 1}
    # a re-fetch of the task shows the rehydrated terminal state
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_FAILED")], Operation.GET_TASK, 50.0)
    assert det.decide("t1", det.agent(AGENT), 500.0).reason is R.TERMINAL_STATE
    assert det.stale_by_agent(500.0) == {}


def test_a_task_waiting_for_the_caller_owes_no_heartbeat() -> None:
    """Human in the loop: the person answers after 31 s; the worker was healthy all along."""
    det = detector()
    for task_id, raw in (("asks", "TASK_STATE_INPUT_REQUIRED"), ("works", "TASK_STATE_WORKING")):
        det.on_reports(det.agent(AGENT), [report(task_id, raw)], Operation.SEND_MESSAGE, 10.0)
    assert det.stale_by_agent(41.0) == {AGENT: 1}  # the working one only
    assert det.decide("asks", det.agent(AGENT), 41.0).ok
    assert det.decide("works", det.agent(AGENT), 41.0).reason is R.HEARTBEAT_GAP
    det.on_card(CARD_URL, make_card('"v2"', interfaces=(AGENT + "/a2a",)))  # redeployed
    assert det.decide("asks", det.agent(AGENT), 41.0).reason is R.ETAG_CHANGED
    assert not det.redundant_get("asks", det.agent(AGENT), 41.0)  # a poll may learn it moved on


def test_seed_etag_change() -> None:
    det = detector()
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 10.0)
    det.on_card(CARD_URL, make_card('"v2"'))
    verdict = det.decide("t1", det.agent(AGENT), 12.0)
    assert verdict.reason is R.ETAG_CHANGED
    assert (verdict.evidence.etag_now, verdict.evidence.etag_observed) == ('"v2"', '"v1"')
    # a fresh observation under the new etag authorises again
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 13.0)
    assert det.decide("t1", det.agent(AGENT), 14.0).ok


def test_seed_variant_working_is_non_canonical() -> None:
    det = detector()
    verdicts = det.on_reports(det.agent(AGENT), [report("t1", "Working")], Operation.GET_TASK, 10.0)
    assert [v.reason for v in verdicts] == [R.NON_CANONICAL_STATE]
    obs = det.ledger.get("t1")
    assert obs is not None and obs.state is TaskState.WORKING and obs.raw == "Working"
    assert det.decide("t1", det.agent(AGENT), 11.0).ok  # normalised: the decision itself is fine
    # v0.3 JSON-RPC spells it exactly that way
    assert (
        det.on_reports(det.agent(AGENT), [report("t2", "working", "0.3")], Operation.GET_TASK, 10.0)
        == []
    )
    assert [
        v.reason
        for v in det.on_reports(det.agent(AGENT), [report("t3", "working")], "GetTask", 10.0)
    ] == [R.NON_CANONICAL_STATE]


def test_unknown_state_is_recorded_and_authorises_nothing() -> None:
    det = detector()
    verdicts = det.on_reports(det.agent(AGENT), [report("t1", "paused")], Operation.GET_TASK, 10.0)
    assert [v.reason for v in verdicts] == [R.UNKNOWN_STATE]
    assert det.decide("t1", det.agent(AGENT), 11.0).reason is R.NO_OBSERVATION
    assert (
        det.on_reports(det.agent(AGENT), [report("t2", "TASK_STATE_UNSPECIFIED")], "GetTask", 1.0)
        == []
    )
    assert det.decide("t2", det.agent(AGENT), 2.0).reason is R.NO_OBSERVATION


def test_terminal_regression() -> None:
    det = detector()
    det.on_reports(
        det.agent(AGENT), [report("t1", "TASK_STATE_COMPLETED")], Operation.GET_TASK, 10.0
    )
    verdicts = det.on_reports(
        det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 11.0
    )
    assert [v.reason for v in verdicts] == [R.TERMINAL_REGRESSION]
    assert verdicts[0].evidence.last_state is TaskState.COMPLETED


def test_a_report_older_than_the_observation_held_changes_nothing_but_is_judged() -> None:
    """Recorded after a newer one (another thread was faster): no regression, no new etag or
    state, but a wrong spelling is still what the agent sent."""
    det = detector()
    det.on_reports(
        det.agent(AGENT), [report("t1", "TASK_STATE_COMPLETED")], Operation.GET_TASK, 10.0
    )
    older = det.on_reports(det.agent(AGENT), [report("t1", "Working")], Operation.GET_TASK, 9.0)
    assert [v.reason for v in older] == [R.NON_CANONICAL_STATE]
    held = det.ledger.get("t1")
    assert held is not None and held.state is TaskState.COMPLETED and held.at == 10.0


def test_task_lost_then_forgotten() -> None:
    det = detector()
    assert det.on_task_not_found("never-seen", 1.0) is None
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 10.0)
    verdict = det.on_task_not_found("t1", 12.0)
    assert verdict is not None and verdict.reason is R.TASK_LOST and verdict.evidence.age == 2.0
    assert det.ledger.get("t1") is None
    det.on_reports(
        det.agent(AGENT), [report("t2", "TASK_STATE_COMPLETED")], Operation.GET_TASK, 10.0
    )
    assert det.on_task_not_found("t2", 12.0) is None and det.ledger.get("t2") is None


def test_redundant_get() -> None:
    det = detector()
    assert det.redundant_get("t1", det.agent(AGENT), 1.0) is False
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 10.0)
    assert det.redundant_get("t1", det.agent(AGENT), 20.0) is True
    assert det.redundant_get("t1", det.agent(AGENT), 41.0) is False
    det.on_reports(
        det.agent(AGENT), [report("t1", "TASK_STATE_COMPLETED")], Operation.GET_TASK, 42.0
    )
    assert det.redundant_get("t1", det.agent(AGENT), 1e6) is True
    det.on_card(CARD_URL, make_card('"v2"'))
    assert det.redundant_get("t1", det.agent(AGENT), 51.0) is False


def test_stream_frames_refresh_while_open() -> None:
    det = detector()
    det.on_reports(
        det.agent(AGENT),
        [report("t1", "TASK_STATE_WORKING")],
        Operation.SEND_STREAMING_MESSAGE,
        0.0,
    )
    for now in range(10, 100, 10):
        assert det.on_stream_frame("t1", float(now)) is True  # ": ping" every 10 s
    assert det.decide("t1", det.agent(AGENT), 100.0).ok
    assert det.decide("t1", det.agent(AGENT), 130.0).reason is R.HEARTBEAT_GAP  # stream went quiet
    assert det.on_stream_frame("unknown", 1.0) is False


def test_report_without_state_only_touches() -> None:
    det = detector()
    artifact = TaskReport("t1", None, None, "artifact-update")
    assert det.on_reports(det.agent(AGENT), [artifact], Operation.SEND_STREAMING_MESSAGE, 5.0) == []
    assert det.ledger.get("t1") is None
    det.on_reports(
        det.agent(AGENT),
        [report("t1", "TASK_STATE_WORKING")],
        Operation.SEND_STREAMING_MESSAGE,
        6.0,
    )
    det.on_reports(det.agent(AGENT), [artifact], Operation.SEND_STREAMING_MESSAGE, 9.0)
    obs = det.ledger.get("t1")
    assert obs is not None and obs.at == 9.0 and obs.state is TaskState.WORKING


def test_observation_records_etag_and_source() -> None:
    det = detector()
    det.on_reports(
        det.agent(AGENT), [report("t1", "TASK_STATE_INPUT_REQUIRED")], Operation.LIST_TASKS, 3.0
    )
    obs = det.ledger.get("t1")
    assert obs is not None
    assert (obs.agent, obs.etag, obs.source, obs.exact) == (AGENT, '"v1"', "ListTasks", True)
    assert det.tracked_by_class() == {
        StateClass.ACTIVE: 0,
        StateClass.INTERRUPTED: 1,
        StateClass.TERMINAL: 0,
    }


def test_heartbeat_override_and_card_heartbeat() -> None:
    det = Detector(100, 30.0, {"worker:9001": 5.0})
    det.on_card(CARD_URL, make_card(heartbeat=60.0, heartbeat_source="extension"))
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 0.0)
    assert det.decide("t1", det.agent(AGENT), 6.0).reason is R.HEARTBEAT_GAP
    assert det.stale_by_agent(6.0) == {AGENT: 1}
    other = Detector(100, 30.0, {})
    update = other.on_card(
        "http://x/.well-known/agent-card.json",
        make_card(heartbeat=60.0, heartbeat_source="extension"),
    )
    assert (update.heartbeat, update.heartbeat_source) == (60.0, "extension")


def test_decide_without_agent_uses_where_the_task_was_seen() -> None:
    det = detector()
    det.on_reports(det.agent(AGENT), [report("t1", "TASK_STATE_WORKING")], Operation.GET_TASK, 0.0)
    det.on_card(CARD_URL, make_card('"v2"'))
    assert det.decide("t1", None, 2.0).reason is R.ETAG_CHANGED
    verdict = det.decide("nope", None, 2.0)
    assert verdict.reason is R.NO_OBSERVATION and verdict.evidence.heartbeat == 30.0


def test_eviction_is_counted() -> None:
    det = Detector(max_tasks=2)
    for i in range(5):
        det.on_reports(
            det.agent(AGENT), [report(f"t{i}", "TASK_STATE_WORKING")], Operation.GET_TASK, float(i)
        )
    assert det.evicted_total == 3 and len(det.ledger) == 2


@pytest.mark.parametrize(
    "raw", [None, "", 3, 99, -1, True, 1.5, math.nan, "x" * 5000, "\ud800", {"a": 1}, ["w"]]
)
def test_weird_states_do_not_raise(raw: object) -> None:
    det = detector()
    det.on_reports(det.agent(AGENT), [report("t", raw)], Operation.GET_TASK, math.nan)
    det.on_reports(det.agent(""), [TaskReport("", None, None, "task")], "weird", math.inf)
    det.decide("t", det.agent(AGENT), math.nan)
    det.decide("t", det.agent("never-seen"), -math.inf)
    det.redundant_get("t", det.agent(AGENT), math.nan)
    det.stale_by_agent(math.nan)
    det.on_task_not_found("t", math.nan)
    det.on_card("::::", None)
    det.on_card("", make_card())


def test_threads_smoke() -> None:
    det = Detector(max_tasks=64)
    det.on_card(CARD_URL, make_card())
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []
    states = ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "Working", "paused"]

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(1_500):
                task = f"t{(i * 7 + n) % 100}"
                now = float(i)
                det.on_reports(
                    det.agent(AGENT), [report(task, states[i % 4])], Operation.GET_TASK, now
                )
                det.on_stream_frame(task, now)
                det.decide(task, det.agent(AGENT), now)
                det.redundant_get(task, det.agent(AGENT), now)
                if i % 50 == 0:
                    det.on_task_not_found(task, now)
                    det.stale_by_agent(now)
                    det.on_card(CARD_URL, make_card(f'"{i}"'))
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(det.ledger) <= 64
    assert sum(det.tracked_by_class().values()) == len(det.ledger)


def _stamped(task_id: str, raw: str, stamp: str | None) -> TaskReport:
    return TaskReport(task_id, "ctx", read_state(raw, "1.0", Binding.JSONRPC), "task", stamp)


@pytest.mark.parametrize(
    ("late_stamp", "reasons", "held"),
    [
        ("2026-12-02T15:00:00.100Z", [], TaskState.COMPLETED),  # emitted before: a late frame
        ("2026-12-02T15:00:00.500Z", [], TaskState.COMPLETED),  # same instant: not news
        ("2026-12-02T15:00:01Z", [R.TERMINAL_REGRESSION], TaskState.WORKING),  # really after
        (None, [R.TERMINAL_REGRESSION], TaskState.WORKING),  # no stamp: judged by arrival
    ],
)
def test_late_frames_are_not_regressions(
    late_stamp: str | None, reasons: list[R], held: TaskState
) -> None:
    det = detector()
    done = _stamped("t1", "TASK_STATE_COMPLETED", "2026-12-02T15:00:00.5+00:00")
    assert det.on_reports(det.agent(AGENT), [done], Operation.SEND_MESSAGE, 1.0) == []
    late = _stamped("t1", "TASK_STATE_WORKING", late_stamp)
    verdicts = det.on_reports(det.agent(AGENT), [late], Operation.SUBSCRIBE_TO_TASK, 2.0)
    assert [v.reason for v in verdicts] == reasons
    observation = det.ledger.get("t1")
    assert observation is not None and observation.state is held


@pytest.mark.parametrize(
    ("late", "stamp"),
    [
        ("TASK_STATE_SUBMITTED", None),  # the returnImmediately reply (a2a-sdk: unstamped)
        ("TASK_STATE_SUBMITTED", "2026-12-02T15:00:00.100Z"),
        ("TASK_STATE_WORKING", "2026-12-02T15:00:00.100Z"),  # a frame sent before the push
    ],
)
def test_a_report_overtaken_by_a_push_keeps_the_task_waiting_for_input(
    late: str, stamp: str | None
) -> None:
    """The push that says the task waits for input is read before a report sent before it
    (two threads, or two connections): the report changes nothing, and a decision long after
    is no ``heartbeat_gap``. An unstamped ``working`` is judged by arrival."""
    det = detector()
    agent = det.agent(AGENT)
    waits = _stamped("t1", "TASK_STATE_INPUT_REQUIRED", "2026-12-02T15:00:00.200Z")
    assert det.on_reports(agent, [waits], "push", 1.0) == []
    assert det.on_reports(agent, [_stamped("t1", late, stamp)], Operation.SEND_MESSAGE, 1.1) == []
    held = det.ledger.get("t1")
    assert held is not None and held.state is TaskState.INPUT_REQUIRED
    assert det.decide("t1", agent, 100.0).ok
    unstamped = _stamped("t1", "TASK_STATE_WORKING", None)
    det.on_reports(agent, [unstamped], Operation.GET_TASK, 1.2)
    assert det.decide("t1", agent, 100.0).reason is R.HEARTBEAT_GAP


def _error_reply(task_id: str, raw: str, state: TaskState) -> TaskReport:
    return TaskReport(task_id, "ctx", StateReading(raw, state, True, True), "error-reply")


def test_an_error_reply_stating_a_terminal_state_is_recorded_and_never_judged() -> None:
    """The race: the task failed after the last observation. The reply is no divergence; the
    decision after it is ``terminal_state``. A v1.0 enum number is no spelling divergence."""
    det = detector()
    agent = det.agent(AGENT)
    det.on_reports(agent, [report("t1", "TASK_STATE_INPUT_REQUIRED")], Operation.GET_TASK, 10.0)
    assert det.decide("t1", agent, 11.0).ok  # the follow-up, judged before it left
    assert det.on_error_reply(agent, _error_reply("t1", "4", TaskState.FAILED), 12.0)
    obs = det.ledger.get("t1")
    assert obs is not None
    assert (obs.state, obs.raw, obs.source, obs.at, obs.etag) == (
        TaskState.FAILED,
        "4",
        ERROR_REPLY,
        12.0,
        '"v1"',
    )
    assert det.decide("t1", agent, 13.0).reason is R.TERMINAL_STATE
    assert det.tracked_by_class()[StateClass.TERMINAL] == 1
    # a task this process never saw is learnt so as well
    assert det.on_error_reply(
        agent, _error_reply("t2", "TASK_STATE_COMPLETED", TaskState.COMPLETED), 14.0
    )
    assert det.decide("t2", agent, 15.0).reason is R.TERMINAL_STATE


def test_not_cancelable_leaves_the_state_unsaid() -> None:
    """TaskNotCancelable without a state: a task seen live is now ``unknown`` (authorises
    nothing: the next decision is ``no_observation``); one seen terminal, or never, is left."""
    det = detector()
    agent = det.agent(AGENT)
    det.on_reports(agent, [report("live", "TASK_STATE_WORKING")], Operation.GET_TASK, 10.0)
    det.on_reports(agent, [report("done", "TASK_STATE_COMPLETED")], Operation.GET_TASK, 10.0)
    assert det.on_error_reply(agent, _error_reply("live", *NOT_CANCELABLE[:2]), 11.0)
    live = det.ledger.get("live")
    assert live is not None and (live.state, live.raw, live.source) == (
        TaskState.UNKNOWN,
        "TASK_NOT_CANCELABLE",
        ERROR_REPLY,
    )
    assert det.decide("live", agent, 12.0).reason is R.NO_OBSERVATION
    assert not det.on_error_reply(agent, _error_reply("done", *NOT_CANCELABLE[:2]), 11.0)
    done = det.ledger.get("done")
    assert done is not None and done.state is TaskState.COMPLETED and done.at == 10.0
    assert not det.on_error_reply(agent, _error_reply("never", *NOT_CANCELABLE[:2]), 11.0)
    assert "never" not in det.ledger
    # a later Task read is judged as usual: unknown was no terminal, so no regression
    assert (
        det.on_reports(agent, [report("live", "TASK_STATE_WORKING")], Operation.GET_TASK, 13.0)
        == []
    )


def test_a_stated_live_state_never_reopens_a_terminal_task() -> None:
    det = detector()
    agent = det.agent(AGENT)
    det.on_reports(agent, [report("t1", "TASK_STATE_CANCELED")], Operation.GET_TASK, 10.0)
    working = _error_reply("t1", "TASK_STATE_WORKING", TaskState.WORKING)
    assert not det.on_error_reply(agent, working, 11.0)
    obs = det.ledger.get("t1")
    assert obs is not None and obs.state is TaskState.CANCELED
    # a stated state older than what is held is not recorded either
    det.on_reports(agent, [report("t2", "TASK_STATE_WORKING")], Operation.GET_TASK, 20.0)
    assert not det.on_error_reply(agent, _error_reply("t2", "4", TaskState.FAILED), 19.0)
