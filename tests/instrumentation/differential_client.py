"""A plain httpx (or httpx2) client script (no otel_a2a import) for the differential test.

Prints one JSON document: for every case and client style, what the application saw: status,
body bytes, or the exception's type and message. Run once with ``OTEL_A2A_ENABLED=true`` and
once without; the two documents must be identical. Arguments: the agent's base URL, the cases
(comma-separated), the client library (``httpx`` or ``httpx2``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import sys
from typing import Any

import httpx

BASE = sys.argv[1]
CASES = sys.argv[2].split(",")
LIB = importlib.import_module(sys.argv[3])  # httpx2 has httpx's API (the annotations say httpx)
RPC = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t-1"}}
HEADERS = {"A2A-Version": "1.0"}


def _request(client: httpx.Client | httpx.AsyncClient, case: str) -> httpx.Request:
    if case.startswith("card"):
        extra = {"If-None-Match": 'W/"card-1"'} if case == "card_304" else {}
        return client.build_request("GET", f"{BASE}/.well-known/agent-card.json", headers=extra)
    method = "SendStreamingMessage" if case.startswith(("sse", "reset")) else "GetTask"
    return client.build_request(
        "POST", f"{BASE}/a2a/{case}", json={**RPC, "method": method}, headers=HEADERS
    )


def _seen(status: int, body: bytes) -> dict[str, Any]:
    return {"status": status, "body": hashlib.sha256(body).hexdigest(), "len": len(body)}


def _failed(exc: BaseException) -> dict[str, Any]:
    return {"exception": type(exc).__qualname__, "message": str(exc)}


def sync_case(case: str, stream: bool) -> dict[str, Any]:
    with LIB.Client() as client:
        try:
            response = client.send(_request(client, case), stream=stream)
            try:
                if stream:
                    body = b"".join(response.iter_bytes(chunk_size=5))
                else:
                    body = response.content
                    response.json() if body and case in ("ok", "invalid_json") else None
                return _seen(response.status_code, body)
            finally:
                response.close()
        except Exception as exc:
            return _failed(exc)


async def async_case(case: str, stream: bool) -> dict[str, Any]:
    async with LIB.AsyncClient() as client:
        try:
            response = await client.send(_request(client, case), stream=stream)
            try:
                if stream:
                    lines = [line async for line in response.aiter_lines()]
                    body = "\n".join(lines).encode()
                else:
                    body = response.content
                return _seen(response.status_code, body)
            finally:
                await response.aclose()
        except Exception as exc:
            return _failed(exc)


async def main() -> None:
    seen: dict[str, Any] = {}
    for case in CASES:
        for stream in (False, True):
            seen[f"{case}/sync/stream={stream}"] = sync_case(case, stream)
            seen[f"{case}/async/stream={stream}"] = await async_case(case, stream)
    instrumented = hasattr(LIB.Client.send, "__wrapped__")
    print(json.dumps({"instrumented": instrumented, "seen": seen}, sort_keys=True))


asyncio.run(main())
