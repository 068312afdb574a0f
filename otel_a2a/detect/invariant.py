"""The invariant as pure functions: given what is known, which reason (if any) holds.

*A card fetch never authorises a state assumption; only an authoritative task observation
under the current card etag and within the agent's heartbeat interval does.*
(docs/architecture.md)

Everything here is a function of its arguments (time included), so the rules can be tested
exhaustively and reused by the seed's guard functions and the live instrumentation alike.
"""

from __future__ import annotations

from otel_a2a.detect.ledger import Observation
from otel_a2a.detect.registry import DEFAULT_HEARTBEAT
from otel_a2a.detect.verdict import DivergenceReason, Evidence, Verdict
from otel_a2a.protocol.states import StateClass, StateReading, TaskState, normalize_task_state

R = DivergenceReason
# Hot path (every decision and every GetTask): enum attribute reads and ``TaskState``
# properties cost ~0.3 µs each on CPython 3.11, so the constants are read once here, the state
# class comes from the observation's shared kind, and value tuples are built directly.
_UNKNOWN = TaskState.UNKNOWN
_TERMINAL = StateClass.TERMINAL
_INTERRUPTED = StateClass.INTERRUPTED
_NO_OBSERVATION = R.NO_OBSERVATION
_ETAG_CHANGED = R.ETAG_CHANGED
_TERMINAL_STATE = R.TERMINAL_STATE
_HEARTBEAT_GAP = R.HEARTBEAT_GAP
_new = tuple.__new__


def _age(obs: Observation, now: float) -> float:
    # A clock read before the observation was recorded (threads racing) is age 0, not < 0.
    # NaN stays NaN (and is then judged a gap: an age that cannot be compared authorises
    # nothing).
    age = now - obs.at
    return 0.0 if age < 0.0 else age


def _etag_changed(observed: str | None, now: str | None) -> bool:
    """Changed only when both are known: an unknown etag proves nothing either way."""
    return observed is not None and now is not None and observed != now


def evidence_of(
    task_id: str,
    obs: Observation | None,
    etag_now: str | None,
    heartbeat: float,
    now: float,
    agent: str | None = None,
) -> Evidence:
    """The evidence of a decision on ``task_id`` given its last observation."""
    if obs is None:
        return _new(Evidence, (task_id, agent, None, None, None, etag_now, None, heartbeat))
    kind = obs._kind  # one read instead of two properties
    age = now - obs.at
    return _new(
        Evidence,
        (
            task_id,
            agent if agent is not None else obs.agent,
            kind.state,
            kind.raw,
            0.0 if age < 0.0 else age,  # as _age(): a racing clock read is age 0
            etag_now,
            obs.etag,
            heartbeat,
        ),
    )


def assumes_live(assumed_state: object) -> bool:
    """Whether a decision that states ``assumed_state`` assumes the task live: unless that is a
    terminal state. An absent or unreadable assumption counts as live (the usual one)."""
    return not normalize_task_state(assumed_state).is_terminal


def judge_decision(
    task_id: str,
    obs: Observation | None,
    etag_now: str | None,
    heartbeat: float,
    now: float,
    agent: str | None = None,
    assumes_live: bool = True,
) -> Verdict:
    """Judge a liveness decision on ``task_id``: ok, or the first reason that holds.

    Order (most specific cause first): ``no_observation`` (none, or the last one is a
    legitimate ``unknown``, which authorises nothing), ``etag_changed`` (both etags known and
    different), ``terminal_state`` (the decision assumes the task live, ``assumes_live``, and
    it was last seen terminal), ``heartbeat_gap`` (active and older than the heartbeat).
    Terminal observations are exempt from the gap (they never go stale), and so are
    interrupted ones (``input-required``, ``auth-required``): such a task waits for the caller,
    not for the worker, which owes no heartbeat meanwhile (a person may take minutes to answer).
    """
    ev = evidence_of(task_id, obs, etag_now, heartbeat, now, agent)
    if obs is None or obs._kind.state is _UNKNOWN:
        return _new(Verdict, (_NO_OBSERVATION, ev))
    if _etag_changed(obs.etag, etag_now):
        return _new(Verdict, (_ETAG_CHANGED, ev))
    cls = obs._kind.state_class
    if cls is _TERMINAL:
        return _new(Verdict, (_TERMINAL_STATE if assumes_live else None, ev))
    if cls is _INTERRUPTED:
        return _new(Verdict, (None, ev))
    age = ev.age
    if not (age is not None and age <= heartbeat):  # written so that NaN is a gap
        return _new(Verdict, (_HEARTBEAT_GAP, ev))
    return _new(Verdict, (None, ev))


