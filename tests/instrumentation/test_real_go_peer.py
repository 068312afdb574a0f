"""What only the a2a-go peer does on the wire, and what otel-a2a makes of it.

test_real_peers.py runs the common scenarios on a2a-go too; here are its own habits (each also
recorded under tests/fixtures/exchanges/go): a card without ``ETag`` or ``Cache-Control`` (no
304 either), v0.3 HTTP+JSON in snake_case (which a2a-sdk's v0.3 REST client cannot speak:
driven with httpx), TaskNotFound "no active execution" for a subscription to a task it still
has, and a refused message to a task whose execution runs. No sleeps.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import CancelTaskRequest, SubscribeToTaskRequest
from a2a.utils.errors import A2AError as SdkError

from tests.instrumentation.conftest import Harness, divergences
from tests.instrumentation.test_real_peers import (
    HEARTBEAT,
    Mode,
    attrs,
    canonical,
    card_etag,
    card_url,
    clients,
    message,
    only_task,
    resolve,
    run,
    status_events,
    tracked,
)

pytestmark = pytest.mark.go
V03_REST = "/a2a/v0.3/rest/v1"


def test_card_without_etag_is_known_by_its_canonical_hash(otel: Harness, go_peer: str) -> None:
    """No ETag: the card's identity is the sha256 of its JCS form; If-None-Match is ignored
    (200 each time), and the same card fetched again is no etag change."""

    async def scenario() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            await A2ACardResolver(http, go_peer).get_agent_card()
            first = await http.get(card_url(go_peer))
            again = await http.get(card_url(go_peer), headers={"If-None-Match": 'W/"x"'})
        return [first, again]

    first, again = run(scenario())
    assert "etag" not in first.headers and "cache-control" not in first.headers
    assert again.status_code == 200 and again.content == first.content
    expected = card_etag(go_peer)  # sha256 of the card's canonical JSON, computed by the test
    assert expected.startswith("sha256:")
    spans = otel.spans("GetAgentCard")
    assert len(spans) == 3
    for span in spans:
        assert attrs(span)["otel_a2a.card.etag"] == expected
        assert attrs(span)["otel_a2a.card.etag.changed"] is False
        assert attrs(span)["http.response.status_code"] == 200
        assert attrs(span)["otel_a2a.card.heartbeat_interval"] == HEARTBEAT
    assert otel.total("otel_a2a.card.etag.changes") == 0


def _v03_message(text: str) -> dict[str, Any]:
    """a2a-go's v0.3 HTTP+JSON body: the v0.3 JSON-RPC message in snake_case."""
    return {
        "message": {
            "kind": "message",
            "message_id": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
        }
    }


def test_v03_rest_in_snake_case_is_observed(otel: Harness, go_peer: str) -> None:
    """A v0.3 HTTP+JSON stream and GetTask whose objects say ``task_id`` and ``context_id``:
    the task, its context and every streamed state are read."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            _, agent = await resolve(http, go_peer)
            url = go_peer + V03_REST
            async with http.stream(
                "POST",
                url + "/message:stream",
                json=_v03_message("echo snake"),
                headers={"Accept": "text/event-stream"},
            ) as stream:
                assert stream.status_code == 200
                lines = [line async for line in stream.aiter_lines()]
            frames = [line[5:].strip() for line in lines if line.startswith("data:")]
            first = httpx.Response(200, content=frames[0]).json()
            got = (await http.get(f"{url}/tasks/{first['id']}")).json()
        return locals()

    seen = run(scenario())
    first, got = seen["first"], seen["got"]
    assert first["kind"] == "task" and "context_id" in first  # the snake_case shape
    task_id, context_id = first["id"], first["context_id"]
    assert got["status"]["state"] == "completed"

    stream = otel.span("SendStreamingMessage")
    span = attrs(stream)
    assert (span["a2a.task.id"], span["gen_ai.conversation.id"]) == (task_id, context_id)
    assert (span["a2a.task.state"], span["otel_a2a.task.state.raw"]) == (
        "TASK_STATE_COMPLETED",
        "completed",
    )
    assert (span["a2a.protocol.version"], span["otel_a2a.binding"]) == ("0.3", "HTTP+JSON")
    assert status_events(stream) == [
        (task_id, "TASK_STATE_WORKING", "working"),
        (task_id, "TASK_STATE_COMPLETED", "completed"),
    ]
    get = attrs(otel.span("GetTask"))
    assert (get["a2a.task.id"], get["gen_ai.conversation.id"]) == (task_id, context_id)
    assert get["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


def test_subscription_refused_for_a_waiting_task_is_no_lost_task(
    otel: Harness, go_peer: str
) -> None:
    """a2a-go answers SubscribeToTask on a task waiting for input (it has it, but runs nothing
    for it) with TaskNotFound "no active execution". Read at face value, a task last seen live
    and now "not found" is ``task_lost``; it is not: the task is there, and says so next."""
    mode = Mode("JSONRPC", "1.0")

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, _ = await resolve(http, go_peer)
            client, streaming = await clients(http, card, mode)
            waiting = await only_task(client.send_message(message("input please")))
            with pytest.raises(SdkError) as refused:
                [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=waiting.id))]
            followed = await only_task(client.send_message(message("echo done", waiting)))
        return locals()

    seen = run(scenario())
    waiting, followed = seen["waiting"], seen["followed"]
    assert "no active execution" in str(seen["refused"].value)
    assert canonical(waiting.status.state) == "input-required"
    assert canonical(followed.status.state) == "completed"
    subscribe = otel.span("SubscribeToTask")
    assert attrs(subscribe)["error.type"] == "-32001"
    assert divergences(subscribe) == []
    # the follow-up is judged on the input-required observation: authoritative
    assert divergences(otel.spans("SendMessage")[-1]) == []
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


def test_a_message_to_a_running_task_is_refused(otel: Harness, go_peer: str) -> None:
    """a2a-go runs one execution per task: a follow-up while the task works is an internal
    error (-32603 "task execution is already in progress"); the task's observation stays
    the one its own answers gave (working), and a cancel then ends it."""
    mode = Mode("JSONRPC", "1.0")

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, _ = await resolve(http, go_peer)
            client, _ = await clients(http, card, mode)
            request = message("slow follow")
            request.configuration.return_immediately = True
            slow = await only_task(client.send_message(request))
            with pytest.raises(SdkError) as refused:
                await only_task(client.send_message(message("echo now", slow)))
            canceled = await client.cancel_task(CancelTaskRequest(id=slow.id))
        return locals()

    seen = run(scenario())
    assert "already in progress" in str(seen["refused"].value)
    assert canonical(seen["canceled"].status.state) == "canceled"
    follow_up = otel.spans("SendMessage")[-1]
    assert attrs(follow_up)["error.type"] == "-32603"
    assert "a2a.task.state" not in attrs(follow_up)
    assert divergences(follow_up) == []
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}
