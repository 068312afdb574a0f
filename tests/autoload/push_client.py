"""A plain push-only a2a-sdk client: no otel_a2a import, no OpenTelemetry code.

Serves its webhook, sends ``input please`` without waiting with the webhook in its
``ClientConfig``, waits for the push that says the task waits for input, answers, and exits.
Arguments: the agent's base URL (a worker started with ``--push deliver``), and the webhook's
server: ``starlette`` (a Starlette application under uvicorn, on a loopback socket that listens
before uvicorn serves it) or ``flask`` (a Flask application under werkzeug's WSGI server, in a
thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import uuid
from collections.abc import AsyncIterator

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskPushNotificationConfig

waiting = threading.Event()


def hook(body: bytes) -> None:
    event = json.loads(body)
    update = event.get("task") or event.get("statusUpdate") or {}
    if update.get("status", {}).get("state") == "TASK_STATE_INPUT_REQUIRED":
        waiting.set()


@contextlib.asynccontextmanager
async def starlette_webhook() -> AsyncIterator[str]:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def receive(request: Request) -> Response:
        hook(await request.body())
        return Response(status_code=204)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    app = Starlette(routes=[Route("/webhook", receive, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/webhook"
    server.should_exit = True
    await serving


@contextlib.asynccontextmanager
async def flask_webhook() -> AsyncIterator[str]:
    from flask import Flask, Response, request
    from werkzeug.serving import make_server

    def receive() -> Response:
        hook(request.get_data())
        return Response(status=204)

    app = Flask(__name__)
    app.add_url_rule("/webhook", "webhook", receive, methods=["POST"])
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,))
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/webhook"
    server.shutdown()
    thread.join()
    server.server_close()


def text(words: str, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=words)],
        task_id=task_id,
        context_id=context_id,
    )


async def main(base: str, webhook: str) -> None:
    serve = {"starlette": starlette_webhook, "flask": flask_webhook}[webhook]
    async with serve() as url, httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        push = TaskPushNotificationConfig(url=url, token="plain-client-token")
        config = ClientConfig(streaming=False, httpx_client=http, push_notification_config=push)
        client = await create_client(card, client_config=config)
        request = SendMessageRequest(message=text("input please"))
        request.configuration.return_immediately = True
        task = None
        async for event in client.send_message(request):
            task = event.task
        assert task is not None
        assert await asyncio.to_thread(waiting.wait, 10)
        async for _ in client.send_message(
            SendMessageRequest(message=text("echo done", task.id, task.context_id))
        ):
            pass
        print("ANSWERED", task.id, flush=True)


asyncio.run(main(sys.argv[1], sys.argv[2]))
