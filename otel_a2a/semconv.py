"""Span, event and metric names, written once, and the agent-name label cap.

docs/semantic-conventions.md documents every name here (tests/test_semconv_doc.py checks it).

Pure (no OpenTelemetry import): the instrumentation and the analyzer both use it.
"""

from __future__ import annotations

import threading

from otel_a2a.locks import fork_safe

SCOPE = "otel_a2a"
# the OpenTelemetry semantic-conventions release whose names the tracer, meter and logger use
# (rpc.response.status_code, server.*, error.type; the A2A convention links it)
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"

# Span attributes. OpenTelemetry's A2A convention (semantic-conventions-genai, docs/gen-ai/a2a.md)
# owns ``a2a.*`` and the ``gen_ai.*`` it uses; otel-a2a's own names live under ``otel_a2a.``.
OPERATION = "a2a.method.name"
PROTOCOL_VERSION = "a2a.protocol.version"
TENANT = "a2a.tenant"
MESSAGE_ID = "a2a.message.id"
MESSAGE_REFERENCE_TASK_IDS = "a2a.message.reference_task_ids"
TASK_ID = "a2a.task.id"
TASK_STATE = "a2a.task.state"
CONTEXT_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_VERSION = "gen_ai.agent.version"
AGENT_DESCRIPTION = "gen_ai.agent.description"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
ERROR_TYPE_OTHER = "_OTHER"  # OpenTelemetry's value for an error of no known class
HTTP_STATUS_CODE = "http.response.status_code"
RPC_RESPONSE_STATUS_CODE = "rpc.response.status_code"
# otel-a2a's own
BINDING = "otel_a2a.binding"
JSONRPC_METHOD = "otel_a2a.jsonrpc.method"
AGENT_URL = "otel_a2a.agent.url"
AGENT_LABEL = "otel_a2a.agent.name"  # metrics and log records: the card's name, else the address
# the detector's metric: the service whose decision or observation it judged from its spans
SERVICE_LABEL = "otel_a2a.service.name"
CARD_ETAG = "otel_a2a.card.etag"
CARD_ETAG_OBSERVED = "otel_a2a.card.etag.observed"
CARD_ETAG_CHANGED = "otel_a2a.card.etag.changed"
CARD_HEARTBEAT = "otel_a2a.card.heartbeat_interval"
CARD_STREAMING = "otel_a2a.card.streaming"
TASK_ID_REQUESTED = "otel_a2a.task.id.requested"
TASK_STATE_RAW = "otel_a2a.task.state.raw"
TASK_STATE_CLASS = "otel_a2a.task.state.class"
AUTHORITATIVE = "otel_a2a.observation.authoritative"
OBSERVATION_AGE = "otel_a2a.observation.age"
LIVENESS_DECISION = "otel_a2a.liveness.decision"
ASSUMED_STATE = "otel_a2a.decision.assumed_state"
DECISION_OUTCOME = "otel_a2a.decision.outcome"
DIVERGENCE_REASON = "otel_a2a.divergence.reason"
DIVERGENCE_OUTCOME = "otel_a2a.divergence.outcome"  # confirmed or refuted (a resolution)
DIVERGENCE_AGE = "otel_a2a.divergence.age"  # seconds from the decision to its resolution
ERROR_REASON = "otel_a2a.error.reason"
ERROR_TASK_STATE = "otel_a2a.error.task_state"  # the state an error reply stated

# ``a2a.method.name`` beyond the A2A method names (metrics and log records only): an explicit
# decision, and a foreign span that names no method
OP_DECISION = "liveness_decision"
OP_UNKNOWN = "unknown"
OP_PUSH = "push_notification"  # a push delivery the application's webhook received


# events
EVENT_DIVERGENCE = "otel_a2a.divergence"
EVENT_TASK_STATUS = "otel_a2a.task.status"
EVENT_STREAM_ABNORMAL_END = "otel_a2a.stream.abnormal_end"
EVENT_TASK_SWAPPED = "otel_a2a.task.swapped"
EVENT_DIVERGENCE_RESOLVED = "otel_a2a.divergence.resolved"

# metrics (OpenTelemetry's naming rules: units, singular namespaces, no ``_total``)
M_DIVERGENCE = "otel_a2a.divergence"
M_DECISIONS = "otel_a2a.liveness.decisions"
M_OBSERVATION_AGE = "otel_a2a.observation.age"
M_ETAG_CHANGES = "otel_a2a.card.etag.changes"
M_GET_REDUNDANT = "otel_a2a.task.get.redundant"
M_TRACKED = "otel_a2a.task.tracked"
M_STALE = "otel_a2a.task.stale"
M_EVICTED = "otel_a2a.task.evicted"
M_ERRORS = "otel_a2a.instrumentation.errors"
M_RESOLUTIONS = "otel_a2a.divergence.resolutions"
M_UNRESOLVED = "otel_a2a.divergence.unresolved"


# seconds; the SDK default buckets are milliseconds-scale and would skew every quantile
AGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)
MAX_AGENT_NAMES = 100
# seconds after which a divergence no observation resolved counts on otel_a2a.divergence.unresolved
UNRESOLVED_AFTER = 300.0
OTHER = "_OTHER"


class AgentLabels:
    """Caps ``otel_a2a.agent.name`` at 100 distinct values; later ones become ``_OTHER``.

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
# The worker's side (``instrumentation/server``): a2a-sdk servers, spans by the same convention
# (name ``{a2a.method.name}``, kind SERVER); its own finding in the ``otel_a2a.`` namespace.
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
