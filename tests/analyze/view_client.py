"""A plain A2A v1.0 JSON-RPC client with no OpenTelemetry code: ``GetTask`` for each task id.

Run with ``OTEL_A2A_ENABLED=true`` and ``OTEL_SERVICE_NAME``: otel-a2a instruments it at
interpreter start and exports its spans with the standard OTLP exporter.
"""

from __future__ import annotations

import sys

import httpx


def main(base: str, task_ids: list[str]) -> None:
    with httpx.Client(timeout=60) as client:
        for n, task_id in enumerate(task_ids, 1):
            response = client.post(
                base + "/a2a/jsonrpc",
                headers={"A2A-Version": "1.0"},
                json={"jsonrpc": "2.0", "id": n, "method": "GetTask", "params": {"id": task_id}},
            )
            response.raise_for_status()
            print("TASK", task_id, response.json()["result"]["status"]["state"], flush=True)


main(sys.argv[1], sys.argv[2:])
