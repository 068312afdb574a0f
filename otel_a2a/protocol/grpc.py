"""A2A over gRPC: what a call is and what its protobuf messages say, read by field access.

No protobuf or grpc import: the messages are those of a2a-sdk's ``a2a.types.a2a_pb2`` (v1.0,
service ``lf.a2a.v1.A2AService``) or its v0.3 compat ``a2a_v0_3_pb2`` (``a2a.v1.A2AService``),
read through the few fields the invariant needs, whichever of the two they are (v0.3 names
the follow-up's message ``request``, the stream's message ``msg`` and addresses tasks by
resource name ``tasks/{id}``). Nothing is serialised to JSON on the way. Nothing here raises on
what a peer sends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from otel_a2a.protocol._util import MAX_ID_LEN
from otel_a2a.protocol.classify import (
    GRPC_METHODS,
    GRPC_METHODS_V03,
    MAX_REFERENCE_TASK_IDS,
    parse_version,
)
from otel_a2a.protocol.extract import judged_error
from otel_a2a.protocol.model import (
    A2AError,
    A2ARequest,
    Binding,
    Operation,
    PushTarget,
    ResponseFacts,
)
from otel_a2a.protocol.model import TaskReport as Report
from otel_a2a.protocol.push import target
from otel_a2a.protocol.states import read_state

SERVICE_V1 = "/lf.a2a.v1.A2AService/"
SERVICE_V03 = "/a2a.v1.A2AService/"
PREFIXES = (SERVICE_V1, SERVICE_V03)  # for ``str.startswith``: the one test other calls pay
STATUS_DETAILS_KEY = "grpc-status-details-bin"
TASK_NOT_FOUND = "TASK_NOT_FOUND"
_V03_NOT_FOUND = "TaskNotFoundError"
_GRPC = Binding.GRPC
_OP = Operation
_STATUS = "status-update"
_ARTIFACT = "artifact-update"
_MAX_LIST_ENTRIES = 1000  # ListTasks entries observed from one reply; a page is 50 by default
_MAX_DETAILS = 16  # status details read from one error


def describe_call(
    method: str, metadata: Iterable[tuple[str, Any]] | None, request: object
) -> A2ARequest | None:
    """The A2A request of a gRPC call, or None for any other method: the operation of its
    method path, the version of its ``a2a-version`` metadata (Major.Minor, absent meaning
    ``0.3`` as the spec says), and what the request message says (its task, context and
    message ids, referenced tasks, tenant, push config). Built as a tuple in one step: the
    named tuple's generated ``__new__`` or ``_replace`` costs a microsecond on every call."""
    found = _operation(method, metadata)
    if found is None:
        return None
    op, version = found
    task_id, context_id = request_ids(op, request)
    message_id, refs = request_message(op, request)
    tenant, push = request_tenant(request), push_target(op, request)
    return _new(
        A2ARequest,
        (op, _GRPC, version, None, task_id, context_id, "", None, message_id, refs, tenant, push),
    )


_new = tuple.__new__


def _operation(
    method: str, metadata: Iterable[tuple[str, Any]] | None
) -> tuple[Operation, str] | None:
    if method.startswith(SERVICE_V1):
        op = GRPC_METHODS.get(method[len(SERVICE_V1) :])
    elif method.startswith(SERVICE_V03):
        op = GRPC_METHODS_V03.get(method[len(SERVICE_V03) :])
    else:
        return None
    if op is None:
        return None
    raw = None
    for key, value in metadata or ():
        if isinstance(key, str) and key.lower() == "a2a-version" and isinstance(value, str):
            raw = value
    return op, parse_version(raw) if raw and raw.strip() else "0.3"


_TARGET_SCHEMES = ("dns:///", "dns:", "ipv4:", "ipv6:")


def channel_origin(target: object) -> str:
    """The agent key of a channel target or a card's gRPC interface URL: ``grpc://host:port``.
    Cards write it ``host:port`` (a2a-sdk), some with a scheme (``grpc://``, ``http://``);
    channels are made for ``host:port`` or a gRPC name (``dns:///host:port``). The registry
    routes the one to the other by this key."""
    text = target.strip() if isinstance(target, str) else ""
    if text.startswith("dns://") and not text.startswith("dns:///"):
        text = text[6:].partition("/")[2]  # dns://authority/host:port: the resolver's address
    for scheme in _TARGET_SCHEMES:
        if text.startswith(scheme):
            text = text[len(scheme) :]
            break
    else:
        if "://" in text:
            text = text.split("://", 1)[1]
    return "grpc://" + text.split("/", 1)[0]


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value and len(value) <= MAX_ID_LEN else None


