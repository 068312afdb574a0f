"""Value types the wire layer hands up: what a request is, and what a response said."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from otel_a2a.protocol.states import StateReading


class Operation(str, Enum):
    """A2A operation, named as in v1.0 whatever version was spoken (``a2a.operation``)."""

    GET_AGENT_CARD = "GetAgentCard"
    GET_EXTENDED_AGENT_CARD = "GetExtendedAgentCard"
    SEND_MESSAGE = "SendMessage"
    SEND_STREAMING_MESSAGE = "SendStreamingMessage"
    GET_TASK = "GetTask"
    LIST_TASKS = "ListTasks"
    CANCEL_TASK = "CancelTask"
    SUBSCRIBE_TO_TASK = "SubscribeToTask"
    CREATE_PUSH_CONFIG = "CreateTaskPushNotificationConfig"
    GET_PUSH_CONFIG = "GetTaskPushNotificationConfig"
    LIST_PUSH_CONFIGS = "ListTaskPushNotificationConfigs"
    DELETE_PUSH_CONFIG = "DeleteTaskPushNotificationConfig"


class Binding(str, Enum):
    """Value of ``a2a.binding``."""

    JSONRPC = "JSONRPC"
    HTTP_JSON = "HTTP+JSON"
    GRPC = "GRPC"


STREAMING_OPERATIONS = frozenset({Operation.SEND_STREAMING_MESSAGE, Operation.SUBSCRIBE_TO_TASK})


@dataclass(frozen=True, slots=True)
class A2ARequest:
    """A request recognised as A2A.

    ``version`` is ``None`` only for well-known card fetches (not version-negotiated).
    ``task_id`` is the task the request addresses: the path or params id for task operations,
    ``message.taskId`` for a follow-up ``SendMessage``. ``base_url_path`` is the URL path
    before the A2A-specific suffix (the interface URL's path), used to attribute the request to
    an agent.
    """

    operation: Operation
    binding: Binding
    version: str | None
    jsonrpc_method: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    base_url_path: str = ""

    @property
    def streaming(self) -> bool:
        return self.operation in STREAMING_OPERATIONS


@dataclass(frozen=True, slots=True)
class TaskReport:
    """One task state carried by a response or stream frame.

    ``state`` is ``None`` for frames that carry a task id but no status (artifact updates);
    those refresh an open stream but carry no state.
    """

    task_id: str
    context_id: str | None
    state: StateReading | None
    kind: str  # "task", "status-update", "artifact-update", "list-entry"


@dataclass(frozen=True, slots=True)
class A2AError:
    """A JSON-RPC error or a REST ``google.rpc.Status`` error."""

    code: int | None
    reason: str | None  # e.g. "TASK_NOT_FOUND", from ErrorInfo or derived from the code
    task_not_found: bool


@dataclass(frozen=True, slots=True)
class ResponseFacts:
    """What one response body (or one SSE frame) says about tasks. Never raises to build."""

    reports: tuple[TaskReport, ...] = ()
    error: A2AError | None = None
    message_only: bool = False  # a Message result without a Task: no observation
    recognized: bool = True  # False: the body is not an A2A payload we understand


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One SSE frame. ``comment`` frames (``: ping``) carry no facts but refresh the stream."""

    facts: ResponseFacts = field(default_factory=ResponseFacts)
    comment: bool = False
    error: bool = False  # an ``event: error`` frame


@dataclass(frozen=True, slots=True)
class Interface:
    url: str
    binding: str
    protocol_version: str | None


@dataclass(frozen=True, slots=True)
class CardInfo:
    """An Agent Card as the invariant needs it.

    ``heartbeat`` is ``None`` when the card declares none; ``heartbeat_source`` is then
    ``None`` and the configuration decides (overrides, then the default).
    ``etag_source`` is ``"header"`` or ``"jcs"``.
    """

    etag: str
    etag_source: str
    name: str | None
    version: str | None
    streaming: bool | None
    interfaces: tuple[Interface, ...]
    heartbeat: float | None
    heartbeat_source: str | None  # "extension" | "card-field"
    max_age: float | None
    protocol_versions: tuple[str, ...]
