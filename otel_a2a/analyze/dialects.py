"""The span attribute dialects A2A runtimes report task beliefs in, read as one. Pure.

A task's beliefs are compared whatever runtime reported them, so each span's attributes go
through one reading: the task, the state (as spelt, and canonical), whether the observation was
authoritative, the A2A method and the agent. The dialects, first match wins
(tests/fixtures/dialects/ records one span of each, with where its names come from):

- OpenTelemetry's A2A semantic conventions (``a2a.method.name``, ``a2a.task.id``,
  ``a2a.task.state`` = ``TASK_STATE_*``, ``gen_ai.agent.name``): otel-a2a now, and Bifrost,
  whose names are the convention's;
- otel-a2a before it spoke the convention (``a2a.operation``, ``a2a.task.state.raw``,
  ``a2a.agent.name``, ``a2a.task.state`` = ``working``...): files dumped before the change;
- the A2A Java SDK's OpenTelemetry extras (``gen_ai.agent.a2a.task_id``, ``.status``,
  ``.operation.name``);
- Kong AI Gateway (``kong.a2a.task.id``, ``kong.a2a.task.state``, ``kong.a2a.operation``);
- agentgateway (``a2a.method``, with ``a2a.task.state``).

A v0.3 or JSON-RPC method spelling (``message/send``) is read as its v1.0 method name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from otel_a2a import semconv as sc
from otel_a2a.protocol.classify import JSONRPC_METHODS
from otel_a2a.protocol.model import Operation
from otel_a2a.protocol.states import TaskState, normalize_task_state

_MAX_TEXT = 256  # ids, names and spellings are short; never hold a huge attribute value

# otel-a2a's names before it spoke OpenTelemetry's A2A conventions
LEGACY_OPERATION = "a2a.operation"
LEGACY_STATE_RAW = "a2a.task.state.raw"
LEGACY_AGENT_NAME = "a2a.agent.name"
LEGACY_AUTHORITATIVE = "a2a.observation.authoritative"
LEGACY_TASK_STATUS = "a2a.task.status"
LEGACY_TASK_SWAPPED = "a2a.task.swapped"
LEGACY_DECISION = "a2a.liveness.decision"
LEGACY_DIVERGENCE = "a2a.divergence"
LEGACY_DIVERGENCE_REASON = "a2a.divergence.reason"
# the A2A Java SDK's OpenTelemetry extras (A2AObservabilityNames)
JAVA_TASK_ID = "gen_ai.agent.a2a.task_id"
JAVA_STATUS = "gen_ai.agent.a2a.status"
JAVA_OPERATION = "gen_ai.agent.a2a.operation.name"
# Kong AI Gateway's A2A span
KONG_TASK_ID = "kong.a2a.task.id"
KONG_STATE = "kong.a2a.task.state"
KONG_OPERATION = "kong.a2a.operation"
# agentgateway's request span
AGENTGATEWAY_METHOD = "a2a.method"

# in order of preference: the first key present wins
_TASK_IDS = (sc.TASK_ID, JAVA_TASK_ID, KONG_TASK_ID)
# wire spellings first: a canonical value says less than the spelling it came from
_STATES = (sc.TASK_STATE_RAW, LEGACY_STATE_RAW, sc.TASK_STATE, JAVA_STATUS, KONG_STATE)
_OPERATIONS = (sc.OPERATION, LEGACY_OPERATION, JAVA_OPERATION, KONG_OPERATION, AGENTGATEWAY_METHOD)
_AGENTS = (sc.AGENT_NAME, LEGACY_AGENT_NAME)
_AUTHORITATIVE = (sc.AUTHORITATIVE, LEGACY_AUTHORITATIVE)
_DECISIONS = (sc.LIVENESS_DECISION, LEGACY_DECISION)
_REASONS = (sc.DIVERGENCE_REASON, LEGACY_DIVERGENCE_REASON)

# what the fleet judge reads besides (otel_a2a.analyze.fleet): where a request went, how the
# state was spelt, whether it failed, a card's etag and heartbeat, an explicit decision's
JUDGE_KEYS = (
    sc.AGENT_URL,
    sc.SERVER_ADDRESS,
    sc.SERVER_PORT,
    sc.PROTOCOL_VERSION,
    sc.BINDING,
    sc.ERROR_TYPE,
    sc.ERROR_REASON,
    sc.ASSUMED_STATE,
)
CARD_KEYS = frozenset((sc.CARD_ETAG, sc.CARD_HEARTBEAT))

# every key a reading looks at (a decoder may keep only these), and those that name a task
KEYS = (
    frozenset(
        (*_TASK_IDS, *_STATES, *_OPERATIONS, *_AGENTS, *_AUTHORITATIVE, *_DECISIONS, *JUDGE_KEYS)
    )
    | CARD_KEYS
)
TASK_KEYS = frozenset(_TASK_IDS)

# span events that carry one belief each (a streamed status, the task a reply answered instead)
BELIEF_EVENTS = frozenset(
    {sc.EVENT_TASK_STATUS, sc.EVENT_TASK_SWAPPED, LEGACY_TASK_STATUS, LEGACY_TASK_SWAPPED}
)
STATUS_EVENTS = frozenset({sc.EVENT_TASK_STATUS, LEGACY_TASK_STATUS})
# a divergence otel-a2a reported in-process, on the span of the decision or observation
DIVERGENCE_EVENTS = frozenset({sc.EVENT_DIVERGENCE, LEGACY_DIVERGENCE})


class Reading(NamedTuple):
    """What one span's (or event's) attributes say of a task, in otel-a2a's terms; empty
    strings where they say nothing. ``state`` is None when no state is carried."""

    task_id: str
    state: tuple[TaskState, str] | None
    authoritative: bool
    operation: str
    agent_name: str
    decision: bool = False  # the span is a liveness decision


def _first_text(attrs: Mapping[str, object], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = attrs.get(key)
        if value.__class__ is str and value:
            return value[:_MAX_TEXT]
    return ""


def method_name(spelling: str) -> str:
    """The v1.0 method name of a method spelling (``message/send`` -> ``SendMessage``); an
    unknown spelling is kept as it is (the metric turns it into ``_OTHER``)."""
    return _METHOD_NAMES.get(spelling, spelling)


# every spelling a method is known by, to its v1.0 name: one lookup per span
_METHOD_NAMES = {
    **{spelling: op.value for spelling, op in JSONRPC_METHODS.items()},
    Operation.GET_AGENT_CARD.value: Operation.GET_AGENT_CARD.value,
}


def task_id(attrs: Mapping[str, object]) -> str:
    """The task ``attrs`` name, in whichever dialect (what :func:`read` gives, read alone)."""
    return _first_text(attrs, _TASK_IDS)


def decision(attrs: Mapping[str, object]) -> bool:
    """Whether ``attrs`` mark a liveness decision (what :func:`read` gives, read alone)."""
    return any(attrs.get(key) is True for key in _DECISIONS)


def read(attrs: Mapping[str, object]) -> Reading:
    """One reading of ``attrs`` in whichever dialect it is spelt. Hot: the detector reads
    every span it receives, so each key is looked up once, the convention's first."""
    get = attrs.get
    raw = _first_text(attrs, _STATES)
    return _new(
        Reading,
        (
            _first_text(attrs, _TASK_IDS),
            (normalize_task_state(raw), raw) if raw else None,
            get(_AUTHORITATIVE[0]) is True or get(_AUTHORITATIVE[1]) is True,
            _METHOD_NAMES.get(op := _first_text(attrs, _OPERATIONS), op),
            _first_text(attrs, _AGENTS),
            get(_DECISIONS[0]) is True or get(_DECISIONS[1]) is True,
        ),
    )


_new = tuple.__new__  # a named tuple's generated ``__new__`` costs a µs per span


def divergence_reason(attrs: Mapping[str, object]) -> str:
    """The reason of a divergence event, in either spelling; '' if none."""
    return _first_text(attrs, _REASONS)
