"""Push notifications on the wire: the webhook a request registers, and what a delivery says.

A caller registers a webhook for a task with ``CreateTaskPushNotificationConfig`` (v0.3
``tasks/pushNotificationConfig/set``), or for the task a message will create with the push
config in ``SendMessage``'s ``configuration``. The agent then POSTs each update of the task to
that URL: v1.0 a ``StreamResponse`` (``task``, ``statusUpdate``, ``artifactUpdate`` or
``message``), v0.3 the Task; always plain HTTP with the HTTP+JSON binding's JSON, whatever
binding registered it, with the config's token in ``X-A2A-Notification-Token``.

The token is a credential: only a keyed digest of it is kept (:func:`token_digest`, keyed per
process), compared in constant time, never recorded.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from otel_a2a.protocol._util import PUSH_CONFIG_KEYS, header, parse_json
from otel_a2a.protocol.extract import UNRECOGNIZED, extract_from_prefixes, extract_stream_payload
from otel_a2a.protocol.model import A2ARequest, Binding, Operation, PushTarget, ResponseFacts

TOKEN_HEADER = "x-a2a-notification-token"
_KEY = os.urandom(16)  # the digests name no token outside this process
_MAX_URL = 2048
_MAX_TOKEN = 4096
_MAX_DEPTH = 3
# where a push config sits in a request, every version and spelling: v1.0
# the keys of _util's, and the v0.3 REST ``config.pushNotificationConfig``
_CONFIG_KEYS = (*PUSH_CONFIG_KEYS, "config")
_STREAM_KEYS = frozenset({"task", "statusUpdate", "artifactUpdate", "message"})
_PUSH = Operation.SUBSCRIBE_TO_TASK  # a delivery reads as one frame of a subscription
_V1 = A2ARequest(_PUSH, Binding.HTTP_JSON, "1.0")
_V03 = A2ARequest(_PUSH, Binding.HTTP_JSON, "0.3")


def token_digest(token: str | bytes | None) -> bytes | None:
    """The keyed digest of a notification token; None for none (or an empty one)."""
    if not token:
        return None
    if isinstance(token, str):
        token = token.encode("utf-8", "replace")
    return hashlib.blake2b(token[:_MAX_TOKEN], key=_KEY, digest_size=16).digest()


def same_token(expected: bytes | None, delivered: bytes | None) -> bool:
    """Whether a delivery's token digest is the one registered (a config without a token
    accepts any delivery, as the spec makes the token optional)."""
    if expected is None:
        return True
    return delivered is not None and hmac.compare_digest(expected, delivered)


def webhook_path(path: str) -> str:
    """A path as both sides compare it: without a trailing ``/`` (the root stays ``/``)."""
    return path.rstrip("/") or "/"


def target(url: object, token: object) -> PushTarget | None:
    """The target of a config's ``url`` and ``token``, or None when the URL is none."""
    if type(url) is not str or not url or len(url) > _MAX_URL:
        return None
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    return PushTarget(webhook_path(path), token_digest(token if type(token) is str else None))


def push_target(op: Operation, params: object) -> PushTarget | None:
    """The webhook a JSON request (JSON-RPC ``params`` or an HTTP+JSON body) registers:
    a create's config, or the push config in a send's ``configuration``. Never raises."""
    if not isinstance(params, dict):
        return None
    if op is Operation.SEND_MESSAGE or op is Operation.SEND_STREAMING_MESSAGE:
        params = params.get("configuration")
        if not isinstance(params, dict):
            return None
    elif op is not Operation.CREATE_PUSH_CONFIG:
        return None
    config = _config(params, _MAX_DEPTH)
    return target(config.get("url"), config.get("token")) if config is not None else None


def _config(obj: dict[str, Any], depth: int) -> dict[str, Any] | None:
    if "url" in obj:
        return obj
    if depth == 0:
        return None
    for key in _CONFIG_KEYS:
        inner = obj.get(key)
        if isinstance(inner, dict):
            return _config(inner, depth - 1)
    return None


def delivery_facts(
    headers: Mapping[str, str], body: bytes, limit: int, truncated: bool = False
) -> ResponseFacts:
    """What a delivery's body says about its task, at most ``limit`` bytes of it read
    (``truncated``: ``body`` is the first bytes of a longer one). The version is the
    request's ``A2A-Version`` when it has one, else the payload's shape: a ``StreamResponse``
    is v1.0, a bare Task v0.3. Never raises."""
    try:
        if truncated or len(body) > limit:
            return extract_from_prefixes(_request(headers, None), 200, body, limit)
        doc = parse_json(body)
        if not isinstance(doc, dict):
            return UNRECOGNIZED
        return extract_stream_payload(_request(headers, doc), doc)
    except Exception:
        return UNRECOGNIZED


def _request(headers: Mapping[str, str], doc: dict[str, Any] | None) -> A2ARequest:
    from otel_a2a.protocol.classify import parse_version

    version = header(headers, "a2a-version")
    if version is not None and version.strip():
        return _V1._replace(version=parse_version(version))
    if doc is not None and _STREAM_KEYS.isdisjoint(doc):
        return _V03
    return _V1
