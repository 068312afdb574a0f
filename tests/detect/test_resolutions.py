"""Each divergence a decision raised is resolved by the next authoritative observation."""

from __future__ import annotations

from otel_a2a.detect import Detector
from otel_a2a.detect.resolutions import PER_TASK, Outcome, Resolutions
from otel_a2a.detect.verdict import DivergenceReason as R
from otel_a2a.protocol.model import Binding, TaskReport
from otel_a2a.protocol.states import TaskState, read_state


def _report(task_id: str, raw: str) -> TaskReport:
    return TaskReport(task_id, None, read_state(raw, "1.0", Binding.JSONRPC), "task")


def test_a_redeploy_that_kept_the_task_is_refuted_and_a_lost_task_confirmed() -> None:
    detector = Detector()
    agent = detector.agent("http://worker")
    # no observation: the decision diverges; the answer then shows the task live: refuted
    assert detector.decide("t-1", agent, now=1.0).reason is R.NO_OBSERVATION
    [resolution] = detector.resolve("t-1", TaskState.WORKING, now=1.5)
    assert (resolution.reason, resolution.outcome, resolution.age) == (
        R.NO_OBSERVATION,
        Outcome.REFUTED,
        0.5,
    )
    assert detector.resolve("t-1", TaskState.WORKING, now=2.0) == []  # resolved once
    # the worker lost it: confirmed by TaskNotFound, and by a terminal state
    detector.decide("t-2", agent, now=3.0)
    assert [r.outcome for r in detector.resolve("t-2", None, now=4.0)] == [Outcome.CONFIRMED]
    detector.decide("t-3", agent, now=3.0)
    assert [r.outcome for r in detector.resolve("t-3", TaskState.FAILED, now=4.0)] == [
        Outcome.CONFIRMED
    ]


def test_a_decision_assuming_the_task_over_is_confirmed_by_a_live_one() -> None:
    detector = Detector()
    agent = detector.agent("http://worker")
    detector.decide("t", agent, now=1.0, assumes_live=False)
    assert [r.outcome for r in detector.resolve("t", TaskState.WORKING, now=2.0)] == [
        Outcome.CONFIRMED
    ]
    detector.decide("u", agent, now=1.0, assumes_live=False)
    assert [r.outcome for r in detector.resolve("u", TaskState.COMPLETED, now=2.0)] == [
        Outcome.REFUTED
    ]


def test_only_authoritative_later_observations_resolve() -> None:
    detector = Detector()
    agent = detector.agent("http://worker")
    detector.on_reports(agent, [_report("t", "TASK_STATE_WORKING")], "GetTask", now=0.0)
    assert detector.decide("t", agent, now=100.0).reason is R.HEARTBEAT_GAP
    assert detector.resolve("t", TaskState.UNKNOWN, now=101.0) == []  # says nothing
    assert detector.resolve("t", TaskState.WORKING, now=99.0) == []  # before the decision
    assert detector.decide("t", agent, now=100.5).ok is False  # a second open divergence
    detector.on_reports(agent, [_report("t", "TASK_STATE_WORKING")], "GetTask", now=102.0)
    assert [r.outcome for r in detector.resolve("t", TaskState.WORKING, now=102.0)] == [
        Outcome.REFUTED,
        Outcome.REFUTED,
    ]
    assert detector.decide("t", agent, now=102.5).ok  # fresh: nothing opened
    assert len(detector.resolutions) == 0


def test_open_divergences_are_bounded_and_the_old_ones_counted() -> None:
    open_ = Resolutions(max_tasks=10)
    for i in range(100):
        open_.open(f"t-{i}", R.NO_OBSERVATION, True, float(i))
    for _ in range(PER_TASK + 5):
        open_.open("t-99", R.HEARTBEAT_GAP, True, 200.0)
    assert len(open_) == 9 + PER_TASK
    assert open_.dropped == 90 + 1 + 5  # 90 tasks pushed out, 6 of t-99's own
    assert open_.unresolved(now=170.0, older_than=60.0) == {
        R.NO_OBSERVATION: 9,
        R.HEARTBEAT_GAP: 0,  # opened here: reported, at 0
    }
    assert open_.unresolved(now=300.0, older_than=60.0) == {
        R.NO_OBSERVATION: 9,
        R.HEARTBEAT_GAP: PER_TASK,
    }


def test_the_reply_to_an_action_the_agent_took_refutes_whatever_state_it_left() -> None:
    """A follow-up (or cancel) the agent took was taken on a live task: its reply refutes a
    divergence assuming the task live even when the action ended the task, and confirms one
    assuming it over; earlier decisions' divergences too (a task never comes back)."""
    detector = Detector()
    agent = detector.agent("http://worker")
    detector.decide("t", agent, now=1.0)  # an explicit decision, then the follow-up's own
    detector.decide("t", agent, now=2.0)
    resolved = detector.resolve("t", TaskState.COMPLETED, now=3.0, accepted=True)
    assert [(r.outcome, r.state) for r in resolved] == [(Outcome.REFUTED, TaskState.COMPLETED)] * 2
    detector.decide("u", agent, now=1.0, assumes_live=False)
    assert [r.outcome for r in detector.resolve("u", TaskState.CANCELED, 2.0, accepted=True)] == [
        Outcome.CONFIRMED
    ]
    # an odd state in a reply the agent took still tells the task was live
    detector.decide("v", agent, now=1.0)
    assert [r.outcome for r in detector.resolve("v", TaskState.UNKNOWN, 2.0, accepted=True)] == [
        Outcome.REFUTED
    ]
    # the same state, not from an action's reply (a GetTask), confirms
    detector.decide("w", agent, now=1.0)
    assert [r.outcome for r in detector.resolve("w", TaskState.COMPLETED, now=2.0)] == [
        Outcome.CONFIRMED
    ]
    assert not detector.resolutions


def test_an_action_on_a_task_observed_terminal_is_judged_by_the_state_answered() -> None:
    """An agent that answers a follow-up to a finished task with the task, still finished,
    and no error (as some do) did not take it: the ``terminal_state`` divergence is
    confirmed. One answering with the task live refutes it (the caller's belief was wrong)."""
    detector = Detector()
    agent = detector.agent("http://worker")
    for task_id in ("t", "u"):
        detector.on_reports(agent, [_report(task_id, "TASK_STATE_FAILED")], "GetTask", now=0.0)
        assert detector.decide(task_id, agent, now=1.0).reason is R.TERMINAL_STATE
    [confirmed] = detector.resolve("t", TaskState.FAILED, now=2.0, accepted=True)
    [refuted] = detector.resolve("u", TaskState.WORKING, now=2.0, accepted=True)
    assert (confirmed.outcome, refuted.outcome) == (Outcome.CONFIRMED, Outcome.REFUTED)
