"""A real loopback A2A v1.0 JSON-RPC agent that plants a secret wherever a peer can put one.

Its card carries the secret in interface URLs (userinfo, query, fragment; well-formed and
malformed), in the provider and documentation URLs, in skills and extensions;
every response carries it in headers a peer may send (``Set-Cookie``, ``WWW-Authenticate``,
``X-Api-Key``, a custom header) and in message contents. Nothing otel-a2a records may contain
it: the tests grep every exported span, log record and metric (and every line ``check-card``
prints) for :data:`SECRET`. Fields otel-a2a records by contract (the card's name, version and
description, ``ETag``, ``Cache-Control``, task and context ids) stay clean.

    with planted_agent() as agent:
        httpx.get(agent.base + "/.well-known/agent-card.json")
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET = "s3cr3t-PLANT"
TASK_ID = "t-planted"
ETAG = '"planted-1"'
CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a"
# Response headers no telemetry may carry (otel-a2a reads ETag, Cache-Control, A2A-Version)
PLANTED_HEADERS = {
    "Set-Cookie": f"session={SECRET}; HttpOnly",
    "WWW-Authenticate": f'Bearer realm="{SECRET}"',
    "X-Api-Key": SECRET,
    "X-Planted": SECRET,
}


def planted_card(base: str) -> dict[str, Any]:
    """The card served at ``base``: its one usable interface is ``base + RPC_PATH`` written
    with credentials, a query and a fragment; the others cannot be parsed."""
    host = base.split("://", 1)[1]
    return {
        "name": "Planted Agent",
        "description": "an agent that plants a secret",  # recorded: gen_ai.agent.description
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"http://bob:{SECRET}@{host}{RPC_PATH}?key={SECRET}#{SECRET}",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            },
            {
                "url": f"http://bob:{SECRET}@127.0.0.1:99999/port-out-of-range?k={SECRET}",
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "1.0",
            },
            {
                "url": f"http://bob:{SECRET}@[::1/unclosed-bracket?k={SECRET}",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "0.3",
            },
            {
                "url": f"bob:{SECRET}@{host}/no-scheme?k={SECRET}",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "0.3",
            },
        ],
        "provider": {
            "organization": f"org {SECRET}",
            "url": f"https://carol:{SECRET}@provider.test/?t={SECRET}#{SECRET}",
        },
        "documentationUrl": f"https://docs.test/a2a?token={SECRET}",
        "iconUrl": f"https://dave:{SECRET}@icons.test/i.png",
        "capabilities": {
            "streaming": False,
            "extensions": [
                {"uri": "urn:otel-a2a:heartbeat:v1", "params": {"intervalSeconds": 30}},
                {"uri": f"https://ext.test/x?k={SECRET}", "params": {"token": SECRET}},
            ],
        },
        "securitySchemes": {
            "key": {"apiKeySecurityScheme": {"location": "header", "name": SECRET}}
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "s", "description": SECRET, "tags": [SECRET]}],
    }


@dataclass
class PlantedAgent:
    base: str
    received: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def saw_secret(self) -> bool:
        """Whether the secret reached this server in a request line or header: the planting
        worked, so a clean export means otel-a2a dropped it."""
        return any(
            SECRET in target or any(SECRET in v for v in headers.values())
            for _method, target, headers in self.received
        )


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in {**PLANTED_HEADERS, **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self) -> None:
        self.server.agent.received.append((self.command, self.path, dict(self.headers.items())))

    def do_GET(self) -> None:
        self._record()
        path = self.path.split("?", 1)[0]
        if path.startswith("/redirect/"):  # to the card, by a Location carrying credentials
            location = f"http://dave:{SECRET}@{self.headers['Host']}{CARD_PATH}?sig={SECRET}"
            self._answer(302, b"", {"Location": location})
        elif path.startswith("/bad-redirect/"):  # a Location nobody can parse, with credentials
            self._answer(302, b"", {"Location": f"http://dave:{SECRET}/x@127.0.0.1:99999/"})
        elif path.endswith(CARD_PATH):
            if self.headers.get("If-None-Match") == ETAG:
                self._answer(304, b"", {"ETag": ETAG})
                return
            body = json.dumps(planted_card(self.server.agent.base)).encode()
            headers = {"Content-Type": "application/json", "ETag": ETAG}
            self._answer(200, body, {**headers, "Cache-Control": "max-age=60"})
        else:
            self._answer(404, b"", {})

    def do_POST(self) -> None:
        self._record()
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        task = {
            "id": TASK_ID,
            "contextId": "c-planted",
            "status": {
                "state": "TASK_STATE_WORKING",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": SECRET}]},
            },
            "artifacts": [{"artifactId": "a", "parts": [{"text": SECRET}]}],
            "metadata": {"token": SECRET},
        }
        result: dict[str, Any] = {"task": task} if request.get("method") == "SendMessage" else task
        body = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result}).encode()
        self._answer(200, body, {"Content-Type": "application/json"})

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    agent: PlantedAgent


@contextlib.contextmanager
def planted_agent() -> Iterator[PlantedAgent]:
    """Serve the planted agent on 127.0.0.1 (a free port) in a thread."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.agent = PlantedAgent(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.agent
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
