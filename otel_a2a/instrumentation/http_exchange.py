"""The HTTP adapter of an exchange: response bytes, as the application reads them, into facts.

It sees the response only as the application reads it (see ``httpx_client``), holds at most
``OTEL_A2A_MAX_BODY_BYTES`` of one body (inflating ``gzip``/``deflate`` in bounded steps),
parses SSE incrementally and reads well-known cards; every judgement is the core's
(``exchange.Exchange``).
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from opentelemetry.trace import Status, StatusCode

from otel_a2a import semconv as sc
from otel_a2a.instrumentation.exchange import Attributes, Exchange, card_attributes
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT
from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.protocol import (
    A2AError,
    A2ARequest,
    Binding,
    Operation,
    SSEParser,
    StreamEvent,
    extract_from_prefixes,
    extract_response,
    parse_card,
    parse_extended_card,
)

_JSONRPC = Binding.JSONRPC.value
_HTTP_JSON = Binding.HTTP_JSON.value
_GET_AGENT_CARD = Operation.GET_AGENT_CARD.value
_GET_EXTENDED_AGENT_CARD = Operation.GET_EXTENDED_AGENT_CARD.value
_STREAM_OPS = frozenset({Operation.SEND_STREAMING_MESSAGE.value, Operation.SUBSCRIBE_TO_TASK.value})
# Of a response httpx hands over decoded, only these operations read headers: a card its
# ETag and Cache-Control, a stream its Content-Type.
_HEADED_OPS = frozenset({_GET_AGENT_CARD, _GET_EXTENDED_AGENT_CARD}) | _STREAM_OPS
NO_HEADERS: Mapping[str, str] = MappingProxyType({})
_BINDING_NAMES: dict[Binding, str] = {b: b.value for b in Binding}  # see ``OP_NAMES``
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


class HttpExchange(Exchange):
    __slots__ = (
        "_buffer",
        "_decoder",
        "_given_up",
        "_overflow",
        "_sse",
        "binding",
        "headers",
        "status",
        "url",
    )

    def __init__(self, rt: Runtime, a2a: A2ARequest, url: str, interface: str) -> None:
        self.url = url
        self.status = 0
        self.headers = NO_HEADERS
        self.binding = binding = _BINDING_NAMES[a2a.binding]
        self._buffer: bytearray | None = None
        self._overflow = False
        self._decoder: _Inflater | None = None
        self._sse: SSEParser | None = None
        self._given_up = False
        # a well-known card fetch is not version-negotiated: no binding either
        recorded = binding if a2a.version is not None else None
        super().__init__(rt, a2a, rt.peer(url, interface), recorded, interface)

    # -- response ------------------------------------------------------------------------

    def reads_headers(self, raw: bool) -> bool:
        """Whether :meth:`on_response` needs the response headers: of a body still encoded
        (``raw``) its Content-Encoding; of a card or a stream, see ``_HEADED_OPS``."""
        return raw or self.op in _HEADED_OPS

    def on_response(self, status: int, headers: Mapping[str, str], raw: bool) -> None:
        """Response headers arrived; ``raw`` when we will see the body still content-encoded."""
        self.status = status
        self._attrs[sc.HTTP_STATUS_CODE] = status
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
        if "text/event-stream" in headers.get("content-type", "") and self.op in _STREAM_OPS:
            self._sse = SSEParser(self.a2a, self.rt.settings.max_body_bytes)
            self.stream_opened()
        elif raw:  # the tee will show the bytes; otherwise httpx hands the whole body over
            self._buffer = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Raw bytes as the application reads them (stream mode)."""
        if not self._open or self._overflow or not chunk:  # ended, or not observed
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
            self.stream_lost()
            self.rt.error("inflated_stream_limit")
        elif self._buffer is not None:
            prefix, self._buffer = self._buffer, None
            self._observe_prefix(prefix)

    def complete(self, body: bytes | None = None) -> None:
        """The whole body was read (``body`` given when httpx read it for the application)."""
        if not self._open:  # ended
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
        finaliser run by a collection there, see ``reentry``): observing it could wait on a
        lock this thread holds. Nothing more of it is observed (counted once); the span ends
        at the next drain, with this time. Takes no lock."""
        if self._given_up or self.ended:
            return
        self._given_up = self._overflow = True
        self._sse = None
        self.stream_lost()
        GUARD.defer(functools.partial(self.rt.error, REENTRANT))
        self.abandon()

    def close(self, end_time: int | None = None) -> None:
        """End of the exchange, whether the body was consumed or not. Idempotent."""
        self._buffer = None
        self._sse = None
        self.finish(end_time)

    def abandon(self) -> None:
        """The application dropped the response unread and unclosed (its stream is being
        collected). This runs at garbage-collection time, in any thread, possibly inside a span
        processor holding its lock: ending the span here could deadlock. The body held goes
        now; the span ends at the next drain (see ``reentry``), with the time of collection."""
        if not self.ended:
            self._buffer = None
            GUARD.defer(functools.partial(self.close, time.time_ns()))

    # -- observations ----------------------------------------------------------------------

    def _observe_prefix(self, body: bytes | bytearray) -> None:
        """An oversized body: look for the state in growing prefixes, never beyond
        ``OTEL_A2A_MAX_BODY_BYTES`` (a Message reply carries no state at all: stop there)."""
        limit = self.rt.settings.max_body_bytes
        self.observe(extract_from_prefixes(self.a2a, self.status, body, limit))

    def _observe_body(self, body: bytes) -> None:
        op = self.op
        if op == _GET_AGENT_CARD:
            self._observe_card(body)
        elif op == _GET_EXTENDED_AGENT_CARD:
            self.extended_card(parse_extended_card(self.a2a, self.status, body))
        else:
            self.observe(extract_response(self.a2a, self.status, body))

    def _observe_card(self, body: bytes | None) -> None:
        """A well-known card: the registry updated (the etag in force may move)."""
        if self.status == 304:
            update = self.rt.card_fetched(self.url, None, None)
        else:
            card = parse_card(self.status, self.headers, body or b"")
            if card is None:
                return
            update = self.rt.card_fetched(self.url, card, self.a2a.card_variant)
        attrs: Attributes = self._attrs
        attrs[sc.AGENT_URL] = update.agent
        attrs[sc.CARD_ETAG_CHANGED] = update.etag_changed
        card_attributes(attrs, update.card, update.etag, update.heartbeat)

    def _on_events(self, events: list[StreamEvent]) -> None:
        """The events of one chunk. Any frame (a ``: ping`` too) refreshes the stream's tasks:
        they all share this chunk's clock reading, so each is refreshed once per chunk (those
        reported in it already were), not once per frame."""
        if not events:
            return
        now = time.monotonic()
        reported: set[str] = set()
        for event in events:
            facts = event.facts
            if facts.reports or facts.error is not None:
                self.observe(facts, now)
                reported.update(r.task_id for r in facts.reports)
            if event.error:
                if self._recording:
                    self.span.set_status(Status(StatusCode.ERROR, "SSE error event"))
                if facts.error is None:  # else ``on_error`` named it
                    self.set(sc.ERROR_TYPE, sc.ERROR_TYPE_OTHER)
        self.frame(reported, now)

    def describe(self, error: A2AError) -> tuple[str, str]:
        """``error.type`` of an error response, as the A2A convention says: the JSON-RPC error
        code as a string, else the protocol status code (the HTTP status), else ``_OTHER``
        (the A2A reason, which tells apart what ``400`` says of most A2A errors alike over
        HTTP+JSON, goes to ``otel_a2a.error.reason``). A JSON-RPC error's code goes on the span
        as ``rpc.response.status_code`` too."""
        code, reason, status = error.code, error.reason, self.status
        description = reason or (str(code) if code is not None else f"HTTP {status}")
        if code is not None and self.binding != _HTTP_JSON:
            if self.binding == _JSONRPC:
                self.set(sc.RPC_RESPONSE_STATUS_CODE, str(code))
            return str(code), description
        if status >= 400:
            return str(status), description
        # an HTTP+JSON error inside a stream answered 200: the status its body gives
        return (str(code) if code is not None else sc.ERROR_TYPE_OTHER), description
