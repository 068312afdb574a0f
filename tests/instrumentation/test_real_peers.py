"""Spans, events and metrics against the two real SDK servers, driven by the a2a-sdk client.

Both peers (a2a-sdk 1.3 under uvicorn, @a2a-js/sdk 1.3 under Node; ``tests/conftest.py``) over
v1.0 JSON-RPC, v1.0 HTTP+JSON, v0.3 JSON-RPC and v0.3 HTTP+JSON. Nothing is mocked: the wire
is whatever the SDKs put on it, and every expected value is either a contract constant
(``otel_a2a.semconv``) or read from what the application itself received (the card's ``ETag``
header, the task the SDK client decoded). No sleeps: every wait is on an event the peer sends.

The a2a-sdk client is handed an ``AsyncClient`` of httpx or of httpx2 (``http_lib``, see
``conftest``): it uses
the client's API only, which httpx2 shares, and otel-a2a must see the same through either.

The a2a-sdk client picks the v1.0 interface whenever the card offers one; v0.3 JSON-RPC is
selected by handing the factory the same card with only its 0.3 JSON-RPC interface (both peers
declare one), which is what a client pinned to 0.3 sees. v0.3 JSON-RPC has no ``tasks/list``
(the SDK refuses it locally, no request leaves), so ListTasks is exercised on v1.0 only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import ReadableSpan

from tests.instrumentation.conftest import AheadClock, Harness, divergences, resolved

T = TypeVar("T")

PEERS = [
    "python",
    pytest.param("node", marks=pytest.mark.node),
    pytest.param("go", marks=pytest.mark.go),
]
# a2a-go refuses a message to a task whose execution runs (one execution per task at a time)
FOLLOW_UP_WHILE_RUNNING = ["python", pytest.param("node", marks=pytest.mark.node)]
HEARTBEAT = 30.0  # both peers' card extension urn:otel-a2a:heartbeat:v1
TIMEOUT = 20.0  # whole-scenario guard; every scenario finishes in well under a second


@dataclass(frozen=True)
class Mode:
    binding: str
    version: str

    @property
    def jsonrpc(self) -> bool:
        return self.binding == "JSONRPC"


MODES = [
    pytest.param(Mode("JSONRPC", "1.0"), id="jsonrpc-1.0"),
    pytest.param(Mode("HTTP+JSON", "1.0"), id="rest-1.0"),
    pytest.param(Mode("JSONRPC", "0.3"), id="jsonrpc-0.3"),
    pytest.param(Mode("HTTP+JSON", "0.3"), id="rest-0.3"),
]
V03_METHODS = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
}


@pytest.fixture(params=PEERS)
def peer(request: pytest.FixtureRequest) -> str:
    """Base URL of the session's Python or Node peer (Node fails loudly under CI=true)."""
    base: str = request.getfixturevalue(f"{request.param}_peer")
    return base


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    value: Mode = request.param
    return value


# -- helpers ----------------------------------------------------------------------------------


def run(coro: Awaitable[T]) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(guarded())


def card_url(base: str) -> str:
    return base + "/.well-known/agent-card.json"


