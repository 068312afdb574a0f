"""``otel-a2a detector``: a live OTLP/HTTP trace receiver running the cross-runtime analysis.

``POST /v1/traces`` with ``application/json`` (OTLP JSON) or ``application/x-protobuf``
(``ExportTraceServiceRequest``, turned into the same JSON form with ``MessageToDict``), gzip
allowed. Bodies are bounded (413 beyond ``max_body``), malformed ones answered 400, and nothing
a client sends can stop the server. Findings are handed to a callback as they happen and
counted on the ``a2a.divergence`` counter (metric contract) of a private SDK meter provider, served
for Prometheus when a metrics port is given. ``--dump`` appends every accepted request as one
OTLP JSON line, the collector file exporter's format, for ``otel-a2a analyze``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

from otel_a2a import semconv as sc
from otel_a2a.analyze.correlate import Correlator
from otel_a2a.analyze.model import Finding
from otel_a2a.analyze.otlp import normalize_id, parse_request
from otel_a2a.protocol import Operation
from otel_a2a.version import __version__

_log = logging.getLogger("otel_a2a.detector")
# ``a2a.operation`` values the detector's metric may carry; anything else is ``_OTHER``
_OPERATIONS = frozenset({*(op.value for op in Operation), sc.OP_DECISION, sc.OP_UNKNOWN})

TRACES_PATH = "/v1/traces"
DEFAULT_MAX_BODY = 16 * 1024 * 1024
MAX_BODIES_IN_HAND = 8  # bodies of the largest size held at once (read, or waiting to decode)
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class _Malformed(ValueError):
    """A chunked body that breaks the framing."""


class _ByteBudget:
    """Bytes of request bodies held at once, across connections (which are not bounded)."""

    def __init__(self, total: int) -> None:
        self.free = total
        self._cond = threading.Condition()

    def reserve(self, size: int, timeout: float) -> bool:
        with self._cond:
            if not self._cond.wait_for(lambda: self.free >= size, timeout):
                return False
            self.free -= size
            return True

    def release(self, size: int) -> None:
        if size:
            with self._cond:
                self.free += size
                self._cond.notify_all()


def _length(text: str | None) -> int | None:
    """A Content-Length value, or None (``str.isdigit`` accepts ``²``, which ``int`` does not)."""
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


class BadRequest(ValueError):
    """The body is not an OTLP trace export request."""


def _hex_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """``MessageToDict`` writes bytes ids in base64; OTLP JSON (and the file exporter) in hex."""
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for owner in (span, *span.get("links", [])):
                    for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                        if key in owner:
                            owner[key] = normalize_id(owner[key], size)
    return doc


def decode_body(body: bytes, content_type: str) -> dict[str, Any]:
    """The OTLP JSON form of an export request body; raises :class:`BadRequest`."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/json":
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"invalid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise BadRequest("an ExportTraceServiceRequest JSON object is required")
        return doc
    if kind == "application/x-protobuf":
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped, unused-ignore]
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        try:
            message = ExportTraceServiceRequest.FromString(body)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise BadRequest(f"invalid protobuf: {exc}") from None
        return _hex_ids(MessageToDict(message, use_integers_for_enums=True))
    raise BadRequest(f"unsupported content type {kind!r}")


