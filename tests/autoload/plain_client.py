"""A plain a2a-sdk client: no otel_a2a import, no OpenTelemetry code.

Fetches the card, sends ``echo hi``, reads the task back, then sends a follow-up to a task
this process never observed (a liveness decision without an observation). Arguments: the
agent's base URL, then the client library (``httpx``, the default, or ``httpx2``); with
``--grpc`` the operations go over the card's gRPC interface (``grpc.aio.insecure_channel``,
as the a2a-sdk documents it), the card still fetched over HTTP.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import uuid

from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest


async def main(base: str, library: str, grpc: bool) -> None:
    lib = importlib.import_module(library)
    http = lib.AsyncClient()
    card = await A2ACardResolver(http, base).get_agent_card()
    config = ClientConfig(streaming=False, httpx_client=http)
    if grpc:
        import grpc.aio

        config = ClientConfig(
            streaming=False,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
    client = await create_client(card, client_config=config)
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="echo hi")]
    )
    task_id = ""
    async for event in client.send_message(SendMessageRequest(message=message)):
        if event.WhichOneof("payload") == "task":
            task_id = event.task.id
    task = await client.get_task(GetTaskRequest(id=task_id))
    print("TASK", task.id, task.status.state, flush=True)
    stray = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        task_id="never-seen",
        parts=[Part(text="echo again")],
    )
    try:
        async for _ in client.send_message(SendMessageRequest(message=stray)):
            pass
    except Exception as exc:  # the peer rejects an unknown task; we only care about the decision
        print("FOLLOW-UP", type(exc).__name__, flush=True)
    await client.close()
    await http.aclose()


_args = [a for a in sys.argv[2:] if not a.startswith("--")]
asyncio.run(main(sys.argv[1], _args[0] if _args else "httpx", "--grpc" in sys.argv[2:]))
