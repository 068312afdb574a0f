"""The seed's guard function, generalised: check a state before acting on it, in plain code.

For applications (and tests) that hold a card and a remembered task state themselves and want
the invariant without the instrumentation: no ledger, no registry, no OpenTelemetry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from otel_a2a.detect.invariant import judge_decision
from otel_a2a.detect.ledger import Observation
from otel_a2a.detect.registry import DEFAULT_HEARTBEAT
from otel_a2a.detect.verdict import DivergenceReason, Evidence, TaskStateDivergenceError, Verdict
from otel_a2a.protocol.card import card_from_document
from otel_a2a.protocol.model import Binding, CardInfo
from otel_a2a.protocol.states import StateReading, TaskState, read_state


def _card_info(card: CardInfo | Mapping[str, Any]) -> CardInfo | None:
    if isinstance(card, CardInfo):
        return card
    if not isinstance(card, Mapping):
        return None
    doc = dict(card)
    etag = doc.pop("etag", None)
    try:
        return card_from_document(doc, etag if isinstance(etag, str) else None)
    except Exception:  # a card of any shape: never raises
        return None


def _reading(raw: object) -> StateReading:
    # No version or binding is known here, so a spelling is exact when it is exact for *some*
    # version and binding: v0.3 HTTP+JSON accepts both the kebab and the TASK_STATE_* forms.
    if isinstance(raw, TaskState):
        raw = raw.value
    return read_state(raw, "0.3", Binding.HTTP_JSON)


def _time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan  # no usable time: too old to authorise anything
    try:
        return float(value)
    except OverflowError:
        return math.nan


def _observation(
    last: Observation | Mapping[str, Any], agent: str
) -> tuple[Observation, StateReading]:
    if isinstance(last, Observation):
        reading = StateReading(last.raw, last.state, True, last.exact)
        if last.state is TaskState.UNKNOWN:
            reading = reading._replace(mapped=_reading(last.raw).mapped)
        return last, reading
    reading = _reading(last.get("state"))
    etag = last.get("etag")
    at = last.get("at", last.get("observed_at"))
    obs = Observation(
        "",
        agent,
        reading.state,
        reading.raw,
        reading.exact,
        _time(at),
        etag if isinstance(etag, str) else None,
        "assert_state_authoritative",
    )
    return obs, reading


def assert_state_authoritative(
    card: CardInfo | Mapping[str, Any],
    last_observation: Observation | Mapping[str, Any] | None,
    now: float | None = None,
) -> TaskState:
    """Return the canonical state of the last observation if it may be acted on, else raise.

    ``card`` is the agent's card *as it is now*: a ``CardInfo`` or the parsed card JSON (its
    etag is the mapping's ``"etag"`` key when present, else the RFC 8785 hash of the card).
    ``last_observation`` is an ``Observation``, a mapping ``{"state": <wire spelling>,
    "etag": <card etag when observed>, "at": <time.monotonic() when observed>}``
    (``"observed_at"`` is accepted for ``"at"``), or None. ``now`` defaults to
    ``time.monotonic()``. The heartbeat comes from the card (the
    ``urn:otel-a2a:heartbeat:v1`` extension, else ``heartbeatInterval``), else 30 s.

    Raises ``TaskStateDivergenceError`` whose ``reason`` is, first match wins:
    ``no_observation``, ``unknown_state`` (a spelling that maps to nothing),
    ``non_canonical_state`` (a spelling that is not exact for any version and binding, such as
    ``Working``), then ``etag_changed``, ``terminal_state``, ``heartbeat_gap`` as for any
    decision (a legitimate ``unknown`` state reports ``no_observation``; an interrupted
    state, ``input-required`` or ``auth-required``, waits for the caller and is never a
    ``heartbeat_gap``).

    >>> card = {"name": "worker", "etag": '"v2"', "heartbeatInterval": 10}
    >>> seen = {"state": "TASK_STATE_WORKING", "etag": '"v2"', "at": 100.0}
    >>> assert_state_authoritative(card, seen, now=105.0)
    <TaskState.WORKING: 'working'>
    >>> assert_state_authoritative(card, seen, now=111.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    otel_a2a.detect.verdict.TaskStateDivergenceError: task '': heartbeat_gap ...
    >>> seen = {"state": "Working", "etag": '"v2"', "at": 100.0}
    >>> assert_state_authoritative(card, seen, now=105.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    otel_a2a.detect.verdict.TaskStateDivergenceError: task '': non_canonical_state ...
    """
    info = _card_info(card)
    etag_now = info.etag if info is not None else None
    heartbeat = (info.heartbeat if info is not None else None) or DEFAULT_HEARTBEAT
    agent = (info.name if info is not None else None) or ""
    now = time.monotonic() if now is None else float(now)
    if last_observation is None or not isinstance(last_observation, (Observation, Mapping)):
        ev = Evidence("", agent or None, None, None, None, etag_now, None, heartbeat)
        raise TaskStateDivergenceError(Verdict(DivergenceReason.NO_OBSERVATION, ev))
    obs, reading = _observation(last_observation, agent)
    verdict = judge_decision(obs.task_id, obs, etag_now, heartbeat, now, agent or None)
    if not reading.mapped:
        verdict = Verdict(DivergenceReason.UNKNOWN_STATE, verdict.evidence)
    elif not reading.exact:
        verdict = Verdict(DivergenceReason.NON_CANONICAL_STATE, verdict.evidence)
    if verdict.reason is not None:
        raise TaskStateDivergenceError(verdict)
    return obs.state