class Detector:
    """The analysis behind the receiver: thread-safe, findings to ``on_finding`` and a metric."""

    def __init__(
        self,
        correlator: Correlator,
        on_finding: Callable[[Finding], None] | None = None,
        *,
        dump: IO[str] | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
    ) -> None:
        from opentelemetry.sdk.metrics import MeterProvider

        self.correlator = correlator
        self.requests = 0
        self._on_finding = on_finding
        self._dump = dump
        self._lock = threading.Lock()
        self._labels = sc.AgentLabels()
        self._metrics_server: Any = None
        self.metrics_port: int | None = None
        readers = []
        if metrics_port is not None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry, start_http_server

            registry = CollectorRegistry()
            readers.append(PrometheusMetricReader(registry=registry))
            server, _thread = start_http_server(metrics_port, addr=metrics_host, registry=registry)
            self._metrics_server = server
            self.metrics_port = int(server.server_port)
        self._provider = MeterProvider(metric_readers=readers)
        self._counter = self._provider.get_meter(sc.SCOPE, __version__).create_counter(
            sc.M_DIVERGENCE,
            unit="{divergence}",
            description="Divergent liveness decisions and observations, by reason",
        )

    def ingest(self, doc: dict[str, Any], *, report: bool = True) -> list[Finding]:
        """Analyse one export request (OTLP JSON form); never raises on its content. The
        findings go to ``on_finding`` now, or with ``report=False`` when the caller calls
        :meth:`report` (the receiver: after answering, outside its locks)."""
        batch = parse_request(doc)
        with self._lock:
            self.requests += 1
            if self._dump is not None:
                self._dump.write(json.dumps(doc, separators=(",", ":")) + "\n")
                self._dump.flush()
            findings = self.correlator.feed(batch)
            for finding in findings:
                attrs = {sc.DIVERGENCE_REASON: finding.reason.value}
                b = finding.b
                operation = b.operation or b.span_name.removeprefix("A2A ").strip()
                if operation:  # from foreign spans: capped like agent names
                    attrs[sc.OPERATION] = operation if operation in _OPERATIONS else sc.OTHER
                if b.agent_name:
                    attrs[sc.AGENT_NAME] = self._labels(b.agent_name)
                self._counter.add(1, attrs)
        if report:
            self.report(findings)
        return findings

    def report(self, findings: list[Finding]) -> None:
        """Hand findings to ``on_finding``, outside every lock: a stdout nobody reads blocks
        the request that found them, not every other one."""
        on_finding = self._on_finding
        if on_finding is None:
            return
        for finding in findings:
            try:
                on_finding(finding)
            except Exception:
                _log.exception("finding callback failed")

    def close(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        self._provider.shutdown()


class _Handler(BaseHTTPRequestHandler):
    server: Receiver
    protocol_version = "HTTP/1.1"
    timeout = 30  # a stalled client releases its thread
    server_version = "otel-a2a-detector/" + __version__
    _consumed = False  # whether this request's body was read (else drained before answering)
    _reserved = 0  # bytes of the budget this request holds

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s " + format, self.address_string(), *args)

    def _reply(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:  # tell the client, or it reuses a socket about to close
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _error(
        self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None
    ) -> None:
        # OTLP/HTTP: errors carry a google.rpc.Status; JSON is readable by every client
        if not self._consumed:
            if self._chunked():
                self._drain_chunks(8 * self.server.max_body)
            elif (length := _length(self.headers.get("Content-Length"))) is not None:
                self._drain(length, 8 * self.server.max_body)
        body = json.dumps({"code": status.value, "message": message}).encode()
        self.close_connection = True
        self._reply(status, body, "application/json", headers)

    def _chunked(self) -> bool:
        return (self.headers.get("Transfer-Encoding") or "").strip().lower() == "chunked"

    def _chunks(self) -> Iterator[bytes]:
        """The data of a chunked body, chunk by chunk; ``_Malformed`` on anything that is not
        ``<hex size>[;ext]CRLF <data> CRLF``, trailers read and dropped."""
        while True:
            line = self.rfile.readline(1024)
            size_text = line.split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size_text) or not line.endswith(b"\n"):
                raise _Malformed("malformed chunked body")
            size = int(size_text, 16)
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            chunk = self.rfile.read(size)
            if len(chunk) != size:
                raise _Malformed("truncated body")
            if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise _Malformed("malformed chunked body")
            yield chunk

    def _reserve(self, size: int) -> bool:
        """Room for ``size`` more bytes of body in hand, waiting up to ``busy_wait``."""
        if not self.server.budget.reserve(size, self.server.busy_wait):
            return False
        self._reserved += size
        return True

    def _busy(self) -> None:
        self._error(HTTPStatus.SERVICE_UNAVAILABLE, "busy, retry later", {"Retry-After": "1"})

    def _read_body(self, limit: int) -> bytes | None:
        """The request body, by Content-Length or chunked (the OpenTelemetry JS exporter
        streams its body without a length); ``None`` when an error was answered. Bytes are
        reserved from the receiver's budget as they come: a client trickling a large body
        holds only what it announced or sent, not a slot others wait for."""
        if self._chunked():
            parts: list[bytes] = []
            total = 0
            chunks = self._chunks()
            try:
                for chunk in chunks:
                    total += len(chunk)
                    if total > limit:
                        self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {limit} bytes")
                        return None
                    if not self._reserve(len(chunk)):
                        self._busy()
                        return None
                    parts.append(chunk)
            except _Malformed as exc:
                self._consumed = True  # the stream is out of step: nothing more to read
                self._error(HTTPStatus.BAD_REQUEST, str(exc))
                return None
            self._consumed = True
            return b"".join(parts)
        if self.headers.get("Transfer-Encoding"):
            self._error(HTTPStatus.NOT_IMPLEMENTED, "unsupported transfer encoding")
            return None
        length = _length(self.headers.get("Content-Length"))
        if length is None:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length or chunked body required")
            return None
        if length > limit:  # drained (up to a bound) so that the client reads the 413
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {limit} bytes")
            return None
        if not self._reserve(length):
            self._busy()
            return None
        body = self.rfile.read(length)
        self._consumed = True
        if len(body) != length:
            self._error(HTTPStatus.BAD_REQUEST, "truncated body")
            return None
        return body

    def _drain(self, length: int, most: int) -> None:
        """Read and drop a refused body (up to ``most`` bytes), so that the client still gets
        the answer: closing a socket with unread data resets the connection instead."""
        self._consumed = True
        left = min(length, most)
        while left > 0:
            chunk = self.rfile.read(min(left, 64 * 1024))
            if not chunk:
                return
            left -= len(chunk)

    def _drain_chunks(self, most: int) -> None:
        self._consumed = True
        left = most
        with contextlib.suppress(_Malformed):
            for chunk in self._chunks():
                left -= len(chunk)
                if left <= 0:
                    return

    def do_GET(self) -> None:
        self._consumed = False
        self._error(
            HTTPStatus.NOT_FOUND if self.path != TRACES_PATH else HTTPStatus.METHOD_NOT_ALLOWED,
            "POST OTLP traces to /v1/traces",
        )

    def do_POST(self) -> None:
        self._consumed = False
        self._reserved = 0
        self._found: list[Finding] = []
        try:
            self._post()
        except Exception as exc:  # never let one request take the receiver down
            _log.exception("request failed")
            with contextlib.suppress(OSError):
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, type(exc).__name__)
        finally:
            self.server.budget.release(self._reserved)
            # found is found, whatever became of the request (the correlator reports it once)
            self.server.detector.report(self._found)

    def _post(self) -> None:
        """Answer one export request; its findings (``_found``) are reported after."""
        if self.path.split("?", 1)[0] != TRACES_PATH:
            self._error(HTTPStatus.NOT_FOUND, "POST OTLP traces to /v1/traces")
            return
        limit = self.server.max_body
        body = self._read_body(limit)
        if body is None:
            return
        with self.server.decoding:  # one at a time: inflated and decoded bodies are large
            content_type = self._decode(body, limit)
        if content_type is None:
            return
        # before the reply (a client that has its answer sees the findings reported), outside
        # every lock (a stdout nobody reads stalls this request, not every other one)
        found, self._found = self._found, []
        self.server.detector.report(found)
        if content_type.lower().startswith("application/x-protobuf"):
            self._reply(HTTPStatus.OK, b"", "application/x-protobuf")  # empty response message
        else:
            self._reply(HTTPStatus.OK, b"{}", "application/json")

    def _decode(self, body: bytes, limit: int) -> str | None:
        """Inflate, decode and analyse the body; its content type, or None when an error
        was answered. The findings are left in ``_found``."""
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding == "gzip":
            inflater = zlib.decompressobj(wbits=31)
            try:
                body = inflater.decompress(body, limit + 1)
            except zlib.error:
                self._error(HTTPStatus.BAD_REQUEST, "invalid gzip body")
                return None
            if len(body) > limit or inflater.unconsumed_tail:
                self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {limit} bytes")
                return None
        elif encoding != "identity":
            self._error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"unsupported encoding {encoding!r}")
            return None
        content_type = self.headers.get("Content-Type") or ""
        try:
            doc = decode_body(body, content_type)
        except BadRequest as exc:
            status = (
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE
                if str(exc).startswith("unsupported")
                else HTTPStatus.BAD_REQUEST
            )
            self._error(status, str(exc))
            return None
        del body
        self._found = self.server.detector.ingest(doc, report=False)
        del doc
        return content_type


