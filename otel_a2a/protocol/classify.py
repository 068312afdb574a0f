"""Recognise an outgoing HTTP request as an A2A operation (v1.0 and v0.3, every binding).

Recognition is by shape, because A2A endpoints live under arbitrary base paths:

- JSON-RPC: a ``POST`` whose body is a JSON object with ``"jsonrpc"`` and a known ``method``
  (v1.0 PascalCase, v0.3, and the v0.1/v0.2 names still seen on the wire).
- HTTP+JSON: a known path suffix (``/message:send``, ``/tasks/{id}``, ...) after any base path
  and optional tenant segment; ``/v1/`` before the suffix marks v0.3.
- gRPC: ``/lf.a2a.v1.A2AService/*`` (v1.0) and ``/a2a.v1.A2AService/*`` (v0.3).
- Card: ``GET .../.well-known/agent-card.json`` (and the legacy ``agent.json``).

Trade-off: REST recognition trusts the path. A non-A2A REST API that happens to serve
``GET /api/tasks/123`` is classified as ``GetTask``; only a request that contradicts A2A
(a non-JSON request content type on a POST, a non-object body) is rejected. Such a false
positive costs one extra span whose body then fails extraction (``recognized=False``); it can
never produce a state observation, because no A2A task shape will be found in the body.

Version: the ``A2A-Version`` header, else an ``A2A-Version`` query parameter (spec §3.6.1),
Major.Minor with the patch dropped; absent or empty means
``0.3`` as the spec mandates, whatever the method spelling (a v1.0 PascalCase call without the
header *is* a v0.3-negotiated call, and both SDKs treat it so). gRPC without the metadata takes
the version from the service name. Well-known card fetches carry ``version=None`` and
``Binding.HTTP_JSON`` (a plain HTTP GET of JSON; spans record neither: not negotiated).

Cost: non-A2A traffic is rejected on the method and a substring test of the path; a POST body
is only parsed when it starts with ``{`` and contains ``"jsonrpc"``. Bodies over 1 MiB are
parsed from a bounded 64 KiB prefix only.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import unquote_plus

from otel_a2a.protocol._util import MAX_FULL_PARSE, get_dict, get_str, header, parse_request
from otel_a2a.protocol.model import A2ARequest, Binding, Operation, PushTarget
from otel_a2a.protocol.push import push_target

Op = Operation

# v1.0 method names are the gRPC ones, which are the operation names (``a2a.method.name``)
_V1_METHODS: dict[str, Operation] = {op.value: op for op in Op if op is not Op.GET_AGENT_CARD}

JSONRPC_METHODS: dict[str, Operation] = {
    **_V1_METHODS,
    # v0.2 / v0.3
    "message/send": Op.SEND_MESSAGE,
    "message/stream": Op.SEND_STREAMING_MESSAGE,
    "tasks/get": Op.GET_TASK,
    "tasks/cancel": Op.CANCEL_TASK,
    "tasks/resubscribe": Op.SUBSCRIBE_TO_TASK,
    "tasks/pushNotificationConfig/set": Op.CREATE_PUSH_CONFIG,
    "tasks/pushNotificationConfig/get": Op.GET_PUSH_CONFIG,
    "tasks/pushNotificationConfig/list": Op.LIST_PUSH_CONFIGS,
    "tasks/pushNotificationConfig/delete": Op.DELETE_PUSH_CONFIG,
    "agent/getAuthenticatedExtendedCard": Op.GET_EXTENDED_AGENT_CARD,
    "agent/authenticatedExtendedCard": Op.GET_EXTENDED_AGENT_CARD,
    # v0.1
    "tasks/send": Op.SEND_MESSAGE,
    "tasks/sendSubscribe": Op.SEND_STREAMING_MESSAGE,
    "tasks/pushNotification/set": Op.CREATE_PUSH_CONFIG,
    "tasks/pushNotification/get": Op.GET_PUSH_CONFIG,
}

# Methods whose task id is ``params.id`` (everything else: ``params.taskId``).
_PARAMS_ID_METHODS = frozenset(
    {
        "GetTask",
        "CancelTask",
        "SubscribeToTask",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "tasks/send",
        "tasks/sendSubscribe",
        "tasks/pushNotification/set",
        "tasks/pushNotification/get",
    }
)

GRPC_METHODS: dict[str, Operation] = _V1_METHODS
GRPC_METHODS_V03: dict[str, Operation] = {
    "SendMessage": Op.SEND_MESSAGE,
    "SendStreamingMessage": Op.SEND_STREAMING_MESSAGE,
    "GetTask": Op.GET_TASK,
    "ListTask": Op.LIST_TASKS,
    "CancelTask": Op.CANCEL_TASK,
    "TaskSubscription": Op.SUBSCRIBE_TO_TASK,
    "CreateTaskPushNotificationConfig": Op.CREATE_PUSH_CONFIG,
    "GetTaskPushNotificationConfig": Op.GET_PUSH_CONFIG,
    "ListTaskPushNotificationConfig": Op.LIST_PUSH_CONFIGS,
    "DeleteTaskPushNotificationConfig": Op.DELETE_PUSH_CONFIG,
    "GetAgentCard": Op.GET_EXTENDED_AGENT_CARD,
}
_GRPC_V1 = "/lf.a2a.v1.A2AService/"
_GRPC_V03 = "/a2a.v1.A2AService/"

# well-known card paths (the second is v0.2's), after the agent's base path
CARD_SUFFIXES = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_LEGACY_EXTENDED_CARD = "/agent/authenticatedExtendedCard"  # a2a-sdk 0.3.x, GET
_PATH_HINTS = re.compile("tasks|message:|xtendedAgentCard|ExtendedCard|/card|well-known|A2AService")
_PUSH = "pushNotificationConfigs"
_OBJECT_START = re.compile(rb"[ \t\r\n]*\{")
_BLANK = re.compile(rb"[ \t\r\n]*\Z")
# the ``A2A-Version`` query parameter (its name percent-encoded or not); at most 64 characters
_QUERY_VERSION = re.compile(r"(?:^|&)a2a(?:-|%2d)version=([^&]{0,64})", re.IGNORECASE)


# Enum member access is slow on Python 3.11 (~0.3 µs); the hot paths use these.
_B_GRPC = Binding.GRPC
_B_HTTP_JSON = Binding.HTTP_JSON
_B_JSONRPC = Binding.JSONRPC
_JSONRPC_KEY = b'"jsonrpc"'
_SNIFF = 4096
_CANCEL_TASK = Op.CANCEL_TASK
_CREATE_PUSH_CONFIG = Op.CREATE_PUSH_CONFIG
_DELETE_PUSH_CONFIG = Op.DELETE_PUSH_CONFIG
_GET_AGENT_CARD = Op.GET_AGENT_CARD
_GET_EXTENDED_AGENT_CARD = Op.GET_EXTENDED_AGENT_CARD
_GET_PUSH_CONFIG = Op.GET_PUSH_CONFIG
_GET_TASK = Op.GET_TASK
_LIST_PUSH_CONFIGS = Op.LIST_PUSH_CONFIGS
_LIST_TASKS = Op.LIST_TASKS
_SEND_MESSAGE = Op.SEND_MESSAGE
_SEND_STREAMING_MESSAGE = Op.SEND_STREAMING_MESSAGE
_SUBSCRIBE_TO_TASK = Op.SUBSCRIBE_TO_TASK
_SEND_OPS = frozenset({_SEND_MESSAGE, _SEND_STREAMING_MESSAGE})
_PUSH_OPS = frozenset({_SEND_MESSAGE, _SEND_STREAMING_MESSAGE, _CREATE_PUSH_CONFIG})
_new = tuple.__new__


def parse_version(value: str | None) -> str:
    """``A2A-Version`` as ``Major.Minor`` (patch dropped); absent or empty means ``0.3``."""
    if value is None:
        return "0.3"
    # only 32 characters are ever kept; bounding the value first bounds the cache key too
    return _parse_version(value.strip()[:64])


@lru_cache(maxsize=256)
def _parse_version(value: str) -> str:
    if not value:
        return "0.3"
    parts = value.split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"{int(parts[0])}.{int(parts[1])}" if len(value) < 32 else value[:32]
    if len(parts) == 1 and parts[0].isdigit() and len(value) < 32:
        return f"{int(parts[0])}.0"
    return value[:32]  # unparseable: recorded as sent, bounded


def classify_request(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None,
    query: str | bytes | None = None,
) -> A2ARequest | None:
    """Recognise an HTTP request as an A2A operation, or return None. Never raises.

    ``query`` is the URL's query string (without ``?``); when it is not given, a ``?`` in
    ``path`` starts it. It is only read, for an ``A2A-Version`` parameter, once the request
    is recognised as A2A: other traffic never pays for it.
    """
    try:
        return _classify(method.upper(), path, headers, body, query)
    except Exception:  # wire layer must never break the host application
        return None


def _classify(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None,
    query: str | bytes | None,
) -> A2ARequest | None:
    if method not in ("GET", "POST", "DELETE"):
        return None
    if query is None:
        cut = path.find("?")
        if cut >= 0:
            query, path = path[cut + 1 :], path[:cut]
    if _PATH_HINTS.search(path):
        found = _classify_path(method, path, headers, body, query)
        if found is not None:
            return found
    if method == "POST" and body:
        return _classify_jsonrpc(path, headers, body, query)
    return None


# The request headers a server may serve a card per caller by (per tenant, per user), and
# the key of their digest: random per process, so the digest names no credential outside it.
CALLER_HEADERS = ("authorization", "cookie", "x-api-key")
_CALLER_KEY = os.urandom(16)


def card_variant(headers: Mapping[str, str], asked: str | None) -> str | None:
    """Which card a well-known card fetch asked for: the ``A2A-Version`` asked for, then
    ``#`` and a digest of the caller's credentials when it sent any."""
    version = parse_version(asked) if asked and asked.strip() else None
    sent = [header(headers, name) for name in CALLER_HEADERS]
    if not any(sent):
        return version
    digest = hashlib.blake2b(key=_CALLER_KEY, digest_size=8)
    for value in sent:
        digest.update((value or "").encode("utf-8", "replace") + b"\0")
    return f"{version or ''}#{digest.hexdigest()}"