def judge_observation(
    prev: Observation | None,
    reading: StateReading,
    *,
    task_id: str,
    etag_now: str | None,
    heartbeat: float,
    now: float,
    agent: str | None = None,
) -> list[Verdict]:
    """Observation-side divergences of one state reading (reported on the carrying span).

    ``unknown_state`` (the spelling maps to nothing), ``non_canonical_state`` (mapped but not
    an exact spelling of the version and binding in use) and ``terminal_regression`` (``prev``
    terminal, the reading a known non-terminal state). At most two: a spelling reason and
    a regression. The spelling reasons' evidence describes the reading itself (age 0, etag
    now); the regression's describes the terminal observation it contradicts.
    """
    out: list[Verdict] = []
    reading_ev = Evidence(
        task_id, agent, reading.state, reading.raw, 0.0, etag_now, etag_now, heartbeat
    )
    if not reading.mapped:
        out.append(Verdict(R.UNKNOWN_STATE, reading_ev))
    elif not reading.exact:
        out.append(Verdict(R.NON_CANONICAL_STATE, reading_ev))
    if (
        prev is not None
        and prev.state.is_terminal
        and reading.mapped
        and reading.state is not TaskState.UNKNOWN
        and not reading.state.is_terminal
    ):
        out.append(
            Verdict(
                R.TERMINAL_REGRESSION, evidence_of(task_id, prev, etag_now, heartbeat, now, agent)
            )
        )
    return out


def judge_task_not_found(
    prev: Observation | None,
    *,
    now: float | None = None,
    etag_now: str | None = None,
    heartbeat: float = DEFAULT_HEARTBEAT,
) -> Verdict | None:
    """``task_lost`` when the agent answers TaskNotFound for a task last seen non-terminal.

    A task last seen terminal may legitimately be garbage-collected by the agent; one last
    seen ``unknown`` was never known to be live, so neither is a loss. ``etag_now`` defaults
    to the observation's etag and ``now`` to its time (age 0).
    """
    if prev is None or prev.state.is_terminal or prev.state is TaskState.UNKNOWN:
        return None
    ev = evidence_of(
        prev.task_id,
        prev,
        prev.etag if etag_now is None else etag_now,
        heartbeat,
        prev.at if now is None else now,
        prev.agent,
    )
    return Verdict(R.TASK_LOST, ev)


def is_redundant_get(
    obs: Observation | None, etag_now: str | None, now: float, heartbeat: float
) -> bool:
    """A ``GetTask`` that could not have told anything new (counted, never a divergence).

    Redundant when the etag is unchanged and the last observation is either fresh (within the
    heartbeat) or terminal (terminal tasks never change). An interrupted task past the
    heartbeat is not: a decision on it owes no heartbeat, but a poll can still learn that
    someone answered it or the agent ended it meanwhile.
    """
    if obs is None:
        return False
    kind, observed = obs._kind, obs.etag  # inlined (_etag_changed, _age): every poll passes
    if kind.state is _UNKNOWN or (
        observed is not None and etag_now is not None and observed != etag_now
    ):
        return False
    age = now - obs.at
    return kind.state_class is _TERMINAL or (0.0 if age < 0.0 else age) <= heartbeat
