"""A plain push-only a2a-sdk client: no otel_a2a import, no OpenTelemetry code.

Serves its webhook (a Starlette application under uvicorn, on a loopback socket that listens
before uvicorn serves it), sends ``input please`` without waiting with the webhook in its
``ClientConfig``, waits for the push that says the task waits for input, answers, and exits.
Argument: the agent's base URL (a worker started with ``--push deliver``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import uuid

import httpx
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskPushNotificationConfig
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

waiting = asyncio.Event()


async def hook(request: Request) -> Response:
    event = json.loads(await request.body())
    update = event.get("task") or event.get("statusUpdate") or {}
    if update.get("status", {}).get("state") == "TASK_STATE_INPUT_REQUIRED":
        waiting.set()
    return Response(status_code=204)


def text(words: str, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=words)],
        task_id=task_id,
        context_id=context_id,
    )


async def main(base: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/webhook"
    app = Starlette(routes=[Route("/webhook", hook, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    async with httpx.AsyncClient() as http:
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
        await asyncio.wait_for(waiting.wait(), 10)
        async for _ in client.send_message(
            SendMessageRequest(message=text("echo done", task.id, task.context_id))
        ):
            pass
        print("ANSWERED", task.id, flush=True)
    server.should_exit = True
    await serving


asyncio.run(main(sys.argv[1]))