def _version(headers: Mapping[str, str], query: str | bytes | None) -> str | None:
    """The ``A2A-Version`` header, else (spec §3.6.1: "Clients MAY provide the
    ``A2A-Version`` as a request parameter instead of a header") the query parameter."""
    value = header(headers, "a2a-version")
    if value is not None or not query:
        return value
    if isinstance(query, bytes):
        query = query.decode("ascii", "replace")
    found = _QUERY_VERSION.search(query)
    return unquote_plus(found.group(1)) if found else None


def _classify_path(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None,
    query: str | bytes | None,
) -> A2ARequest | None:
    if method == "GET":
        for suffix in CARD_SUFFIXES:
            if path.endswith(suffix):
                return A2ARequest(
                    _GET_AGENT_CARD,
                    _B_HTTP_JSON,
                    None,
                    base_url_path=path[: -len(suffix)],
                    card_variant=card_variant(headers, _version(headers, query)),
                )
    if "A2AService/" in path:
        return _classify_grpc(method, path, headers)
    segs = path.split("/")
    if len(segs) > 1 and segs[-1] == "":
        segs.pop()  # one trailing slash
    if len(segs) < 2:
        return None
    last = segs[-1]
    op: Operation | None = None
    task_id: str | None = None
    n_suffix = 1
    if last == "message:send" or last == "message:stream":
        if method != "POST":
            return None
        op = _SEND_MESSAGE if last == "message:send" else _SEND_STREAMING_MESSAGE
    elif last == "extendedAgentCard" or (last == "card" and segs[-2] == "v1"):
        op = _GET_EXTENDED_AGENT_CARD if method == "GET" else None
    elif last == "tasks":
        op = _LIST_TASKS if method == "GET" else None
    elif segs[-2] == "tasks" and last:
        n_suffix = 2
        op, task_id = _task_resource(method, last)
    elif last == _PUSH and len(segs) >= 4 and segs[-3] == "tasks" and segs[-2]:
        n_suffix, task_id = 3, segs[-2]
        op = {"POST": _CREATE_PUSH_CONFIG, "GET": _LIST_PUSH_CONFIGS}.get(method)
    elif len(segs) >= 5 and segs[-2] == _PUSH and segs[-4] == "tasks" and segs[-3] and last:
        n_suffix, task_id = 4, segs[-3]
        op = {"GET": _GET_PUSH_CONFIG, "DELETE": _DELETE_PUSH_CONFIG}.get(method)
    elif method == "GET" and path.endswith(_LEGACY_EXTENDED_CARD):
        n_suffix = 2
        op = _GET_EXTENDED_AGENT_CARD
    if op is None:
        return None
    if method == "POST" and not _json_request(headers, body):
        return None
    base = segs[:-n_suffix]
    raw_version = _version(headers, query)
    version = parse_version(raw_version)
    if base and base[-1] == "v1" and (raw_version is None or version.startswith("0.")):
        base.pop()  # the v0.3 ``/v1`` prefix is not part of the interface URL
    elif op is _GET_EXTENDED_AGENT_CARD and last == "card":
        return None  # ``/v1/card`` under a v1.x header is not the v0.3 card route
    context_id = message_id = tenant = None
    refs: tuple[str, ...] = ()
    push: PushTarget | None = None
    if op in _PUSH_OPS and body:
        doc = parse_request(body)
        if op is not _CREATE_PUSH_CONFIG:
            # a2a-sdk's v0.3 REST client writes proto field names: the message is ``request``
            message = get_dict(doc, "message") or get_dict(doc, "request")
            task_id = _either(message, "taskId", "task_id")
            context_id = _either(message, "contextId", "context_id")
            message_id, refs = message_fields(message)
            tenant = get_str(doc, "tenant")
        push = push_target(op, doc)
    return _new(
        A2ARequest,
        (
            op,
            _B_HTTP_JSON,
            version,
            None,
            task_id,
            context_id,
            "/".join(base),
            None,
            message_id,
            refs,
            tenant,
            push,
        ),
    )


