"""Task states of A2A v1.0 and v0.3 and how wire spellings map onto them.

The canonical state is a ``TaskState`` (its value is otel-a2a's internal spelling, ``working``,
``input-required`` ...: the ledger, the analyzer's output). Spans carry it as OpenTelemetry's A2A
convention spells ``a2a.task.state`` (``TASK_STATE_WORKING`` ...: ``semconv_state``), whatever
the peer spelled.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from otel_a2a.protocol.bindings import Binding


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

    # A member hashes and compares as its ``str`` value (``str`` precedes ``Enum`` in the
    # MRO): tables keyed by values take members as they are, without the Python-level
    # ``.value`` descriptor.
    @property
    def state_class(self) -> StateClass:
        return _CLASS[self]

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_VALUES


class StateClass(str, Enum):
    """Value of ``otel_a2a.task.state.class``; ``unknown`` tasks count as active."""

    ACTIVE = "active"
    INTERRUPTED = "interrupted"
    TERMINAL = "terminal"


_CLASS = {
    TaskState.SUBMITTED.value: StateClass.ACTIVE,
    TaskState.WORKING.value: StateClass.ACTIVE,
    TaskState.UNKNOWN.value: StateClass.ACTIVE,
    TaskState.INPUT_REQUIRED.value: StateClass.INTERRUPTED,
    TaskState.AUTH_REQUIRED.value: StateClass.INTERRUPTED,
    TaskState.COMPLETED.value: StateClass.TERMINAL,
    TaskState.FAILED.value: StateClass.TERMINAL,
    TaskState.CANCELED.value: StateClass.TERMINAL,
    TaskState.REJECTED.value: StateClass.TERMINAL,
}
_TERMINAL_VALUES = frozenset(v for v, c in _CLASS.items() if c is StateClass.TERMINAL)
_SEMCONV = {
    s.value: "TASK_STATE_" + ("UNSPECIFIED" if s.name == "UNKNOWN" else s.name) for s in TaskState
}


def semconv_state(state: TaskState) -> str:
    """``state`` as OpenTelemetry's A2A convention spells ``a2a.task.state``: the v1.0 proto
    name (``TASK_STATE_WORKING``; ``UNKNOWN`` is ``TASK_STATE_UNSPECIFIED``)."""
    return _SEMCONV[state]


class StateReading(NamedTuple):
    """One state as carried on the wire.

    ``mapped`` is False when the spelling maps to nothing (``paused``, ``UNRECOGNIZED``, a
    missing state): ``state`` is then ``UNKNOWN`` and the reading is an ``unknown_state``
    divergence. ``exact`` is True when the spelling is an exact spelling of the protocol version
    and binding in use (else a ``non_canonical_state`` divergence).
    """

    raw: str
    state: TaskState
    mapped: bool
    exact: bool


_BY_NAME: dict[str, TaskState] = {s.value: s for s in TaskState}
_BY_NAME["canceled"] = TaskState.CANCELED
_BY_NAME["cancelled"] = TaskState.CANCELED
_BY_NAME["unspecified"] = TaskState.UNKNOWN

# v1.0 proto enum numbers (ProtoJSON parsers accept integers too).
_BY_NUMBER: tuple[TaskState, ...] = (
    TaskState.UNKNOWN,
    TaskState.SUBMITTED,
    TaskState.WORKING,
    TaskState.COMPLETED,
    TaskState.FAILED,
    TaskState.CANCELED,
    TaskState.INPUT_REQUIRED,
    TaskState.REJECTED,
    TaskState.AUTH_REQUIRED,
)

_PROTO_V1 = frozenset(
    "TASK_STATE_" + n
    for n in (
        "UNSPECIFIED",
        "SUBMITTED",
        "WORKING",
        "COMPLETED",
        "FAILED",
        "CANCELED",
        "INPUT_REQUIRED",
        "REJECTED",
        "AUTH_REQUIRED",
    )
)
# v0.3 proto (gRPC): the British CANCELLED.
_PROTO_V03 = (_PROTO_V1 - {"TASK_STATE_CANCELED"}) | {"TASK_STATE_CANCELLED"}
_KEBAB = frozenset(s.value for s in TaskState)
_EXACT_V03_JSONRPC = _KEBAB
_EXACT_V03_REST = _KEBAB | _PROTO_V1 | _PROTO_V03  # the Python and JS SDKs differ

_MAX_RAW = 64  # longest legitimate spelling is 26 characters; bound what spans carry


def _map(raw: object) -> TaskState | None:
    """The state ``raw`` spells, or None when it spells nothing."""
    if isinstance(raw, str):
        key = raw.strip()  # as the seed's ``TaskState(raw.strip().lower())`` does
        if len(key) > _MAX_RAW:
            return None
        key = key.lower()
        if key.startswith("task_state_"):
            key = key[11:]
        return _BY_NAME.get(key.replace("_", "-"))
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < len(_BY_NUMBER):
        return _BY_NUMBER[raw]
    return None


def normalize_task_state(raw: object) -> TaskState:
    """Map any wire spelling (v1.0, v0.3 kebab, v0.3 proto, enum number) to the canonical state.

    Strip surrounding whitespace, lowercase, strip ``task_state_``, ``_`` to ``-``,
    ``cancelled`` to ``canceled``, ``unspecified`` to ``unknown``; integers 0-8 are v1.0 enum
    numbers. So every string the seed's ``TaskState(raw.strip().lower())`` accepts maps as it
    did there. Anything else is ``UNKNOWN``: a state that cannot be read is never guessed.
    Whether a spelling was exact is ``read_state``'s business: ``" Working"`` maps here, and
    on the wire it is a ``non_canonical_state``.
    """
    state = _map(raw)
    return TaskState.UNKNOWN if state is None else state


# ProtoJSON omits a field at its default value: ``"status": {}`` is ``TASK_STATE_UNSPECIFIED``
# (both SDKs serialise it so). Exact and mapped, it reads ``unknown``; its raw spelling stays
# empty, as nothing was spelt (and a body cut inside ``status`` is never read as one).
OMITTED_UNSPECIFIED = StateReading("", TaskState.UNKNOWN, True, True)

# A TaskNotCancelable reply that spells no state. The spec's examples of a task "not in a
# cancelable state" are terminal ones, but both SDKs also answer it for a live task whose
# executor declines to cancel (a2a-sdk 1.3 turns the executor's UnsupportedOperationError into
# it; @a2a-js/sdk answers it when the task is not canceled afterwards): the state is unsaid,
# and never guessed. Its raw text is the reason, as nothing else was spelt.
NOT_CANCELABLE = StateReading("TASK_NOT_CANCELABLE", TaskState.UNKNOWN, True, True)


def omits_defaults(version: str | None, binding: Binding) -> bool:
    """Whether this version and binding serialise with ProtoJSON: every v1.x binding, and
    v0.3's HTTP+JSON and gRPC (v0.3 JSON-RPC always spells the state)."""
    return binding != "JSONRPC" or _major(version) >= 1


