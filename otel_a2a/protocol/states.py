"""Task states of A2A v1.0 and v0.3 and how wire spellings map onto them.

The canonical vocabulary is the v0.3 / semconv-draft one (``working``, ``input-required`` ...):
it is what spans and metrics carry, whatever the peer spelled.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class TaskState(str, Enum):
    """Canonical task state."""

    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    AUTH_REQUIRED = "auth-required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"
    UNKNOWN = "unknown"

    @property
    def state_class(self) -> StateClass:
        return _CLASS[self]

    @property
    def is_terminal(self) -> bool:
        return _CLASS[self] is StateClass.TERMINAL


class StateClass(str, Enum):
    """Value of ``a2a.task.state.class``; ``unknown`` tasks count as active."""

    ACTIVE = "active"
    INTERRUPTED = "interrupted"
    TERMINAL = "terminal"


_CLASS = {
    TaskState.SUBMITTED: StateClass.ACTIVE,
    TaskState.WORKING: StateClass.ACTIVE,
    TaskState.UNKNOWN: StateClass.ACTIVE,
    TaskState.INPUT_REQUIRED: StateClass.INTERRUPTED,
    TaskState.AUTH_REQUIRED: StateClass.INTERRUPTED,
    TaskState.COMPLETED: StateClass.TERMINAL,
    TaskState.FAILED: StateClass.TERMINAL,
    TaskState.CANCELED: StateClass.TERMINAL,
    TaskState.REJECTED: StateClass.TERMINAL,
}


class StateReading(NamedTuple):
    """One state as carried on the wire.

    ``mapped`` is False when the spelling maps to nothing (``paused``, ``UNRECOGNIZED``, a
    missing state): ``state`` is then ``UNKNOWN`` and the reading is an ``unknown_state``
    divergence. ``exact`` is True when the spelling is an exact spelling of the protocol version
    and binding in use (DESIGN §1, ``non_canonical_state``).
    """

    raw: str
    state: TaskState
    mapped: bool
    exact: bool