def card_etag(base: str) -> str:
    """The card's ``ETag`` header, read with otel-a2a suppressed (no span, no registry entry);
    a card without one (a2a-go's) is known by the sha256 of its canonical JSON, computed here
    with ``json.dumps`` (the JCS form for a card of plain strings, integers and booleans)."""
    with suppress_instrumentation(), httpx.Client(timeout=10.0) as http:
        response = http.get(card_url(base))
    assert response.status_code == 200
    if "etag" in response.headers:
        return str(response.headers["etag"])
    text = json.dumps(response.json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def canonical(state: int) -> str:
    """``TaskState.TASK_STATE_INPUT_REQUIRED`` → ``input-required`` (canonical vocabulary)."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def wire(mode: Mode, state: str) -> str:
    """The exact spelling the peer puts on the wire for ``state`` under ``mode``."""
    if mode.version == "0.3" and mode.jsonrpc:
        return state
    spelt = "TASK_STATE_" + state.upper().replace("-", "_")
    if mode.version == "0.3":  # v0.3 HTTP+JSON is the v0.3 proto's JSON: CANCELLED
        return spelt.replace("CANCELED", "CANCELLED")
    return spelt


def message(text: str, task: Task | None = None) -> SendMessageRequest:
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task is not None:
        msg.task_id = task.id
        msg.context_id = task.context_id
    return SendMessageRequest(message=msg)


def background(text: str) -> SendMessageRequest:
    """A message answered as soon as the task exists (``returnImmediately``)."""
    request = message(text)
    request.configuration.return_immediately = True
    return request


def for_mode(card: AgentCard, mode: Mode) -> AgentCard:
    """``card`` with only the interface ``mode`` names, so the factory cannot pick another."""
    chosen = AgentCard()
    chosen.CopyFrom(card)
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == mode.binding and i.protocol_version == mode.version
    ]
    assert len(keep) == 1, f"the peer's card declares no {mode}"
    del chosen.supported_interfaces[:]
    chosen.supported_interfaces.extend(keep)
    return chosen


async def clients(http: httpx.AsyncClient, card: AgentCard, mode: Mode) -> tuple[Client, Client]:
    """A non-streaming and a streaming a2a-sdk client on the interface of ``mode``."""
    selected = for_mode(card, mode)
    made = []
    for streaming in (False, True):
        config = ClientConfig(
            streaming=streaming, supported_protocol_bindings=[mode.binding], httpx_client=http
        )
        made.append(await create_client(selected, client_config=config))
    return made[0], made[1]


async def only_task(events: AsyncIterator[StreamResponse]) -> Task:
    received = [e async for e in events]
    assert len(received) == 1 and received[0].HasField("task"), received
    return received[0].task


@dataclass(frozen=True)
class Agent:
    base: str
    name: str
    etag: str
    version: str = ""
    description: str = ""
    interfaces: tuple[tuple[str, str, str], ...] = ()  # (binding, version, url)

    @classmethod
    def of(cls, base: str, card: AgentCard, etag: str) -> Agent:
        interfaces = tuple(
            (i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces
        )
        return cls(base, card.name, etag, card.version, card.description, interfaces)

    def server(self, mode: Mode) -> dict[str, Any]:
        """``server.address`` and ``server.port`` of the interface ``mode`` takes."""
        for binding, version, url in self.interfaces:
            if (binding, version) == (mode.binding, mode.version):
                parsed = httpx.URL(url if "://" in url else f"grpc://{url}")
                return {"server.address": parsed.host, "server.port": parsed.port}
        raise AssertionError(f"the card declares no {mode}")

    def card(self) -> dict[str, Any]:
        """What the card in force puts on every span (the convention's ``gen_ai.agent.*``)."""
        out = {"gen_ai.agent.name": self.name, "gen_ai.agent.version": self.version}
        if self.description:
            out["gen_ai.agent.description"] = self.description[:1024]
        return out


# ``a2a.message.id`` of a sent message, as ``attrs`` shows it: the SDK clients draw each one
MESSAGE_ID = "<a message id>"


def task_attrs(
    agent: Agent, mode: Mode, op: str, task: Task, state: str, *, decision: bool = False
) -> dict[str, Any]:
    """The exact attribute set of a task span that carried ``task`` in ``state``."""
    attrs: dict[str, Any] = {
        "a2a.method.name": op,
        "a2a.protocol.version": mode.version,
        "otel_a2a.binding": mode.binding,
        "otel_a2a.agent.url": agent.base,
        **agent.card(),
        **agent.server(mode),
        "otel_a2a.card.etag": agent.etag,
        "a2a.task.id": task.id,
        "gen_ai.conversation.id": task.context_id,
        "a2a.task.state": semconv_value(state),
        "otel_a2a.observation.authoritative": True,
        "http.response.status_code": 200,
    }
    if wire(mode, state) != semconv_value(state):  # else the spelling is a2a.task.state's
        attrs["otel_a2a.task.state.raw"] = wire(mode, state)
    if op == "SendMessage" and mode.version == "0.3" and not mode.jsonrpc and "Node" in agent.name:
        attrs["http.response.status_code"] = 201  # @a2a-js/sdk's v0.3 REST: 201 Created
    if mode.jsonrpc and mode.version == "0.3":  # recorded where it is not a2a.method.name
        attrs["otel_a2a.jsonrpc.method"] = V03_METHODS[op]
    if op in {"SendMessage", "SendStreamingMessage"}:
        attrs["a2a.message.id"] = MESSAGE_ID
    if decision:
        attrs["otel_a2a.liveness.decision"] = True
    return attrs


def attrs(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes; a message id (a fresh UUID per message) shown as ``MESSAGE_ID``."""
    out = dict(span.attributes or {})
    if "a2a.message.id" in out:
        assert isinstance(out["a2a.message.id"], str) and out["a2a.message.id"]
        out["a2a.message.id"] = MESSAGE_ID
    return out


def status_events(span: ReadableSpan) -> list[tuple[str, str, str]]:
    return [
        (
            str(e.attributes["a2a.task.id"]),
            str(e.attributes["a2a.task.state"]),
            # the wire's spelling: recorded where it is not a2a.task.state's
            str(e.attributes.get("otel_a2a.task.state.raw", e.attributes["a2a.task.state"])),
        )
        for e in span.events
        if e.name == "otel_a2a.task.status" and e.attributes
    ]


def semconv_value(state: str) -> str:
    """The convention's ``a2a.task.state`` value of a canonical state (``input-required``)."""
    return "TASK_STATE_" + state.upper().replace("-", "_")


def streamed_updates(mode: Mode, events: list[StreamResponse]) -> list[tuple[str, str, str]]:
    """What the ``otel_a2a.task.status`` events must be: one per status update the app received."""
    out = []
    for event in events:
        if event.HasField("status_update"):
            state = canonical(event.status_update.status.state)
            out.append((event.status_update.task_id, semconv_value(state), wire(mode, state)))
    return out


def tracked(otel: Harness) -> dict[str, float]:
    return {str(a["otel_a2a.task.state.class"]): v for a, v in otel.points("otel_a2a.task.tracked")}


async def resolve(http: httpx.AsyncClient, base: str) -> tuple[AgentCard, Agent]:
    """Fetch the card through the instrumented client (the agent's etag and name are learnt)."""
    etag = card_etag(base)
    card = await A2ACardResolver(http, base).get_agent_card()
    return card, Agent.of(base, card, etag)


# -- card -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "peer", ["python", pytest.param("node", marks=pytest.mark.node)], indirect=True
)
def test_card_fetch_and_304_revalidation(otel: Harness, http_lib: ModuleType, peer: str) -> None:
    async def scenario() -> tuple[AgentCard, list[httpx.Response]]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            card = await A2ACardResolver(http, peer).get_agent_card()
            first = await http.get(card_url(peer))
            again = await http.get(card_url(peer), headers={"If-None-Match": first.headers["etag"]})
        return card, [first, again]

    card, (first, again) = run(scenario())
    etag = first.headers["etag"]
    assert etag.startswith('W/"')
    assert again.status_code == 304 and again.content == b""

    spans = otel.spans("GetAgentCard")
    assert len(spans) == 3 and otel.spans() == spans
    expected = {
        "a2a.method.name": "GetAgentCard",
        "otel_a2a.agent.url": peer,
        "server.address": httpx.URL(peer).host,
        "server.port": httpx.URL(peer).port,
        "gen_ai.agent.name": card.name,
        "gen_ai.agent.version": "1.0.0",
        "gen_ai.agent.description": card.description,
        "otel_a2a.card.streaming": True,
        "otel_a2a.card.etag": etag,
        "otel_a2a.card.heartbeat_interval": HEARTBEAT,
        "otel_a2a.card.etag.changed": False,
    }
    statuses = [200, 200, 304]
    for span, status in zip(spans, statuses, strict=True):
        assert attrs(span) == {**expected, "http.response.status_code": status}
        assert span.events == ()
        assert span.kind.name == "CLIENT"
    # a card fetch is no observation and no decision; a 304 keeps the etag
    assert otel.total("otel_a2a.card.etag.changes") == 0
    assert otel.total("otel_a2a.liveness.decisions") == 0
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 0}


# -- request/response operations --------------------------------------------------------------


def test_send_get_list_cancel(otel: Harness, http_lib: ModuleType, peer: str, mode: Mode) -> None:
    """SendMessage, GetTask twice, ListTasks, then a slow task polled and cancelled."""

    async def scenario() -> dict[str, Any]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            done = await only_task(client.send_message(message("echo hi")))
            got = await client.get_task(GetTaskRequest(id=done.id))
            again = await client.get_task(GetTaskRequest(id=done.id))
            listed = None
            if mode.version == "1.0":
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
    # how far the slow task got before the poll is the peer's business: take what it answered
    slow_state, polled_state = canonical(slow.status.state), canonical(polled.status.state)
    assert slow_state in ("submitted", "working") and polled_state in ("submitted", "working")

    sends = otel.spans("SendMessage")
    gets = otel.spans("GetTask")
    assert [attrs(s) for s in sends] == [
        task_attrs(agent, mode, "SendMessage", done, "completed"),
        task_attrs(agent, mode, "SendMessage", slow, slow_state),
    ]
    assert [attrs(s) for s in gets] == [
        task_attrs(agent, mode, "GetTask", done, "completed"),
        task_attrs(agent, mode, "GetTask", done, "completed"),
        task_attrs(agent, mode, "GetTask", slow, polled_state),
    ]
    cancel = otel.span("CancelTask")
    assert attrs(cancel) == task_attrs(agent, mode, "CancelTask", slow, "canceled", decision=True)
    names = ["GetAgentCard", "SendMessage", "GetTask", "GetTask"]
    if mode.version == "1.0":
        listed = seen["listed"]
        assert [t.id for t in listed.tasks] == [done.id]
        span = otel.span("ListTasks")
        assert attrs(span) == task_attrs(agent, mode, "ListTasks", done, "completed")
        names.append("ListTasks")
    names += ["SendMessage", "GetTask", "CancelTask"]
    assert [s.name for s in otel.spans()] == names
    # CancelTask right after a GetTask: fresh, same etag, live -> authoritative, no divergence
    assert all(divergences(s) == [] and s.events == () for s in otel.spans())
    assert (
        otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="authoritative") == 1
    )
    assert otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="divergent") == 0
    assert otel.points("otel_a2a.liveness.decisions") == [
        ({"otel_a2a.decision.outcome": "authoritative", "otel_a2a.agent.name": agent.name}, 1)
    ]
    assert otel.total("otel_a2a.divergence") == 0
    # GetTask on a terminal task under the same etag, twice, and GetTask right after the
    # SendMessage that returned the fresh slow task: all three redundant
    assert otel.points("otel_a2a.task.get.redundant") == [({"otel_a2a.agent.name": agent.name}, 3)]
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}
    assert otel.total("otel_a2a.observation.age") == 1  # one decision, one age sample


