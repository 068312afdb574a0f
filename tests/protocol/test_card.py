"""Agent Card parsing: etag, caching, interfaces, heartbeat."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_a2a.protocol.card import (
    cache_max_age,
    extended_card_etag,
    parse_card,
    parse_extended_card,
)
from otel_a2a.protocol.jcs import canonicalize
from otel_a2a.protocol.model import A2ARequest, Binding, CardInfo, Interface, Operation

# Observed hybrid card of the Python 1.3.0 peer, verbatim.
PY_CARD = (
    b'{"name":"Echo Agent","description":"Echoes input","supportedInterfaces":[{"url":"http://1'
    b'27.0.0.1:9999/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"'
    b'http://127.0.0.1:9999/a2a/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"},{'
    b'"url":"http://127.0.0.1:9999/a2a/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":'
    b'"0.3"}],"version":"0.0.1","capabilities":{"streaming":true,"pushNotifications":false},"d'
    b'efaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"ec'
    b'ho","name":"Echo","description":"Echo text","tags":["echo"]}],"preferredTransport":"JSON'
    b'RPC","protocolVersion":"0.3","url":"http://127.0.0.1:9999/a2a/jsonrpc"}'
)
PY_HEADERS = {
    "etag": 'W/"ccd90c9da7a1d95c3e85bd357dad9b94e580c2a91146a448016939208d8c4b3c"',
    "cache-control": "public, max-age=300",
    "content-type": "application/json",
}
JS_CARD = {
    "name": "JS Echo Agent",
    "description": "Echoes input",
    "version": "0.0.1",
    "supportedInterfaces": [
        {
            "url": "http://127.0.0.1:9998/a2a/jsonrpc",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
            "tenant": "",
        },
        {
            "url": "http://127.0.0.1:9998/a2a/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
            "tenant": "",
        },
    ],
    "capabilities": {"streaming": True, "pushNotifications": False, "extensions": []},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "Echo text", "tags": ["echo"]}],
}


def test_observed_python_hybrid_card() -> None:
    card = parse_card(200, PY_HEADERS, PY_CARD)
    assert card == CardInfo(
        etag=PY_HEADERS["etag"],
        etag_source="header",
        name="Echo Agent",
        version="0.0.1",
        streaming=True,
        interfaces=(
            Interface("http://127.0.0.1:9999/a2a/jsonrpc", "JSONRPC", "1.0"),
            Interface("http://127.0.0.1:9999/a2a/rest", "HTTP+JSON", "1.0"),
            Interface("http://127.0.0.1:9999/a2a/jsonrpc", "JSONRPC", "0.3"),
        ),
        heartbeat=None,
        heartbeat_source=None,
        max_age=300.0,
        protocol_versions=("0.3", "1.0"),
        description="Echoes input",
    )


def test_observed_js_card_with_httpx_headers() -> None:
    headers = httpx.Headers(
        {"ETag": 'W/"b56e99da7d37c86b"', "Cache-Control": "public, max-age=300"}
    )
    card = parse_card(200, headers, json.dumps(JS_CARD).encode())
    assert card is not None
    assert (card.etag, card.etag_source, card.max_age) == ('W/"b56e99da7d37c86b"', "header", 300.0)
    assert card.protocol_versions == ("1.0",)
    assert len(card.interfaces) == 2


def test_jcs_etag_when_no_header_and_stable_across_serialisations() -> None:
    body = json.dumps(JS_CARD).encode()
    card = parse_card(200, {}, body)
    assert card is not None and card.etag_source == "jcs"
    assert card.etag == "sha256:" + hashlib.sha256(canonicalize(JS_CARD)).hexdigest()
    reordered = json.dumps(dict(reversed(list(JS_CARD.items()))), indent=2).encode()
    again = parse_card(200, {"Content-Type": "application/json"}, reordered)
    assert again is not None and again.etag == card.etag
    changed = parse_card(200, {}, json.dumps({**JS_CARD, "version": "0.0.2"}).encode())
    assert changed is not None and changed.etag != card.etag


def test_card_with_nan_is_hashed_from_bytes() -> None:
    body = b'{"name":"x","heartbeatInterval":NaN}'
    card = parse_card(200, {}, body)
    assert card is not None and card.etag_source == "body" and card.heartbeat is None
    assert card.etag == "sha256:" + hashlib.sha256(body).hexdigest()


def test_v03_card_interfaces() -> None:
    doc = {
        "protocolVersion": "0.3.0",
        "name": "old",
        "url": "http://h/rpc",
        "additionalInterfaces": [
            {"url": "http://h/rpc", "transport": "JSONRPC"},
            {"url": "http://h/rest", "transport": "HTTP+JSON"},
            {"url": 7, "transport": "GRPC"},
        ],
        "capabilities": {"streaming": "yes"},
    }
    card = parse_card(200, {}, json.dumps(doc).encode())
    assert card is not None
    assert card.interfaces == (
        Interface("http://h/rpc", "JSONRPC", "0.3.0"),
        Interface("http://h/rest", "HTTP+JSON", "0.3.0"),
    )
    assert card.protocol_versions == ("0.3.0",)
    assert card.streaming is None


def test_what_a_card_keeps_is_bounded() -> None:
    """A card is remembered per agent (up to 1000) and its etag copied onto every task span."""
    long_etag = 'W/"' + "e" * 90_000 + '"'
    doc = {
        "name": "n" * 1000,
        "supportedInterfaces": [
            {"url": f"http://h/{i}", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            for i in range(100)
        ]
        + [{"url": "http://h/" + "x" * 600, "protocolBinding": "JSONRPC"}],
    }
    card = parse_card(200, {"etag": long_etag}, json.dumps(doc).encode())
    assert card is not None
    assert card.etag == "sha256:" + hashlib.sha256(long_etag.encode()).hexdigest()
    assert card.etag_source == "header"
    assert card.name == "n" * 256
    assert len(card.interfaces) == 16
    long_url = {**doc, "supportedInterfaces": doc["supportedInterfaces"][-1:]}
    card = parse_card(200, {"etag": '"short"'}, json.dumps(long_url).encode())
    assert card is not None and card.etag == '"short"'
    assert card.interfaces == ()  # never cut: a cut URL would route to the wrong agent


def ext(interval: object) -> dict[str, object]:
    return {"uri": "urn:otel-a2a:heartbeat:v1", "params": {"intervalSeconds": interval}}


@pytest.mark.parametrize(
    ("doc", "heartbeat", "source"),
    [
        ({"capabilities": {"extensions": [ext(5)]}}, 5.0, "extension"),
        ({"capabilities": {"extensions": [ext(2.5)]}, "heartbeatInterval": 9}, 2.5, "extension"),
        ({"capabilities": {"extensions": [ext(0)]}, "heartbeatInterval": 9}, 9.0, "card-field"),
        ({"capabilities": {"extensions": [ext(True)]}}, None, None),
        ({"capabilities": {"extensions": [ext("5")]}}, None, None),
        ({"capabilities": {"extensions": [ext(-1)]}}, None, None),
        (
            {
                "capabilities": {
                    "extensions": [{"uri": "urn:other", "params": {"intervalSeconds": 5}}]
                }
            },
            None,
            None,
        ),
        ({"capabilities": {"extensions": [{"uri": "urn:otel-a2a:heartbeat:v1"}]}}, None, None),
        ({"heartbeatInterval": 12}, 12.0, "card-field"),
        ({"capabilities": {"heartbeatInterval": 7.5}}, 7.5, "card-field"),
        ({"heartbeatInterval": 3, "capabilities": {"heartbeatInterval": 7}}, 3.0, "card-field"),
        ({"heartbeatInterval": False}, None, None),
        ({"heartbeatInterval": 1e400}, None, None),
        ({"heartbeatInterval": 10**400}, None, None),
        ({"heartbeatInterval": None, "capabilities": "x"}, None, None),
    ],
)
def test_heartbeat(doc: dict[str, object], heartbeat: float | None, source: str | None) -> None:
    body = json.dumps(doc).replace("Infinity", "1e400").encode()
    card = parse_card(200, {}, body)
    assert card is not None
    assert (card.heartbeat, card.heartbeat_source) == (heartbeat, source)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("public, max-age=300", 300.0),
        ('max-age="60", must-revalidate', 60.0),
        ("MAX-AGE=5", 5.0),
        ("no-cache", 0.0),
        ("private, no-store, max-age=300", 0.0),
        ("max-age=-1", None),
        ("max-age=abc", None),
        ("public", None),
    ],
)
def test_cache_max_age(value: str | None, expected: float | None) -> None:
    assert cache_max_age(value) == expected


def test_unusable_responses() -> None:
    assert parse_card(404, {}, PY_CARD) is None
    assert parse_card(304, PY_HEADERS, b"") is None
    assert parse_card(200, {}, b"[]") is None
    assert parse_card(200, {}, b"<html>") is None
    assert parse_card(200, {}, b"") is None


def test_extended_card() -> None:
    result = {**JS_CARD, "skills": []}
    etag = extended_card_etag(result)
    assert etag == "sha256:" + hashlib.sha256(canonicalize(result)).hexdigest()
    rpc = A2ARequest(
        Operation.GET_EXTENDED_AGENT_CARD, Binding.JSONRPC, "1.0", "GetExtendedAgentCard"
    )
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
    card = parse_extended_card(rpc, 200, body)
    assert card is not None and card.etag == etag and card.etag_source == "jcs"
    rest = A2ARequest(Operation.GET_EXTENDED_AGENT_CARD, Binding.HTTP_JSON, "1.0")
    again = parse_extended_card(rest, 200, json.dumps(result).encode())
    assert again is not None and again.etag == etag
    error = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32007,"message":"no"}}'
    assert parse_extended_card(rpc, 200, error) is None
    assert parse_extended_card(rest, 400, b'{"error":{"code":400}}') is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "version",
                    "capabilities",
                    "extensions",
                    "uri",
                    "params",
                    "intervalSeconds",
                    "heartbeatInterval",
                    "supportedInterfaces",
                    "url",
                    "protocolBinding",
                    "protocolVersion",
                    "additionalInterfaces",
                    "transport",
                    "streaming",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=250, deadline=None)
@given(
    JSON,
    st.dictionaries(
        st.sampled_from(["etag", "ETag", "Cache-Control", "x"]), st.text(max_size=20), max_size=3
    ),
)
def test_parse_card_any_json_never_raises(doc: object, headers: dict[str, str]) -> None:
    body = json.dumps(doc).encode()
    card = parse_card(200, headers, body)
    assert card is None or isinstance(card, CardInfo)
    if card is not None:
        assert card.heartbeat is None or card.heartbeat > 0
    rpc = A2ARequest(Operation.GET_EXTENDED_AGENT_CARD, Binding.JSONRPC, "1.0")
    assert parse_extended_card(rpc, 200, body) is None or isinstance(doc, dict)


@settings(max_examples=150, deadline=None)
@given(st.integers(), st.binary(max_size=200))
def test_parse_card_any_bytes_never_raises(status: int, body: bytes) -> None:
    assert parse_card(status, {}, body) is None or 200 <= status < 300


def test_deeply_nested_card() -> None:
    body = b'{"name":"x","skills":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert parse_card(200, {}, body) is None
