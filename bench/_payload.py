"""A2A v1.0 JSON-RPC ``GetTask`` exchanges of a chosen size, shaped as the SDKs emit them.

Key order follows the a2a-sdk (protobuf JSON) and @a2a-js/sdk output: ``id``, ``contextId``,
``status`` and only then ``history``, so the state is near the start of even a huge body.
"""

from __future__ import annotations

import json
from typing import Any

TASK_ID = "3f2c9a0e-6d1b-4b7e-9a55-0c8d2e41f7a1"
CONTEXT_ID = "9b1e7c24-5f0a-4d83-b6e2-71a4c9d03e58"
BASE = "http://agent.bench"
PATH = "/a2a"
REQUEST_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
RESPONSE_HEADERS = {"Content-Type": "application/json"}
STATE = "TASK_STATE_WORKING"


def request_body(task_id: str = TASK_ID) -> bytes:
    doc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    return json.dumps(doc, separators=(",", ":")).encode()


def _message(i: int, text: str) -> dict[str, Any]:
    return {
        "messageId": f"msg-{i:08d}",
        "contextId": CONTEXT_ID,
        "taskId": TASK_ID,
        "role": "ROLE_USER" if i % 2 == 0 else "ROLE_AGENT",
        "parts": [{"text": text}],
    }


def get_task_response(size: int, task_id: str = TASK_ID) -> bytes:
    """A JSON-RPC ``GetTask`` result of about ``size`` bytes (long history, status first)."""
    head = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "id": task_id,
            "contextId": CONTEXT_ID,
            "status": {"state": STATE, "timestamp": "2026-05-01T12:00:00.000Z"},
            "history": [],
        },
    }
    skeleton = len(json.dumps(head, separators=(",", ":")))
    text = "lorem ipsum dolor sit amet " * 10  # 270 characters per message
    one = len(json.dumps(_message(1, text), separators=(",", ":"))) + 1
    count = max(1, (size - skeleton) // one)
    history = [_message(i, text) for i in range(count)]
    head["result"]["history"] = history  # type: ignore[index]
    body = json.dumps(head, separators=(",", ":")).encode()
    short = size - len(body)
    if short > 0:  # pad the last message's text to the exact size
        history[-1]["parts"][0]["text"] += "x" * short
        body = json.dumps(head, separators=(",", ":")).encode()
    assert len(body) == size or count == 1, (len(body), size)
    return body


# A non-A2A POST of the same size, shaped like an LLM call (the commonest other httpx traffic
# of an agent): otel-a2a must tell it apart and step aside cheaply.
OTHER_PATH = "/v1/chat/completions"
OTHER_HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}


def other_request_body(size: int = 2048) -> bytes:
    doc = {"model": "bench", "messages": [{"role": "user", "content": ""}]}
    pad = size - len(json.dumps(doc, separators=(",", ":")))
    doc["messages"][0]["content"] = "y" * max(pad, 0)  # type: ignore[index]
    return json.dumps(doc, separators=(",", ":")).encode()


def other_response_body(size: int = 2048) -> bytes:
    doc = {"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": ""}}]}
    pad = size - len(json.dumps(doc, separators=(",", ":")))
    doc["choices"][0]["message"]["content"] = "x" * max(pad, 0)  # type: ignore[index]
    return json.dumps(doc, separators=(",", ":")).encode()