class Receiver(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` on ``host:port`` (0 picks a free port) feeding ``detector``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        detector: Detector,
        host: str = "127.0.0.1",
        port: int = 4318,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        busy_wait: float = 10.0,
    ) -> None:
        self.detector = detector
        self.max_body = max_body
        self.budget = _ByteBudget(MAX_BODIES_IN_HAND * max_body)
        self.decoding = threading.Lock()
        self.busy_wait = busy_wait  # seconds a request waits for its turn before a 503
        if ":" in host:  # an IPv6 address (``::1``, ``::``)
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> threading.Thread:
        """Serve on a background thread (stop with ``stop``)."""
        thread = threading.Thread(target=self.serve_forever, name="otel-a2a-detector", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 4318,
    metrics_port: int | None = None,
    dump_path: str | None = None,
    as_json: bool = False,
    max_body: int = DEFAULT_MAX_BODY,
    correlator: Correlator | None = None,
) -> int:
    """Run until SIGINT/SIGTERM, printing findings as they happen; the ``detector`` command."""
    import signal
    import sys

    from otel_a2a.analyze.model import finding_json, render_finding

    def emit(finding: Finding) -> None:
        line = json.dumps(finding_json(finding)) if as_json else render_finding(finding)
        print(line, flush=True)

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    try:
        dump = open(dump_path, "a", encoding="utf-8") if dump_path else None  # noqa: SIM115
    except OSError as exc:
        print(f"otel-a2a detector: cannot open dump file: {exc}", file=sys.stderr)
        return 2
    detector: Detector | None = None
    receiver: Receiver | None = None
    try:
        detector = Detector(
            correlator or Correlator(),
            emit,
            dump=dump,
            metrics_port=metrics_port,
            metrics_host=host,
        )
        receiver = Receiver(detector, host, port, max_body=max_body)
    except OSError as exc:
        print(f"otel-a2a detector: cannot listen: {exc}", file=sys.stderr)
        if detector is not None:
            detector.close()
        if dump is not None:
            dump.close()
        return 2
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        receiver.start()
        print(
            f"otel-a2a detector: OTLP/HTTP on http://{shown}:{receiver.port}{TRACES_PATH}"
            + (
                f", metrics on http://{shown}:{detector.metrics_port}/metrics"
                if detector.metrics_port
                else ""
            ),
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    finally:
        receiver.stop()
        detector.close()
        if dump is not None:
            dump.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats = detector.correlator.stats
    print(
        f"otel-a2a detector: stopped after {detector.requests} requests, {stats.spans} spans, "
        f"{stats.beliefs} task beliefs, {stats.findings} findings",
        file=sys.stderr,
        flush=True,
    )
    return 0