# -- streams ----------------------------------------------------------------------------------


def test_streamed_status_updates_and_follow_up(
    otel: Harness, http_lib: ModuleType, peer: str, mode: Mode
) -> None:
    """SendStreamingMessage to completion, then to input-required and a follow-up."""

    async def scenario() -> dict[str, Any]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
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
    # one otel_a2a.task.status event per status update the application received, in order
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
    for span in streams:  # both ended in a terminal or interrupted state: no abnormal end
        assert [e.name for e in span.events] == ["otel_a2a.task.status", "otel_a2a.task.status"]
    assert attrs(streams[0]) == task_attrs(
        agent, mode, "SendStreamingMessage", echo_task, "completed"
    )
    assert attrs(streams[1]) == task_attrs(
        agent, mode, "SendStreamingMessage", waiting, "input-required"
    )

    # the follow-up is a liveness decision on a freshly observed interrupted task: authoritative
    assert canonical(followed.status.state) == "completed" and followed.id == waiting.id
    send = otel.span("SendMessage")
    assert attrs(send) == task_attrs(
        agent, mode, "SendMessage", followed, "completed", decision=True
    )
    assert divergences(send) == [] and send.events == ()
    assert otel.points("otel_a2a.liveness.decisions") == [
        ({"otel_a2a.decision.outcome": "authoritative", "otel_a2a.agent.name": agent.name}, 1)
    ]
    assert otel.total("otel_a2a.divergence") == 0
    assert otel.total("otel_a2a.task.get.redundant") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}


