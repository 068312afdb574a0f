"""``otel-a2a detector --ui-port``: the timeline page of the tasks the detector tracks, live.

Read-only and bounded: ``GET /`` (the page) and ``GET /data.json`` (what it redraws from every
two seconds) only, anything else is refused; one request at a time (the standard library's
single-threaded server), each with ``TIMEOUT`` seconds to arrive, so that a client can hold
no more than one thread and one socket; the page draws at most ``max_drawn`` tasks with
findings and keeps at most ``max_items`` beliefs and marks of each (it says when it left
some out). It listens on 127.0.0.1 unless told otherwise: it shows task ids and service
names to whoever reaches it.
"""

from __future__ import annotations

import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from otel_a2a.analyze.model import Batch, Finding
from otel_a2a.analyze.page import DATA_PATH, data_json, page_data, render_page
from otel_a2a.analyze.timeline import Timeline, TimelineBuilder
from otel_a2a.version import __version__

_log = logging.getLogger("otel_a2a.detector")
TIMEOUT = 5.0  # seconds a request has to arrive and its answer to leave
TITLE = "otel-a2a detector: tasks with findings"


class LivePage:
    """Fed by the detector's analysis (:meth:`record`), served on ``host:port`` (0: a free
    port) from :meth:`start` on a thread of its own until :meth:`close`. Binds in the
    constructor, so that ``OSError`` says at once when the port is taken."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_tasks: int = 200,
        max_items: int = 2_000,
        max_drawn: int = 30,
    ) -> None:
        self.max_drawn = max_drawn
        self.errors = 0  # requests the timeline could not take (logged)
        self._timeline = TimelineBuilder(max_tasks=max_tasks, max_items=max_items)
        self._lock = threading.Lock()
        page = self

        class Handler(BaseHTTPRequestHandler):
            timeout = TIMEOUT
            server_version = "otel-a2a-detector-ui/" + __version__

            def do_GET(self) -> None:
                page._answer(self)

            def do_HEAD(self) -> None:
                page._answer(self, body=False)

            def log_message(self, format: str, *args: Any) -> None:
                _log.debug("ui: " + format, *args)

        class Server(HTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET  # ``::1``

        self._server = Server((host, port), Handler)
        self.port: int = self._server.server_address[1]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"
        self._thread: threading.Thread | None = None

    def record(self, doc: dict[str, Any], batch: Batch, findings: list[Finding]) -> None:
        """One export request the detector analysed; never raises into the analysis."""
        try:
            with self._lock:
                self._timeline.add(doc, batch.beliefs, findings)
        except Exception:
            self.errors += 1
            _log.exception("the live page could not take a request")

    def view(self) -> Timeline:
        with self._lock:
            return self._timeline.view(max_tasks=self.max_drawn)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otel-a2a-ui", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def _answer(self, request: BaseHTTPRequestHandler, *, body: bool = True) -> None:
        path = request.path.split("?", 1)[0]
        if path == "/":
            content = render_page(self.view(), title=TITLE, live=True)
            kind = "text/html; charset=utf-8"
        elif path == "/" + DATA_PATH:
            content = data_json(page_data(self.view(), title=TITLE, live=True))
            kind = "application/json"
        else:
            request.send_error(HTTPStatus.NOT_FOUND, "the page is / (and its data /data.json)")
            return
        data = content.encode("utf-8")
        request.send_response(HTTPStatus.OK)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(data)))
        request.send_header("Cache-Control", "no-store")
        request.send_header("X-Content-Type-Options", "nosniff")
        request.end_headers()
        if body:
            request.wfile.write(data)
