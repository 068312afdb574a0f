"""The process ``bench_exit`` times: started with ``OTEL_A2A_ENABLED=true``, it makes one A2A
follow-up on a task it never saw (a ``no_observation`` divergence, hence one
``otel_a2a.divergence`` log record), prints ``DONE`` and exits."""

from __future__ import annotations

import httpx


def _agent(request: httpx.Request) -> httpx.Response:
    error = {"code": -32001, "message": "Task not found"}
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "error": error})


message = {
    "messageId": "m1",
    "role": "ROLE_USER",
    "taskId": "never-seen",
    "parts": [{"text": "hi"}],
}
body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
with httpx.Client(transport=httpx.MockTransport(_agent), base_url="http://agent.bench") as client:
    client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
print("DONE", flush=True)