def test_subscribe_to_slow_task_then_cancel(
    otel: Harness, http_lib: ModuleType, peer: str, mode: Mode
) -> None:
    """SubscribeToTask on a task that keeps working; a CancelTask ends task and stream."""

    async def scenario() -> dict[str, Any]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, streaming = await clients(http, card, mode)
            slow = await only_task(client.send_message(background("slow subscribe")))
            subscription = streaming.subscribe(SubscribeToTaskRequest(id=slow.id))
            first = await anext(subscription)  # the stream is open: the peer sent the task
            canceled = await client.cancel_task(CancelTaskRequest(id=slow.id))
            rest = [e async for e in subscription]
        return locals()

    seen = run(scenario())
    agent: Agent = seen["agent"]
    slow, first, rest = seen["slow"], seen["first"], seen["rest"]
    assert first.HasField("task") and first.task.id == slow.id
    assert canonical(seen["canceled"].status.state) == "canceled"
    states = [canonical(e.status_update.status.state) for e in rest]
    # a peer may send its ``working`` after the subscription's snapshot (seen once from the
    # a2a-go peer on a loaded machine): the peer's own timing, passed on as it came
    assert states[-1] == "canceled" and set(states[:-1]) <= {"working"}

    span = otel.span("SubscribeToTask")
    assert attrs(span) == task_attrs(agent, mode, "SubscribeToTask", slow, "canceled")
    assert status_events(span) == streamed_updates(mode, [first, *rest])
    assert [e.name for e in span.events] == ["otel_a2a.task.status"] * len(states)
    # one per streamed update: no divergence, no abnormal end
    cancel = otel.span("CancelTask")
    assert attrs(cancel) == task_attrs(agent, mode, "CancelTask", slow, "canceled", decision=True)
    assert divergences(cancel) == []
    assert otel.points("otel_a2a.liveness.decisions") == [
        ({"otel_a2a.decision.outcome": "authoritative", "otel_a2a.agent.name": agent.name}, 1)
    ]
    assert otel.total("otel_a2a.divergence") == 0
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


