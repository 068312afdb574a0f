"""Agent Card parsing: the etag, caching, interfaces and heartbeat the invariant relies on.

``parse_card`` reads a ``2xx`` well-known card response into a ``CardInfo``; a ``304 Not
Modified`` has no body, and the card and etag on record stay in force.

Etag: the HTTP ``ETag`` header verbatim (a weak ``W/"…"`` kept as is), else ``sha256:`` + hex
digest of the card's RFC 8785 canonical form; a card whose JSON has no canonical form (NaN,
numbers beyond double range) is hashed from its raw bytes (``etag_source="body"``).
An extended card (``GetExtendedAgentCard``) has its own etag, the JCS hash of the result, and
never moves the well-known card's etag: see ``parse_extended_card``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

from otel_a2a.protocol._util import get_dict, header, parse_json
from otel_a2a.protocol.jcs import jcs_sha256
from otel_a2a.protocol.model import A2ARequest, Binding, CardInfo, Interface

HEARTBEAT_EXTENSION_URI = "urn:otel-a2a:heartbeat:v1"
_MAX_TEXT = 256
_MAX_DESCRIPTION = 1024  # a span attribute, not the card: enough to tell agents apart
_MAX_URL = 512  # an interface URL longer than this is not recorded (nor routed)
_MAX_INTERFACES = 16  # per card: a card is remembered per agent, up to 1000 agents


# Enum member access is slow on Python 3.11 (~0.3 µs); the hot paths use these.
_B_JSONRPC = Binding.JSONRPC


def parse_card(status: int, headers: Mapping[str, str], body: bytes) -> CardInfo | None:
    """The card of a ``2xx`` well-known card response, or None when unusable. Never raises.

    A ``304`` yields None: the card on record stays in force.
    """
    try:
        if not 200 <= status < 300:
            return None
        doc = parse_json(body)
        if not isinstance(doc, dict):
            return None
        max_age = cache_max_age(header(headers, "cache-control"))
        return card_from_document(doc, header(headers, "etag"), max_age, body)
    except Exception:  # the wire layer must never break the host application
        return None


def card_from_document(
    doc: dict[str, Any],
    etag: str | None = None,
    max_age: float | None = None,
    body: bytes | None = None,
) -> CardInfo | None:
    """A card from its parsed JSON: ``etag`` as given (its sha256 when over 256 characters),
    else the JCS hash of ``doc``, else (no canonical form) the hash of ``body``; None when there
    is nothing to take an etag from."""
    if etag and etag.strip():
        source = "header"
        if len(etag) > _MAX_TEXT:  # kept per agent and copied onto every task span: bounded
            etag = "sha256:" + hashlib.sha256(etag.encode("utf-8", "replace")).hexdigest()
    else:
        etag, source = jcs_sha256(doc), "jcs"
        if etag is None:
            if body is None:
                return None
            etag, source = "sha256:" + hashlib.sha256(body).hexdigest(), "body"
    return _card_info(doc, etag, source, max_age)


def extended_card_etag(result_obj: object) -> str | None:
    """Etag of an extended card: ``sha256:`` of the JCS form of the RPC result (or None)."""
    return jcs_sha256(result_obj)


def parse_extended_card(request: A2ARequest, status: int, body: bytes) -> CardInfo | None:
    """The card carried by a ``GetExtendedAgentCard`` response (JSON-RPC ``result`` or REST body).

    Its etag is ``extended_card_etag`` of that object (``etag_source="jcs"``). Never raises.
    """
    try:
        if not 200 <= status < 300:
            return None
        doc = parse_json(body)
        if request.binding is _B_JSONRPC:
            doc = doc.get("result") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or "error" in doc:
            return None
        return extended_card(doc)
    except Exception:
        return None


def extended_card(doc: dict[str, Any]) -> CardInfo | None:
    """An extended card from its JSON object (the HTTP bindings' body, or a gRPC reply's
    ProtoJSON form, which is the same object): etag ``extended_card_etag``. Never raises."""
    try:
        etag = extended_card_etag(doc)
        return None if etag is None else _card_info(doc, etag, "jcs", None)
    except Exception:
        return None


def cache_max_age(cache_control: str | None) -> float | None:
    """``max-age`` seconds of a ``Cache-Control`` value; ``no-store``/``no-cache`` mean 0."""
    if not cache_control:
        return None
    max_age: float | None = None
    for directive in cache_control.split(",")[:32]:
        name, _, value = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-store", "no-cache"):
            return 0.0
        if name == "max-age":
            value = value.strip().strip('"')
            if value.isdigit() and len(value) < 16:
                max_age = float(value)
    return max_age


def _text(obj: dict[str, Any], key: str, limit: int = _MAX_TEXT) -> str | None:
    value = obj.get(key)
    return value[:limit] if isinstance(value, str) and value else None


def _url(obj: dict[str, Any], key: str) -> str | None:
    """A URL is kept whole or not at all: a cut one would route requests to the wrong agent."""
    value = obj.get(key)
    return value if isinstance(value, str) and value and len(value) <= _MAX_URL else None


def _card_info(doc: dict[str, Any], etag: str, source: str, max_age: float | None) -> CardInfo:
    capabilities = get_dict(doc, "capabilities") or {}
    streaming = capabilities.get("streaming")
    interfaces = _interfaces(doc)
    versions: list[str] = []
    for version in [_text(doc, "protocolVersion")] + [i.protocol_version for i in interfaces]:
        if version is not None and version not in versions:
            versions.append(version)
    heartbeat, heartbeat_source = _heartbeat(doc, capabilities)
    return CardInfo(
        etag=etag,
        etag_source=source,
        name=_text(doc, "name"),
        version=_text(doc, "version"),
        streaming=streaming if isinstance(streaming, bool) else None,
        interfaces=interfaces,
        heartbeat=heartbeat,
        heartbeat_source=heartbeat_source,
        max_age=max_age,
        protocol_versions=tuple(versions),
        description=_text(doc, "description", _MAX_DESCRIPTION),
    )


def _interfaces(doc: dict[str, Any]) -> tuple[Interface, ...]:
    """v1.0 ``supportedInterfaces`` then v0.3 ``url``/``additionalInterfaces`` (hybrid: union)."""
    found: list[Interface] = []

    def add(url: str | None, binding: str | None, version: str | None) -> None:
        if url and binding and len(found) < _MAX_INTERFACES:
            item = Interface(url, binding, version)
            if item not in found:
                found.append(item)

    supported = doc.get("supportedInterfaces")
    if isinstance(supported, list):
        for entry in supported[:_MAX_INTERFACES]:
            if isinstance(entry, dict):
                add(
                    _url(entry, "url"),
                    _text(entry, "protocolBinding"),
                    _text(entry, "protocolVersion"),
                )
    top_version = _text(doc, "protocolVersion")
    url = _url(doc, "url")
    if url:
        add(url, _text(doc, "preferredTransport") or "JSONRPC", top_version)
    additional = doc.get("additionalInterfaces")
    if isinstance(additional, list):
        for entry in additional[:_MAX_INTERFACES]:
            if isinstance(entry, dict):
                add(_url(entry, "url"), _text(entry, "transport"), top_version)
    return tuple(found)


def valid_seconds(value: object) -> float | None:
    """A positive, finite number of seconds, or None (bools and strings are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _heartbeat(
    doc: dict[str, Any], capabilities: dict[str, Any]
) -> tuple[float | None, str | None]:
    extensions = capabilities.get("extensions")
    if isinstance(extensions, list):
        for ext in extensions[:_MAX_INTERFACES]:
            if isinstance(ext, dict) and ext.get("uri") == HEARTBEAT_EXTENSION_URI:
                params = get_dict(ext, "params") or {}
                seconds = valid_seconds(params.get("intervalSeconds"))
                if seconds is not None:
                    return seconds, "extension"
    for holder in (doc, capabilities):
        seconds = valid_seconds(holder.get("heartbeatInterval"))
        if seconds is not None:
            return seconds, "card-field"
    return None, None
