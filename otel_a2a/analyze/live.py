"""The analysis behind ``otel-a2a detector``, apart from HTTP: bodies to findings and a metric.

An OTLP/HTTP export body (``application/json``, OTLP JSON, or ``application/x-protobuf``, an
``ExportTraceServiceRequest`` read field by field; gzip allowed) is inflated within a bound,
decoded and fed to the :class:`Correlator` and, when given one, to the
:class:`~otel_a2a.analyze.fleet.FleetJudge` (the invariant judged per service from spans; a
ticker thread judges what waited its hold out when no request comes). Findings go to a
callback and are counted on ``otel_a2a.divergence`` (reason, operation, agent name, and the
service judged for the judge's) of a private SDK meter provider, served for Prometheus when a
metrics port is given. The HTTP side is :mod:`otel_a2a.analyze.receiver`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import IO, Any

from otel_a2a import semconv as sc
from otel_a2a.analyze.correlate import Correlator
from otel_a2a.analyze.fleet import FleetJudge, ServiceFinding
from otel_a2a.analyze.model import Batch, Finding
from otel_a2a.analyze.otlp import normalize_id, parse_request
from otel_a2a.analyze.otlp_protobuf import parse_message
from otel_a2a.protocol import Operation
from otel_a2a.version import __version__

_log = logging.getLogger("otel_a2a.detector")
# ``a2a.method.name`` values the detector's metric may carry; anything else is ``_OTHER``
_OPERATIONS = frozenset({*(op.value for op in Operation), sc.OP_DECISION, sc.OP_UNKNOWN})
JSON = "application/json"
PROTOBUF = "application/x-protobuf"
# ``error.type`` on ``a2a.instrumentation.errors`` of a finding the correlator's bounds dropped
FINDING_DROPPED = "finding_dropped"
# ``error.type`` of a span act that arrived after a later act of its service and task was judged
LATE_SPAN = "late_span"
TICK = 0.5  # seconds between the ticker's looks at acts whose hold ended
AnyFinding = Finding | ServiceFinding


class BadRequest(ValueError):
    """The body is not an OTLP trace export request."""


class Unsupported(BadRequest):
    """A content type or encoding the receiver does not read (HTTP 415)."""


class TooLarge(BadRequest):
    """A body over the bound once inflated (HTTP 413)."""


def content_kind(content_type: str) -> str:
    """``application/json`` or ``application/x-protobuf`` from a Content-Type value."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in (JSON, PROTOBUF):
        raise Unsupported(f"unsupported content type {kind!r}")
    return kind