# -- divergences ------------------------------------------------------------------------------


def test_follow_up_to_a_task_never_observed(
    otel: Harness, http_lib: ModuleType, peer: str, mode: Mode
) -> None:
    """Another process created the task: this one decides with no observation of it."""

    async def scenario() -> dict[str, Any]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
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
    # the decision is divergent, and the response is still an authoritative observation
    assert attrs(send) == task_attrs(
        agent, mode, "SendMessage", followed, "completed", decision=True
    )
    events = [(e.name, dict(e.attributes or {})) for e in send.events]
    assert events[-1][1].pop("otel_a2a.divergence.age") >= 0
    # the reply (the task completed by the follow-up the agent took) refutes the divergence
    assert events == [
        (
            "otel_a2a.divergence",
            {
                "otel_a2a.divergence.reason": "no_observation",
                "a2a.task.id": elsewhere.id,
                "otel_a2a.card.heartbeat_interval": HEARTBEAT,
                "otel_a2a.card.etag": agent.etag,
            },
        ),
        (
            "otel_a2a.divergence.resolved",
            {
                "otel_a2a.divergence.reason": "no_observation",
                "otel_a2a.divergence.outcome": "refuted",
                "a2a.task.id": elsewhere.id,
                "a2a.task.state": "TASK_STATE_COMPLETED",
            },
        ),
    ]
    assert otel.points("otel_a2a.divergence") == [
        (
            {
                "otel_a2a.divergence.reason": "no_observation",
                "a2a.method.name": "SendMessage",
                "otel_a2a.agent.name": agent.name,
            },
            1,
        )
    ]
    assert otel.points("otel_a2a.liveness.decisions") == [
        ({"otel_a2a.decision.outcome": "divergent", "otel_a2a.agent.name": agent.name}, 1)
    ]
    assert otel.total("otel_a2a.observation.age") == 0  # nothing observed, no age
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 1}


