"""Spans, events and metrics against the A2A Java SDK's server, driven by the a2a-sdk client.

The peer is the demo's JVM worker jar in its test-peer mode (``--agent behave``: the same
behaviours as the Python and Node peers), on the A2A Java SDK 1.0.0.Alpha3 (``make jvm``),
over v1.0 JSON-RPC and v1.0 HTTP+JSON (that SDK line has no v0.3 layer). The scenarios mirror
``test_real_peers.py``; what differs is the Java SDK's wire (``tests/fixtures/README.md``): a
quoted MD5 card ``ETag`` without 304 revalidation (and, with other flags of the peer, with
one, or none), class-named HTTP+JSON errors, TaskNotFound for a subscription to a finished
task. Nothing is mocked, no sleeps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
)
from opentelemetry.instrumentation.utils import suppress_instrumentation

from tests.instrumentation.conftest import AheadClock, Harness, divergences
from tests.instrumentation.test_real_peers import (
    HEARTBEAT,
    Agent,
    Mode,
    attrs,
    background,
    canonical,
    card_url,
    clients,
    message,
    only_task,
    resolve,
    run,
    status_events,
    streamed_updates,
    task_attrs,
    tracked,
)
from tests.support import in_ci
from tests.support.peers import jvm_problem, running_peer

pytestmark = pytest.mark.jvm

MODES = [
    pytest.param(Mode("JSONRPC", "1.0"), id="jsonrpc-1.0"),
    pytest.param(Mode("HTTP+JSON", "1.0"), id="rest-1.0"),
]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    value: Mode = request.param
    return value


@pytest.fixture
def peer(jvm_peer: str) -> str:
    return jvm_peer


@pytest.fixture
def card_peer(request: pytest.FixtureRequest) -> Iterator[str]:
    """A JVM peer of its own with ``--card-etag <param>`` (``md5``: 304 on revalidation;
    ``none``: no ``ETag`` at all)."""
    reason = jvm_problem()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the JVM A2A peer cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    with running_peer("jvm", options=("--card-etag", request.param)) as started:
        yield started.base_url


def _fetch_three_times(base: str) -> tuple[str, list[httpx.Response]]:
    """The resolver's fetch, a plain one, and one revalidating the plain one's ``ETag``."""

    async def scenario() -> tuple[str, list[httpx.Response]]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card = await A2ACardResolver(http, base).get_agent_card()
            first = await http.get(card_url(base))
            validators = {"If-None-Match": first.headers["etag"]} if "etag" in first.headers else {}
            again = await http.get(card_url(base), headers=validators)
        return card.name, [first, again]

    return run(scenario())


def _card_spans(otel: Harness, base: str, name: str, etag: str, statuses: list[int]) -> None:
    spans = otel.spans("GetAgentCard")
    assert len(spans) == 3 and otel.spans() == spans
    expected = {
        "a2a.method.name": "GetAgentCard",
        "otel_a2a.agent.url": base,
        "server.address": httpx.URL(base).host,
        "server.port": httpx.URL(base).port,
        "gen_ai.agent.name": name,
        "gen_ai.agent.version": "1.0.0",
        "gen_ai.agent.description": "A2A Java SDK peer whose behaviour follows the message text",
        "otel_a2a.card.streaming": True,
        "otel_a2a.card.etag": etag,
        "otel_a2a.card.heartbeat_interval": HEARTBEAT,
        "otel_a2a.card.etag.changed": False,
    }
    for span, status in zip(spans, statuses, strict=True):
        assert attrs(span) == {**expected, "http.response.status_code": status}
        assert span.events == ()
    assert otel.total("otel_a2a.card.etag.changes") == 0
    assert otel.total("otel_a2a.divergence") == 0


# -- card -------------------------------------------------------------------------------------


def test_card_quoted_md5_etag_revalidated_with_the_full_card(otel: Harness, peer: str) -> None:
    """The default: a strong quoted MD5 ``ETag``, and ``If-None-Match`` answered 200 with the
    same card: the same etag three times, no change, no redeploy."""
    name, (first, again) = _fetch_three_times(peer)
    etag = first.headers["etag"]
    assert etag == '"' + hashlib.md5(first.content).hexdigest() + '"'
    assert again.status_code == 200 and again.headers["etag"] == etag
    _card_spans(otel, peer, name, etag, [200, 200, 200])


@pytest.mark.parametrize("card_peer", ["md5"], indirect=True)
def test_card_revalidated_with_304(otel: Harness, card_peer: str) -> None:
    name, (first, again) = _fetch_three_times(card_peer)
    assert again.status_code == 304 and again.content == b""
    _card_spans(otel, card_peer, name, first.headers["etag"], [200, 200, 304])


@pytest.mark.parametrize("card_peer", ["none"], indirect=True)
def test_card_without_etag_gets_a_content_hash(otel: Harness, card_peer: str) -> None:
    """No ``ETag``: otel-a2a's etag is the hash of the card's canonical JSON, the same on every
    fetch of the same card (so no change is seen)."""
    name, (first, again) = _fetch_three_times(card_peer)
    assert "etag" not in first.headers and again.status_code == 200
    etag = str(attrs(otel.spans("GetAgentCard")[0])["otel_a2a.card.etag"])
    assert etag.startswith("sha256:") and len(etag) == len("sha256:") + 64
    _card_spans(otel, card_peer, name, etag, [200, 200, 200])


# -- request/response operations --------------------------------------------------------------


def test_send_get_list_cancel(otel: Harness, peer: str, mode: Mode) -> None:
    """SendMessage, GetTask twice, ListTasks, then a slow task polled and cancelled."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            done = await only_task(client.send_message(message("echo hi")))
            got = await client.get_task(GetTaskRequest(id=done.id))
            again = await client.get_task(GetTaskRequest(id=done.id))
            listed = await client.list_tasks(ListTasksRequest(context_id=done.context_id))
            slow = await only_task(client.send_message(background("slow poll")))
            polled = await client.get_task(GetTaskRequest(id=slow.id))
            canceled = await client.cancel_task(CancelTaskRequest(id=slow.id))
        return locals()

    seen = run(scenario())
    agent: Agent = seen["agent"]
    done, slow, polled = seen["done"], seen["slow"], seen["polled"]
    assert canonical(done.status.state) == "completed"
    assert canonical(seen["canceled"].status.state) == "canceled"
    slow_state, polled_state = canonical(slow.status.state), canonical(polled.status.state)
    assert slow_state in ("submitted", "working") and polled_state in ("submitted", "working")
    assert [t.id for t in seen["listed"].tasks] == [done.id]

    assert [attrs(s) for s in otel.spans("SendMessage")] == [
        task_attrs(agent, mode, "SendMessage", done, "completed"),
        task_attrs(agent, mode, "SendMessage", slow, slow_state),
    ]
    assert [attrs(s) for s in otel.spans("GetTask")] == [
        task_attrs(agent, mode, "GetTask", done, "completed"),
        task_attrs(agent, mode, "GetTask", done, "completed"),
        task_attrs(agent, mode, "GetTask", slow, polled_state),
    ]
    assert attrs(otel.span("ListTasks")) == task_attrs(agent, mode, "ListTasks", done, "completed")
    cancel = otel.span("CancelTask")
    assert attrs(cancel) == task_attrs(agent, mode, "CancelTask", slow, "canceled", decision=True)
    assert all(divergences(s) == [] and s.events == () for s in otel.spans())
    assert otel.points("otel_a2a.liveness.decisions") == [
        ({"otel_a2a.decision.outcome": "authoritative", "otel_a2a.agent.name": agent.name}, 1)
    ]
    assert otel.total("otel_a2a.divergence") == 0
    assert otel.points("otel_a2a.task.get.redundant") == [({"otel_a2a.agent.name": agent.name}, 3)]
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}


