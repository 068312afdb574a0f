"""Incremental Server-Sent Events parser for A2A streams.

The application reads the stream at its own pace; the instrumentation tees each chunk here, so
frames must be recognised however the bytes are split (between ``\\r`` and ``\\n`` included)
and memory must stay bounded whatever the peer sends. Parsing follows the WHATWG SSE rules:
CRLF, LF and CR line endings, a leading BOM is dropped, ``:`` starts a comment, ``data`` lines
join with ``\\n``, a blank line dispatches, a frame without data dispatches nothing.

Events produced:
- every comment line (``: ping``) → ``StreamEvent(comment=True)``: it proves the stream is live;
- every data frame → its facts (JSON-RPC envelope or bare StreamResponse, v1.0 or v0.3
  ``kind``); ``event: error`` frames set ``error=True``;
- a frame larger than ``max_frame_bytes`` (sum of its line lengths) keeps its first
  ``max_frame_bytes`` of data, the rest is discarded as it arrives, and at its end the kept
  prefix is read like the prefix of a large body (a snapshot's status comes before its
  history); nothing kept, or nothing found in it, is ``recognized=False``;
- bytes left without a terminating blank line at ``close()`` are, per the SSE rules, not
  dispatched; they are reported as one ``recognized=False`` event (bytes did arrive).
"""

from __future__ import annotations

import re

from otel_a2a.protocol._util import parse_response
from otel_a2a.protocol.extract import (
    UNRECOGNIZED,
    extract_from_prefixes,
    extract_stream_payload,
)
from otel_a2a.protocol.model import A2ARequest, StreamEvent

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
_COMMENT = StreamEvent(comment=True)
_UNRECOGNIZED = StreamEvent(facts=UNRECOGNIZED)


class SSEParser:
    """Feed raw stream bytes, get ``StreamEvent``s. Never raises."""

    def __init__(self, request: A2ARequest, max_frame_bytes: int) -> None:
        self._request = request
        self._max = max(1, int(max_frame_bytes))
        self._head: bytes | None = b""  # stream start, until the BOM question is settled
        self._pending = bytearray()  # the incomplete current line (not kept while dropping)
        self._pending_len = 0
        self._skip_lf = False  # the last chunk ended in CR: a leading LF is the same line end
        self._reset_frame()

    def _reset_frame(self) -> None:
        self._data: list[bytes] = []
        self._event = b""
        self._size = 0
        self._dropping = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """Consume one chunk; return the events it completed."""
        events: list[StreamEvent] = []
        try:
            self._feed(bytes(chunk), events)
        except Exception:  # defensive: never break the application's read
            self._pending.clear()
            self._pending_len = 0
            self._reset_frame()
        return events

    def close(self) -> list[StreamEvent]:
        """End of stream: report an incomplete trailing frame, if any, and reset."""
        events: list[StreamEvent] = []
        try:
            if self._head:
                head, self._head = self._head, None
                self._lines(head, events)
            if self._pending_len or self._data or self._dropping:
                events.append(_UNRECOGNIZED)
        except Exception:
            pass
        self._head = b""
        self._pending.clear()
        self._pending_len = 0
        self._skip_lf = False
        self._reset_frame()
        return events

    def _feed(self, chunk: bytes, events: list[StreamEvent]) -> None:
        if self._head is not None:
            head = self._head + chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._head = head
                return
            self._head = None
            chunk = head[len(_BOM) :] if head.startswith(_BOM) else head
        self._lines(chunk, events)

    def _lines(self, chunk: bytes, events: list[StreamEvent]) -> None:
        start = 0
        if self._skip_lf and chunk:
            if chunk[:1] == b"\n":
                start = 1
            self._skip_lf = False
        end = len(chunk)
        for match in _EOL.finditer(chunk, start):
            part = chunk[start : match.start()]
            length = self._pending_len + len(part)
            line = bytes(self._pending) + part if self._pending else part
            self._pending.clear()
            self._pending_len = 0
            if match.end() == end and match.group() == b"\r":
                self._skip_lf = True
            start = match.end()
            self._end_line(line, length, events)
        rest = chunk[start:]
        if rest:
            # an incomplete line is held only up to what the frame may still take: so it is
            # always the same first bytes of the line, however the stream was chunked
            room = self._max - self._size - len(self._pending)
            if not self._dropping and room > 0:
                self._pending += rest[:room]
            self._pending_len += len(rest)

    def _keep_prefix(self, line: bytes) -> None:
        """The frame outgrew the bound with ``line`` (already cut to what fits): keep it if it
        is a data line, and nothing more of this frame."""
        field, _, value = line.partition(b":")
        if field == b"data":
            self._data.append(value[1:] if value[:1] == b" " else value)
        self._dropping = True

    def _end_line(self, line: bytes, length: int, events: list[StreamEvent]) -> None:
        if length == 0:
            if self._dropping:
                events.append(self._dispatch_prefix())
            elif self._data:
                events.append(self._dispatch())
            self._reset_frame()
            return
        self._size += length
        if self._dropping:
            return
        if self._size > self._max:
            self._keep_prefix(line[: self._max - (self._size - length)])
            return
        if line[:1] == b":":
            events.append(_COMMENT)
            return
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = value

    def _dispatch_prefix(self) -> StreamEvent:
        if not self._data:
            return _UNRECOGNIZED
        facts = extract_from_prefixes(self._request, 200, b"\n".join(self._data))
        if not (facts.reports or facts.error is not None or facts.message_only):
            facts = UNRECOGNIZED
        return StreamEvent(facts=facts, error=self._event == b"error")

    def _dispatch(self) -> StreamEvent:
        payload = b"\n".join(self._data)
        obj = parse_response(payload)
        facts = UNRECOGNIZED if obj is None else extract_stream_payload(self._request, obj)
        return StreamEvent(facts=facts, error=self._event == b"error")
