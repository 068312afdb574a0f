"""Per-caller cards are not redeploys; a redeploy still is.

A real a2a-sdk agent serving one card per caller (``card_modifier``, the card naming the
``Authorization`` it was fetched with, so the SDK's weak ETag differs per caller): two
callers of one process, each with its own credentials, fetch their cards in turn, and one of
them follows up on its task. Nothing changed on the agent: no etag change and no
divergence. Then the agent is redeployed on the same address with a new card version: the
next card fetch is an etag change and the follow-up taken without a new observation is
``etag_changed``, as the seed's rule says.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.instrumentation.conftest import divergences, make_harness
from tests.support import free_port
from tests.support.peers import running_peer

# the real a2a-sdk 1.3 peer: the version matrix's oldest cell leaves it out (tests/conftest.py)
pytestmark = pytest.mark.peer

CARD = "/.well-known/agent-card.json"
RPC = "/a2a/jsonrpc"


def _send(client: httpx.Client, text: str, task: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task is not None:
        message.update(taskId=task["id"], contextId=task["contextId"])
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = client.post(RPC, json=body, headers={"A2A-Version": "1.0"})
    reply.raise_for_status()
    result: dict[str, Any] = reply.json().get("result", {})
    return result.get("task", {})


def test_per_caller_cards_are_no_change_and_a_redeploy_is() -> None:
    port = free_port()
    options = ["--card-per-caller"]
    otel, instrumentor = make_harness()
    try:
        with running_peer("python", port=port, options=options) as peer:
            base = peer.base_url
            alice = httpx.Client(base_url=base, headers={"Authorization": "Bearer alice"})
            bob = httpx.Client(base_url=base, headers={"Authorization": "Bearer bob"})
            with alice, bob:
                alice_etag = alice.get(CARD).headers["etag"]
                task = _send(alice, "input first")  # waits for input: owes no heartbeat
                assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                bob_etag = bob.get(CARD).headers["etag"]
                assert bob_etag != alice_etag  # the agent really serves one card per caller
                _send(alice, "input again", task)  # a follow-up: a liveness decision
                assert alice.get(CARD).headers["etag"] == alice_etag
                assert bob.get(CARD).headers["etag"] == bob_etag
                _send(alice, "input once more", task)
        assert otel.total("otel_a2a.card.etag.changes") == 0
        assert [d for s in otel.spans() for d in divergences(s)] == []

        redeployed = [*options, "--card-version", "2.0.0"]
        with (
            running_peer("python", port=port, options=redeployed),
            httpx.Client(base_url=base, headers={"Authorization": "Bearer alice"}) as alice,
        ):
            assert alice.get(CARD).headers["etag"] != alice_etag
            # the redeployed agent lost the task: the answer is an error, the decision
            # before it was taken on an observation made under the old card
            body = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}
            body["message"].update(taskId=task["id"], contextId=task["contextId"])
            alice.post(
                RPC,
                json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": body},
                headers={"A2A-Version": "1.0"},
            )
        assert otel.total("otel_a2a.card.etag.changes") == 1
        follow_ups = [s for s in otel.spans("SendMessage") if divergences(s)]
        assert [divergences(s) for s in follow_ups] == [["etag_changed"]]
    finally:
        instrumentor.uninstrument()