def test_get_and_cancel_of_unknown_or_finished_tasks(otel: Harness, peer: str, mode: Mode) -> None:
    """TaskNotFound (HTTP+JSON: 404 and ``io.a2a.spec.TaskNotFoundError``) is an error of
    that reason, for a task never seen no loss; a CancelTask of a finished task is
    TaskNotCancelable (HTTP+JSON: 409), a ``terminal_state`` decision."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            done = await only_task(client.send_message(message("echo hi")))
            errors = []
            for call in (
                client.get_task(GetTaskRequest(id="no-such-task")),
                client.cancel_task(CancelTaskRequest(id=done.id)),
            ):
                try:
                    await call
                except Exception as exc:  # the SDK client's own error types differ per binding
                    errors.append(exc)
        return locals()

    seen = run(scenario())
    assert len(seen["errors"]) == 2
    get = otel.span("GetTask")
    assert attrs(get)["a2a.task.id"] == "no-such-task"
    # JSON-RPC: the code; HTTP+JSON: the status; the reason (HTTP+JSON: read off the Java
    # class name) beside it
    assert attrs(get)["error.type"] == ("-32001" if mode.jsonrpc else "404")
    assert attrs(get)["otel_a2a.error.reason"] == "TASK_NOT_FOUND"
    assert attrs(get)["http.response.status_code"] == (200 if mode.jsonrpc else 404)
    assert get.status.status_code.name == "ERROR"
    cancel = otel.span("CancelTask")
    assert cancel.status.status_code.name == "ERROR"
    assert attrs(cancel)["error.type"] == ("-32002" if mode.jsonrpc else "409")
    assert attrs(cancel)["otel_a2a.error.reason"] == "TASK_NOT_CANCELABLE"
    assert attrs(cancel)["http.response.status_code"] == (200 if mode.jsonrpc else 409)
    # the state the error reply stated, as the convention spells states (no wire spelling)
    assert attrs(cancel)["otel_a2a.error.task_state"] == "TASK_STATE_COMPLETED"
    assert "a2a.task.state" not in attrs(cancel) and "otel_a2a.task.state.raw" not in attrs(cancel)
    # cancelling a task last seen completed is a decision on a terminal task: its error reply
    # confirms the state the decision ignored
    assert divergences(cancel) == ["terminal_state"]
    [event] = [e for e in cancel.events if e.name == "otel_a2a.divergence"]
    assert (
        event.attributes is not None
        and event.attributes["a2a.task.state"] == "TASK_STATE_COMPLETED"
    )
    assert otel.points("otel_a2a.divergence") == [
        (
            {
                "otel_a2a.divergence.reason": "terminal_state",
                "a2a.method.name": "CancelTask",
                "otel_a2a.agent.name": seen["agent"].name,
            },
            1,
        )
    ]
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


# -- streams ----------------------------------------------------------------------------------


def test_streamed_status_updates_and_follow_up(otel: Harness, peer: str, mode: Mode) -> None:
    """SendStreamingMessage to completion, then to input-required and a follow-up."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, streaming = await clients(http, card, mode)
            echo = [e async for e in streaming.send_message(message("echo stream"))]
            asked = [e async for e in streaming.send_message(message("input please"))]
            waiting = asked[0].task
            followed = await only_task(client.send_message(message("echo done", waiting)))
        return locals()

    seen = run(scenario())
    agent: Agent = seen["agent"]
    echo, asked, followed = seen["echo"], seen["asked"], seen["followed"]
    assert echo[0].HasField("task") and asked[0].HasField("task")
    echo_task, waiting = echo[0].task, seen["waiting"]

    streams = otel.spans("SendStreamingMessage")
    assert len(streams) == 2
    assert status_events(streams[0]) == streamed_updates(mode, echo)
    assert [s for _, s, _ in status_events(streams[0])] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert status_events(streams[1]) == streamed_updates(mode, asked)
    assert [s for _, s, _ in status_events(streams[1])] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
    ]
    for span in streams:
        assert [e.name for e in span.events] == ["otel_a2a.task.status", "otel_a2a.task.status"]
    assert attrs(streams[0]) == task_attrs(
        agent, mode, "SendStreamingMessage", echo_task, "completed"
    )
    assert attrs(streams[1]) == task_attrs(
        agent, mode, "SendStreamingMessage", waiting, "input-required"
    )
    assert canonical(followed.status.state) == "completed" and followed.id == waiting.id
    send = otel.span("SendMessage")
    assert attrs(send) == task_attrs(
        agent, mode, "SendMessage", followed, "completed", decision=True
    )
    assert divergences(send) == [] and send.events == ()
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}


