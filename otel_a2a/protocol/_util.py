"""Small helpers shared by the wire modules: bounded JSON parsing and header lookup."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import CoreSchema, SchemaValidator, from_json
from pydantic_core import core_schema as cs

MAX_FULL_PARSE = 1 << 20  # bodies above this are only parsed from a bounded prefix
PREFIX_PARSE = 64 * 1024
MAX_ID_LEN = 1024  # longer "ids" are not ids; keeps the ledger's memory bounded


_BOM = b"\xef\xbb\xbf"


def strip_bom(data: bytes | bytearray) -> bytes | bytearray:
    """Without a leading UTF-8 byte order mark, which httpx's ``json()`` skips too."""
    return data[3:] if data[:3] == _BOM else data


def parse_json(data: bytes | bytearray | str) -> Any:
    """Parse JSON, or return None when it is not JSON.

    ``pydantic_core.from_json`` is about twice as fast as ``json.loads`` and has a nesting
    limit, so hostile nesting raises ``ValueError`` instead of exhausting the stack.
    """
    if not isinstance(data, str):
        data = strip_bom(data)
    try:
        return from_json(data)
    except (ValueError, RecursionError, TypeError, MemoryError):
        return None


def parse_json_prefix(data: bytes) -> Any:
    """Parse at most ``PREFIX_PARSE`` leading bytes of a large body, tolerating truncation.

    Incomplete trailing strings are dropped, so a cut id is never returned.
    """
    try:
        return from_json(strip_bom(data[:PREFIX_PARSE]), allow_partial=True)
    except (ValueError, RecursionError, TypeError, MemoryError):
        return None


_TITLE = {"a2a-version": "A2A-Version", "etag": "ETag", "content-type": "Content-Type"}


def header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup on a case-insensitive mapping or on a plain dict.

    ``name`` must be lowercase. ``httpx.Headers`` answers the first ``get``; a plain dict is
    tried with the lowercase and the Title-Case spelling, then scanned (headers are few).
    """
    value = headers.get(name)
    if value is None:
        value = headers.get(_TITLE.get(name) or name.title())
        if value is None and isinstance(headers, dict):
            for key, val in headers.items():
                if isinstance(key, str) and key.lower() == name:
                    value = val
                    break
    return value if isinstance(value, str) else None


def get_str(obj: Any, key: str) -> str | None:
    """``obj[key]`` when ``obj`` is a dict and the value a non-empty, bounded string."""
    if isinstance(obj, dict):
        value = obj.get(key)
        if isinstance(value, str) and 0 < len(value) <= MAX_ID_LEN:
            return value
    return None


def get_dict(obj: Any, key: str) -> dict[str, Any] | None:
    if isinstance(obj, dict):
        value = obj.get(key)
        if isinstance(value, dict):
            return value
    return None


def _fields(**fields: CoreSchema) -> CoreSchema:
    return cs.typed_dict_schema(
        {k: cs.typed_dict_field(v, required=False) for k, v in fields.items()},
        extra_behavior="ignore",
        total=False,
    )


_ANY = cs.any_schema()
_STATUS = _fields(state=_ANY, timestamp=_ANY)
# task_id / context_id: a2a-go's v0.3 HTTP+JSON writes the v0.3 objects in snake_case
_TASKISH = _fields(
    id=_ANY,
    contextId=_ANY,
    taskId=_ANY,
    context_id=_ANY,
    task_id=_ANY,
    kind=_ANY,
    status=_STATUS,
    generation=_ANY,  # A2A 1.1
)
_PAYLOAD = {
    "id": _ANY,
    "contextId": _ANY,
    "taskId": _ANY,
    "context_id": _ANY,
    "task_id": _ANY,
    "kind": _ANY,
    "status": _STATUS,
    "generation": _ANY,
    "task": _TASKISH,
    "statusUpdate": _TASKISH,
    "artifactUpdate": _TASKISH,
    "message": _ANY,
    "tasks": cs.list_schema(_TASKISH),
}
# Only the keys the extractors read are turned into Python objects; history, artifacts and
# parts are skipped inside the Rust parser. Any other shape fails validation and falls back
# to a full parse, so the pruned and full paths feed the same extractor.
_RESPONSE = SchemaValidator(
    _fields(jsonrpc=_ANY, result=_fields(**_PAYLOAD), error=_ANY, code=_ANY, **_PAYLOAD)
)
_MESSAGE_IDS = _fields(
    taskId=_ANY,
    contextId=_ANY,
    task_id=_ANY,
    context_id=_ANY,
    messageId=_ANY,
    message_id=_ANY,
    referenceTaskIds=_ANY,
    reference_task_ids=_ANY,
)
# a push config, where ``protocol.push`` looks for one (a create's, a send's configuration's)
_PUSH_CONFIG = _fields(url=_ANY, token=_ANY)
# where a request holds a push config: ``taskPushNotificationConfig`` (SendMessage) or the
# config itself (Create), v0.3 ``pushNotificationConfig`` (JSON-RPC) / ``pushNotification``
# (proto JSON); proto field names are accepted as ProtoJSON demands
PUSH_CONFIG_KEYS = (
    "taskPushNotificationConfig",
    "task_push_notification_config",
    "pushNotificationConfig",
    "push_notification_config",
    "pushNotification",
    "push_notification",
)
_PUSH_KEYS = dict.fromkeys(PUSH_CONFIG_KEYS, _PUSH_CONFIG)
_PUSH_HOLDER = {
    "url": _ANY,
    "token": _ANY,
    "config": _fields(url=_ANY, token=_ANY, **_PUSH_KEYS),
    "configuration": _fields(**_PUSH_KEYS),
    **_PUSH_KEYS,
}
_REQUEST = SchemaValidator(
    _fields(
        jsonrpc=_ANY,
        method=_ANY,
        message=_MESSAGE_IDS,
        request=_MESSAGE_IDS,
        tenant=_ANY,
        params=_fields(
            id=_ANY, taskId=_ANY, task_id=_ANY, tenant=_ANY, message=_MESSAGE_IDS, **_PUSH_HOLDER
        ),
        **_PUSH_HOLDER,
    )
)


def parse_response(data: bytes) -> Any:
    """Parse a response body or stream payload, keeping only what extraction reads."""
    unmarked = data[3:] if data[:3] == _BOM else data  # strip_bom, inlined: every response
    try:
        return _RESPONSE.validate_json(unmarked)
    except ValueError:
        return parse_json(unmarked)


def parse_request(data: bytes) -> Any:
    """Parse a request body, keeping only the method, the tenant, the task, context and
    message ids and a push config's URL and token."""
    if len(data) > MAX_FULL_PARSE:
        return parse_json_prefix(data)
    unmarked = data[3:] if data[:3] == _BOM else data  # strip_bom, inlined: every request
    try:
        return _REQUEST.validate_json(unmarked)
    except ValueError:
        return parse_json(unmarked)
