"""A plain a2a-sdk orchestrator: no otel_a2a import, no OpenTelemetry code.

Run with ``OTEL_A2A_ENABLED=true`` and the standard OTLP variables only. It fetches the
card, sends ``echo hi`` and reads the task back, then, once per line read on stdin, sends a
follow-up to a task it never observed (a liveness decision without an observation: the
``no_observation`` divergence). It prints ``TASK <id> <state>`` and ``STRAY <task id>`` lines
so the caller knows what to look for, and exits at the end of stdin.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest


async def main(base: str) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card()
    client = await create_client(card, client_config=ClientConfig(streaming=False))
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="echo hi")]
    )
    task_id = ""
    async for event in client.send_message(SendMessageRequest(message=message)):
        if event.WhichOneof("payload") == "task":
            task_id = event.task.id
    task = await client.get_task(GetTaskRequest(id=task_id))
    print("TASK", task.id, task.status.state, flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        stray_id = f"never-seen-{uuid.uuid4()}"
        stray = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            task_id=stray_id,
            parts=[Part(text="echo again")],
        )
        try:
            async for _ in client.send_message(SendMessageRequest(message=stray)):
                pass
        except Exception:  # the peer rejects an unknown task; the decision is what counts
            pass
        print("STRAY", stray_id, flush=True)
    await client.close()


asyncio.run(main(sys.argv[1]))
