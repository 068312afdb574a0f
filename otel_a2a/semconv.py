"""Span, event and metric names, written once, and the agent-name label cap.

docs/semantic-conventions.md documents every name here (tests/test_semconv_doc.py checks it).

Pure (no OpenTelemetry import): the instrumentation and the analyzer both use it.
"""

from __future__ import annotations

import threading

from otel_a2a.locks import fork_safe

SCOPE = "otel_a2a"

# span attributes
RPC_SYSTEM = "rpc.system"
RPC_METHOD = "rpc.method"
OPERATION = "a2a.operation"
PROTOCOL_VERSION = "a2a.protocol.version"
BINDING = "a2a.binding"
JSONRPC_METHOD = "a2a.jsonrpc.method"
AGENT_NAME = "a2a.agent.name"
AGENT_URL = "a2a.agent.url"
CARD_ETAG = "a2a.card.etag"
CARD_ETAG_OBSERVED = "a2a.card.etag.observed"
CARD_ETAG_CHANGED = "a2a.card.etag.changed"
CARD_VERSION = "a2a.card.version"
CARD_HEARTBEAT = "a2a.card.heartbeat_interval"
CARD_STREAMING = "a2a.card.streaming"
TASK_ID = "a2a.task.id"
TASK_ID_REQUESTED = "a2a.task.id.requested"
CONTEXT_ID = "a2a.context.id"
TASK_STATE = "a2a.task.state"
TASK_STATE_RAW = "a2a.task.state.raw"
TASK_STATE_CLASS = "a2a.task.state.class"
AUTHORITATIVE = "a2a.observation.authoritative"
OBSERVATION_AGE = "a2a.observation.age"
LIVENESS_DECISION = "a2a.liveness.decision"
ASSUMED_STATE = "a2a.decision.assumed_state"
DECISION_OUTCOME = "a2a.decision.outcome"
DIVERGENCE_REASON = "a2a.divergence.reason"
ERROR_TYPE = "error.type"
ERROR_TYPE_OTHER = "_OTHER"  # OpenTelemetry's value for an error of no known class
HTTP_STATUS_CODE = "http.response.status_code"
JSONRPC_ERROR_CODE = "rpc.jsonrpc.error_code"
RPC_GRPC_STATUS_CODE = "rpc.grpc.status_code"

# ``a2a.operation`` beyond the A2A operation names: an explicit decision (``liveness_decision``
# or a span marked ``a2a.liveness.decision``), and a foreign span that names no operation
OP_DECISION = "liveness_decision"
OP_UNKNOWN = "unknown"
OP_PUSH = "push_notification"  # a push delivery the application's webhook received


def span_name(operation: str) -> str:
    """The name of otel-a2a's span of ``operation`` (an A2A operation, or ``OP_DECISION``)."""
    return f"A2A {operation}"


# events
EVENT_DIVERGENCE = "a2a.divergence"
EVENT_TASK_STATUS = "a2a.task.status"
EVENT_STREAM_ABNORMAL_END = "a2a.stream.abnormal_end"
EVENT_TASK_SWAPPED = "a2a.task.swapped"

# metrics
M_DIVERGENCE = "a2a.divergence"
M_DECISIONS = "a2a.liveness.decisions"
M_OBSERVATION_AGE = "a2a.observation.age"
M_ETAG_CHANGES = "a2a.card.etag.changes"
M_GET_REDUNDANT = "a2a.task.get.redundant"
M_TRACKED = "a2a.tasks.tracked"
M_STALE = "a2a.tasks.stale"
M_EVICTED = "a2a.tasks.evicted"
M_ERRORS = "a2a.instrumentation.errors"

# seconds; the SDK default buckets are milliseconds-scale and would skew every quantile
AGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)
MAX_AGENT_NAMES = 100
OTHER = "_OTHER"


class AgentLabels:
    """Caps ``a2a.agent.name`` at 100 distinct values; later ones become ``_OTHER``.

    Names that are only an address (an agent whose card this process never fetched, named by
    its origin) may take half of the slots at most: any 50 hosts the application happens to
    call must not leave the agents it knows by their cards reported as ``_OTHER``.
    """

    def __init__(self, limit: int = MAX_AGENT_NAMES) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._addresses = 0
        self._lock = threading.Lock()
        fork_safe(self, "_lock")

    def __call__(self, name: str, *, address: bool = False) -> str:
        if name in self._seen:
            return name
        with self._lock:
            if len(self._seen) < self._limit and not (
                address and self._addresses >= self._limit // 2
            ):
                self._seen.add(name)
                self._addresses += address
                return name
        return OTHER


# ---------------------------------------------------------------------------------------------
# The worker's side (``instrumentation/server``): a2a-sdk servers. Names OpenTelemetry's A2A
# semantic conventions define (``a2a.server`` span: name ``{a2a.method.name}``, kind SERVER) are
# spelt as they do; otel-a2a's own finding uses its ``otel_a2a.`` namespace.
METHOD_NAME = "a2a.method.name"
MESSAGE_ID = "a2a.message.id"
REFERENCE_TASK_IDS = "a2a.message.reference_task_ids"
TENANT = "a2a.tenant"
CONVERSATION_ID = "gen_ai.conversation.id"  # the A2A contextId
GEN_AI_AGENT_NAME = "gen_ai.agent.name"  # of the local card
GEN_AI_AGENT_VERSION = "gen_ai.agent.version"
# accepted, never finished: a task neither terminal nor interrupted with no live execution
EVENT_TASK_UNFINISHED = "otel_a2a.task.unfinished"
M_TASKS_UNFINISHED = "otel_a2a.task.unfinished"
UNFINISHED_CAUSE = "otel_a2a.task.unfinished.cause"
CAUSE_NOT_RUN_HERE = "not_run_here"  # in the store, never executed by this process (restart)
CAUSE_EXECUTION_ENDED = "execution_ended"  # its execution here ended without a final state

# ---------------------------------------------------------------------------------------------
# Push notifications the application's webhook receives (``instrumentation/webhook``)
M_PUSH_DELIVERIES = "otel_a2a.push.deliveries"
PUSH_OUTCOME = "otel_a2a.push.outcome"
