"""A follow-up answered with another task: fasta2a submits a new task B for a message naming A.

The span stays about A (``a2a.task.id`` is the task the request named, the decision's), B is
observed as B, A keeps its last observation, and an ``otel_a2a.task.swapped`` event names both.
fasta2a is not installed here: the fake agent answers as it does (``new_task_for_follow_ups``),
over a real loopback socket in fasta2a's v0.3 dialect, and in-process for a v1.0 stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from otel_a2a.detect.ledger import Observation
from otel_a2a.instrumentation import runtime
from tests.instrumentation.conftest import V1, Clock, Harness, divergences
from tests.support.fake_agent import CARD_PATH, FakeAgent, new_task_for_follow_ups


def ledger(task_id: str) -> Observation | None:
    rt = runtime.current()
    assert rt is not None
    return rt.detector.ledger.get(task_id)


def events(span: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def test_a_follow_up_answered_with_a_new_task_over_v03_as_fasta2a_does(otel: Harness) -> None:
    agent = FakeAgent(states={"task-a": "input-required"}, misbehave=new_task_for_follow_ups)
    follow_up = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m2",
                "role": "user",
                "taskId": "task-a",
                "contextId": "ctx-task-a",
                "parts": [{"kind": "text", "text": "here is more"}],
            }
        },
    }
    get = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "task-a"}}
    with agent.serve() as base, httpx.Client(base_url=base, timeout=10.0) as client:
        client.get(CARD_PATH)
        assert client.post("/a2a", json=get).json()["result"]["id"] == "task-a"
        before = ledger("task-a")
        answered = client.post("/a2a", json=follow_up).json()["result"]
    new_id = answered["id"]  # what the application received
    assert new_id != "task-a" and answered["kind"] == "task"
    assert answered["status"]["state"] == "submitted"

    span = otel.span("SendMessage")
    attrs = dict(span.attributes or {})
    assert attrs["a2a.task.id"] == "task-a"  # the task the request named, as at its start
    assert attrs["otel_a2a.liveness.decision"] is True
    assert attrs["otel_a2a.observation.authoritative"] is True
    assert "a2a.task.state" not in attrs and "otel_a2a.task.state.raw" not in attrs  # none of A's
    assert attrs["gen_ai.conversation.id"] == "ctx-task-a"
    assert events(span) == [
        (
            "otel_a2a.task.swapped",
            {
                "a2a.task.id": new_id,
                "otel_a2a.task.id.requested": "task-a",
                "a2a.task.state": "TASK_STATE_SUBMITTED",
                "otel_a2a.task.state.raw": "submitted",
            },
        )
    ]
    assert divergences(span) == []  # A was seen waiting for input: the decision is authoritative
    # B observed as B; A exactly as it was
    new = ledger(new_id)
    assert new is not None and (new.state.value, new.source) == ("submitted", "SendMessage")
    after = ledger("task-a")
    assert before is not None and after is before
    assert (after.state.value, after.source) == ("input-required", "GetTask")
    assert otel.total("otel_a2a.divergence") == 0


def test_a_streamed_follow_up_answered_with_a_new_task(otel: Harness, clock: Clock) -> None:
    """The stream carries only B: its frames refresh B, not A; the swap shows once; the
    stream ends at B's terminal state, which is a normal end."""

    def frame(result: dict[str, Any]) -> bytes:
        return (
            b"data: " + json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode() + b"\n\n"
        )

    def status(state: str) -> bytes:
        update = {"taskId": "task-b", "contextId": "c", "status": {"state": state}}
        return frame({"statusUpdate": update})

    def chunks() -> Iterator[bytes]:
        task = {"id": "task-b", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}
        yield frame({"task": task})
        clock.advance(5)
        yield status("TASK_STATE_WORKING")
        clock.advance(5)
        yield b": ping\n\n"
        yield status("TASK_STATE_COMPLETED")

    agent = FakeAgent(states={"task-a": "TASK_STATE_WORKING"}, sse=chunks())
    message = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [], "taskId": "task-a"}}
    with agent.client() as client:
        agent.rpc(client, "GetTask", {"id": "task-a"})
        seen_at = clock.now
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": message}
        with client.stream("POST", "/a2a", json=body, headers=V1) as r:
            r.read()

    span = otel.span("SendStreamingMessage")
    attrs = dict(span.attributes or {})
    assert attrs["a2a.task.id"] == "task-a" and "a2a.task.state" not in attrs
    assert [name for name, _ in events(span)] == [
        "otel_a2a.task.swapped",
        "otel_a2a.task.status",
        "otel_a2a.task.status",
    ]  # no otel_a2a.stream.abnormal_end: the stream ended at the task's terminal state
    assert events(span)[0][1] == {
        "a2a.task.id": "task-b",
        "otel_a2a.task.id.requested": "task-a",
        "a2a.task.state": "TASK_STATE_SUBMITTED",
    }
    named = ledger("task-a")
    assert named is not None and named.at == seen_at and named.state.value == "working"
    other = ledger("task-b")
    assert other is not None and other.state.value == "completed" and other.at == clock.now


def test_a_stream_that_reported_the_named_task_first_keeps_it_alive(
    otel: Harness, clock: Clock
) -> None:
    """Frames of A, then of B: the stream is about both, and both stay refreshed."""

    def status(task: str, state: str) -> bytes:
        update = {"taskId": task, "contextId": "c", "status": {"state": state}}
        doc = {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": update}}
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    def chunks() -> Iterator[bytes]:
        yield status("task-a", "TASK_STATE_WORKING")
        yield status("task-b", "TASK_STATE_WORKING")
        clock.advance(5)
        yield b": ping\n\n"

    agent = FakeAgent(sse=chunks())
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "task-a"}}
    with agent.client() as client, client.stream("POST", "/a2a", json=body, headers=V1) as r:
        r.read()
    span = otel.span("SubscribeToTask")
    assert (
        dict(span.attributes or {})["a2a.task.state"] == "TASK_STATE_WORKING"
    )  # A's, from its frame
    assert [name for name, _ in events(span)] == [
        "otel_a2a.task.status",
        "otel_a2a.task.status",
        "otel_a2a.task.swapped",
        "otel_a2a.stream.abnormal_end",  # it closed with both tasks working
    ]
    for task in ("task-a", "task-b"):
        obs = ledger(task)
        assert obs is not None and obs.at == clock.now, task