MAX_REFERENCE_TASK_IDS = 16  # of one message, on its span: bounded whatever a caller sends


def message_fields(message: object) -> tuple[str | None, tuple[str, ...]]:
    """(``messageId``, ``referenceTaskIds``) of a request's message, either spelling."""
    refs = message.get("referenceTaskIds") if isinstance(message, dict) else None
    if refs is None and isinstance(message, dict):
        refs = message.get("reference_task_ids")
    ids = (
        tuple(r for r in refs[:MAX_REFERENCE_TASK_IDS] if isinstance(r, str) and r)
        if isinstance(refs, list)
        else ()
    )
    return _either(message, "messageId", "message_id"), ids


def _either(obj: object, json_name: str, proto_name: str) -> str | None:
    """A ProtoJSON field: parsers must accept the original proto name as well."""
    return get_str(obj, json_name) or get_str(obj, proto_name)


def _task_resource(method: str, last: str) -> tuple[Operation | None, str | None]:
    """``tasks/{id}``, ``tasks/{id}:cancel``, ``tasks/{id}:subscribe``."""
    head, sep, verb = last.rpartition(":")
    if sep and head:
        if verb == "cancel":
            return (_CANCEL_TASK if method == "POST" else None), head
        if verb == "subscribe":
            return (_SUBSCRIBE_TO_TASK if method in ("GET", "POST") else None), head
    # A task id may itself contain ':' (``urn:uuid:...``): only GET reads it as GetTask.
    return (_GET_TASK if method == "GET" else None), last


