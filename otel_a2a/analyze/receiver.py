"""``otel-a2a detector``: a live OTLP/HTTP trace receiver running the cross-runtime analysis.

``POST /v1/traces`` (OTLP JSON or protobuf, gzip allowed, with a Content-Length or chunked as
the OpenTelemetry JS exporter sends) goes to a :class:`~otel_a2a.analyze.live.LiveAnalyzer`.
Nothing a client sends can stop the server or grow its memory without bound:

- HTTP/1.1 (framing, chunked decoding, keep-alive, Content-Length checks) is h11's, driven by
  asyncio streams that read at most ``READ_SIZE`` bytes at a time: a chunk of any declared
  size reaches the receiver as pieces of at most that size, each checked against
  ``max_body`` before the next read, and h11 refuses a request head over ``MAX_HEAD``;
- a declared Content-Length over ``max_body`` is answered 413 before the body is read;
- bodies held at once (received, or waiting for the decoder) are bounded by a byte budget
  (``bodies``: ``serve`` gives it the memory budget's share, :mod:`~otel_a2a.analyze.budget`;
  else ``MAX_BODIES_IN_HAND * max_body``) that counts bytes as they arrive, so a client announcing
  a large body and trickling it holds only what it sent; a request that waits ``busy_wait``
  seconds for room is answered 503;
- a request has ``body_timeout`` seconds from its first byte to arrive whole (head and body),
  else 408: a deadline for the whole body, not per read, so a client dripping a byte now and
  then is cut off too; an idle keep-alive connection is closed after ``KEEP_ALIVE_TIMEOUT``;
- 413 and 503 carry ``Retry-After``; every refusal closes the connection after the answer,
  reading and dropping what the client still sends for up to ``LINGER`` seconds so that it
  reads the answer instead of a reset;
- the listen backlog (``backlog``, default 1024) queues a burst of connections that the
  standard library's 5 would have reset.

Why h11 on asyncio rather than uvicorn: h11 is already installed with httpx (httpcore needs
it) and is sans-IO, so the receiver decides how much it reads before anything is buffered and
sees each request's head before its body; uvicorn would be one more runtime dependency and
still need all of the above in the application (its ``limit_concurrency`` answers 503 without
``Retry-After`` and counts connections, not bytes; it has no deadline for a body).

Inflating, decoding and analysing are CPU work and run on one decoder thread (one body at a
time: a protobuf body takes up to 96 times its size while decoded), reporting findings on a
reporter thread (a stdout nobody reads stalls the requests that found something, never the
event loop or the analysis of other requests); a request is answered after its findings are
reported. ``stop`` is graceful: the listener closes, idle connections are closed, requests in
flight get ``SHUTDOWN_GRACE`` seconds to be answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from email.utils import formatdate
from http import HTTPStatus

import h11

from otel_a2a.analyze import budget
from otel_a2a.analyze.correlate import Correlator
from otel_a2a.analyze.fleet import FleetJudge, FleetJudgeOptions, ServiceFinding, summary
from otel_a2a.analyze.live import (
    PROTOBUF,
    BadRequest,
    LiveAnalyzer,
    TooLarge,
    Unsupported,
    content_kind,
    decode_body,
    inflate,
)
from otel_a2a.analyze.model import Finding
from otel_a2a.analyze.ui import LivePage
from otel_a2a.version import __version__

_log = logging.getLogger("otel_a2a.detector")

TRACES_PATH = "/v1/traces"
DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_BACKLOG = 1024
DEFAULT_BUSY_WAIT = 10.0
MAX_BODIES_IN_HAND = 8  # bodies of the largest size held at once (received, or to decode)
READ_SIZE = 64 * 1024  # the most one read takes from a socket
MAX_HEAD = 64 * 1024  # request line and headers
KEEP_ALIVE_TIMEOUT = 30.0  # seconds an idle connection waits for its next request
LINGER = 5.0  # seconds a refused body is read and dropped after the answer
SHUTDOWN_GRACE = 5.0  # seconds requests in flight have to be answered on stop
RETRY_AFTER = ("Retry-After", "1")
_SERVER = "otel-a2a-detector/" + __version__
Headers = Sequence[tuple[str, str]]


class ByteBudget:
    """Bytes of request bodies held at once, across connections, taken as they arrive.

    Used on the receiver's event loop only; ``held`` and ``peak`` (the most held at once) are
    plain integers other threads may read."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        self.peak = 0
        self._room = asyncio.Event()  # set (and replaced) whenever bytes are released

    async def take(self, size: int, timeout: float) -> bool:
        """Room for ``size`` more bytes, waiting up to ``timeout`` seconds for it."""
        try:
            async with asyncio.timeout(timeout):
                while self.held + size > self.total:
                    await self._room.wait()
        except TimeoutError:
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def release(self, size: int) -> None:
        if size:
            self.held -= size
            self._room.set()
            self._room = asyncio.Event()


