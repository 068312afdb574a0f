"""assert_state_authoritative: the seed's guard, on cards as CardInfo or parsed JSON."""

from __future__ import annotations

import contextlib
import doctest
import math
from typing import Any

import pytest

import otel_a2a.detect.api
from otel_a2a.detect import TaskStateDivergenceError, assert_state_authoritative
from otel_a2a.detect.verdict import DivergenceReason as R
from otel_a2a.protocol.jcs import jcs_sha256
from otel_a2a.protocol.states import TaskState

from .helpers import make_card, make_obs

CARD: dict[str, Any] = {
    "name": "worker",
    "etag": '"v1"',
    "capabilities": {
        "streaming": True,
        "extensions": [{"uri": "urn:otel-a2a:heartbeat:v1", "params": {"intervalSeconds": 10}}],
    },
}


def reason(card: Any, last: Any, now: float | None = 105.0) -> R | None:
    with pytest.raises(TaskStateDivergenceError) as info:
        assert_state_authoritative(card, last, now)
    return info.value.reason


def seen(
    state: object = "TASK_STATE_WORKING", etag: str | None = '"v1"', at: float = 100.0
) -> dict[str, Any]:
    return {"state": state, "etag": etag, "at": at}


def test_docstring_example_runs() -> None:
    result = doctest.testmod(otel_a2a.detect.api, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0


def test_authoritative_returns_canonical_state() -> None:
    assert assert_state_authoritative(CARD, seen(), 105.0) is TaskState.WORKING
    assert assert_state_authoritative(CARD, seen("working"), 105.0) is TaskState.WORKING
    assert (
        assert_state_authoritative(CARD, seen(TaskState.INPUT_REQUIRED), 105.0)
        is TaskState.INPUT_REQUIRED
    )
    assert (
        assert_state_authoritative(
            CARD, {"state": "submitted", "etag": '"v1"', "observed_at": 100.0}, 101.0
        )
        is TaskState.SUBMITTED
    )


def test_seed_etag_change() -> None:
    assert reason(CARD, seen(etag='"v0"')) is R.ETAG_CHANGED


def test_seed_heartbeat_gap_uses_card_heartbeat() -> None:
    assert reason(CARD, seen(), now=110.5) is R.HEARTBEAT_GAP
    no_hb = {"name": "w", "etag": '"v1"'}
    assert assert_state_authoritative(no_hb, seen(), 129.0) is TaskState.WORKING  # 30 s default
    assert reason(no_hb, seen(), now=131.0) is R.HEARTBEAT_GAP
    field = {"etag": '"v1"', "heartbeatInterval": 2}
    assert reason(field, seen(), now=103.0) is R.HEARTBEAT_GAP


@pytest.mark.parametrize("state", ["TASK_STATE_INPUT_REQUIRED", "auth-required"])
def test_a_task_waiting_for_the_caller_is_no_gap(state: str) -> None:
    """As for any decision: an interrupted task owes no heartbeat, the other reasons hold."""
    assert assert_state_authoritative(CARD, seen(state), now=131.0).state_class.value == (
        "interrupted"
    )
    assert reason(CARD, seen(state, etag='"v0"'), now=131.0) is R.ETAG_CHANGED


def test_seed_terminal_state_not_gap() -> None:
    assert reason(CARD, seen("TASK_STATE_FAILED"), now=1e6) is R.TERMINAL_STATE
    assert reason(CARD, seen("completed"), now=100.0) is R.TERMINAL_STATE


def test_seed_working_is_normalised_and_flagged() -> None:
    with pytest.raises(TaskStateDivergenceError) as info:
        assert_state_authoritative(CARD, seen("Working"), 105.0)
    assert info.value.reason is R.NON_CANONICAL_STATE
    assert info.value.verdict.evidence.last_state is TaskState.WORKING
    assert info.value.verdict.evidence.last_state_raw == "Working"


def test_unknown_and_missing() -> None:
    assert reason(CARD, None) is R.NO_OBSERVATION
    assert reason(CARD, "working") is R.NO_OBSERVATION  # not an observation at all
    assert reason(CARD, seen("paused")) is R.UNKNOWN_STATE
    assert reason(CARD, {"etag": '"v1"', "at": 100.0}) is R.UNKNOWN_STATE
    assert reason(CARD, seen("TASK_STATE_UNSPECIFIED")) is R.NO_OBSERVATION
    assert reason(CARD, {"state": "working", "etag": '"v1"'}) is R.HEARTBEAT_GAP  # no time


def test_precedence_spelling_before_decision_reasons() -> None:
    assert reason(CARD, seen("Working", etag='"v0"'), now=1e6) is R.NON_CANONICAL_STATE
    assert reason(CARD, seen("TASK_STATE_COMPLETED", etag='"v0"'), now=1e6) is R.ETAG_CHANGED


def test_card_info_and_observation_objects() -> None:
    card = make_card('"v1"', heartbeat=10.0, heartbeat_source="extension")
    obs = make_obs(at=100.0, etag='"v1"')
    assert assert_state_authoritative(card, obs, 105.0) is TaskState.WORKING
    assert reason(card, obs, now=111.0) is R.HEARTBEAT_GAP
    assert reason(card, make_obs(raw="Working", exact=False)) is R.NON_CANONICAL_STATE
    assert reason(card, make_obs(state=TaskState.UNKNOWN, raw="paused")) is R.UNKNOWN_STATE
    assert reason(card, make_obs(state=TaskState.UNKNOWN, raw="unknown")) is R.NO_OBSERVATION


def test_card_without_etag_key_uses_jcs() -> None:
    card = {"name": "w", "version": "1", "capabilities": {}}
    etag = jcs_sha256(card)
    assert assert_state_authoritative(card, seen(etag=etag), 101.0) is TaskState.WORKING
    assert reason(card, seen(etag='"other"'), now=101.0) is R.ETAG_CHANGED


def test_now_defaults_to_monotonic() -> None:
    import time

    assert assert_state_authoritative(CARD, seen(at=time.monotonic())) is TaskState.WORKING


@pytest.mark.parametrize(
    "card", [{}, {"etag": 5}, {"x": math.nan}, {"x": object()}, "not a card", None]
)
def test_weird_cards_do_not_crash(card: Any) -> None:
    with contextlib.suppress(TaskStateDivergenceError):
        assert_state_authoritative(card, seen(), 101.0)
