"""Divergence reasons and the verdict the invariant returns, with its evidence."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from otel_a2a.protocol.states import TaskState


class DivergenceReason(str, Enum):
    """Value of ``otel_a2a.divergence.reason`` (docs/semantic-conventions.md)."""

    NO_OBSERVATION = "no_observation"
    ETAG_CHANGED = "etag_changed"
    HEARTBEAT_GAP = "heartbeat_gap"
    TERMINAL_STATE = "terminal_state"
    NON_CANONICAL_STATE = "non_canonical_state"
    UNKNOWN_STATE = "unknown_state"
    TERMINAL_REGRESSION = "terminal_regression"
    TASK_LOST = "task_lost"
    CROSS_RUNTIME_CONFLICT = "cross_runtime_conflict"
    RENORMALIZED_STATE = "renormalized_state"
    GENERATION_GAP = "generation_gap"
    GENERATION_REGRESSION = "generation_regression"


class Evidence(NamedTuple):
    """Everything a divergence event carries (the ``otel_a2a.divergence`` event's attributes).

    ``age`` is seconds since the last authoritative observation (``None`` without one).
    """

    task_id: str
    agent: str | None
    last_state: TaskState | None
    last_state_raw: str | None
    age: float | None
    etag_now: str | None
    etag_observed: str | None
    heartbeat: float


class Verdict(NamedTuple):
    """``reason is None`` means the decision or observation is authoritative (ok)."""

    reason: DivergenceReason | None
    evidence: Evidence

    @property
    def ok(self) -> bool:
        return self.reason is None


class TaskStateDivergenceError(RuntimeError):
    """Raised in ``enforce`` mode (and by ``assert_state_authoritative``) on a divergence."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        ev = verdict.evidence
        reason = verdict.reason.value if verdict.reason else "ok"
        super().__init__(
            f"task {ev.task_id!r}: {reason} (last state "
            f"{ev.last_state.value if ev.last_state else None}, age {ev.age}, heartbeat "
            f"{ev.heartbeat}s, etag now {ev.etag_now!r}, observed under {ev.etag_observed!r})"
        )

    @property
    def reason(self) -> DivergenceReason | None:
        return self.verdict.reason