def _json_request(headers: Mapping[str, str], body: bytes | None) -> bool:
    """False when the request contradicts an A2A JSON call (non-JSON type or body)."""
    ctype = header(headers, "content-type")
    if ctype and "json" not in ctype.lower():
        return False
    return not body or _OBJECT_START.match(body) is not None or _BLANK.match(body) is not None


def _classify_grpc(method: str, path: str, headers: Mapping[str, str]) -> A2ARequest | None:
    if method != "POST":
        return None
    if path.startswith(_GRPC_V1):
        table, name, default = GRPC_METHODS, path[len(_GRPC_V1) :], "1.0"
    elif path.startswith(_GRPC_V03):
        table, name, default = GRPC_METHODS_V03, path[len(_GRPC_V03) :], "0.3"
    else:
        return None
    op = table.get(name)
    if op is None:
        return None
    raw_version = header(headers, "a2a-version")  # gRPC metadata: no query string
    version = parse_version(raw_version) if raw_version and raw_version.strip() else default
    return A2ARequest(op, _B_GRPC, version)


def _mentions_jsonrpc(body: bytes) -> bool:
    """Whether the ``"jsonrpc"`` key is near either end of the body: a top-level key is, in
    every serialisation (@a2a-js/sdk writes it first, a2a-sdk last, after ``params``).
    Bounded, so a large non-A2A POST (an LLM prompt) costs two 4 KB searches, not a scan."""
    if body.find(_JSONRPC_KEY, 0, _SNIFF) >= 0:
        return True
    return len(body) > _SNIFF and body.find(_JSONRPC_KEY, len(body) - _SNIFF) >= 0