def inflate(body: bytes | bytearray, limit: int) -> bytes:
    """A gzip body inflated, refused (:class:`TooLarge`) as soon as it passes ``limit``."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise BadRequest("invalid gzip body") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"body over {limit} bytes")
    return out


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


def to_json(message: Any) -> dict[str, Any]:
    """The OTLP JSON form (hex ids, the file exporter's) of a decoded protobuf request: what
    ``--dump`` writes. Several times the memory and CPU of reading the message itself."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped, unused-ignore]

    return _hex_ids(MessageToDict(message, use_integers_for_enums=True))


def decode_body(
    body: bytes | bytearray, content_type: str, *, as_json: bool = False
) -> tuple[Batch, dict[str, Any] | None]:
    """The beliefs and links of an export request body, and with ``as_json`` its OTLP JSON
    form; raises :class:`BadRequest`. Protobuf is read field by field
    (:func:`~otel_a2a.analyze.otlp_protobuf.parse_message`), never turned into JSON unless
    asked."""
    kind = content_kind(content_type)
    if kind == JSON:
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"invalid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise BadRequest("an ExportTraceServiceRequest JSON object is required")
        return parse_request(doc), doc
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        message = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise BadRequest(f"invalid protobuf: {exc}") from None
    return parse_message(message), to_json(message) if as_json else None


class LiveAnalyzer:
    """Thread-safe analysis of export requests: findings to ``on_finding`` and a metric."""

    def __init__(
        self,
        correlator: Correlator,
        on_finding: Callable[[AnyFinding], None] | None = None,
        *,
        judge: FleetJudge | None = None,
        dump: IO[str] | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        on_request: Callable[[dict[str, Any], Batch, list[Finding]], None] | None = None,
    ) -> None:
        from opentelemetry.sdk.metrics import MeterProvider

        self.correlator = correlator
        self.judge = judge
        self.requests = 0
        self._on_finding = on_finding
        self._on_request = on_request  # the live page: each request with what it found
        self._dump = dump
        self._lock = threading.Lock()
        self._labels = sc.AgentLabels()
        self._services = sc.AgentLabels()  # the same cap, for the services judged
        self._stopping = threading.Event()
        self._late_seen = 0  # the judge's late acts already counted
        self._ticker: threading.Thread | None = None
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
        self._counter = self._provider.get_meter(
            sc.SCOPE, __version__, schema_url=sc.SCHEMA_URL
        ).create_counter(
            sc.M_DIVERGENCE,
            unit="{divergence}",
            description="Divergent liveness decisions and observations, by reason",
        )
        self._errors = self._provider.get_meter(
            sc.SCOPE, __version__, schema_url=sc.SCHEMA_URL
        ).create_counter(
            sc.M_ERRORS,
            unit="{error}",
            description="Internal failures of otel-a2a (contained)",
        )

    @property
    def dumping(self) -> bool:
        """Whether ``ingest`` wants each request's OTLP JSON form: requests are dumped, or the
        live page draws them."""
        return self._dump is not None or self._on_request is not None

    def start_ticking(self, interval: float = TICK) -> None:
        """Judge acts whose hold ended every ``interval`` seconds, requests or not."""
        if self.judge is None or self._ticker is not None:
            return
        self._ticker = threading.Thread(
            target=self._tick_loop, args=(interval,), name="otel-a2a-judge", daemon=True
        )
        self._ticker.start()

    def _tick_loop(self, interval: float) -> None:
        while not self._stopping.wait(interval):
            self.tick(time.monotonic())

    def tick(self, now: float) -> list[AnyFinding]:
        """Judge (and report) what waited its hold out by ``now``."""
        if self.judge is None:
            return []
        with self._lock:
            found = self._judged(self.judge.tick(now))
        self.report(found)
        return found

    def _judged(self, found: Sequence[ServiceFinding]) -> list[AnyFinding]:
        """Count the judge's findings (caller holds the lock) and its late acts."""
        judge = self.judge
        assert judge is not None
        late = judge.stats.late
        self._count(LATE_SPAN, late - self._late_seen)
        self._late_seen = late
        for f in found:
            attrs = {
                sc.DIVERGENCE_REASON: f.reason.value,
                sc.OPERATION: f.operation if f.operation in _OPERATIONS else sc.OTHER,
                sc.SERVICE_LABEL: self._services(f.service),
            }
            if f.agent_name or f.agent:
                attrs[sc.AGENT_LABEL] = self._labels(
                    f.agent_name or f.agent, address=not f.agent_name
                )
            self._counter.add(1, attrs)
        return list(found)

    def ingest(
        self, batch: Batch, doc: dict[str, Any] | None = None, *, report: bool = True
    ) -> list[AnyFinding]:
        """Analyse one export request's batch (and dump its OTLP JSON form ``doc``, when
        dumping). The findings go to ``on_finding`` now, or with ``report=False`` when the
        caller calls :meth:`report` (the receiver: on a thread of its own, before answering)."""
        with self._lock:
            self.requests += 1
            if self._dump is not None and doc is not None:
                self._dump.write(json.dumps(doc, separators=(",", ":")) + "\n")
                self._dump.flush()
            dropped = self.correlator.stats.findings_dropped
            findings = self.correlator.feed(batch)
            self._count(FINDING_DROPPED, self.correlator.stats.findings_dropped - dropped)
            for finding in findings:
                attrs = {sc.DIVERGENCE_REASON: finding.reason.value}
                b = finding.b
                operation = b.operation or b.span_name.removeprefix("A2A ").strip()
                if operation:  # from foreign spans: capped like agent names
                    attrs[sc.OPERATION] = operation if operation in _OPERATIONS else sc.OTHER
                if b.agent_name:
                    attrs[sc.AGENT_LABEL] = self._labels(b.agent_name)
                self._counter.add(1, attrs)
            if self._on_request is not None and doc is not None:
                self._on_request(doc, batch, findings)
            judged: list[AnyFinding] = []
            if self.judge is not None:
                acts = self.judge.feed(batch.acts, time.monotonic(), batch.self_judging)
                judged = self._judged(acts)
        found: list[AnyFinding] = [*findings, *judged]
        if report:
            self.report(found)
        return found

    def _count(self, error_type: str, n: int) -> None:
        if n:
            self._errors.add(n, {sc.ERROR_TYPE: error_type})

    def report(self, findings: Sequence[AnyFinding]) -> None:
        """Hand findings to ``on_finding``, outside every lock: a stdout nobody reads blocks
        the requests that found something, not the analysis of every other one."""
        on_finding = self._on_finding
        if on_finding is None:
            return
        for finding in findings:
            try:
                on_finding(finding)
            except Exception:
                _log.exception("finding callback failed")

    def close(self) -> None:
        """Stop ticking and judge every act still waiting (reported), then stop serving
        metrics."""
        self._stopping.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self.judge is not None:
            with self._lock:
                found = self._judged(self.judge.flush())
            self.report(found)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        self._provider.shutdown()
