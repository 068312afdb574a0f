"""Push deliveries as observations, against the real a2a-sdk 1.3 worker and a real webhook.

The worker (``tests/peers/python_peer.py --grpc --push MODE``) is a2a-sdk's
``DefaultRequestHandler`` with its in-memory push config store and ``BasePushNotificationSender``.
The caller is the a2a-sdk client on each binding (JSON-RPC, HTTP+JSON, gRPC; v1.0 and v0.3),
whose ``ClientConfig.push_notification_config`` names a webhook served in this very process,
as a push-only application serves it: a Starlette application under uvicorn (ASGI), or a Flask
application under werkzeug's WSGI server in a thread. It sends ``input please`` without
waiting (``returnImmediately``: the reply says ``submitted``), learns
by push that the task waits for input, and answers after the heartbeat has passed (the clock
otel-a2a reads moves, no sleep). Healthy, the push was the last authoritative word (the task
waits for the caller, and owes no heartbeat): nothing is raised. Planted faults: the worker
never pushes (``drop``), or pushes with a token other than the one registered (``forge``): the
caller's answer is judged on the ``submitted`` it pulled, a ``heartbeat_gap``, as before.
No sleeps: every wait is on the delivery the webhook received.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import flask
import grpc.aio
import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.types import AgentCard, Task, TaskPushNotificationConfig
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from werkzeug.serving import make_server

from otel_a2a.instrumentation import runtime
from tests.instrumentation.conftest import AheadClock, Harness, divergences
from tests.instrumentation.test_real_peers import (
    HEARTBEAT,
    Mode,
    background,
    canonical,
    for_mode,
    message,
    only_task,
    run,
)
from tests.support.peers import RunningPeer, start_peer

MODES = [
    pytest.param(Mode("JSONRPC", "1.0"), id="jsonrpc-1.0"),
    pytest.param(Mode("HTTP+JSON", "1.0"), id="rest-1.0"),
    pytest.param(Mode("GRPC", "1.0"), id="grpc-1.0"),
    pytest.param(Mode("JSONRPC", "0.3"), id="jsonrpc-0.3"),
    pytest.param(Mode("HTTP+JSON", "0.3"), id="rest-0.3"),
    pytest.param(Mode("GRPC", "0.3"), id="grpc-0.3"),
]
TOKEN = "caller-token-for-this-task"
HOOK_PATH = "/hooks/a2a"
WAIT = 10.0  # a guard on each wait for a delivery; each comes within milliseconds


def _peer(push: str) -> Iterator[RunningPeer]:
    peer = start_peer("python", options=["--grpc", "--push", push])
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture(scope="module")
def delivering_peer() -> Iterator[RunningPeer]:
    yield from _peer("deliver")


@pytest.fixture(scope="module")
def dropping_peer() -> Iterator[RunningPeer]:
    yield from _peer("drop")


@pytest.fixture(scope="module")
def forging_peer() -> Iterator[RunningPeer]:
    yield from _peer("forge")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    value: Mode = request.param
    return value


class Webhook:
    """The caller's webhook: it reads each delivery as an application does and wakes the test
    once the task waits for input; it checks no token (otel-a2a's check is under test). Its
    server listens on a loopback socket before it serves (a delivery waits in the backlog
    meanwhile)."""

    def __init__(self) -> None:
        self.states: list[str] = []
        self.waiting = threading.Event()  # set from the server's thread or loop

    def _read(self, body: bytes) -> None:
        event = json.loads(body)
        event = event.get("task") or event.get("statusUpdate") or {}
        state = str(event.get("status", {}).get("state", ""))
        self.states.append(state)
        if state == "TASK_STATE_INPUT_REQUIRED":
            self.waiting.set()

    async def input_required(self) -> None:
        """Returns once the push saying the task waits for input arrived."""
        assert await asyncio.to_thread(self.waiting.wait, WAIT), self.states


class StarletteWebhook(Webhook):
    """A Starlette application under uvicorn, on the test's event loop."""

    def __init__(self) -> None:
        super().__init__()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}{HOOK_PATH}"
        app = Starlette(routes=[Route(HOOK_PATH, self._receive, methods=["POST"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._serving: asyncio.Task[None] | None = None

    async def _receive(self, request: Request) -> Response:
        self._read(await request.body())
        return Response(status_code=204)

    async def __aenter__(self) -> Webhook:
        self._serving = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._serving is not None
        await self._serving
        self._sock.close()


class FlaskWebhook(Webhook):
    """A Flask application under werkzeug's own WSGI server (``make_server``, which listens
    once made), serving from a thread of this process."""

    def __init__(self) -> None:
        super().__init__()
        app = flask.Flask(__name__)
        app.add_url_rule(HOOK_PATH, "hook", self._receive, methods=["POST"])
        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}{HOOK_PATH}"
        # shut down within a poll: a short one keeps the test short
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,))

    def _receive(self) -> flask.Response:
        self._read(flask.request.get_data())
        return flask.Response(status=204)

    async def __aenter__(self) -> Webhook:
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()


WEBHOOKS = {"starlette": StarletteWebhook, "flask": FlaskWebhook}


@pytest.fixture(params=list(WEBHOOKS))
def webhook(request: pytest.FixtureRequest) -> type[Webhook]:
    """The server of the caller's webhook: ASGI (Starlette) or WSGI (Flask)."""
    return WEBHOOKS[request.param]


def _client_config(mode: Mode, http: httpx.AsyncClient, hook: str | None) -> ClientConfig:
    push = TaskPushNotificationConfig(url=hook, token=TOKEN) if hook else None
    return ClientConfig(
        streaming=False,
        supported_protocol_bindings=[mode.binding],
        httpx_client=http,
        grpc_channel_factory=grpc.aio.insecure_channel,
        push_notification_config=push,
    )


def _scenario(
    peer: RunningPeer, mode: Mode, ahead: AheadClock, webhook: type[Webhook], wait: bool
) -> tuple[Task, Task]:
    """Send in the background with the webhook registered, wait for the push that says the
    task waits for input (``wait``), let the heartbeat pass, then answer."""

    async def ask() -> tuple[AgentCard, Task]:
        async with webhook() as hook, httpx.AsyncClient(timeout=10.0) as http:
            card = await _card(http, peer.base_url)
            client = await create_client(
                for_mode(card, mode), client_config=_client_config(mode, http, hook.url)
            )
            task = await only_task(client.send_message(background("input please")))
            if wait:
                await hook.input_required()
        return card, task

    async def answer(card: AgentCard, task: Task) -> Task:
        async with httpx.AsyncClient(timeout=10.0) as http:
            client = await create_client(
                for_mode(card, mode), client_config=_client_config(mode, http, None)
            )
            return await only_task(client.send_message(message("echo done", task)))

    card, task = run(ask())
    assert canonical(task.status.state) == "submitted"  # all the caller pulled
    ahead.advance(HEARTBEAT + 1)
    return task, run(answer(card, task))


async def _card(http: httpx.AsyncClient, base: str) -> AgentCard:
    from a2a.client import A2ACardResolver

    return await A2ACardResolver(http, base).get_agent_card()


def _answer_span(otel: Harness, task: Task) -> Any:
    [span] = [
        s
        for s in otel.spans("SendMessage")
        if s.attributes and s.attributes.get("otel_a2a.liveness.decision")
    ]
    assert span.attributes["a2a.task.id"] == task.id
    return span


def test_a_push_is_the_last_word_and_nothing_is_raised(
    otel: Harness,
    ahead: AheadClock,
    delivering_peer: RunningPeer,
    mode: Mode,
    webhook: type[Webhook],
) -> None:
    task, answered = _scenario(delivering_peer, mode, ahead, webhook, wait=True)
    assert canonical(answered.status.state) == "completed"
    assert divergences(_answer_span(otel, task)) == []
    assert otel.points("otel_a2a.divergence") == []
    assert otel.total("otel_a2a.push.deliveries", otel_a2a__push__outcome="observed") >= 1
    assert otel.total("otel_a2a.push.deliveries", otel_a2a__push__outcome="token_mismatch") == 0
    rt = runtime.current()
    assert rt is not None
    last = rt.detector.ledger.get(task.id)
    assert last is not None and last.state.value == "completed"  # the answer's reply, since


def test_a_push_that_never_comes_still_ages_the_task(
    otel: Harness,
    ahead: AheadClock,
    dropping_peer: RunningPeer,
    mode: Mode,
    webhook: type[Webhook],
) -> None:
    task, answered = _scenario(dropping_peer, mode, ahead, webhook, wait=False)
    assert canonical(answered.status.state) == "completed"
    assert divergences(_answer_span(otel, task)) == ["heartbeat_gap"]
    assert otel.total("otel_a2a.push.deliveries") == 0


def test_a_push_with_another_token_is_no_observation(
    otel: Harness,
    ahead: AheadClock,
    forging_peer: RunningPeer,
    mode: Mode,
    webhook: type[Webhook],
) -> None:
    task, answered = _scenario(forging_peer, mode, ahead, webhook, wait=True)
    assert canonical(answered.status.state) == "completed"
    assert divergences(_answer_span(otel, task)) == ["heartbeat_gap"]
    assert otel.total("otel_a2a.push.deliveries", otel_a2a__push__outcome="token_mismatch") >= 1
    assert otel.total("otel_a2a.push.deliveries", otel_a2a__push__outcome="observed") == 0