def _resource_id(name: object) -> str | None:
    """``tasks/{id}`` (v0.3 resource names, a suffix after it allowed) to ``{id}``."""
    if not isinstance(name, str) or not name.startswith("tasks/"):
        return None
    return _id(name[6:].split("/", 1)[0])


def request_message(op: Operation, request: object) -> tuple[str | None, tuple[str, ...]]:
    """(message id, reference task ids: 16 at most) of a request's message, v1.0 or v0.3."""
    if op is not _OP.SEND_MESSAGE and op is not _OP.SEND_STREAMING_MESSAGE:
        return None, ()
    message = getattr(request, "message", None)
    if message is None:  # v0.3
        message = getattr(request, "request", None)
    if message is None:
        return None, ()
    refs = getattr(message, "reference_task_ids", None) or ()
    ids = tuple(r for r in list(refs)[:MAX_REFERENCE_TASK_IDS] if _id(r))
    return _id(getattr(message, "message_id", None)), ids


def request_tenant(request: object) -> str | None:
    """The ``tenant`` a v1.0 request names (v0.3 messages have none)."""
    return _id(getattr(request, "tenant", None))


def request_ids(op: Operation, request: object) -> tuple[str | None, str | None]:
    """(task id, context id) a request message addresses, v1.0 or v0.3."""
    if op is _OP.SEND_MESSAGE or op is _OP.SEND_STREAMING_MESSAGE:
        message = getattr(request, "message", None)
        if message is None:  # v0.3
            message = getattr(request, "request", None)
        if message is None:
            return None, None
        return _id(getattr(message, "task_id", None)), _id(getattr(message, "context_id", None))
    task_id = _id(getattr(request, "task_id", None))  # v1.0 push configs
    if task_id is None:
        task_id = _id(getattr(request, "id", None))  # v1.0 GetTask, CancelTask, SubscribeToTask
        if task_id is None or op is _OP.CREATE_PUSH_CONFIG:  # ``id`` there is the config's
            task_id = _resource_id(getattr(request, "name", None)) or _resource_id(
                getattr(request, "parent", None)
            )
    context_id = _id(getattr(request, "context_id", None)) if op is _OP.LIST_TASKS else None
    return task_id, context_id


def _present(message: Any, field: str) -> Any:
    """A sub-message the message sets, or None (proto3 gives an empty one when unset)."""
    try:
        return getattr(message, field) if message.HasField(field) else None
    except (AttributeError, ValueError, TypeError):  # no such field, or not a message one
        return None


def push_target(op: Operation, request: object) -> PushTarget | None:
    """The webhook a request message registers: v1.0 ``TaskPushNotificationConfig`` (a
    create's request itself, a send's ``configuration.task_push_notification_config``), v0.3
    ``config.push_notification_config`` and ``configuration.push_notification``."""
    config: Any = None
    if op is _OP.SEND_MESSAGE or op is _OP.SEND_STREAMING_MESSAGE:
        configuration = _present(request, "configuration")
        if configuration is not None:
            config = _present(configuration, "task_push_notification_config") or _present(
                configuration, "push_notification"
            )
    elif op is _OP.CREATE_PUSH_CONFIG:
        config = request
        inner = _present(request, "config")  # v0.3
        if inner is not None:
            config = _present(inner, "push_notification_config")
    if config is None:
        return None
    return target(getattr(config, "url", None), getattr(config, "token", None))


_ENUMS: dict[int, dict[int, str]] = {}  # TaskState spellings per message type


def _state_name(status: Any) -> object:
    """The wire spelling of ``status.state``: its enum value's name (``TASK_STATE_WORKING``),
    or the number when the peer sent one its proto does not name."""
    number = status.state
    descriptor = status.DESCRIPTOR
    names = _ENUMS.get(id(descriptor))
    if names is None:
        enum = descriptor.fields_by_name["state"].enum_type
        names = _ENUMS[id(descriptor)] = {v.number: v.name for v in enum.values}
    return names.get(number, number)