class _Refusal(Exception):
    """A request answered with an error, after which the connection closes."""

    def __init__(self, status: HTTPStatus, message: str, headers: Headers = ()) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _too_large(limit: int) -> _Refusal:
    return _Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {limit} bytes", [RETRY_AFTER])


class _Connection:
    """One client connection: requests read through h11, each answered before the next."""

    def __init__(
        self, receiver: Receiver, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._receiver = receiver
        self._reader = reader
        self._writer = writer
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._loop = asyncio.get_running_loop()
        self._deadline = 0.0  # loop time by which the request in hand must have arrived
        self._held = 0  # bytes of the budget this connection's request holds
        self._head_only = False  # a HEAD request: the answer has no body
        self.idle = True  # waiting for a request's first byte: nothing is lost by closing

    async def run(self) -> None:
        try:
            while await self._cycle():
                pass
        except OSError as exc:  # the peer went away
            _log.debug("connection lost: %s", exc)
        except Exception:  # never let one connection take the receiver down
            _log.exception("connection failed")
        finally:
            self._release()
            self._writer.close()

    def _release(self) -> None:
        self._receiver.budget.release(self._held)
        self._held = 0

    async def _cycle(self) -> bool:
        """Read one request and answer it; whether the connection may serve another."""
        try:
            request = await self._request()
            if request is None:
                return False
            kind, gzipped = self._check(request)
            if self._h11.they_are_waiting_for_100_continue:
                continue_ = h11.InformationalResponse(status_code=100, headers=[])
                await self._write(self._h11.send(continue_))
            async with asyncio.timeout_at(self._deadline):
                body = await self._body()
        except TimeoutError:
            await self._refuse(HTTPStatus.REQUEST_TIMEOUT, "request not received in time")
            return False
        except h11.RemoteProtocolError as exc:
            await self._refuse(HTTPStatus(exc.error_status_hint), str(exc))
            return False
        except _Refusal as refusal:
            await self._refuse(refusal.status, str(refusal), refusal.headers)
            return False
        analysis = self._loop.run_in_executor(
            self._receiver._decoder, self._receiver._analyse, body, kind, gzipped
        )
        del body  # held by the decoder until it is done, not by this connection's refusal
        try:
            reported = await analysis
        except TooLarge as exc:
            await self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc), [RETRY_AFTER])
            return False
        except BadRequest as exc:  # the content type and encoding were checked with the head
            await self._refuse(HTTPStatus.BAD_REQUEST, str(exc))
            return False
        except Exception as exc:
            _log.exception("request failed")
            await self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, type(exc).__name__)
            return False
        finally:
            self._release()
        if reported is not None:  # before the answer: a client that has it sees them reported
            await asyncio.wrap_future(reported)
        if kind == PROTOBUF:
            await self._respond(HTTPStatus.OK, b"", PROTOBUF)  # an empty response message
        else:
            await self._respond(HTTPStatus.OK, b"{}", "application/json")
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            return True
        return False

    async def _event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        """The next h11 event, reading (at most ``READ_SIZE`` at a time) until there is one
        (never ``NEED_DATA``)."""
        while (event := self._h11.next_event()) is h11.NEED_DATA:
            self._h11.receive_data(await self._reader.read(READ_SIZE))
        return event

    async def _request(self) -> h11.Request | None:
        """The next request's head; None when the peer closed, idled out between requests,
        or the receiver is stopping."""
        if self._receiver.closing:
            return None
        self.idle = True
        if not self._h11.trailing_data[0]:  # no pipelined request already in hand
            try:
                async with asyncio.timeout(KEEP_ALIVE_TIMEOUT):
                    data = await self._reader.read(READ_SIZE)
            except TimeoutError:
                return None
            self._h11.receive_data(data)
        self.idle = False
        self._deadline = self._loop.time() + self._receiver.body_timeout
        async with asyncio.timeout_at(self._deadline):
            event = await self._event()
        if isinstance(event, h11.Request):
            self._head_only = event.method == b"HEAD"
            return event
        return None  # ConnectionClosed

    def _check(self, request: h11.Request) -> tuple[str, bool]:
        """What the head says of the body (its content type, whether gzipped); a
        :class:`_Refusal` for what can be refused before reading it."""
        receiver = self._receiver
        if request.target.split(b"?", 1)[0] != TRACES_PATH.encode():
            raise _Refusal(HTTPStatus.NOT_FOUND, "POST OTLP traces to /v1/traces")
        if request.method != b"POST":
            raise _Refusal(
                HTTPStatus.METHOD_NOT_ALLOWED, "POST OTLP traces to /v1/traces", [("Allow", "POST")]
            )
        headers = {name: value.decode("latin-1") for name, value in request.headers}
        length = headers.get(b"content-length")
        if b"transfer-encoding" in headers:  # chunked (h11 refuses any other): it frames the body
            length = None
        elif length is None:
            raise _Refusal(HTTPStatus.LENGTH_REQUIRED, "Content-Length or chunked body required")
        if length is not None and int(length) > receiver.max_body:  # h11 checked the digits
            raise _too_large(receiver.max_body)
        encoding = headers.get(b"content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            raise _Refusal(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"unsupported encoding {encoding!r}")
        try:
            kind = content_kind(headers.get(b"content-type", ""))
        except Unsupported as exc:
            raise _Refusal(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, str(exc)) from None
        return kind, encoding == "gzip"

    async def _body(self) -> bytearray:
        """The request body, each piece counted against ``max_body`` and taken from the
        budget before the next read."""
        receiver = self._receiver
        body = bytearray()
        while True:
            event = await self._event()
            if isinstance(event, h11.EndOfMessage):
                return body
            if not isinstance(event, h11.Data):
                raise h11.RemoteProtocolError("unexpected end of request")
            if len(body) + len(event.data) > receiver.max_body:
                raise _too_large(receiver.max_body)
            if not await receiver.budget.take(len(event.data), receiver.busy_wait):
                raise _Refusal(HTTPStatus.SERVICE_UNAVAILABLE, "busy, retry later", [RETRY_AFTER])
            self._held += len(event.data)
            body += event.data

    async def _write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def _respond(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: Headers = (),
        close: bool = False,
    ) -> None:
        fields = [
            ("Server", _SERVER),
            ("Date", formatdate(usegmt=True)),
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            *headers,
        ]
        if close or self._receiver.closing:  # tell the client, or it reuses a closing socket
            fields.append(("Connection", "close"))
        head = h11.Response(status_code=status, headers=fields, reason=status.phrase)
        data = self._h11.send(head)
        if body and not self._head_only:
            data += self._h11.send(h11.Data(data=body))
        await self._write(data + self._h11.send(h11.EndOfMessage()))

    async def _refuse(self, status: HTTPStatus, message: str, headers: Headers = ()) -> None:
        """Answer an error and end the connection; the client's unread rest is dropped for up
        to ``LINGER`` seconds, so that closing does not reset the connection before the
        client has read the answer."""
        self._release()
        if self._h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # an answer is (partly) out already: closing is all that is left
        # OTLP/HTTP: errors carry a google.rpc.Status; JSON is readable by every client
        body = json.dumps({"code": status.value, "message": message}).encode()
        await self._respond(status, body, "application/json", headers, close=True)
        if self._writer.can_write_eof():
            self._writer.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LINGER):
                while await self._reader.read(READ_SIZE):
                    pass