def test_subscribe_to_slow_task_then_cancel(otel: Harness, peer: str, mode: Mode) -> None:
    """SubscribeToTask on a task that keeps working; a CancelTask ends task and stream."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, streaming = await clients(http, card, mode)
            slow = await only_task(client.send_message(background("slow subscribe")))
            subscription = streaming.subscribe(SubscribeToTaskRequest(id=slow.id))
            first = await anext(subscription)  # the SDK sends the task first
            canceled = await client.cancel_task(CancelTaskRequest(id=slow.id))
            rest = [e async for e in subscription]
        return locals()

    seen = run(scenario())
    agent: Agent = seen["agent"]
    slow, first, rest = seen["slow"], seen["first"], seen["rest"]
    assert first.HasField("task") and first.task.id == slow.id
    assert canonical(seen["canceled"].status.state) == "canceled"
    assert [canonical(e.status_update.status.state) for e in rest] == ["canceled"]

    span = otel.span("SubscribeToTask")
    assert attrs(span) == task_attrs(agent, mode, "SubscribeToTask", slow, "canceled")
    assert status_events(span) == streamed_updates(mode, [first, *rest])
    assert [e.name for e in span.events] == ["otel_a2a.task.status"]
    cancel = otel.span("CancelTask")
    assert attrs(cancel) == task_attrs(agent, mode, "CancelTask", slow, "canceled", decision=True)
    assert divergences(cancel) == []
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


def test_subscribing_to_a_finished_task_is_no_lost_task(otel: Harness, peer: str) -> None:
    """a2a-java answers SubscribeToTask on a finished task with TaskNotFound (-32001), where
    a2a-sdk answers UnsupportedOperation: the task was last seen completed, which an agent may
    forget, so it is no ``task_lost``."""
    mode = Mode("JSONRPC", "1.0")

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, streaming = await clients(http, card, mode)
            done = await only_task(client.send_message(message("echo finished")))
            try:
                events = [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=done.id))]
            except Exception as exc:
                events = [exc]
        return locals()

    seen = run(scenario())
    assert len(seen["events"]) == 1 and isinstance(seen["events"][0], Exception)
    span = otel.span("SubscribeToTask")
    assert attrs(span)["a2a.task.id"] == seen["done"].id
    assert (attrs(span)["error.type"], attrs(span)["rpc.response.status_code"]) == (
        "-32001",
        "-32001",
    )
    # the stream ended on an error, not a state: abnormal, but no divergence
    assert [e.name for e in span.events] == ["otel_a2a.stream.abnormal_end"]
    assert otel.total("otel_a2a.divergence") == 0
    # the agent forgot a finished task: it leaves the ledger
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 0}


# -- divergences ------------------------------------------------------------------------------


def test_follow_up_to_a_task_never_observed(otel: Harness, peer: str, mode: Mode) -> None:
    """Another process created the task: this one decides with no observation of it."""

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            with suppress_instrumentation():  # the task is created out of our sight
                elsewhere = await only_task(client.send_message(message("input elsewhere")))
            followed = await only_task(client.send_message(message("echo here", elsewhere)))
        return locals()

    seen = run(scenario())
    agent: Agent = seen["agent"]
    elsewhere, followed = seen["elsewhere"], seen["followed"]
    assert canonical(elsewhere.status.state) == "input-required"
    assert canonical(followed.status.state) == "completed" and followed.id == elsewhere.id
    assert [s.name for s in otel.spans()] == ["GetAgentCard", "SendMessage"]
    send = otel.span("SendMessage")
    assert attrs(send) == task_attrs(
        agent, mode, "SendMessage", followed, "completed", decision=True
    )
    assert divergences(send) == ["no_observation"]
    assert otel.points("otel_a2a.liveness.decisions") == [
        ({"otel_a2a.decision.outcome": "divergent", "otel_a2a.agent.name": agent.name}, 1)
    ]


def test_a_task_waiting_for_the_caller_owes_no_heartbeat(
    otel: Harness, ahead: AheadClock, peer: str, mode: Mode
) -> None:
    """One task left ``input-required``, another working; past the heartbeat (no sleep) the
    stale gauge counts the working one only, the follow-up on the waiting one is
    authoritative, a cancel of the working one a ``heartbeat_gap``."""

    async def ask() -> tuple[AgentCard, Agent, Task, Task]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            waiting = await only_task(client.send_message(message("input please")))
            slow = await only_task(client.send_message(background("slow meanwhile")))
        return card, agent, waiting, slow

    async def answer(card: AgentCard) -> tuple[Task, Task]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            client, _ = await clients(http, card, mode)
            followed = await only_task(client.send_message(message("echo done", waiting)))
            canceled = await client.cancel_task(CancelTaskRequest(id=slow.id))
        return followed, canceled

    card, agent, waiting, slow = run(ask())
    assert otel.points("otel_a2a.task.stale") == [({"otel_a2a.agent.name": agent.name}, 0)]
    ahead.advance(HEARTBEAT + 1)
    assert otel.points("otel_a2a.task.stale") == [({"otel_a2a.agent.name": agent.name}, 1)]
    assert tracked(otel) == {"active": 1, "interrupted": 1, "terminal": 0}

    followed, canceled = run(answer(card))
    assert canonical(followed.status.state) == "completed" and followed.id == waiting.id
    assert canonical(canceled.status.state) == "canceled"
    send = next(s for s in otel.spans("SendMessage") if attrs(s)["a2a.task.id"] == waiting.id)
    assert divergences(send) == []
    assert divergences(otel.span("CancelTask")) == ["heartbeat_gap"]
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}


def test_late_stream_frame_after_a_newer_response_is_no_regression(
    otel: Harness, peer: str, mode: Mode
) -> None:
    """A follow-up completes a subscribed slow task; the Java SDK runs it beside the waiting
    execution, and the stream's frames, read after the completed reply, never regress."""

    async def scenario() -> tuple[Task, list[StreamResponse], dict[str, float]]:
        async with httpx.AsyncClient(timeout=10.0) as http:
            card = await A2ACardResolver(http, peer).get_agent_card()
            client, streaming = await clients(http, card, mode)
            slow = await only_task(client.send_message(background("slow x")))
            sub = streaming.subscribe(SubscribeToTaskRequest(id=slow.id))
            await anext(sub)  # the Task snapshot: the stream is open
            done = await only_task(client.send_message(message("echo done", slow)))
            after = tracked(otel)
            rest = [e async for e in sub]
            return done, rest, after

    done, rest, after = run(scenario())
    assert canonical(done.status.state) == "completed"
    states = [canonical(e.status_update.status.state) for e in rest if e.HasField("status_update")]
    assert states[-1] == "completed", rest
    assert divergences(otel.span("SubscribeToTask")) == []
    assert after == {"active": 0, "interrupted": 0, "terminal": 1}
    assert otel.total("otel_a2a.divergence") == 0
