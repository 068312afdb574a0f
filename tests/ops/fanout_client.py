"""A plain A2A v1.0 JSON-RPC client: ``GetTask`` for each task id, in order.

No OpenTelemetry SDK code: run it with ``OTEL_A2A_ENABLED=true`` and the standard OTLP
variables and otel-a2a instruments it at start-up. ``--traceparent`` makes every request a
child of that (remote) span, as the calls an orchestrator fans out while serving one request
are: one trace then names all its tasks. ``--own-trace`` lists tasks read outside it, each in
a trace of its own.
"""

from __future__ import annotations

import argparse

import httpx
from opentelemetry import context, propagate


def get_task(client: httpx.Client, base: str, n: int, task_id: str) -> None:
    response = client.post(
        base + "/a2a/jsonrpc",
        headers={"A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": n, "method": "GetTask", "params": {"id": task_id}},
    )
    response.raise_for_status()
    print("TASK", task_id, response.json()["result"]["status"]["state"], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("tasks", nargs="+")
    parser.add_argument("--traceparent", default="")
    parser.add_argument("--own-trace", action="append", default=[])
    args = parser.parse_args()
    parent = propagate.extract({"traceparent": args.traceparent})
    with httpx.Client(timeout=60) as client:
        for n, task_id in enumerate(args.tasks, 1):
            ctx = context.get_current() if task_id in args.own_trace else parent
            token = context.attach(ctx)
            try:
                get_task(client, args.base, n, task_id)
            finally:
                context.detach(token)


main()
