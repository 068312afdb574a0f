"""Value types the wire layer hands up: what a request is, and what a response said.

They are named tuples: immutable and hashable like frozen dataclasses, but built several times
faster, which matters since some are built on every A2A response.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from otel_a2a.protocol.bindings import Binding
from otel_a2a.protocol.states import StateReading

__all__ = [
    "A2AError",
    "A2ARequest",
    "Binding",
    "CardInfo",
    "Interface",
    "Operation",
    "PushTarget",
    "ResponseFacts",
    "StreamEvent",
    "TaskReport",
]


class Operation(str, Enum):
    """A2A operation, named as in v1.0 whatever version was spoken (``a2a.method.name``)."""

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


class PushTarget(NamedTuple):
    """A webhook a request registers for push notifications: the path of its URL (what the
    receiving server sees) and a keyed digest of its token (None: the config has none; the
    token itself is never kept, see ``protocol.push``)."""

    path: str
    token: bytes | None


class A2ARequest(NamedTuple):
    """A request recognised as A2A.

    ``version`` is ``None`` only for well-known card fetches (not version-negotiated).
    ``task_id`` is the task the request addresses: the path or params id for task operations,
    ``message.taskId`` for a follow-up ``SendMessage``. ``base_url_path`` is the URL path
    before the A2A-specific suffix (the interface URL's path), used to attribute the request to
    an agent. ``card_variant`` says which card a well-known card fetch asked for: the
    ``A2A-Version`` it asked for (a server may serve one card per version, each with its own
    ETag), and a keyed digest of the credentials it sent (a server may serve one card per
    caller: a2a-sdk's ``card_modifier``), never the credentials themselves. ``message_id``,
    ``reference_task_ids`` (16 at most) and ``tenant`` are what the request says of them,
    where it says it (a message is sent only by ``SendMessage`` and ``SendStreamingMessage``).
    ``push`` is the webhook the request registers (a push config created, or given with a
    message).
    """

    operation: Operation
    binding: Binding
    version: str | None
    jsonrpc_method: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    base_url_path: str = ""
    card_variant: str | None = None
    message_id: str | None = None
    reference_task_ids: tuple[str, ...] = ()
    tenant: str | None = None
    push: PushTarget | None = None


class TaskReport(NamedTuple):
    """One task state carried by a response or stream frame.

    ``state`` is ``None`` for frames that carry a task id but no status (artifact updates);
    those refresh an open stream but carry no state. ``timestamp`` is the status's own
    ``timestamp`` as sent (ISO 8601), used to tell a late frame from a real regression.
    ``generation`` is A2A 1.1's ``generation`` of the task, status or artifact update (the
    task's after the change; ``0`` from a peer that says it keeps none; ``None`` when absent).
    """

    task_id: str
    context_id: str | None
    state: StateReading | None
    kind: str  # "task", "status-update", "artifact-update", "list-entry", "error-reply"
    timestamp: str | None = None
    generation: int | None = None


class A2AError(NamedTuple):
    """A JSON-RPC error or a REST ``google.rpc.Status`` error.

    ``report`` is what the error states about the task the request named, as a report of kind
    ``"error-reply"``: a state its message spells (``... is in terminal state:
    TASK_STATE_FAILED``, ``... in a terminal state (4)``), or, for a TaskNotCancelable that
    spells none, :data:`~otel_a2a.protocol.states.NOT_CANCELABLE`.
    """

    code: int | None
    reason: str | None  # e.g. "TASK_NOT_FOUND", from ErrorInfo or derived from the code
    task_not_found: bool
    report: TaskReport | None = None


class ResponseFacts(NamedTuple):
    """What one response body (or one SSE frame) says about tasks. Never raises to build."""

    reports: tuple[TaskReport, ...] = ()
    error: A2AError | None = None
    message_only: bool = False  # a Message result without a Task: no observation
    recognized: bool = True  # False: the body is not an A2A payload we understand


class StreamEvent(NamedTuple):
    """One SSE frame. ``comment`` frames (``: ping``) carry no facts but refresh the stream."""

    facts: ResponseFacts = ResponseFacts()
    comment: bool = False
    error: bool = False  # an ``event: error`` frame


class Interface(NamedTuple):
    url: str
    binding: str
    protocol_version: str | None


class CardInfo(NamedTuple):
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
    description: str | None = None  # for gen_ai.agent.description: cut at 1,024 characters