def _report(
    task_id: object, context_id: object, status: Any, kind: str, version: str | None
) -> Report | None:
    tid = _id(task_id)
    if tid is None:
        return None
    if status is None:
        return Report(tid, _id(context_id), None, kind)
    reading = read_state(_state_name(status), version, _GRPC)
    stamp = status.timestamp.ToJsonString() if status.HasField("timestamp") else None
    return Report(tid, _id(context_id), reading, kind, stamp)


def _task(task: Any, kind: str, version: str | None) -> Report | None:
    return _report(task.id, task.context_id, task.status, kind, version)


def _facts(reports: Sequence[Report | None]) -> ResponseFacts:
    return ResponseFacts(tuple(r for r in reports if r is not None))


def response_facts(op: Operation, message: object, version: str | None) -> ResponseFacts:
    """What a unary reply or one stream message says about tasks. Never raises."""
    try:
        return _response_facts(op, message, version)
    except (AttributeError, KeyError, TypeError, ValueError):
        return ResponseFacts(recognized=False)


def _response_facts(op: Operation, message: Any, version: str | None) -> ResponseFacts:
    if op is _OP.GET_TASK or op is _OP.CANCEL_TASK:
        return _facts([_task(message, "task", version)])
    if op is _OP.LIST_TASKS:
        tasks = message.tasks
        return _facts([_task(t, "list-entry", version) for t in tasks[:_MAX_LIST_ENTRIES]])
    if op in (_OP.SEND_MESSAGE, _OP.SEND_STREAMING_MESSAGE, _OP.SUBSCRIBE_TO_TASK):
        which = message.WhichOneof("payload")
        if which == "task":
            return _facts([_task(message.task, "task", version)])
        if which == "status_update":
            event = message.status_update
            status = event.status
            return _facts([_report(event.task_id, event.context_id, status, _STATUS, version)])
        if which == "artifact_update":
            event = message.artifact_update
            return _facts([_report(event.task_id, event.context_id, None, _ARTIFACT, version)])
        if which in ("message", "msg"):
            return ResponseFacts(message_only=True)
        return ResponseFacts(recognized=False)
    return ResponseFacts(recognized=op in (_OP.CREATE_PUSH_CONFIG, _OP.GET_PUSH_CONFIG))


def status_error(
    request: A2ARequest,
    code: str,
    trailing_metadata: Iterable[tuple[str, Any]] | None,
    details: object = None,
) -> A2AError:
    """The A2A error a non-OK status states about ``request``: the ``google.rpc.ErrorInfo``
    reason in its ``grpc-status-details-bin`` trailer (a ``google.rpc.Status``: v1.0), else,
    for v0.3's ``NOT_FOUND`` whose details name ``TaskNotFoundError`` (a2a-sdk's v0.3 handler
    spells its errors so), ``TASK_NOT_FOUND``, else the status code's name (``UNAVAILABLE``);
    the status details (its message) are read as over HTTP (``judged_error``). The trailer is
    read by hand (three nested messages, a few fields): no generated type to import for it."""
    try:
        reason = _error_info_reason(trailing_metadata)
    except (ValueError, TypeError):
        reason = None
    v03_not_found = isinstance(details, str) and details.startswith(_V03_NOT_FOUND)
    if reason is None and code == "NOT_FOUND" and v03_not_found:
        reason = TASK_NOT_FOUND
    return judged_error(request, None, reason or code, reason == TASK_NOT_FOUND, details)


def _error_info_reason(trailing_metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    for key, value in trailing_metadata or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        for n, (field, detail) in enumerate(_fields(value)):  # Status.details: field 3, Any
            if n > _MAX_DETAILS:
                return None
            if field != 3 or not isinstance(detail, bytes):
                continue
            any_fields = dict(_fields(detail))  # Any: type_url 1, value 2
            type_url = any_fields.get(1)
            if isinstance(type_url, bytes) and type_url.endswith(b"/google.rpc.ErrorInfo"):
                info = any_fields.get(2)
                reason = dict(_fields(info)).get(1) if isinstance(info, bytes) else None
                if isinstance(reason, bytes) and reason:  # ErrorInfo.reason: field 1
                    return reason[:64].decode("utf-8", "replace")
    return None


def _fields(data: bytes) -> Iterable[tuple[int, int | bytes]]:
    """(field number, value) of protobuf wire bytes: varints and length-delimited only (the
    types read here have no other); anything else ends the read."""
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield field, value
        elif wire == 2:
            length, i = _varint(data, i)
            if i + length > n:
                raise ValueError("truncated field")
            yield field, data[i : i + length]
            i += length
        else:
            return


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