def _major(version: str | None) -> int:
    if not version:
        return 0
    head = version.split(".", 1)[0].strip()
    return int(head) if head.isdigit() and len(head) < 6 else 0


def _raw_text(raw: object) -> str:
    if isinstance(raw, str):
        return raw[:_MAX_RAW]
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int) and abs(raw) < 10**12:
        return str(raw)
    if isinstance(raw, float):
        return repr(raw)
    return ""


_READINGS: dict[tuple[str, str | None, str], StateReading] = {}
_MAX_READINGS = 4096  # spellings seen in practice are few; a hostile peer cannot grow this


def read_state(raw: object, version: str | None, binding: Binding) -> StateReading:
    """Read one wire state: canonical value, whether it mapped, whether it was spelt exactly.

    Cached per (spelling, version, binding): this runs on every response and stream frame.
    """
    if type(raw) is str and len(raw) <= _MAX_RAW:
        key = (raw, version, binding)
        reading = _READINGS.get(key)
        if reading is None:
            reading = _read_state(raw, version, binding)
            if len(_READINGS) < _MAX_READINGS:
                _READINGS[key] = reading
        return reading
    return _read_state(raw, version, binding)


def _read_state(raw: object, version: str | None, binding: Binding) -> StateReading:
    """Exact spellings (anything else accepted is a
    ``non_canonical_state``): any version >= 1, every binding: ``TASK_STATE_*``; v0.3 JSON-RPC:
    lowercase kebab; v0.3 gRPC: ``TASK_STATE_*`` with ``CANCELLED``; v0.3 HTTP+JSON: either.
    Integers map but are never exact; a missing state (``None``) reads as raw ``""``.
    """
    state = _map(raw)
    text = _raw_text(raw)
    if state is None:
        return StateReading(text, TaskState.UNKNOWN, False, False)
    if not isinstance(raw, str):
        return StateReading(text, state, True, False)
    if _major(version) >= 1:
        exact = raw in _PROTO_V1
    else:
        if binding == "JSONRPC":
            exact = raw in _EXACT_V03_JSONRPC
        elif binding == "GRPC":
            exact = raw in _PROTO_V03
        else:
            exact = raw in _EXACT_V03_REST
    return StateReading(raw, state, True, exact)