class Receiver:
    """OTLP/HTTP on ``host:port`` (0 picks a free port) feeding ``analyzer``, on an asyncio
    loop of its own thread (:meth:`start`, :meth:`stop`). Binds in the constructor, so that
    ``OSError`` says at once when the address is taken."""

    def __init__(
        self,
        analyzer: LiveAnalyzer,
        host: str = "127.0.0.1",
        port: int = 4318,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        bodies: int | None = None,
        busy_wait: float = DEFAULT_BUSY_WAIT,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        backlog: int = DEFAULT_BACKLOG,
    ) -> None:
        self.analyzer = analyzer
        self.max_body = max_body
        self.busy_wait = busy_wait  # seconds a request waits for room in the budget: then 503
        self.body_timeout = body_timeout
        # bytes of bodies held at once: at least one of the largest
        self.budget = ByteBudget(max(max_body, bodies or MAX_BODIES_IN_HAND * max_body))
        self.closing = False
        family = socket.AF_INET6 if ":" in host else socket.AF_INET  # ``::1``, ``::``
        self._sock = socket.create_server(
            (host, port),
            family=family,
            backlog=backlog,
            dualstack_ipv6=family == socket.AF_INET6 and socket.has_dualstack_ipv6(),
        )
        self.port: int = self._sock.getsockname()[1]
        self._backlog = backlog
        self._decoder = ThreadPoolExecutor(1, thread_name_prefix="otel-a2a-decode")
        self._reporter = ThreadPoolExecutor(1, thread_name_prefix="otel-a2a-report")
        self._connections: dict[_Connection, asyncio.Task[None]] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None

    def start(self) -> threading.Thread:
        """Serve on a background thread (stop with ``stop``); returns once serving."""
        ready = threading.Event()
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._serve(ready),), name="otel-a2a-detector", daemon=True
        )
        self._thread.start()
        ready.wait()
        return self._thread

    def stop(self) -> None:
        """Stop serving, gracefully (see the module's docstring), and free the threads."""
        if self._thread is not None and self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop ended already
                self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join()
        self._sock.close()
        self._decoder.shutdown()  # an analysis under way ends, and submits its report
        self._reporter.shutdown()

    async def _serve(self, ready: threading.Event) -> None:
        try:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
            server = await asyncio.start_server(
                self._accept, sock=self._sock, backlog=self._backlog, limit=READ_SIZE
            )
        finally:
            ready.set()
        await self._stopping.wait()
        server.close()
        self.closing = True
        for connection, task in list(self._connections.items()):
            if connection.idle:
                task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections.values()), timeout=SHUTDOWN_GRACE)
        late = list(self._connections.values())
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(self, reader, writer)
        task = asyncio.current_task()
        assert task is not None  # start_server runs each connection in a task
        self._connections[connection] = task
        try:
            await connection.run()
        except asyncio.CancelledError:
            # stopping: the connection is closed, its end is the task's end. Python 3.11's
            # asyncio.start_server callback would log the cancellation as an error traceback
            pass
        finally:
            del self._connections[connection]

    def _analyse(self, body: bytearray, kind: str, gzipped: bool) -> Future[None] | None:
        """Inflate, decode and analyse one body, on the decoder thread; the report of its
        findings, submitted to the reporter thread here so that it happens whatever becomes
        of the request (the correlator reports a finding once)."""
        batch, doc = decode_body(
            inflate(body, self.max_body) if gzipped else body, kind, as_json=self.analyzer.dumping
        )
        del body  # the decoded form is all that is needed now
        found = self.analyzer.ingest(batch, doc, report=False)
        return self._reporter.submit(self.analyzer.report, found) if found else None


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 4318,
    metrics_port: int | None = None,
    dump_path: str | None = None,
    as_json: bool = False,
    max_memory_mb: int = budget.DEFAULT_MAX_MEMORY_MB,
    max_body: int | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    backlog: int = DEFAULT_BACKLOG,
    max_tasks: int = 10_000,
    grace: float = 1.0,
    ui_port: int | None = None,
    ui_host: str = "127.0.0.1",
    judge: FleetJudgeOptions | None = None,
) -> int:
    """Run until SIGINT/SIGTERM, printing findings as they happen; the ``detector`` command.
    With ``ui_port``, the live timeline page (:mod:`otel_a2a.analyze.ui`) too."""
    import signal
    import sys

    from otel_a2a.analyze.fleet import any_finding_json, render_any_finding

    def emit(finding: Finding | ServiceFinding) -> None:
        line = json.dumps(any_finding_json(finding)) if as_json else render_any_finding(finding)
        print(line, flush=True)

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    try:
        shares = budget.shares(max_memory_mb, max_body)
    except ValueError as exc:
        print(f"otel-a2a detector: {exc}", file=sys.stderr)
        return 2
    try:
        dump = open(dump_path, "a", encoding="utf-8") if dump_path else None  # noqa: SIM115
    except OSError as exc:
        print(f"otel-a2a detector: cannot open dump file: {exc}", file=sys.stderr)
        return 2
    analyzer: LiveAnalyzer | None = None
    receiver: Receiver | None = None
    ui: LivePage | None = None
    try:
        ui = LivePage(ui_host, ui_port) if ui_port is not None else None
        correlator = Correlator(
            max_tasks=max_tasks, max_bytes=shares.tasks, max_link_bytes=shares.links, grace=grace
        )
        options = judge or FleetJudgeOptions()
        analyzer = LiveAnalyzer(
            correlator,
            emit,
            judge=FleetJudge(
                max_tasks=max_tasks,
                default_heartbeat=options.default_heartbeat,
                heartbeat_overrides=options.heartbeat_overrides,
                hold=options.hold,
                max_bytes=shares.tasks // 8,
            ),
            dump=dump,
            metrics_port=metrics_port,
            metrics_host=host,
            on_request=ui.record if ui is not None else None,
        )
        receiver = Receiver(
            analyzer,
            host,
            port,
            max_body=shares.max_body,
            bodies=shares.bodies,
            body_timeout=body_timeout,
            backlog=backlog,
        )
    except OSError as exc:
        print(f"otel-a2a detector: cannot listen: {exc}", file=sys.stderr)
        if ui is not None:
            ui.close()
        if analyzer is not None:
            analyzer.close()
        if dump is not None:
            dump.close()
        return 2
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        receiver.start()
        analyzer.start_ticking()
        if ui is not None:
            ui.start()
        print(
            f"otel-a2a detector: OTLP/HTTP on http://{shown}:{receiver.port}{TRACES_PATH}"
            + (
                f", metrics on http://{shown}:{analyzer.metrics_port}/metrics"
                if analyzer.metrics_port
                else ""
            )
            + (f", timeline page on {ui.url}" if ui is not None else ""),
            file=sys.stderr,
            flush=True,
        )
        print(
            f"otel-a2a detector: memory budget {max_memory_mb} MiB: bodies up to "
            f"{shares.max_body} bytes, {shares.bodies} bytes of bodies held at once, "
            f"{shares.tasks} bytes of task records, {shares.links} bytes of parent links",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        receiver.stop()
        analyzer.close()
        if ui is not None:
            ui.close()
        if dump is not None:
            dump.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats = analyzer.correlator.stats
    print(
        f"otel-a2a detector: stopped after {analyzer.requests} requests, {stats.spans} spans, "
        f"{stats.beliefs} task beliefs, {stats.findings} findings "
        f"({stats.findings_dropped} more dropped by the bounds), {stats.tasks_evicted} tasks "
        f"evicted, {stats.errors} malformed span(s) skipped; {summary(analyzer.judge)}",
        file=sys.stderr,
        flush=True,
    )
    return 0
