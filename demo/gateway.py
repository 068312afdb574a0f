"""The demo's gateway: forwards A2A between the orchestrator and the worker.

    python demo/gateway.py --upstream http://127.0.0.1:W [--port N] [--respell]

Prints ``READY <base_url>`` on stdout once it accepts connections (``--port 0`` picks a free
port). What it forwards:

- ``GET /.well-known/agent-card.json``: the worker's card, its interface URLs rewritten to the
  gateway's own; ``ETag``, ``Cache-Control`` and ``Vary`` pass through, and so do conditional
  requests (``If-None-Match``) and their ``304 Not Modified``;
- every request under ``/a2a/`` (JSON-RPC at ``/a2a/jsonrpc``, HTTP+JSON at ``/a2a/rest``), as
  is. Server-sent event streams are passed through chunk by chunk as they arrive, never
  buffered whole. When the worker's side of a stream breaks, the gateway ends the client's
  stream too.

Fault switch ``--respell``: the gateway re-spells exact task-state values on the way back
(``"TASK_STATE_WORKING"`` becomes ``"Working"``, and so on), in JSON bodies and in SSE frames,
playing a worker that spells states its own way. SSE frames are rewritten line by line, so a
state split across two network chunks is still rewritten.

The gateway is deliberately not instrumented: ``OTEL_A2A_ENABLED`` belongs to the orchestrator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CARD_PATH = "/.well-known/agent-card.json"
STATES = (
    "SUBMITTED",
    "WORKING",
    "INPUT_REQUIRED",
    "AUTH_REQUIRED",
    "COMPLETED",
    "FAILED",
    "CANCELED",
    "REJECTED",
)
# "TASK_STATE_INPUT_REQUIRED" -> "InputRequired": the spelling of a worker with its own enum.
RESPELLINGS: dict[bytes, bytes] = {
    f'"TASK_STATE_{s}"'.encode(): ('"' + s.title().replace("_", "") + '"').encode() for s in STATES
}
_RESPELL_RE = re.compile(b"|".join(re.escape(k) for k in RESPELLINGS))
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "content-encoding",
    }
)


def respell(data: bytes) -> bytes:
    """Rewrite every exact ``"TASK_STATE_*"`` JSON string in ``data``."""
    return _RESPELL_RE.sub(lambda m: RESPELLINGS[m.group(0)], data)


def _forward_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}


def rewrite_card(card: dict[str, Any], upstream: str, public: str) -> dict[str, Any]:
    """Point the card's interface URLs (v1.0 and v0.3 fields) at the gateway."""

    def fix(url: object) -> object:
        if isinstance(url, str) and url.startswith(upstream):
            return public + url[len(upstream) :]
        return url

    for key in ("supportedInterfaces", "additionalInterfaces"):
        for iface in card.get(key) or []:
            if isinstance(iface, dict) and "url" in iface:
                iface["url"] = fix(iface["url"])
    if "url" in card:
        card["url"] = fix(card["url"])
    return card


class Gateway:
    def __init__(self, upstream: str, respell_states: bool) -> None:
        self.upstream = upstream.rstrip("/")
        self.public = ""  # set once the listening port is known
        self.respell = respell_states
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=5.0, read=None, write=30.0, pool=None),
            follow_redirects=False,
        )

    def log(self, line: str) -> None:
        print(f"[gateway] {line}", file=sys.stderr, flush=True)

    async def card(self, request: Request) -> Response:
        headers = {}
        for name in ("if-none-match", "a2a-version", "accept"):
            if name in request.headers:
                headers[name] = request.headers[name]
        try:
            upstream = await self.client.get(self.upstream + CARD_PATH, headers=headers)
        except httpx.HTTPError as exc:
            self.log(f"card: upstream unreachable ({type(exc).__name__})")
            return JSONResponse({"error": "upstream unavailable"}, status_code=502)
        passed = {
            k: v
            for k, v in upstream.headers.items()
            if k.lower() in ("etag", "cache-control", "vary", "last-modified")
        }
        if upstream.status_code != 200:
            return Response(upstream.content, upstream.status_code, headers=passed)
        try:
            card = json.loads(upstream.content)
        except ValueError:
            return Response(upstream.content, 200, headers=passed, media_type="application/json")
        body = json.dumps(rewrite_card(card, self.upstream, self.public), separators=(",", ":"))
        return Response(body, 200, headers=passed, media_type="application/json")

    async def forward(self, request: Request) -> Response:
        url = self.upstream + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        req = self.client.build_request(
            request.method,
            url,
            headers=_forward_headers(request.headers),
            content=await request.body(),
        )
        try:
            upstream = await self.client.send(req, stream=True)
        except httpx.HTTPError as exc:
            self.log(f"{request.method} {request.url.path}: upstream unreachable")
            return JSONResponse(
                {"error": f"upstream unavailable: {type(exc).__name__}"}, status_code=502
            )
        headers = _forward_headers(upstream.headers)
        content_type = upstream.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            self.log(f"{request.method} {request.url.path}: stream opened")
            return StreamingResponse(
                self._stream(upstream, request.url.path),
                status_code=upstream.status_code,
                headers=headers,
            )
        try:
            body = await upstream.aread()
        except httpx.HTTPError:
            await upstream.aclose()
            return JSONResponse({"error": "upstream broke"}, status_code=502)
        await upstream.aclose()
        if self.respell and "json" in content_type:
            body = respell(body)
        return Response(body, upstream.status_code, headers=headers)

    async def _stream(self, upstream: httpx.Response, path: str) -> AsyncIterator[bytes]:
        pending = b""
        try:
            async for chunk in upstream.aiter_raw():
                if not self.respell:
                    yield chunk
                    continue
                pending += chunk
                cut = pending.rfind(b"\n") + 1
                if cut:
                    yield respell(pending[:cut])
                    pending = pending[cut:]
            if pending:
                yield respell(pending)
            self.log(f"{path}: stream ended")
        except httpx.HTTPError as exc:
            self.log(f"{path}: upstream stream broke ({type(exc).__name__}); ending it")
        finally:
            await upstream.aclose()

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(
            routes=[
                Route(CARD_PATH, self.card, methods=["GET"]),
                Route("/a2a/{rest:path}", self.forward, methods=methods),
            ]
        )


async def serve(args: argparse.Namespace) -> None:
    gateway = Gateway(args.upstream, args.respell)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    gateway.public = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(
        gateway.app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)  # SIGTERM / SIGINT: uvicorn shuts down (open streams: 1 s)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started:
        print(f"READY {gateway.public}", flush=True)
    try:
        await task
    finally:
        await gateway.client.aclose()
        with contextlib.suppress(OSError):
            sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="otel-a2a-gateway", description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", required=True, help="the worker's base URL")
    parser.add_argument("--port", type=int, default=0, help="listening port (0: a free one)")
    parser.add_argument(
        "--respell",
        action="store_true",
        help='fault switch: re-spell task states ("TASK_STATE_WORKING" -> "Working")',
    )
    args = parser.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