def test_a_task_waiting_for_the_caller_owes_no_heartbeat(
    otel: Harness, http_lib: ModuleType, ahead: AheadClock, peer: str, mode: Mode
) -> None:
    """Human in the loop: the person answers after the heartbeat, the worker was healthy.

    One task is left ``input-required``, another working (``slow``); the clock otel-a2a
    reads then moves past the heartbeat (no sleep). The stale gauge counts the working task
    only; the follow-up on the waiting one is authoritative, a cancel of the working one is a
    ``heartbeat_gap``.
    """

    async def ask() -> tuple[AgentCard, Agent, Task, Task]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            card, agent = await resolve(http, peer)
            client, _ = await clients(http, card, mode)
            waiting = await only_task(client.send_message(message("input please")))
            slow = await only_task(client.send_message(background("slow meanwhile")))
        return card, agent, waiting, slow

    async def answer(card: AgentCard) -> tuple[Task, Task]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            client, _ = await clients(http, card, mode)
            followed = await only_task(client.send_message(message("echo done", waiting)))
            canceled = await client.cancel_task(CancelTaskRequest(id=slow.id))
        return followed, canceled

    card, agent, waiting, slow = run(ask())
    assert canonical(waiting.status.state) == "input-required"
    assert canonical(slow.status.state) in ("submitted", "working")
    assert otel.points("otel_a2a.task.stale") == [({"otel_a2a.agent.name": agent.name}, 0)]
    ahead.advance(HEARTBEAT + 1)
    assert otel.points("otel_a2a.task.stale") == [({"otel_a2a.agent.name": agent.name}, 1)]
    assert tracked(otel) == {"active": 1, "interrupted": 1, "terminal": 0}

    followed, canceled = run(answer(card))
    assert canonical(followed.status.state) == "completed" and followed.id == waiting.id
    assert canonical(canceled.status.state) == "canceled"
    send = next(s for s in otel.spans("SendMessage") if attrs(s)["a2a.task.id"] == waiting.id)
    assert [attrs(s)["a2a.task.id"] for s in otel.spans("SendMessage")] == [
        waiting.id,
        slow.id,
        waiting.id,
    ]
    assert divergences(send) == [] and send.events == ()
    cancel = otel.span("CancelTask")
    assert divergences(cancel) == ["heartbeat_gap"]
    [gap] = [e for e in cancel.events if e.name == "otel_a2a.divergence"]
    # the agent took the cancel: the task was live, as the decision assumed
    assert resolved(cancel) == [("heartbeat_gap", "refuted")]
    assert gap.attributes is not None and gap.attributes["otel_a2a.observation.age"] > HEARTBEAT
    assert otel.points("otel_a2a.divergence") == [
        (
            {
                "otel_a2a.divergence.reason": "heartbeat_gap",
                "a2a.method.name": "CancelTask",
                "otel_a2a.agent.name": agent.name,
            },
            1,
        )
    ]
    assert sorted(otel.points("otel_a2a.liveness.decisions"), key=str) == [
        ({"otel_a2a.decision.outcome": "authoritative", "otel_a2a.agent.name": agent.name}, 1),
        ({"otel_a2a.decision.outcome": "divergent", "otel_a2a.agent.name": agent.name}, 1),
    ]
    assert tracked(otel) == {"active": 0, "interrupted": 0, "terminal": 2}
    assert otel.points("otel_a2a.task.stale") == []  # no agent has a task left to go stale


def test_agent_name_and_etag_come_from_the_card(
    otel: Harness, http_lib: ModuleType, peer: str
) -> None:
    """Before this process fetched the card, task spans carry neither name nor etag."""
    mode = Mode("JSONRPC", "1.0")

    async def scenario() -> dict[str, Any]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            with suppress_instrumentation():
                card = await A2ACardResolver(http, peer).get_agent_card()
            client, _ = await clients(http, card, mode)
            done = await only_task(client.send_message(message("echo early")))
            _, agent = await resolve(http, peer)
            got = await client.get_task(GetTaskRequest(id=done.id))
        return locals()

    seen = run(scenario())
    agent: Agent = seen["agent"]
    done = seen["done"]
    assert [s.name for s in otel.spans()] == ["SendMessage", "GetAgentCard", "GetTask"]
    before = task_attrs(agent, mode, "SendMessage", done, "completed")
    for key in (*agent.card(), "otel_a2a.card.etag"):  # the card was not fetched yet
        del before[key]
    assert attrs(otel.span("SendMessage")) == before
    assert attrs(otel.span("GetTask")) == task_attrs(agent, mode, "GetTask", done, "completed")