def _classify_jsonrpc(
    path: str, headers: Mapping[str, str], body: bytes, query: str | bytes | None
) -> A2ARequest | None:
    if not _mentions_jsonrpc(body):  # most non-A2A POSTs stop here
        return None
    doc = parse_request(body)
    # a large body is parsed from its prefix, which misses a "jsonrpc" written last: the
    # search above found it near an end, which is as good
    if not isinstance(doc, dict) or ("jsonrpc" not in doc and len(body) <= MAX_FULL_PARSE):
        return None
    rpc_method = doc.get("method")
    if not isinstance(rpc_method, str):
        return None
    op = JSONRPC_METHODS.get(rpc_method)
    if op is None:
        return None
    params = doc.get("params")
    task_id = context_id = message_id = tenant = None
    refs: tuple[str, ...] = ()
    push: PushTarget | None = None
    if isinstance(params, dict):
        sending = op is _SEND_MESSAGE or op is _SEND_STREAMING_MESSAGE
        message = get_dict(params, "message") if sending else None
        if rpc_method in _PARAMS_ID_METHODS:  # v0.1 ``tasks/send`` too: params.id
            task_id = get_str(params, "id")
        else:
            task_id = _either(message if sending else params, "taskId", "task_id")
        if sending:
            context_id = _either(message, "contextId", "context_id")
            message_id, refs = message_fields(message)
        tenant = get_str(params, "tenant")
        if op in _PUSH_OPS:
            push = push_target(op, params)
    # built as a tuple: the named tuple's generated ``__new__`` costs a µs on this hot path
    return _new(
        A2ARequest,
        (
            op,
            _B_JSONRPC,
            parse_version(_version(headers, query)),
            rpc_method,
            task_id,
            context_id,
            path.rstrip("/"),
            None,
            message_id,
            refs,
            tenant,
            push,
        ),
    )
