"""The real peers start, serve their card with caching headers (a2a-go's has none: see
tests/instrumentation/test_real_go_peer.py), and answer A2A calls."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import httpx
import pytest

from tests.support.peers import RunningPeer, running_peer

HEARTBEAT = {"uri": "urn:otel-a2a:heartbeat:v1", "params": {"intervalSeconds": 30}}


def _check_card(base_url: str) -> None:
    with httpx.Client(timeout=10.0) as client:
        first = client.get(base_url + "/.well-known/agent-card.json")
        assert first.status_code == 200
        assert first.headers["content-type"].startswith("application/json")
        assert first.headers["cache-control"] == "public, max-age=300"
        etag = first.headers["etag"]
        assert etag.startswith('W/"')
        card = first.json()
        urls = {i["url"] for i in card["supportedInterfaces"]}
        assert urls == {base_url + "/a2a/jsonrpc", base_url + "/a2a/rest"}
        versions = {
            (i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]
        }
        assert ("JSONRPC", "1.0") in versions and ("HTTP+JSON", "1.0") in versions
        assert card["capabilities"]["streaming"] is True
        (ext,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == HEARTBEAT["uri"]]
        assert ext["params"]["intervalSeconds"] == 30

        again = client.get(
            base_url + "/.well-known/agent-card.json", headers={"If-None-Match": etag}
        )
        assert again.status_code == 304
        assert again.content == b""


def _send(base_url: str, text: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    response = httpx.post(
        base_url + "/a2a/jsonrpc",
        content=json.dumps(body),
        headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
        timeout=10.0,
    )
    assert response.status_code == 200
    result: dict[str, Any] = response.json()["result"]
    return result


def test_python_peer_serves_card(python_peer: str) -> None:
    _check_card(python_peer)


@pytest.mark.node
def test_node_peer_serves_card(node_peer: str) -> None:
    _check_card(node_peer)


@pytest.mark.jvm
def test_jvm_peer_serves_its_static_card_with_a_quoted_md5_etag_and_no_304(jvm_peer: str) -> None:
    """The A2A Java SDK peer: the card from its static descriptor, a strong quoted MD5 of the
    bytes served as ``ETag``, and (the seed's habit) the full card again on ``If-None-Match``."""
    card_url = jvm_peer + "/.well-known/agent-card.json"
    with httpx.Client(timeout=10.0) as client:
        first = client.get(card_url)
        again = client.get(card_url, headers={"If-None-Match": first.headers["etag"]})
    assert first.status_code == 200 and first.headers["cache-control"] == "public, max-age=300"
    assert first.headers["etag"] == '"' + hashlib.md5(first.content).hexdigest() + '"'
    card = first.json()
    assert card["capabilities"]["streaming"] is True
    assert {(i["url"], i["protocolBinding"]) for i in card["supportedInterfaces"]} == {
        (jvm_peer + "/a2a/jsonrpc", "JSONRPC"),
        (jvm_peer + "/a2a/rest", "HTTP+JSON"),
    }
    (ext,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == HEARTBEAT["uri"]]
    assert ext["params"]["intervalSeconds"] == 30
    assert again.status_code == 200 and again.content == first.content
    assert again.headers["etag"] == first.headers["etag"]


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("echo hi", "TASK_STATE_COMPLETED"),
        ("input more", "TASK_STATE_INPUT_REQUIRED"),
        ("fail", "TASK_STATE_FAILED"),
        ("reject", "TASK_STATE_REJECTED"),
    ],
)
@pytest.mark.parametrize(
    "runtime",
    [
        "python",
        pytest.param("node", marks=pytest.mark.node),
        pytest.param("go", marks=pytest.mark.go),
        pytest.param("jvm", marks=pytest.mark.jvm),
    ],
)
def test_behaviour_follows_text(
    runtime: str, text: str, state: str, request: pytest.FixtureRequest
) -> None:
    base_url: str = request.getfixturevalue(f"{runtime}_peer")
    task = _send(base_url, text)["task"]
    assert task["status"]["state"] == state


def test_running_peer_stops_cleanly() -> None:
    with running_peer("python", slow_timeout=5) as peer:
        assert isinstance(peer, RunningPeer) and peer.alive()
        assert httpx.get(peer.card_url, timeout=10.0).status_code == 200
    assert not peer.alive()
    assert peer.process.returncode is not None