@pytest.mark.parametrize("peer", FOLLOW_UP_WHILE_RUNNING, indirect=True)
def test_late_stream_frame_after_a_newer_response_is_no_regression(
    otel: Harness, http_lib: ModuleType, peer: str, mode: Mode
) -> None:
    """A `working` frame emitted before completion but read after the completed response.

    Judged by arrival it would be a false ``terminal_regression``; the agent's own status
    timestamps say it never went backwards.
    """

    async def scenario() -> tuple[Task, StreamResponse, dict[str, float]]:
        async with http_lib.AsyncClient(timeout=10.0) as http:
            card = await A2ACardResolver(http, peer).get_agent_card()
            client, streaming = await clients(http, card, mode)
            slow = await only_task(client.send_message(background("slow x")))
            sub = streaming.subscribe(SubscribeToTaskRequest(id=slow.id))
            await anext(sub)  # the Task snapshot: the stream is open
            done = await only_task(client.send_message(message("echo done", slow)))
            late = await anext(sub)
            after = tracked(otel)
            [e async for e in sub]
            return done, late, after

    done, late, after = run(scenario())
    assert canonical(done.status.state) == "completed"
    # the race this test is about: both peers emit `working` on the stream before completing
    assert late.WhichOneof("payload") == "status_update", late
    assert canonical(late.status_update.status.state) == "working", late
    assert late.status_update.status.timestamp.ToDatetime() <= done.status.timestamp.ToDatetime()
    assert divergences(otel.span("SubscribeToTask")) == []
    assert after == {"active": 0, "interrupted": 0, "terminal": 1}


@pytest.mark.node
def test_card_variants_per_version_are_not_etag_changes(
    otel: Harness, http_lib: ModuleType, node_peer: str
) -> None:
    """@a2a-js/sdk's card handler in compatibility mode serves a v0.3-shaped card without
    ``A2A-Version`` and the v1.0 card with it, each with its own ETag (``Vary: A2A-Version``).
    A process fetching both ways (a bare resolver, then a 1.0 client) saw every alternate
    fetch as a redeploy, and a decision after it as ``etag_changed``."""
    compat_card = node_peer + "/compat/.well-known/agent-card.json"
    rpc = {"A2A-Version": "1.0"}
    slow = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "slow"}],
            },
            "configuration": {"returnImmediately": True},
        },
    }
    with http_lib.Client(timeout=10.0) as http:
        bare = http.get(compat_card)
        versioned = http.get(compat_card, headers=rpc)
        assert bare.headers["etag"] != versioned.headers["etag"]  # the peer does vary
        task = http.post(node_peer + "/a2a/jsonrpc", json=slow, headers=rpc).json()["result"][
            "task"
        ]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        http.post(node_peer + "/a2a/jsonrpc", json=get, headers=rpc)
        http.get(compat_card)  # the other variant again: no redeploy
        cancel = {"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": task["id"]}}
        http.post(node_peer + "/a2a/jsonrpc", json=cancel, headers=rpc)
        http.get(compat_card, headers=rpc)
    cards = otel.spans("GetAgentCard")
    assert [attrs(s)["otel_a2a.card.etag.changed"] for s in cards] == [False] * 4
    # each card span carries the etag of the card it fetched; task spans the one in force
    etags = [bare.headers["etag"], versioned.headers["etag"]] * 2
    assert [attrs(s)["otel_a2a.card.etag"] for s in cards] == etags
    assert attrs(otel.span("GetTask"))["otel_a2a.card.etag"] == bare.headers["etag"]
    assert otel.total("otel_a2a.card.etag.changes") == 0
    assert divergences(otel.span("CancelTask")) == []
    assert (
        otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="authoritative") == 1
    )
