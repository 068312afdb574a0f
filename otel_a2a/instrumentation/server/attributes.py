"""What an a2a-sdk request, reply or stream event says, as the A2A convention's attributes.

The handler sees a2a-sdk's v1.0 protobuf messages whatever the binding (the v0.3 compat layer
converts before it calls the handler): they are read by field access, never serialised, and
nothing here raises on a message of an unexpected shape. No message content is read: ids,
states and the tenant only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_a2a import semconv as sc

# the request handler's methods: the convention's a2a.method.name, and the request field that
# names the task (None: the request names no task)
METHODS: dict[str, tuple[str, str | None]] = {
    "on_message_send": ("SendMessage", None),
    "on_message_send_stream": ("SendStreamingMessage", None),
    "on_get_task": ("GetTask", "id"),
    "on_cancel_task": ("CancelTask", "id"),
    "on_subscribe_to_task": ("SubscribeToTask", "id"),
    "on_list_tasks": ("ListTasks", None),
    "on_create_task_push_notification_config": ("CreateTaskPushNotificationConfig", "task_id"),
    "on_get_task_push_notification_config": ("GetTaskPushNotificationConfig", "task_id"),
    "on_list_task_push_notification_configs": ("ListTaskPushNotificationConfigs", "task_id"),
    "on_delete_task_push_notification_config": ("DeleteTaskPushNotificationConfig", "task_id"),
    "on_get_extended_agent_card": ("GetExtendedAgentCard", None),
}
STREAMING = frozenset({"on_message_send_stream", "on_subscribe_to_task"})

# TaskState numbers of a2a-sdk's v1.0 proto (the convention's values are their names)
STATE_NAMES = {
    0: "TASK_STATE_UNSPECIFIED",
    1: "TASK_STATE_SUBMITTED",
    2: "TASK_STATE_WORKING",
    3: "TASK_STATE_COMPLETED",
    4: "TASK_STATE_FAILED",
    5: "TASK_STATE_CANCELED",
    6: "TASK_STATE_INPUT_REQUIRED",
    7: "TASK_STATE_REJECTED",
    8: "TASK_STATE_AUTH_REQUIRED",
}
TERMINAL = frozenset({3, 4, 5, 7})
INTERRUPTED = frozenset({6, 8})
# v0.3 JSON-RPC spells states in kebab case on the wire (its HTTP+JSON and gRPC use the names)
_V03_JSONRPC = {
    "TASK_STATE_UNSPECIFIED": "unknown",
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}
_MAX_TEXT = 256  # ids and tenants are short; a huge one is cut, never held whole


def _text(message: Any, name: str) -> str:
    value = getattr(message, name, "")
    return value[:_MAX_TEXT] if isinstance(value, str) else ""


def _has(message: Any, name: str) -> bool:
    try:
        return bool(message.HasField(name))
    except (AttributeError, ValueError):
        return False


def state_name(number: object) -> str:
    """The convention's value of a TaskState number (an unknown number is UNSPECIFIED's)."""
    return STATE_NAMES.get(number if isinstance(number, int) else 0, STATE_NAMES[0])


def wire_spelling(name: str, v03_jsonrpc: bool) -> str | None:
    """The state as the reply spelt it, when that differs from the convention's value (v0.3
    JSON-RPC): the analyzer compares spellings across hops."""
    return _V03_JSONRPC.get(name) if v03_jsonrpc else None


def request_attributes(method: str, params: Any) -> dict[str, AttributeValue]:
    """The message, task and context a request names, and its tenant."""
    attrs: dict[str, AttributeValue] = {}
    field = METHODS.get(method, ("", None))[1]
    if _has(params, "message"):
        message = params.message
        for name, key in (
            ("message_id", sc.MESSAGE_ID),
            ("task_id", sc.TASK_ID),
            ("context_id", sc.CONTEXT_ID),
        ):
            value = _text(message, name)
            if value:
                attrs[key] = value
        refs = getattr(message, "reference_task_ids", ())
        ids = [r[:_MAX_TEXT] for r in list(refs)[:16] if isinstance(r, str) and r]
        if ids:
            attrs[sc.MESSAGE_REFERENCE_TASK_IDS] = ids
    elif field is not None and _text(params, field):
        attrs[sc.TASK_ID] = _text(params, field)
    elif method == "on_list_tasks" and _text(params, "context_id"):
        attrs[sc.CONTEXT_ID] = _text(params, "context_id")
    tenant = _text(params, "tenant")
    if tenant:
        attrs[sc.TENANT] = tenant
    return attrs


def task_state(event: Any) -> tuple[str, str, int] | None:
    """``(task id, context id, state number)`` of a Task or a TaskStatusUpdateEvent."""
    if not _has(event, "status"):
        return None
    task_id = _text(event, "id") or _text(event, "task_id")
    state = getattr(event.status, "state", 0)
    return task_id, _text(event, "context_id"), state if isinstance(state, int) else 0


def reply_ids(reply: Any) -> tuple[str, str]:
    """``(task id, context id)`` of a Task, a Message or a task event (empty when absent)."""
    task_id = _text(reply, "task_id") if hasattr(reply, "task_id") else _text(reply, "id")
    return task_id, _text(reply, "context_id")


def card_attributes(card: Any) -> dict[str, AttributeValue]:
    """The local card's name and version (the convention's ``gen_ai.agent.*``)."""
    attrs: dict[str, AttributeValue] = {}
    for name, key in (("name", sc.AGENT_NAME), ("version", sc.AGENT_VERSION)):
        value = _text(card, name)
        if value:
            attrs[key] = value
    return attrs


def carrier(state: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers (HTTP) or invocation metadata (gRPC) from a ServerCallContext's
    state, as a propagation carrier with lower-case keys."""
    headers = state.get("headers")
    if isinstance(headers, Mapping):
        return {str(k).lower(): v for k, v in headers.items() if isinstance(v, str)}
    grpc_context = state.get("grpc_context")
    if grpc_context is None:
        return {}
    try:
        metadata = grpc_context.invocation_metadata() or ()
    except Exception:
        return {}
    return {str(k).lower(): v for k, v in metadata if isinstance(v, str)}


def protocol_version(state: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The A2A version a request was made in, by a2a-sdk's own rules: the JSON-RPC method's
    form, else the ``A2A-Version`` header (missing over HTTP: 0.3); gRPC only if sent."""
    method = state.get("method")
    if isinstance(method, str) and method:
        return "0.3" if "/" in method else "1.0"
    version = headers.get("a2a-version", "").strip()
    if version:
        return version[:16]
    return "0.3" if isinstance(state.get("headers"), Mapping) else None


def v03_jsonrpc(state: Mapping[str, Any]) -> bool:
    method = state.get("method")
    return isinstance(method, str) and "/" in method
