"""Error replies that state a task's state, from the three real SDK servers.

A task is seen waiting for input, then ends out of this process' sight (a message sent with
otel-a2a suppressed, as another caller would), and the process acts on what it saw: it follows
the task up, or cancels it. The agent refuses, and its error says why: "Task … is in terminal
state: TASK_STATE_FAILED" (a2a-sdk), "… is in a terminal state (4) …" (@a2a-js/sdk, a v1.0 enum
number), 'task in a terminal state "TASK_STATE_FAILED"' (a2a-go, an InvalidParams), or only
"not cancelable" (a2a-go names the state there too). What the reply says is recorded; the reply
itself is no divergence (the decision was judged before the request left, on a fresh
observation); the next decision is judged on it. Every peer, v1.0 and v0.3, JSON-RPC and
HTTP+JSON, with the a2a-sdk client. No sleeps: every wait is on an answer.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types import CancelTaskRequest
from a2a.utils.errors import A2AError as SdkError
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import ReadableSpan

from otel_a2a import liveness_decision
from otel_a2a.detect.detector import ERROR_REPLY
from otel_a2a.detect.ledger import Observation
from otel_a2a.instrumentation import runtime
from tests.instrumentation.conftest import Harness, divergences
from tests.instrumentation.test_real_peers import (
    MODES,
    PEERS,
    Mode,
    canonical,
    clients,
    message,
    only_task,
    resolve,
    run,
    tracked,
)


@pytest.fixture(params=PEERS)
def peer(request: pytest.FixtureRequest) -> str:
    base: str = request.getfixturevalue(f"{request.param}_peer")
    return base


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    value: Mode = request.param
    return value


def observation(task_id: str) -> Observation | None:
    rt = runtime.current()
    assert rt is not None
    return rt.detector.ledger.get(task_id)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def error_type(mode: Mode, code: int) -> str:
    """The convention's ``error.type``: JSON-RPC, the code; HTTP+JSON, the HTTP status (400 for
    both errors here: ``otel_a2a.error.reason`` tells them apart)."""
    return str(code) if mode.jsonrpc else "400"


def next_decision(task_id: str, otel: Harness) -> list[str]:
    with liveness_decision(task_id):
        pass
    return divergences(otel.spans("liveness_decision")[-1])


@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
def test_a_follow_up_to_a_task_that_failed_meanwhile(
    otel: Harness, peer: str, mode: Mode, streamed: bool
) -> None:
    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, _ = await resolve(http, peer)
            client, streaming = await clients(http, card, mode)
            waiting = await only_task(client.send_message(message("input please")))
            with suppress_instrumentation():  # the task fails out of this process' sight
                failed = await only_task(client.send_message(message("fail now", waiting)))
            sender = streaming if streamed else client
            refusal = sender.send_message(message("echo again", waiting))
            if streamed and not mode.jsonrpc and "Go" in card.name:
                # a2a-go sends the refusal as an error frame in a 200 stream, which the
                # a2a-sdk HTTP+JSON client reads as one empty event: no error reaches the app
                assert [e.WhichOneof("payload") async for e in refusal] == [None]
            else:
                with pytest.raises(SdkError):  # UnsupportedOperationError, HTTP 400, ...
                    [e async for e in refusal]
        return locals()

    seen = run(scenario())
    waiting, failed = seen["waiting"], seen["failed"]
    assert canonical(waiting.status.state) == "input-required"
    assert canonical(failed.status.state) == "failed" and failed.id == waiting.id
    [follow_up] = otel.spans("SendStreamingMessage" if streamed else "SendMessage")[-1:]
    assert attrs(follow_up)["a2a.task.id"] == waiting.id
    assert "a2a.task.state" not in attrs(follow_up)  # a message is no wire state
    assert divergences(follow_up) == []  # a fresh task waiting for input: authoritative
    assert otel.total("otel_a2a.divergence") == 0  # nothing raised on the reply
    obs = observation(waiting.id)
    assert obs is not None

    if streamed and not mode.jsonrpc and mode.version == "0.3" and "Python" in seen["card"].name:
        # a2a-sdk's v0.3 HTTP+JSON stream opens, then the server fails inside it: nothing of
        # the refusal reaches the wire, so nothing is learnt and nothing guessed
        assert (obs.state.value, obs.source) == ("input-required", "SendMessage")
        assert [e.name for e in follow_up.events] == ["otel_a2a.stream.abnormal_end"]
        assert next_decision(waiting.id, otel) == []
        return
    reason, code = ("UNSUPPORTED_OPERATION", -32004)
    if "Go" in seen["card"].name:
        reason, code = ("INVALID_PARAMS", -32602)  # a2a-go's answer to a terminal task
    assert attrs(follow_up)["error.type"] == error_type(mode, code)
    assert attrs(follow_up)["otel_a2a.error.reason"] == reason
    assert attrs(follow_up)["otel_a2a.error.task_state"] == "TASK_STATE_FAILED"
    assert follow_up.status.description == reason
    assert (obs.state.value, obs.source) == ("failed", ERROR_REPLY)
    assert obs.raw in ("TASK_STATE_FAILED", "4")  # a2a-sdk and a2a-go, @a2a-js/sdk
    assert follow_up.events == ()  # a refusal saying terminal ends a stream normally
    assert next_decision(waiting.id, otel) == ["terminal_state"]
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


def test_a_cancel_of_a_task_that_completed_meanwhile(otel: Harness, peer: str, mode: Mode) -> None:
    """TaskNotCancelable says no state: the task seen waiting is now ``unknown``, which
    authorises nothing. A task seen completed stays completed."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, _ = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            waiting = await only_task(client.send_message(message("input please")))
            with suppress_instrumentation():
                done = await only_task(client.send_message(message("echo done", waiting)))
            with pytest.raises(SdkError):
                await client.cancel_task(CancelTaskRequest(id=waiting.id))
            seen_done = await only_task(client.send_message(message("echo seen")))
            with pytest.raises(SdkError):
                await client.cancel_task(CancelTaskRequest(id=seen_done.id))
        return locals()

    seen = run(scenario())
    waiting, done, seen_done = seen["waiting"], seen["done"], seen["seen_done"]
    assert canonical(done.status.state) == "completed" and done.id == waiting.id
    first, second = otel.spans("CancelTask")
    for span in (first, second):
        assert attrs(span)["error.type"] == error_type(mode, -32002)
        assert attrs(span)["otel_a2a.error.reason"] == "TASK_NOT_CANCELABLE"
        # a2a-go names the state in its refusal; the others name none
        stated = "TASK_STATE_COMPLETED" if "Go" in seen["card"].name else None
        assert attrs(span).get("otel_a2a.error.task_state") == stated
        assert span.status.description == "TASK_NOT_CANCELABLE"
        assert "a2a.task.state" not in attrs(span)
    assert divergences(first) == []  # judged before it left, on a fresh observation
    assert divergences(second) == ["terminal_state"]  # it was seen completed: the decision
    assert otel.total("otel_a2a.divergence") == 1  # and nothing on either reply

    obs = observation(waiting.id)
    kept = observation(seen_done.id)
    assert obs is not None and kept is not None
    if "Go" in seen["card"].name:
        # a2a-go: "task in non-cancelable state TASK_STATE_COMPLETED": the state is named
        assert (obs.state.value, obs.raw, obs.source) == (
            "completed",
            "TASK_STATE_COMPLETED",
            ERROR_REPLY,
        )
        assert (kept.state.value, kept.source) == ("completed", ERROR_REPLY)
        assert next_decision(waiting.id, otel) == ["terminal_state"]
        assert next_decision(seen_done.id, otel) == ["terminal_state"]
        assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}
        return
    assert (kept.state.value, kept.source) == ("completed", "SendMessage")
    assert (obs.state.value, obs.raw, obs.source) == ("unknown", "TASK_NOT_CANCELABLE", ERROR_REPLY)
    assert next_decision(waiting.id, otel) == ["no_observation"]
    assert next_decision(seen_done.id, otel) == ["terminal_state"]
    assert tracked(otel) == {"active": 1, "interrupted": 0, "terminal": 1}  # unknown: active
