"""The invariant's rules: every reason, their precedence, evidence, redundancy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_a2a.detect.invariant import (
    assumes_live,
    is_redundant_get,
    judge_decision,
    judge_observation,
    judge_task_not_found,
)
from otel_a2a.detect.ledger import Observation
from otel_a2a.detect.verdict import DivergenceReason as R
from otel_a2a.protocol.states import StateClass, StateReading, TaskState

from .helpers import make_obs

HB = 30.0
TERMINAL = [s for s in TaskState if s.is_terminal]
LIVE = [s for s in TaskState if not s.is_terminal and s is not TaskState.UNKNOWN]
ACTIVE = [s for s in LIVE if s.state_class is StateClass.ACTIVE]
INTERRUPTED = [s for s in TaskState if s.state_class is StateClass.INTERRUPTED]


def decide(obs: Observation | None, etag_now: str | None = '"v1"', now: float = 110.0) -> R | None:
    return judge_decision("t1", obs, etag_now, HB, now, "http://worker:9001").reason


def test_fresh_observation_under_same_etag_is_authoritative() -> None:
    verdict = judge_decision("t1", make_obs(at=100.0), '"v1"', HB, 110.0, "http://w")
    assert verdict.ok and verdict.reason is None
    ev = verdict.evidence
    assert (ev.task_id, ev.agent, ev.last_state, ev.last_state_raw) == (
        "t1",
        "http://w",
        TaskState.WORKING,
        "TASK_STATE_WORKING",
    )
    assert (ev.age, ev.etag_now, ev.etag_observed, ev.heartbeat) == (10.0, '"v1"', '"v1"', HB)


def test_no_observation() -> None:
    verdict = judge_decision("t1", None, '"v1"', HB, 1.0)
    assert verdict.reason is R.NO_OBSERVATION
    assert verdict.evidence.age is None and verdict.evidence.last_state is None


def test_legit_unknown_authorises_nothing() -> None:
    assert decide(make_obs(state=TaskState.UNKNOWN, at=109.0)) is R.NO_OBSERVATION


def test_seed_etag_change() -> None:
    assert decide(make_obs(etag='"v1"'), etag_now='"v2"') is R.ETAG_CHANGED


@pytest.mark.parametrize(("observed", "now"), [(None, '"v2"'), ('"v1"', None), (None, None)])
def test_unknown_etag_is_not_a_change(observed: str | None, now: str | None) -> None:
    assert decide(make_obs(etag=observed), etag_now=now) is None


def test_seed_heartbeat_gap() -> None:
    assert decide(make_obs(at=100.0), now=130.0) is None  # exactly the heartbeat: still fresh
    verdict = judge_decision("t1", make_obs(at=100.0), '"v1"', HB, 130.5)
    assert verdict.reason is R.HEARTBEAT_GAP and verdict.evidence.age == 30.5


@pytest.mark.parametrize("state", TERMINAL)
def test_seed_terminal_states_exempt_from_gap(state: TaskState) -> None:
    assert decide(make_obs(state=state, at=0.0), now=1e6) is R.TERMINAL_STATE


@pytest.mark.parametrize("state", ACTIVE)
def test_active_states_age(state: TaskState) -> None:
    assert decide(make_obs(state=state, at=0.0), now=1e6) is R.HEARTBEAT_GAP


@pytest.mark.parametrize("state", INTERRUPTED)
def test_interrupted_states_owe_no_heartbeat(state: TaskState) -> None:
    """A task waiting for the caller (a person answering after 31 s) is no gap; every other
    reason still holds, and its evidence still tells the age."""
    verdict = judge_decision("t1", make_obs(state=state, at=100.0), '"v1"', HB, 131.0)
    assert verdict.reason is None and verdict.evidence.age == 31.0
    assert decide(make_obs(state=state, at=math.nan)) is None  # no time: nothing owed either
    assert decide(make_obs(state=state, at=0.0, etag='"v0"'), now=1e6) is R.ETAG_CHANGED
    assert decide(None) is R.NO_OBSERVATION
    # a poll past the heartbeat may still learn something (answered elsewhere, ended)
    assert is_redundant_get(make_obs(state=state, at=100.0), '"v1"', 131.0, HB) is False
    assert is_redundant_get(make_obs(state=state, at=100.0), '"v1"', 110.0, HB) is True


def test_precedence_no_observation_first() -> None:
    unknown_old_changed = make_obs(state=TaskState.UNKNOWN, at=0.0, etag='"v0"')
    assert decide(unknown_old_changed, etag_now='"v9"', now=1e6) is R.NO_OBSERVATION


def test_precedence_etag_before_terminal_and_gap() -> None:
    assert (
        decide(make_obs(state=TaskState.FAILED, at=0.0, etag='"a"'), '"b"', 1e6) is R.ETAG_CHANGED
    )
    assert (
        decide(make_obs(state=TaskState.WORKING, at=0.0, etag='"a"'), '"b"', 1e6) is R.ETAG_CHANGED
    )


def test_precedence_terminal_before_gap() -> None:
    assert decide(make_obs(state=TaskState.CANCELED, at=0.0), '"v1"', 1e6) is R.TERMINAL_STATE


@given(
    state=st.sampled_from(list(TaskState)),
    has_obs=st.booleans(),
    etag_obs=st.sampled_from([None, "a", "b"]),
    etag_now=st.sampled_from([None, "a", "b"]),
    age=st.floats(min_value=-5, max_value=100, allow_nan=False),
    live=st.booleans(),
)
def test_precedence_matches_the_table(
    state: TaskState,
    has_obs: bool,
    etag_obs: str | None,
    etag_now: str | None,
    age: float,
    live: bool,
) -> None:
    obs = make_obs(state=state, at=1000.0, etag=etag_obs) if has_obs else None
    reason = judge_decision("t", obs, etag_now, HB, 1000.0 + age, assumes_live=live).reason
    holds = [
        (R.NO_OBSERVATION, obs is None or state is TaskState.UNKNOWN),
        (R.ETAG_CHANGED, etag_obs is not None and etag_now is not None and etag_obs != etag_now),
        (None, state.is_terminal and not live),  # assumed ended, seen ended: authorised
        (R.TERMINAL_STATE, state.is_terminal),
        (R.HEARTBEAT_GAP, state.state_class is StateClass.ACTIVE and max(age, 0.0) > HB),
    ]
    expected = next((r for r, cond in holds if cond), None)
    assert reason is expected
    # Redundant GetTask: when a decision now would be ok or terminal_state, except on an
    # interrupted task past the heartbeat (owed none, but a poll may learn it moved on)
    waited = obs is not None and state.state_class is StateClass.INTERRUPTED and max(age, 0) > HB
    assert is_redundant_get(obs, etag_now, 1000.0 + age, HB) == (
        expected in (None, R.TERMINAL_STATE) and not waited
    )


@pytest.mark.parametrize(
    ("assumed", "live"),
    [
        ("working", True),
        ("TASK_STATE_WORKING", True),
        ("input-required", True),
        (None, True),
        ("", True),
        ("paused", True),  # unreadable: the usual assumption
        ("completed", False),
        ("TASK_STATE_FAILED", False),
        ("cancelled", False),
        ("rejected", False),
    ],
)
def test_assumes_live(assumed: object, live: bool) -> None:
    assert assumes_live(assumed) is live


def test_nan_time_is_a_gap_not_ok() -> None:
    assert decide(make_obs(at=math.nan)) is R.HEARTBEAT_GAP
    assert judge_decision("t", make_obs(), '"v1"', math.nan, 100.0).reason is R.HEARTBEAT_GAP
    assert is_redundant_get(make_obs(at=math.nan), '"v1"', 1.0, HB) is False


def test_clock_behind_observation_is_age_zero() -> None:
    verdict = judge_decision("t", make_obs(at=100.0), '"v1"', HB, 99.0)
    assert verdict.ok and verdict.evidence.age == 0.0


def reading(raw: str, state: TaskState, mapped: bool = True, exact: bool = True) -> StateReading:
    return StateReading(raw, state, mapped, exact)


def observe(prev: Observation | None, r: StateReading) -> list[R | None]:
    verdicts = judge_observation(
        prev,
        r,
        task_id="t1",
        etag_now='"v1"',
        heartbeat=HB,
        now=200.0,
        agent="http://w",
    )
    return [v.reason for v in verdicts]


def test_seed_non_canonical_state() -> None:
    verdicts = judge_observation(
        None,
        reading("Working", TaskState.WORKING, exact=False),
        task_id="t1",
        etag_now='"v1"',
        heartbeat=HB,
        now=5.0,
        agent="http://w",
    )
    assert [v.reason for v in verdicts] == [R.NON_CANONICAL_STATE]
    ev = verdicts[0].evidence
    assert ev.last_state is TaskState.WORKING and ev.last_state_raw == "Working" and ev.age == 0.0


def test_unknown_state_and_legit_unknown() -> None:
    assert observe(None, reading("paused", TaskState.UNKNOWN, mapped=False, exact=False)) == [
        R.UNKNOWN_STATE
    ]
    assert observe(None, reading("TASK_STATE_UNSPECIFIED", TaskState.UNKNOWN)) == []
    assert observe(None, reading("TASK_STATE_WORKING", TaskState.WORKING)) == []


@pytest.mark.parametrize("new", LIVE)
def test_terminal_regression(new: TaskState) -> None:
    prev = make_obs(state=TaskState.COMPLETED, at=150.0)
    verdicts = judge_observation(
        prev, reading("x", new), task_id="t1", etag_now='"v1"', heartbeat=HB, now=200.0
    )
    assert [v.reason for v in verdicts] == [R.TERMINAL_REGRESSION]
    ev = verdicts[0].evidence
    assert ev.last_state is TaskState.COMPLETED and ev.age == 50.0


def test_regression_and_spelling_both_reported() -> None:
    prev = make_obs(state=TaskState.FAILED)
    assert observe(prev, reading("Working", TaskState.WORKING, exact=False)) == [
        R.NON_CANONICAL_STATE,
        R.TERMINAL_REGRESSION,
    ]


def test_not_a_regression() -> None:
    done = make_obs(state=TaskState.COMPLETED)
    assert observe(done, reading("TASK_STATE_FAILED", TaskState.FAILED)) == []
    assert observe(done, reading("TASK_STATE_UNSPECIFIED", TaskState.UNKNOWN)) == []
    assert observe(done, reading("bogus", TaskState.UNKNOWN, False, False)) == [R.UNKNOWN_STATE]
    assert observe(make_obs(), reading("TASK_STATE_SUBMITTED", TaskState.SUBMITTED)) == []


def test_task_lost() -> None:
    assert judge_task_not_found(None) is None
    assert judge_task_not_found(make_obs(state=TaskState.COMPLETED)) is None
    assert judge_task_not_found(make_obs(state=TaskState.UNKNOWN)) is None
    verdict = judge_task_not_found(make_obs(state=TaskState.INPUT_REQUIRED, at=10.0), now=25.0)
    assert verdict is not None and verdict.reason is R.TASK_LOST
    ev = verdict.evidence
    assert ev.task_id == "t1" and ev.age == 15.0 and ev.etag_now == ev.etag_observed == '"v1"'
    assert ev.agent == "http://worker:9001"


def test_redundant_get() -> None:
    assert is_redundant_get(None, '"v1"', 1.0, HB) is False
    assert is_redundant_get(make_obs(at=100.0), '"v1"', 110.0, HB) is True
    assert is_redundant_get(make_obs(at=100.0), '"v1"', 140.0, HB) is False
    assert is_redundant_get(make_obs(at=100.0), '"v2"', 110.0, HB) is False
    assert is_redundant_get(make_obs(state=TaskState.COMPLETED, at=0.0), '"v1"', 1e6, HB) is True
    assert is_redundant_get(make_obs(state=TaskState.UNKNOWN, at=100.0), '"v1"', 101.0, HB) is False
