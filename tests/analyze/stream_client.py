"""A plain A2A v1.0 JSON-RPC streaming client with no OpenTelemetry code.

    python stream_client.py BASE_URL TEXT

Sends ``SendStreamingMessage`` with TEXT, prints ``TASK <id>`` once the stream names its task,
and keeps reading the stream until its standard input closes (or the stream ends), then
exits. Run with ``OTEL_A2A_ENABLED=true`` and ``OTEL_SERVICE_NAME``: otel-a2a instruments it
at interpreter start and exports its spans with the standard OTLP exporter.
"""

from __future__ import annotations

import sys
import threading
import uuid

import httpx


def main(base: str, text: str) -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    headers = {"A2A-Version": "1.0", "Accept": "text/event-stream"}
    named = False
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", base + "/a2a/jsonrpc", json=body, headers=headers) as response,
    ):
        for line in response.iter_lines():
            if not named and line.startswith("data:") and '"task"' in line:
                task_id = httpx.Response(200, content=line[5:]).json()["result"]["task"]["id"]
                print("TASK", task_id, flush=True)
                named = True
            if stop.is_set():
                break


main(sys.argv[1], sys.argv[2])
