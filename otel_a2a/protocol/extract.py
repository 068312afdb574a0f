"""Extract task facts (ids, states, errors) from A2A response bodies and stream payloads.

Shapes understood, whatever the binding: v1.0 ``{task|message}`` (SendMessage), a bare Task
(GetTask, CancelTask), v1.0 StreamResponse (``task|message|statusUpdate|artifactUpdate``),
v0.3 results tagged with ``kind`` (camelCase, or a2a-go's snake_case v0.3 HTTP+JSON),
``{tasks: [...]}`` pages (ListTasks), JSON-RPC errors and
REST ``google.rpc.Status`` errors (with what an error says of the state of the task the
request named: a report of kind ``"error-reply"``). A JSON object with ``id`` and a
``status`` object counts as a Task; this is the A2A Task shape, so a non-A2A REST API
classified as ``GetTask`` (see ``classify``) can yield an observation only if its body has
that very shape.

The whole body is parsed (the instrumentation bounds held bodies by ``OTEL_A2A_MAX_BODY_BYTES``):
a prefix parse could cut a Task before its ``status`` and report a missing state that the
agent never sent.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic_core import from_json

from otel_a2a.protocol._util import MAX_ID_LEN, parse_response, strip_bom
from otel_a2a.protocol.model import (
    A2AError,
    A2ARequest,
    Binding,
    Operation,
    ResponseFacts,
    TaskReport,
)
from otel_a2a.protocol.states import (
    NOT_CANCELABLE,
    OMITTED_UNSPECIFIED,
    StateReading,
    TaskState,
    normalize_task_state,
    omits_defaults,
    read_state,
)

UNRECOGNIZED = ResponseFacts(recognized=False)
_JSONRPC = Binding.JSONRPC
_HTTP_JSON = Binding.HTTP_JSON
# An oversized body or frame is searched for its state in growing prefixes, so that a 50 MB
# history costs a small parse when the status comes first (it does in both official SDKs).
PREFIX_STEPS = (64 * 1024, 1024 * 1024)
_EMPTY = ResponseFacts()
_MESSAGE_ONLY = ResponseFacts(message_only=True)

ERROR_REASONS: dict[int, str] = {
    -32700: "PARSE_ERROR",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32603: "INTERNAL_ERROR",
    -32001: "TASK_NOT_FOUND",
    -32002: "TASK_NOT_CANCELABLE",
    -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED",
    -32006: "INVALID_AGENT_RESPONSE",
    -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    -32008: "EXTENSION_SUPPORT_REQUIRED",
    -32009: "VERSION_NOT_SUPPORTED",
}
_TASK_NOT_FOUND = "TASK_NOT_FOUND"
# a2a-java before 1.0.0.Final (io.github.a2asdk 0.3.x and the 1.0 pre-releases) answers an
# HTTP+JSON error as ``{"error": "<the A2AError's Java class>", "message": ...}`` with an HTTP
# status of its own (RestHandler's HTTPRestErrorResponse); the class names the reason. Only the
# SDK's own spec package counts: any other string is no A2A error.
_JAVA_ERROR = re.compile(r"(?:io\.a2a|org\.a2aproject\.sdk)\.spec\.([A-Za-z]{1,64})")
_JAVA_REASONS: dict[str, str] = {
    "JSONParseError": "PARSE_ERROR",
    "InvalidRequestError": "INVALID_REQUEST",
    "MethodNotFoundError": "METHOD_NOT_FOUND",
    "InvalidParamsError": "INVALID_PARAMS",
    "InternalError": "INTERNAL_ERROR",
    "TaskNotFoundError": _TASK_NOT_FOUND,
    "TaskNotCancelableError": "TASK_NOT_CANCELABLE",
    "PushNotificationNotSupportedError": "PUSH_NOTIFICATION_NOT_SUPPORTED",
    "UnsupportedOperationError": "UNSUPPORTED_OPERATION",
    "ContentTypeNotSupportedError": "CONTENT_TYPE_NOT_SUPPORTED",
    "InvalidAgentResponseError": "INVALID_AGENT_RESPONSE",
    "ExtendedAgentCardNotConfiguredError": "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    "AuthenticatedExtendedCardNotConfiguredError": "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    "ExtensionSupportRequiredError": "EXTENSION_SUPPORT_REQUIRED",
    "VersionNotSupportedError": "VERSION_NOT_SUPPORTED",
}
# Operations on which a bare 404 NOT_FOUND can only mean the task (push-config operations can
# also miss the config, so they need the explicit reason).
_TASK_ADDRESSED = frozenset(
    {Operation.GET_TASK, Operation.CANCEL_TASK, Operation.SUBSCRIBE_TO_TASK}
)
_SEND = frozenset({Operation.SEND_MESSAGE, Operation.SEND_STREAMING_MESSAGE})
_MAX_REASON = 64
_NOT_CANCELABLE = "TASK_NOT_CANCELABLE"
# The errors a server answers about a task's state: TaskNotCancelable, UnsupportedOperation
# for a message, a subscription or a cancel to a task already in a terminal state, and
# InvalidParams, a2a-go's answer to a message to a terminal task.
_STATE_REASONS = frozenset({_NOT_CANCELABLE, "UNSUPPORTED_OPERATION", "INVALID_PARAMS"})
# How servers word that state in the message: a2a-sdk 1.x "Task <id> is in terminal state:
# TASK_STATE_FAILED", a2a-sdk 0.3 "... terminal state: failed", @a2a-js/sdk "Task <id> is in a
# terminal state (4) and cannot be modified." (a v1.0 enum number), a2a-sdk's legacy handler
# "Task cannot be canceled - current state: TASK_STATE_WORKING", a2a-go 'task in a terminal
# state "TASK_STATE_COMPLETED"' and "task in non-cancelable state TASK_STATE_COMPLETED" (a
# terminal one). Only the message's head is read.
_STATED = re.compile(
    r"\b(terminal|current|non-cancelable) state\W{0,3}([A-Za-z][A-Za-z_-]{0,40}|\d{1,2})\b", re.I
)
# a2a-go answers SubscribeToTask on a task it has but no longer runs (terminal, or waiting for
# input) with TaskNotFound "task not found: no active execution": no evidence of a lost task.
_NO_ACTIVE_EXECUTION = "no active execution"
_MAX_MESSAGE = 512
_UNKNOWN = TaskState.UNKNOWN


def extract_response(request: A2ARequest, status: int, body: bytes) -> ResponseFacts:
    """What a complete, non-streamed response body says about tasks. Never raises."""
    try:
        return _extract(request, status, body)
    except Exception:  # the wire layer must never break the host application
        return UNRECOGNIZED


def extract_prefix(request: A2ARequest, status: int, prefix: bytes | bytearray) -> ResponseFacts:
    """Facts from the leading bytes of a body too large to hold whole. Never raises.

    The prefix is parsed tolerating truncation, which drops a cut-off string: only reports
    whose state value arrived are kept (a cut entry would look like a missing state, and
    nothing is ever guessed), including complete spellings otel-a2a does not know.
    """
    try:
        doc = from_json(strip_bom(prefix), allow_partial=True)
        facts = _facts(request, doc, status)
    except Exception:
        return UNRECOGNIZED
    complete = tuple(r for r in facts.reports if r.state is not None and r.state.raw)
    return facts._replace(reports=complete) if len(complete) != len(facts.reports) else facts


def extract_from_prefixes(
    request: A2ARequest, status: int, body: bytes | bytearray, limit: int | None = None
) -> ResponseFacts:
    """:func:`extract_prefix` on growing prefixes of ``body`` up to ``limit`` bytes (see
    ``PREFIX_STEPS``), stopping at the first that tells something (a Message reply carries no
    state at all: stop there). Each prefix is a copy of that many bytes, the whole body none."""
    facts = UNRECOGNIZED
    size = len(body)
    end = size if limit is None else min(size, limit)
    for step in (*(n for n in PREFIX_STEPS if n < end), end):
        facts = extract_prefix(request, status, body if step == size else body[:step])
        if facts.reports or facts.error is not None or facts.message_only:
            break
    return facts


def extract_stream_payload(request: A2ARequest, obj: object) -> ResponseFacts:
    """Facts of one parsed SSE ``data`` payload (JSON-RPC envelope or bare). Never raises."""
    try:
        return _facts(request, obj, 200)
    except Exception:
        return UNRECOGNIZED


def _extract(request: A2ARequest, status: int, body: bytes) -> ResponseFacts:
    doc = parse_response(body) if body else None
    if isinstance(doc, dict):
        facts = _facts(request, doc, status)
    elif isinstance(doc, list) and request.operation is Operation.LIST_TASKS:
        facts = _payload(request, {"tasks": doc})  # v0.3 HTTP+JSON spec: a bare ``[Task]``
    else:
        facts = UNRECOGNIZED
    if status >= 400 and facts.error is None:  # the status says it all (and is on the span)
        if status == 404 and _v03_rest_not_found(request, doc):
            return ResponseFacts(error=A2AError(None, _TASK_NOT_FOUND, True))
        return ResponseFacts(error=A2AError(None, None, False), recognized=False)
    return facts


def _names_a_task(request: A2ARequest) -> bool:
    """Whether a NOT_FOUND answer to ``request`` can only mean its task."""
    op = request.operation
    return op in _TASK_ADDRESSED or (op in _SEND and request.task_id is not None)


def _v03_rest_not_found(request: A2ARequest, doc: Any) -> bool:
    """a2a-sdk 0.3's HTTP+JSON server answers TaskNotFound with 404 and exactly
    ``{"message": "Task not found"}`` (``utils/error_handlers.py``). Only that: gateways and
    frameworks answer a missed route with a ``message`` too (Kong, API Gateway, Fastify,
    NestJS), and a task reported lost that was not is a critical page."""
    if not (
        request.binding is _HTTP_JSON
        and (request.version or "").startswith("0.")
        and _names_a_task(request)
        and isinstance(doc, dict)
        and len(doc) == 1
    ):
        return False
    message = doc.get("message")
    return isinstance(message, str) and message[:14].lower() == "task not found"


def _facts(request: A2ARequest, doc: Any, status: int) -> ResponseFacts:
    if not isinstance(doc, dict):
        return UNRECOGNIZED
    err = doc.get("error")
    if isinstance(err, dict):
        return ResponseFacts(error=_error(request, err, status))
    if isinstance(err, str) and status >= 400:
        java = _JAVA_ERROR.fullmatch(err[:128])
        if java is not None:
            reason = _JAVA_REASONS.get(java.group(1))
            return ResponseFacts(
                error=_error(request, {"message": doc.get("message")}, status, reason)
            )
    # a JSON-RPC call's reply is an envelope whatever its key order: a2a-sdk writes "result"
    # first, so "id" and "jsonrpc" are missing from the prefix of a large one
    if "result" in doc and ("jsonrpc" in doc or "id" in doc or request.binding is _JSONRPC):
        return _payload(request, doc["result"])
    code = doc.get("code")
    if (
        isinstance(code, int)
        and isinstance(doc.get("message"), str)
        and (status >= 400 or code in ERROR_REASONS)
    ):
        # a bare error object: @a2a-js/sdk v0.3 HTTP+JSON sends {"code": -32001, "message": ...}
        return ResponseFacts(error=_error(request, doc, status))
    return _payload(request, doc)


def _error(
    request: A2ARequest, err: dict[str, Any], status: int, reason: str | None = None
) -> A2AError:
    """A JSON-RPC error object or a ``google.rpc.Status`` (``{"error": {...}}``) error; or the
    message of one whose ``reason`` was read elsewhere (a2a-java's class-named errors)."""
    raw_code = err.get("code")
    code = raw_code if type(raw_code) is int and -(2**63) <= raw_code < 2**63 else None
    if reason is None:
        reason = _error_info_reason(err.get("data")) or _error_info_reason(err.get("details"))
    if reason is None and code is not None:
        reason = ERROR_REASONS.get(code)
    not_found = reason == _TASK_NOT_FOUND
    if (
        not not_found
        and err.get("status") == "NOT_FOUND"
        and (code == 404 or status == 404)
        and _names_a_task(request)
    ):
        not_found = True
        reason = _TASK_NOT_FOUND
    return judged_error(request, code, reason, not_found, err.get("message"))


def judged_error(
    request: A2ARequest, code: int | None, reason: str | None, not_found: bool, message: object
) -> A2AError:
    """The error whose ``reason`` was read off the wire (any binding), with what its
    ``message`` adds: a2a-go's "no active execution" is no lost task, and a state the message
    spells is a report of kind ``"error-reply"`` about the task the request named."""
    if (
        not_found
        and request.operation is Operation.SUBSCRIBE_TO_TASK
        and _NO_ACTIVE_EXECUTION in str(message)[:_MAX_MESSAGE]
    ):
        not_found = False
    report = None
    task_id = request.task_id
    if task_id and reason in _STATE_REASONS:
        reading = _stated_state(message)
        if reading is None and reason == _NOT_CANCELABLE:
            reading = NOT_CANCELABLE
        if reading is not None:
            report = TaskReport(task_id, request.context_id, reading, "error-reply")
    return A2AError(code, reason, not_found, report)


def _stated_state(message: object) -> StateReading | None:
    """The state an error message says the task is in (see ``_STATED``), or None. A "terminal"
    or "non-cancelable state" that names a non-terminal one is a contradiction, never a
    reading. Never judged for its spelling: a message is no wire state (so it reads as
    exact)."""
    if type(message) is not str:
        return None
    found = _STATED.search(message[:_MAX_MESSAGE])
    if found is None:
        return None
    phrase, token = found.groups()
    state = normalize_task_state(int(token) if token.isdigit() else token)
    if state is _UNKNOWN or (phrase.lower() != "current" and not state.is_terminal):
        return None
    return StateReading(token, state, True, True)


def _error_info_reason(details: Any) -> str | None:
    """``reason`` of the first ``google.rpc.ErrorInfo`` in a v1.0 details array."""
    if not isinstance(details, list):
        return None
    for item in details[:8]:
        if isinstance(item, dict):
            reason = item.get("reason")
            if isinstance(reason, str) and 0 < len(reason) <= _MAX_REASON:
                return reason
    return None


def _payload(request: A2ARequest, obj: Any) -> ResponseFacts:
    if not isinstance(obj, dict):
        return UNRECOGNIZED
    get = obj.get
    version = request.version
    binding = request.binding
    kind = get("kind")
    if kind is None:
        if "status" in obj and "id" in obj and "task" not in obj:  # a bare Task (no ``kind``)
            return _reports(_report(obj, "id", version, binding, "task"))
        inner = get("task")
        if isinstance(inner, dict):
            return _reports(_task(inner, version, binding, "task"))
        inner = get("statusUpdate")
        if isinstance(inner, dict):
            return _reports(_status_update(inner, version, binding))
        inner = get("artifactUpdate")
        if isinstance(inner, dict):
            return _reports(_artifact_update(inner))
        if isinstance(get("message"), dict):
            return _MESSAGE_ONLY
        tasks = get("tasks")
        if isinstance(tasks, list):
            found = (
                _task(t, version, binding, "list-entry")
                for t in tasks[:MAX_LIST_ENTRIES]
                if isinstance(t, dict)
            )
            return ResponseFacts(tuple(r for r in found if r is not None))
        if request.operation in _TASK_ADDRESSED or request.operation in _SEND:
            return UNRECOGNIZED  # these must answer with a task or a message
        return _EMPTY  # cards, push configs: understood, nothing about task state
    if kind == "task":
        return _reports(_task(obj, version, binding, "task"))
    if kind == "status-update":
        return _reports(_status_update(obj, version, binding))
    if kind == "artifact-update":
        return _reports(_artifact_update(obj))
    if kind == "message":
        return _MESSAGE_ONLY
    return UNRECOGNIZED


_MAX_TIMESTAMP = 64
# Entries of one ListTasks page that are observed: ten times the largest page A2A allows (100).
# Each costs a ledger update in the application's read path (on its event loop): a peer
# ignoring the page size with a 4 MiB page of 59,000 tasks held the loop for 0.7 s.
MAX_LIST_ENTRIES = 1000
_new = tuple.__new__


def _reports(report: TaskReport | None) -> ResponseFacts:
    # built as tuples: the named tuples' generated ``__new__`` costs a µs per call here
    return UNRECOGNIZED if report is None else _new(ResponseFacts, ((report,), None, False, True))


def _report(
    obj: dict[str, Any], id_key: str, version: str | None, binding: Binding | None, kind: str
) -> TaskReport | None:
    """One task's report; ``binding=None`` for frames without a state (artifact updates).

    a2a-go's v0.3 HTTP+JSON writes the v0.3 objects in snake_case (``task_id``,
    ``context_id``): read when the camelCase key is absent."""
    task_id = obj.get(id_key)
    if task_id is None and id_key == "taskId":
        task_id = obj.get("task_id")
    if type(task_id) is not str or not 0 < len(task_id) <= MAX_ID_LEN:
        return None
    state: StateReading | None = None
    stamp: str | None = None
    if binding is not None:
        status = obj.get("status")
        if type(status) is dict:
            raw = status.get("state")
            if (
                raw is None
                and "state" not in status
                and "kind" not in obj  # ProtoJSON objects carry no ``kind``
                and omits_defaults(version, binding)
            ):
                state = OMITTED_UNSPECIFIED
            else:
                state = read_state(raw, version, binding)
            stamp = status.get("timestamp")
            if type(stamp) is not str or len(stamp) > _MAX_TIMESTAMP:
                stamp = None
        else:
            state = read_state(None, version, binding)
    context_id = obj.get("contextId")  # as _id does, inlined: every report passes here
    if context_id is None:
        context_id = obj.get("context_id")
    if type(context_id) is not str or not 0 < len(context_id) <= MAX_ID_LEN:
        context_id = None
    generation = obj.get("generation")
    if generation is not None:
        generation = _generation(generation)
    return _new(TaskReport, (task_id, context_id, state, kind, stamp, generation))


_MAX_GENERATION = 2**63 - 1  # an int64


def _generation(value: object) -> int | None:
    """A2A 1.1's ``generation``: an int64, which ProtoJSON writes as a string."""
    if type(value) is str and 0 < len(value) <= 19 and value.isascii() and value.isdigit():
        value = int(value)
    if type(value) is int and 0 <= value <= _MAX_GENERATION:
        return value
    return None


def _task(
    obj: dict[str, Any], version: str | None, binding: Binding, kind: str
) -> TaskReport | None:
    return _report(obj, "id", version, binding, kind)


def _status_update(obj: dict[str, Any], version: str | None, binding: Binding) -> TaskReport | None:
    return _report(obj, "taskId", version, binding, "status-update")


def _artifact_update(obj: dict[str, Any]) -> TaskReport | None:
    return _report(obj, "taskId", None, None, "artifact-update")
