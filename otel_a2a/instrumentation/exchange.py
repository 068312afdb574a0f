"""One A2A exchange, from the request leaving to the last byte of its response.

The exchange owns the operation's span. It sees the response bytes only as the application
reads them (see ``httpx_client``), holds at most ``OTEL_A2A_MAX_BODY_BYTES`` of one body, parses
SSE incrementally, and ends the span when the body is consumed or closed. Every method is
called from the host's request path and contains its own failures (counted, never raised).
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from otel_a2a import semconv as sc
from otel_a2a.instrumentation import collection, own_spans
from otel_a2a.instrumentation.runtime import Peer, Runtime
from otel_a2a.protocol import (
    A2AError,
    A2ARequest,
    Binding,
    CardInfo,
    Operation,
    ResponseFacts,
    SSEParser,
    StateClass,
    StateReading,
    StreamEvent,
    TaskReport,
    extract_from_prefixes,
    extract_response,
    parse_card,
    parse_extended_card,
)
from otel_a2a.protocol.states import semconv_state

# Hot path: members read once; sets and dicts keyed by value (hashing a member runs Python).
_JSONRPC = Binding.JSONRPC
_HTTP_JSON = Binding.HTTP_JSON
_GET_TASK = Operation.GET_TASK
_GET_AGENT_CARD = Operation.GET_AGENT_CARD
_GET_EXTENDED_AGENT_CARD = Operation.GET_EXTENDED_AGENT_CARD
_CARD_OPS = frozenset({Operation.GET_AGENT_CARD.value, Operation.GET_EXTENDED_AGENT_CARD.value})
_ACTIVE = StateClass.ACTIVE
_CLIENT = SpanKind.CLIENT
_DECISION_OPS = frozenset(
    op.value
    for op in (
        Operation.SEND_MESSAGE,
        Operation.SEND_STREAMING_MESSAGE,
        Operation.CANCEL_TASK,
        Operation.CREATE_PUSH_CONFIG,
    )
)
_STREAM_OPS = frozenset({Operation.SEND_STREAMING_MESSAGE.value, Operation.SUBSCRIBE_TO_TASK.value})
_SPAN_NAMES = {op.value: sc.span_name(op.value) for op in Operation}
# Of a response httpx hands over decoded, only these operations read headers: a card its
# ETag and Cache-Control, a stream its Content-Type.
_HEADED_OPS = _CARD_OPS | _STREAM_OPS
NO_HEADERS: Mapping[str, str] = MappingProxyType({})
# Tasks one stream keeps alive (its frames refresh their observations). A stream is about one task;
# a peer naming thousands on one stream must not make every frame cost thousands of updates.
_MAX_STREAM_TASKS = 16


def _error_type(code: int | None, binding: Binding, status: int) -> str:
    """``error.type`` of an error response, as the A2A convention says: the JSON-RPC error
    code as a string, else the protocol status code (the HTTP status), else ``_OTHER``. The
    A2A error reason, which tells apart what ``400`` says of most A2A errors alike over
    HTTP+JSON, is ``otel_a2a.error.reason``."""
    if code is not None and binding is not _HTTP_JSON:
        return str(code)
    return str(status) if status >= 400 else sc.ERROR_TYPE_OTHER


def card_attributes(
    attrs: dict[str, str | bool | float | int],
    card: CardInfo | None,
    etag: str | None,
    heartbeat: float | None,
) -> dict[str, str | bool | float | int]:
    """``attrs`` with what a card puts on the span of its fetch, over any binding."""
    if card is not None:
        if card.name:
            attrs[sc.AGENT_NAME] = card.name
        if card.version:
            attrs[sc.AGENT_VERSION] = card.version
        if card.streaming is not None:
            attrs[sc.CARD_STREAMING] = card.streaming
    if etag:
        attrs[sc.CARD_ETAG] = etag
    if heartbeat is not None:
        attrs[sc.CARD_HEARTBEAT] = heartbeat
    return attrs


_INFLATE_STEP = 64 * 1024


class _Inflater:
    """Undoes ``Content-Encoding`` gzip/deflate in bounded steps, at most ``budget`` bytes in
    all (then ``over`` is set): a few KB on the wire can inflate to GBs. ``deflate`` is tried
    as zlib, then as raw deflate, and what follows the end of the first gzip member or deflate
    stream (trailing bytes, further members) is ignored, as httpx does: otel-a2a observes the
    bytes the application reads."""

    __slots__ = ("_first", "_left", "_zlib", "over")

    def __init__(self, encoding: str, budget: int) -> None:
        self._zlib = zlib.decompressobj(
            16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        )
        self._first = encoding == "deflate"
        self._left = budget
        self.over = False

    def pieces(self, chunk: bytes) -> Iterator[bytes]:
        inflater = self._zlib
        if inflater.eof:  # ``decompress`` would keep answering b'' and hoarding the input
            return
        try:
            piece = inflater.decompress(chunk, _INFLATE_STEP)
        except zlib.error:
            if not self._first:
                raise
            inflater = self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            piece = inflater.decompress(chunk, _INFLATE_STEP)
        self._first = False
        while True:
            if len(piece) > self._left:
                self.over = True
                if self._left:
                    yield piece[: self._left]
                return
            self._left -= len(piece)
            yield piece
            # a full step may leave output pending in zlib even once every input byte is in
            if len(piece) < _INFLATE_STEP or inflater.eof:
                return
            piece = inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP)


_TemplateKey = tuple[Peer, str, str | None, str, str | None]
# The attributes every span of one operation to one peer (as resolved under one card
# generation: a card fetch makes new peers) starts with, built once; a request adds its task
# and context ids. Bounded: cleared when full.
_TEMPLATES: dict[_TemplateKey, dict[str, str | bool]] = {}
_MAX_TEMPLATES = 256


def _template(key: _TemplateKey) -> dict[str, str | bool]:
    peer, op_name, version, binding, jsonrpc_method = key
    attrs: dict[str, str | bool] = {
        sc.RPC_SYSTEM: sc.RPC_SYSTEM_A2A,
        sc.RPC_METHOD: op_name,
        sc.OPERATION: op_name,
        sc.AGENT_URL: peer.key,
    }
    if version is not None:  # None only for the well-known card: no binding either
        attrs[sc.PROTOCOL_VERSION] = version
        attrs[sc.BINDING] = binding
    if jsonrpc_method:
        attrs[sc.JSONRPC_METHOD] = jsonrpc_method
    if peer.name:
        attrs[sc.AGENT_NAME] = peer.name
    if peer.etag and op_name not in _CARD_OPS:  # card spans carry their own
        attrs[sc.CARD_ETAG] = peer.etag
    if len(_TEMPLATES) >= _MAX_TEMPLATES:
        _TEMPLATES.clear()
    _TEMPLATES[key] = attrs
    return attrs


class Exchange:
    __slots__ = (
        "_buffer",
        "_closed",
        "_decoder",
        "_given_up",
        "_last_report",
        "_named_seen",
        "_overflow",
        "_sse",
        "_stream_tasks",
        "_swapped",
        "_terminal_seen",
        "_unsaid_status",
        "a2a",
        "headers",
        "peer",
        "rt",
        "span",
        "status",
        "url",
    )

    def __init__(self, rt: Runtime, a2a: A2ARequest, url: str, interface: str) -> None:
        self.rt = rt
        self.a2a = a2a
        self.url = url
        self.status = 0
        # the status not yet on the span: it goes with the next attributes set (each call
        # into the SDK costs as much as several attributes), at the latest before the end
        self._unsaid_status = 0
        self.headers = NO_HEADERS
        self._buffer: bytearray | None = None
        self._overflow = False
        self._decoder: _Inflater | None = None
        self._sse: SSEParser | None = None
        self._stream_tasks: set[str] = set()
        self._last_report: TaskReport | None = None
        self._swapped: str | None = None  # the last other task answered for the one named
        self._named_seen = False  # a stream frame reported the task the request named
        self._terminal_seen = False
        self._closed = False
        self._given_up = False
        self.peer = peer = rt.peer(url, interface)
        op_name = a2a.operation._value_  # Enum ``.value`` is a slow property on CPython 3.11
        # the binding's value, not the member: hashing an Enum member runs Python code
        key = (peer, op_name, a2a.version, a2a.binding._value_, a2a.jsonrpc_method)
        template = _TEMPLATES.get(key)
        if template is None:
            template = _template(key)
        attrs = template.copy()
        if a2a.task_id:
            attrs[sc.TASK_ID] = a2a.task_id
            if op_name in _DECISION_OPS:  # judged in ``before_send``
                attrs[sc.LIVENESS_DECISION] = True
        if a2a.context_id:
            attrs[sc.CONTEXT_ID] = a2a.context_id
        self.span: Span = own_spans.start(rt.tracer, _SPAN_NAMES[op_name], _CLIENT, attrs)

    # -- before the request leaves ------------------------------------------------------

    def before_send(self) -> None:
        """Judge implicit liveness decisions and redundant polls, before the request leaves."""
        a2a, now = self.a2a, time.monotonic()
        task_id = a2a.task_id
        if not task_id:
            return
        if a2a.operation is _GET_TASK:
            self.rt.poll(self.peer, task_id, now)
        elif a2a.operation._value_ in _DECISION_OPS:
            self.rt.decide(self.span, task_id, self.peer, a2a.operation._value_, now)

    # -- response ------------------------------------------------------------------------

    def reads_headers(self, raw: bool) -> bool:
        """Whether :meth:`on_response` needs the response headers: of a body still encoded
        (``raw``) its Content-Encoding; of a card or a stream, see ``_HEADED_OPS``."""
        return raw or self.a2a.operation._value_ in _HEADED_OPS

    def on_response(self, status: int, headers: Mapping[str, str], raw: bool) -> None:
        """Response headers arrived; ``raw`` when we will see the body still content-encoded."""
        self.status = self._unsaid_status = status
        self.headers = headers
        encoding = headers.get("content-encoding") if raw else None  # else httpx decoded it
        if encoding is not None and (encoding := encoding.strip().lower()) not in ("", "identity"):
            if encoding not in ("gzip", "deflate"):  # br, zstd, ...
                self.rt.error("unsupported_content_encoding")
                self._overflow = True  # observe nothing rather than guess
                return
            self._decoder = _Inflater(encoding, self.rt.settings.max_body_bytes)
        # read as the SDK clients do: a stream only where the operation streams, whatever the
        # content type claims (a JSON Task labelled text/event-stream is still a Task)
        if (
            "text/event-stream" in headers.get("content-type", "")
            and self.a2a.operation._value_ in _STREAM_OPS
        ):
            self._sse = SSEParser(self.a2a, self.rt.settings.max_body_bytes)
            if self.a2a.task_id:
                self._stream_tasks.add(self.a2a.task_id)  # the first of at most 16
        elif raw:  # the tee will show the bytes; otherwise httpx hands the whole body over
            self._buffer = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Raw bytes as the application reads them (stream mode)."""
        if self._closed or self._overflow or not chunk:
            return
        try:
            decoder = self._decoder
            if decoder is None:
                self._take(chunk)
                return
            for piece in decoder.pieces(chunk):
                self._take(piece)
            if decoder.over:
                self._over_limit()
        except zlib.error as exc:
            self._overflow = True  # the decoder's state is lost: counted once, nothing guessed
            self.rt.error(exc)
        except Exception as exc:
            self.rt.error(exc)

    def _take(self, data: bytes) -> None:
        if self._sse is not None:
            self._on_events(self._sse.feed(data))
        elif self._buffer is not None:
            self._buffer_chunk(data)

    def _buffer_chunk(self, chunk: bytes) -> None:
        assert self._buffer is not None
        limit = self.rt.settings.max_body_bytes
        room = limit - len(self._buffer)
        if len(chunk) <= room:
            self._buffer += chunk
            return
        self._buffer += chunk[: max(room, 0)]
        self._over_limit()

    def _over_limit(self) -> None:
        """The body goes past ``OTEL_A2A_MAX_BODY_BYTES``: nothing more of it is taken (nor
        inflated). A body is searched for its state in what is held. A content-encoded stream
        is no longer observed, its end not judged (it was not seen), and that is counted: its
        inflation would cost far more than the wire bytes. The application still reads all."""
        self._overflow = True
        if self._sse is not None:
            self._sse = None
            self.rt.error("inflated_stream_limit")
        elif self._buffer is not None:
            prefix, self._buffer = self._buffer, None
            self._observe_prefix(prefix)

    def complete(self, body: bytes | None = None) -> None:
        """The whole body was read (``body`` given when httpx read it for the application)."""
        if self._closed:
            return
        try:
            if self._sse is not None:
                if body is not None:
                    self._on_events(self._sse.feed(body))
                self._on_events(self._sse.close())  # a last event without its blank line
            elif body is not None:
                if len(body) > self.rt.settings.max_body_bytes:
                    self._observe_prefix(body)
                else:
                    self._observe_body(body)
            elif self._buffer is not None and not self._overflow:
                self._observe_body(bytes(self._buffer))
            self._buffer = None
        except Exception as exc:
            self.rt.error(exc)
        self.close()

    def give_up(self) -> None:
        """The application reads this response inside otel-a2a's own work in this thread (a
        finaliser run by a collection there, see ``collection``): observing it could wait on
        a lock this thread holds. Nothing more of it is observed (counted once); the span ends
        at the next drain, with this time. Takes no lock."""
        if self._given_up or self._closed:
            return
        self._given_up = self._overflow = True
        self._sse = None
        collection.defer(functools.partial(self.rt.error, collection.REENTRANT))
        self.abandon()

    def fail(self, exc: BaseException) -> None:
        """The request or the body read failed: end the span with the exception's type only."""
        if self._closed:
            return
        try:
            if self.span.is_recording():
                self.span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
                self.span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
        except Exception as err:
            self.rt.error(err)
        self.close()

    def close(self, end_time: int | None = None) -> None:
        """End of the exchange, whether the body was consumed or not. Idempotent.
        ``end_time`` (ns since the epoch): when an abandoned response was collected."""
        if self._closed:
            return
        self._closed = True
        try:
            abnormal = self._sse is not None and self._stream_tasks and not self._terminal_seen
            if abnormal and self.span.is_recording():
                last = self._last_report
                attrs = {sc.TASK_ID: last.task_id} if last else {}
                if last and last.state is not None:
                    attrs[sc.TASK_STATE] = semconv_state(last.state.state)
                self.span.add_event(sc.EVENT_STREAM_ABNORMAL_END, attrs, end_time)
        except Exception as exc:
            self.rt.error(exc)
        finally:
            self._buffer = None
            self._sse = None
            try:
                if self._unsaid_status and self.span.is_recording():
                    self.span.set_attribute(sc.HTTP_STATUS_CODE, self._unsaid_status)
            except Exception as exc:
                self.rt.error(exc)
            try:
                own_spans.end(self.span, end_time)  # runs every span processor, the host's too
            except Exception as exc:
                self.rt.error(exc)

    def abandon(self) -> None:
        """The application dropped the response unread and unclosed (its stream is being
        collected). This runs at garbage-collection time, in any thread, possibly inside a span
        processor holding its lock: ending the span here could deadlock. The body held goes
        now; the span ends at the next drain (see ``collection``), with the time of
        collection."""
        if not self._closed:
            self._buffer = None
            collection.defer(functools.partial(self.close, time.time_ns()))

    # -- observations ----------------------------------------------------------------------

    def _observe_prefix(self, body: bytes | bytearray) -> None:
        """An oversized body: look for the state in growing prefixes, never beyond
        ``OTEL_A2A_MAX_BODY_BYTES`` (a Message reply carries no state at all: stop there)."""
        limit = self.rt.settings.max_body_bytes
        self._apply(extract_from_prefixes(self.a2a, self.status, body, limit), False)

    def _observe_body(self, body: bytes) -> None:
        op = self.a2a.operation
        if op is _GET_AGENT_CARD:
            self._observe_card(body)
        elif op is _GET_EXTENDED_AGENT_CARD:
            card = parse_extended_card(self.a2a, self.status, body)
            if card is not None and self.span.is_recording():  # its own etag, span only
                self._set_attributes(card_attributes({}, card, card.etag, card.heartbeat))
        else:
            self._apply(extract_response(self.a2a, self.status, body), False)

    def _observe_card(self, body: bytes | None) -> None:
        if self.status == 304:
            update = self.rt.card_fetched(self.url, None, None)
        else:
            card = parse_card(self.status, self.headers, body or b"")
            if card is None:
                return
            update = self.rt.card_fetched(self.url, card, self.a2a.card_variant)
        if self.span.is_recording():
            attrs: dict[str, str | bool | float | int] = {
                sc.AGENT_URL: update.agent,
                sc.CARD_ETAG_CHANGED: update.etag_changed,
            }
            self._set_attributes(card_attributes(attrs, update.card, update.etag, update.heartbeat))

    def _set_attributes(self, attrs: dict[str, str | bool | float | int]) -> None:
        """Set ``attrs`` on the live span, with the HTTP status when it is not there yet."""
        if self._unsaid_status:
            attrs[sc.HTTP_STATUS_CODE] = self._unsaid_status
            self._unsaid_status = 0
        own_spans.set_attributes(self.span, attrs)

    def _on_events(self, events: list[StreamEvent]) -> None:
        """The events of one chunk. Any frame (a ``: ping`` too) refreshes the stream's tasks:
        they all share this chunk's clock reading, so each is refreshed once per chunk (those
        reported in it already were), not once per frame."""
        if not events:
            return
        now = time.monotonic()
        reported: set[str] = set()
        for event in events:
            reports = event.facts.reports
            if reports or event.facts.error is not None:
                self._apply(event.facts, True, now)
                reported.update(r.task_id for r in reports)
            if event.error and self.span.is_recording():
                self.span.set_status(Status(StatusCode.ERROR, "SSE error event"))
                if event.facts.error is None:  # else _apply named it
                    self.span.set_attribute(sc.ERROR_TYPE, sc.ERROR_TYPE_OTHER)
        self.rt.stream_alive(self._stream_tasks - reported, now)

    def _apply(self, facts: ResponseFacts, streamed: bool, now: float | None = None) -> None:
        rt, span = self.rt, self.span
        if now is None:
            now = time.monotonic()
        recording = span.is_recording()
        if facts.error is not None:
            self._on_error(facts.error, recording, now)
        reports = facts.reports
        if not reports:
            return
        if streamed:
            self._on_stream_reports(reports, recording)
        else:  # one body: only its last state counts (how it ends is judged of streams only)
            for report in reports:
                if report.state is not None:
                    self._last_report = report
        peer = rt.fresh(self.peer)  # a card fetched since the request left is in force now
        rt.observe(span, peer, reports, self.a2a.operation._value_, now)
        last = self._last_report
        if last is None or last.state is None:
            return
        named = self.a2a.task_id
        if named is not None and last.task_id != named:
            self._swap(last, last.state, named, recording)  # the span stays about the named
            return
        if streamed:
            self._named_seen = True
        if recording:
            # only what the span does not carry yet: each attribute is validated by the SDK
            attrs: dict[str, str | bool | float | int] = {
                sc.TASK_STATE: semconv_state(last.state.state),
                sc.TASK_STATE_RAW: last.state.raw,
                sc.AUTHORITATIVE: True,
            }
            if named is None:  # a request naming no task: the span is about the one answered
                attrs[sc.TASK_ID] = last.task_id
            if last.context_id and last.context_id != self.a2a.context_id:
                attrs[sc.CONTEXT_ID] = last.context_id
            if peer.etag and peer.etag != self.peer.etag:
                attrs[sc.CARD_ETAG] = peer.etag
            self._set_attributes(attrs)

    def _on_stream_reports(self, reports: tuple[TaskReport, ...], recording: bool) -> None:
        """A stream's reports: the tasks it keeps alive, whether it stands at a terminal (or
        interrupted) state, one ``otel_a2a.task.status`` event per status update."""
        span = self.span
        for report in reports:
            if len(self._stream_tasks) < _MAX_STREAM_TASKS:
                self._stream_tasks.add(report.task_id)
            if report.state is None:
                continue
            self._last_report = report
            state = report.state.state
            # terminal or interrupted; a later live state reopens it
            self._terminal_seen = state.state_class is not _ACTIVE
            if recording and report.kind == "status-update":
                span.add_event(
                    sc.EVENT_TASK_STATUS,
                    {
                        sc.TASK_ID: report.task_id,
                        sc.TASK_STATE: semconv_state(state),
                        sc.TASK_STATE_RAW: report.state.raw,
                    },
                )

    def _on_error(self, error: A2AError, recording: bool, now: float) -> None:
        """An error reply: on the span, and what it says of the task named (lost, or in a
        state it names)."""
        span, status = self.span, self.status
        operation = self.a2a.operation._value_
        if recording:
            binding = self.a2a.binding
            code = error.code
            text = str(code) if code is not None else f"HTTP {status}"
            span.set_status(Status(StatusCode.ERROR, error.reason or text))
            span.set_attribute(sc.ERROR_TYPE, _error_type(code, binding, status))
            if error.reason:
                span.set_attribute(sc.ERROR_REASON, error.reason)
            if code is not None and binding is _JSONRPC:
                span.set_attribute(sc.RPC_RESPONSE_STATUS_CODE, str(code))
        task_id = self.a2a.task_id
        if error.task_not_found and task_id:
            self.rt.task_not_found(span, task_id, operation, now)
        elif error.report is not None:
            self._error_reply(error.report, now)

    def _swap(self, report: TaskReport, state: StateReading, named: str, recording: bool) -> None:
        """The agent answered the task the request named with another one (fasta2a answers
        a follow-up with a new task). That task was observed as itself (``Runtime.observe``)
        and the named one is left as it was: a stream that did not report it first no longer
        refreshes it (one that did is about both). The span keeps the named task in
        ``a2a.task.id`` (so it carries no state of it) and shows the swap, once per other
        task, with that task's state."""
        if not self._named_seen:
            self._stream_tasks.discard(named)
        if not recording or report.task_id == self._swapped:
            return
        self._swapped = report.task_id
        span = self.span
        span.set_attribute(sc.AUTHORITATIVE, True)
        span.add_event(
            sc.EVENT_TASK_SWAPPED,
            {
                sc.TASK_ID: report.task_id,
                sc.TASK_ID_REQUESTED: named,
                sc.TASK_STATE: semconv_state(state.state),
                sc.TASK_STATE_RAW: state.raw,
            },
        )

    def _error_reply(self, report: TaskReport, now: float) -> None:
        """An error reply stated the named task's state: the ledger records it (nothing is
        reported on it), and a stream it ends at a terminal state ended normally."""
        if report.state is not None and report.state.state.is_terminal:
            self._terminal_seen = True
        self.rt.error_reply(self.rt.fresh(self.peer), report, now)
