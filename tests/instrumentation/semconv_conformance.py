"""otel-a2a's client spans against OpenTelemetry's A2A convention, as read into
tests/fixtures/semconv/a2a-client-span.json (the commit it names): span name and kind, and per
attribute its type, well-known values and requirement level.

The ``otel`` fixture runs ``check`` on every span of the real-peer modules (a2a-sdk client
against real SDK servers over JSON-RPC, HTTP+JSON and gRPC, v1.0 and v0.3), so each operation on
each binding those tests drive is checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_a2a import semconv as sc

TABLE = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures/semconv/a2a-client-span.json").read_text()
)
ATTRIBUTES: dict[str, dict[str, Any]] = {a["key"]: a for a in TABLE["attributes"]}
METHODS = set(ATTRIBUTES[sc.OPERATION]["well_known_values"])
STATES = set(ATTRIBUTES[sc.TASK_STATE]["well_known_values"])
# well-known card fetches are no A2A method of the convention: a custom value it allows
CUSTOM_METHODS = {"GetAgentCard"}
TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "int": (int,), "string[]": (tuple, list)}


def _type_ok(value: object, type_name: str) -> bool:
    if isinstance(value, bool) or not isinstance(value, TYPES[type_name]):
        return False
    return type_name != "string[]" or all(isinstance(v, str) for v in value)  # type: ignore[union-attr]


def check(span: ReadableSpan) -> None:
    """Assert ``span`` (one of otel-a2a's operation spans) follows the convention's table."""
    attrs: Mapping[str, Any] = span.attributes or {}
    method = attrs.get(sc.OPERATION)
    assert span.kind is SpanKind.CLIENT, span.name
    # required, and the span's name
    assert isinstance(method, str) and method in METHODS | CUSTOM_METHODS, method
    assert span.name == method
    for key, spec in ATTRIBUTES.items():
        if key in attrs:
            assert _type_ok(attrs[key], spec["type"]), (span.name, key, attrs[key])
    if sc.TASK_STATE in attrs:
        assert attrs[sc.TASK_STATE] in STATES, attrs[sc.TASK_STATE]
    # error.type: conditionally required, if and only if the operation fails
    failed = span.status.status_code is StatusCode.ERROR
    assert (sc.ERROR_TYPE in attrs) == failed, (span.name, span.status, attrs.get(sc.ERROR_TYPE))
    # the task of a task-scoped request or response, with its state when it carried one
    if sc.TASK_STATE in attrs:
        assert sc.TASK_ID in attrs
    if method in {"GetTask", "CancelTask", "SubscribeToTask"} and not failed:
        assert sc.TASK_ID in attrs, span.name
    # gen_ai.agent.* when the card is known: otel-a2a knows it when it fetched the card (the
    # SDK test peers' cards have a name, a version and a description)
    if attrs.get(sc.CARD_ETAG) is not None and method != "GetAgentCard":
        for key in (sc.AGENT_NAME, sc.AGENT_VERSION, sc.AGENT_DESCRIPTION):
            assert key in attrs, (span.name, key)
    # a2a.message.id when the request contains a message (the SDK clients always give one)
    if method in {"SendMessage", "SendStreamingMessage"}:
        assert sc.MESSAGE_ID in attrs, span.name
    # server.address (and its port, which every loopback peer's URL writes) on every span
    assert isinstance(attrs.get(sc.SERVER_ADDRESS), str) and attrs[sc.SERVER_ADDRESS], span.name
    assert isinstance(attrs.get(sc.SERVER_PORT), int), span.name


def check_all(spans: Iterable[ReadableSpan]) -> int:
    """Check every otel-a2a operation span among ``spans``; how many were checked."""
    checked = 0
    for span in spans:
        scope = span.instrumentation_scope
        if scope is None or scope.name != sc.SCOPE or span.name == sc.OP_DECISION:
            continue
        assert scope.schema_url == sc.SCHEMA_URL
        check(span)
        checked += 1
    return checked
