"""Content-encoded responses read as a stream, from a real socket, with and without otel-a2a:
the application gets the same bytes or the same exception, every read finishes, and otel-a2a
observes exactly the bytes the application reads (what httpx ignores after the first member
too), up to ``OTEL_A2A_MAX_BODY_BYTES``; an encoded stream is inflated no further than that.
Each read goes through httpx and through httpx2 (its own decoders, the same rules)."""

from __future__ import annotations

import asyncio
import functools
import gzip
import importlib
import json
import threading
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType, SimpleNamespace
from typing import Any

import brotli
import httpx
import pytest

from otel_a2a.instrumentation import http_exchange as exchange
from otel_a2a.protocol import SSEParser
from tests.instrumentation.conftest import Harness, make_harness

STEP = exchange._INFLATE_STEP
LIMIT = 3 * STEP + 3000  # OTEL_A2A_MAX_BODY_BYTES here: apart from every multiple of a step
SIZES = (300, STEP - 1, STEP, STEP + 1, 2 * STEP - 1, 2 * STEP, 2 * STEP + 1)
SIZES += (LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2 * STEP)
DEADLINE = 30.0  # seconds for one read (they take milliseconds): a hang fails, alone
HEADERS = {"A2A-Version": "1.0"}
SEND_STREAMING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendStreamingMessage",
    "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
}
GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t-1"}}
# built once: each client would load the CA bundle again (0.1 s on a busy machine), for http
TLS = httpx.create_ssl_context()
LIBRARIES = ["httpx", "httpx2"]


def _task_reply(size: int) -> bytes:
    """A GetTask reply of exactly ``size`` bytes, its state before a history that pads it
    with one letter: the whole response comes in one wire chunk that inflates in many steps."""
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "result": task}
    task["history"] = [{"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": ""}]}]
    pad = size - len(json.dumps(reply).encode())
    assert pad >= 0
    task["history"][0]["parts"][0]["text"] = "a" * pad
    body = json.dumps(reply).encode()
    assert len(body) == size
    return body


def _status_frame(state: str) -> bytes:
    update = {"taskId": "t-1", "contextId": "c-1", "status": {"state": state}}
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": update}}
    return b"data: " + json.dumps(reply).encode() + b"\n\n"


def _pings(size: int) -> bytes:
    """``size`` (at least 3) bytes of SSE comment frames of 3 to 1,000 bytes each."""
    frames = []
    while size:
        n = size if size <= 1000 else min(1000, size - 3)
        frames.append(b":" + b"p" * (n - 3) + b"\n\n")
        size -= n
    return b"".join(frames)


def _stream(size: int) -> bytes:
    """An SSE stream of exactly ``size`` bytes: working, pings, then completed."""
    first, last = _status_frame("TASK_STATE_WORKING"), _status_frame("TASK_STATE_COMPLETED")
    body = first + _pings(size - len(first) - len(last)) + last
    assert len(body) == size
    return body


def _raw_deflate(body: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(body) + packer.flush()


def _first_half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _gzip_then_invalid_block(body: bytes) -> bytes:
    """A gzip header, ``body`` deflated in blocks that are not the last, then a block of the
    reserved type: an error once the whole body has inflated (none before, nothing guessed)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return (
        gzip.compress(b"")[:10] + packer.compress(body) + packer.flush(zlib.Z_FULL_FLUSH) + b"\xff"
    )


# kind -> (Content-Encoding, what is sent for a body); "sse_" kinds send an SSE stream
ENCODINGS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("gzip", gzip.compress),
    "gzip_trailing_byte": ("gzip", lambda b: gzip.compress(b) + b"\0"),
    "gzip_two_members": ("gzip", lambda b: gzip.compress(b) + gzip.compress(b' {"x": 1}')),
    "gzip_without_trailer": ("gzip", lambda b: gzip.compress(b)[:-8]),
    "gzip_cut_in_half": ("gzip", lambda b: _first_half(gzip.compress(b))),
    "gzip_invalid_first_block": ("gzip", lambda b: _gzip_then_invalid_block(b"")),
    "gzip_invalid_block_after_body": ("gzip", _gzip_then_invalid_block),
    "deflate_zlib": ("deflate", zlib.compress),
    "deflate_zlib_trailing_byte": ("deflate", lambda b: zlib.compress(b) + b"\0"),
    "deflate_raw": ("deflate", _raw_deflate),
    "deflate_raw_trailing_byte": ("deflate", lambda b: _raw_deflate(b) + b"\0"),
    "br": ("br", brotli.compress),
    "sse_gzip": ("gzip", gzip.compress),
    "sse_gzip_trailing_byte": ("gzip", lambda b: gzip.compress(b) + b"\0"),
    "sse_deflate_raw": ("deflate", _raw_deflate),
}


# path -> (Content-Type, Content-Encoding, the bytes sent)
_RESPONSES: dict[str, tuple[str, str, bytes]] = {}


class _Handler(BaseHTTPRequestHandler):
    """Answers any POST with the response registered under its path."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ctype, encoding, data = _RESPONSES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _serve(base: str, kind: str, body: bytes) -> str:
    encoding, encode = ENCODINGS[kind]
    ctype = "text/event-stream" if kind.startswith("sse") else "application/json"
    path = f"/{kind}/{len(body)}"
    _RESPONSES[path] = (ctype, encoding, encode(body))
    return base + path


Seen = tuple[str, bytes | str]  # ("body", the bytes read) or (exception type, its message)
Read = Callable[[ModuleType, str, dict[str, Any]], Seen]  # a read with httpx or httpx2


def _read_sync(lib: ModuleType, url: str, rpc: dict[str, Any]) -> Seen:
    try:
        with (
            lib.Client(verify=TLS) as client,
            client.stream("POST", url, json=rpc, headers=HEADERS) as r,
        ):
            return "body", r.read()
    except Exception as exc:
        return type(exc).__qualname__, str(exc)


def _read_async(lib: ModuleType, url: str, rpc: dict[str, Any]) -> Seen:
    async def read() -> Seen:
        try:
            async with (
                lib.AsyncClient(verify=TLS) as client,
                client.stream("POST", url, json=rpc, headers=HEADERS) as r,
            ):
                return "body", await r.aread()
        except Exception as exc:
            return type(exc).__qualname__, str(exc)

    return asyncio.run(read())


def _finishes(read: Read, lib: ModuleType, url: str, rpc: dict[str, Any]) -> Seen:
    """The read, in a daemon thread waited for until the deadline: a read that spins for ever
    (on the event loop too) fails the test instead of hanging the suite."""
    seen: list[Seen] = []
    thread = threading.Thread(target=lambda: seen.append(read(lib, url, rpc)), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), f"the read of {url} never finishes"
    return seen[0]


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_A2A_MAX_BODY_BYTES", str(LIMIT))


def _instrumented(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Harness, Callable[[], None], list[bytes]]:
    """A harness, its undoing, and the bytes the exchange takes (inflated) as they come."""
    taken: list[bytes] = []
    take = exchange.HttpExchange._take

    def spy(self: exchange.HttpExchange, data: bytes) -> None:
        taken.append(bytes(data))
        take(self, data)

    monkeypatch.setattr(exchange.HttpExchange, "_take", spy)
    harness, instrumentor = make_harness()
    return harness, instrumentor.uninstrument, taken


def _state(harness: Harness, span: str) -> object:
    return dict(harness.span(span).attributes or {}).get("a2a.task.state")


@pytest.mark.usefixtures("limit")
@pytest.mark.parametrize("read", [_read_sync, _read_async], ids=["sync", "async"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", list(ENCODINGS))
@pytest.mark.parametrize("library", LIBRARIES)
def test_the_application_reads_the_same_and_otel_a2a_observes_it(
    server: str,
    monkeypatch: pytest.MonkeyPatch,
    library: str,
    kind: str,
    size: int,
    read: Read,
) -> None:
    lib = importlib.import_module(library)
    stream = kind.startswith("sse")
    body = _stream(size) if stream else _task_reply(size)
    url = _serve(server, kind, body)
    rpc = SEND_STREAMING if stream else GET_TASK
    assert not hasattr(lib.Client.send, "__wrapped__")
    plain = _finishes(read, lib, url, rpc)
    harness, uninstrument, taken = _instrumented(monkeypatch)
    try:
        assert hasattr(lib.Client.send, "__wrapped__")
        seen = _finishes(read, lib, url, rpc)
    finally:
        uninstrument()

    assert seen == plain  # the same bytes, or the same exception and message
    name = "SendStreamingMessage" if stream else "GetTask"
    span = harness.span(name)  # it ended
    errors = {
        attrs["error.type"]: value
        for attrs, value in harness.points("otel_a2a.instrumentation.errors")
    }
    what, read_bytes = seen
    if (
        kind == "br"
    ):  # decoded by the library, not by otel-a2a: nothing observed rather than guessed
        assert what == "body" and read_bytes == body
        assert taken == [] and errors == {"unsupported_content_encoding": 1}
        assert _state(harness, name) is None
        return
    if "invalid" in kind:
        assert what == "DecodingError"
        inflated = b"".join(taken)  # what inflated before the error (whole steps), if any
        assert inflated == body[: len(inflated)] and len(inflated) <= LIMIT
        if errors:
            assert errors == {"error": 1}  # zlib.error, once
            assert _state(harness, name) is None  # cut off before the end: nothing guessed
        else:  # the bound came first: the error was never inflated, the state is in the prefix
            assert "after_body" in kind and len(inflated) == LIMIT < size
            assert _state(harness, name) == "TASK_STATE_WORKING"
        return
    assert what == "body" and isinstance(read_bytes, bytes)
    assert b"".join(taken) == read_bytes[:LIMIT]  # what the application read, to the bound
    if "cut" in kind or "without_trailer" in kind:
        assert read_bytes == body[: len(read_bytes)]
    else:
        assert read_bytes == body  # what follows the first member is not the body
    if stream:
        over = size > LIMIT
        assert errors == ({"inflated_stream_limit": 1} if over else {})
        assert _state(harness, name) == ("TASK_STATE_WORKING" if over else "TASK_STATE_COMPLETED")
        # a stream no longer looked at is not judged to have ended abnormally
        assert [e.name for e in span.events if e.name == "otel_a2a.stream.abnormal_end"] == []
        return
    assert errors == {}
    if read_bytes == body:
        assert (
            _state(harness, name) == "TASK_STATE_WORKING"
        )  # over the bound too: found in a prefix
    elif len(read_bytes) <= LIMIT:
        assert _state(harness, name) is None  # a cut body is not guessed at


@functools.cache
def _output_left_in_zlib() -> bytes:
    """A JSON body whose raw deflate data, inflated in steps, is all taken in while output is
    still pending in zlib (its last match straddles a step): where that happens depends on the
    compressor's bit layout, so it is looked for, not assumed."""
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
    head = json.dumps({"jsonrpc": "2.0", "id": 1, "result": task}).encode()
    for size in range(2 * STEP - 64, 2 * STEP + 64):
        for blank in b" \t\n\r":  # JSON allows trailing whitespace: a long run, long matches
            body = head + bytes([blank]) * (size - len(head))
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            data = _raw_deflate(body)
            while data:
                piece = inflater.decompress(data, STEP)
                data = inflater.unconsumed_tail
            if len(piece) == STEP and not inflater.eof:
                return body
    raise AssertionError("no body leaves output pending in zlib: look further")


@pytest.mark.usefixtures("limit")
@pytest.mark.parametrize("read", [_read_sync, _read_async], ids=["sync", "async"])
@pytest.mark.parametrize("library", LIBRARIES)
def test_output_still_in_zlib_after_the_last_input_byte_is_observed(
    server: str, monkeypatch: pytest.MonkeyPatch, library: str, read: Read
) -> None:
    lib = importlib.import_module(library)
    body = _output_left_in_zlib()
    url = _serve(server, "deflate_raw", body)
    plain = _finishes(read, lib, url, GET_TASK)
    harness, uninstrument, taken = _instrumented(monkeypatch)
    try:
        seen = _finishes(read, lib, url, GET_TASK)
    finally:
        uninstrument()
    assert seen == plain == ("body", body)
    assert b"".join(taken) == body  # its last bytes too: the JSON is whole, its state read
    assert _state(harness, "GetTask") == "TASK_STATE_WORKING"


class _CountingInflater:
    """A ``zlib`` decompressor that counts what it inflates."""

    def __init__(self, wbits: int, inflated: list[int]) -> None:
        self._inner = zlib.decompressobj(wbits)
        self._inflated = inflated

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        out = self._inner.decompress(data, max_length)
        self._inflated.append(len(out))
        return out

    @property
    def eof(self) -> bool:
        return self._inner.eof

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inner.unconsumed_tail


def _count_inflation(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What otel-a2a's decompressors inflate (httpx's, the application's, are not counted)."""
    inflated: list[int] = []
    counting = SimpleNamespace(
        decompressobj=lambda wbits: _CountingInflater(wbits, inflated),
        MAX_WBITS=zlib.MAX_WBITS,
        error=zlib.error,
    )
    monkeypatch.setattr(exchange, "zlib", counting)
    return inflated


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_gzip_sse_bomb_is_inflated_no_further_than_the_limit(
    server: str, monkeypatch: pytest.MonkeyPatch, library: str
) -> None:
    """16 MiB of frames in under 100 KB of gzip: the application reads them all, otel-a2a parses
    ``OTEL_A2A_MAX_BODY_BYTES`` of them, counts that once, and ends the span normally."""
    monkeypatch.setenv("OTEL_A2A_MAX_BODY_BYTES", str(LIMIT))
    frame = _status_frame("TASK_STATE_WORKING")
    body = frame * (16 * 2**20 // len(frame)) + _status_frame("TASK_STATE_COMPLETED")
    url = _serve(server, "sse_gzip", body)
    assert len(_RESPONSES[url.removeprefix(server)][2]) < len(body) // 200
    lib = importlib.import_module(library)
    plain = _finishes(_read_sync, lib, url, SEND_STREAMING)
    parsed: list[int] = []
    feed = SSEParser.feed

    def counting(self: SSEParser, chunk: bytes) -> list[Any]:
        parsed.append(len(chunk))
        return feed(self, chunk)

    monkeypatch.setattr(SSEParser, "feed", counting)
    inflated = _count_inflation(monkeypatch)
    harness, uninstrument, _ = _instrumented(monkeypatch)
    try:
        seen = _finishes(_read_sync, lib, url, SEND_STREAMING)
    finally:
        uninstrument()
    assert seen == plain == ("body", body)
    assert sum(parsed) == LIMIT  # then the parser was fed no more
    assert LIMIT < sum(inflated) <= LIMIT + STEP  # and zlib inflated one step past, no more
    assert (
        harness.total("otel_a2a.instrumentation.errors", error__type="inflated_stream_limit") == 1
    )
    assert harness.total("otel_a2a.instrumentation.errors") == 1
    span = harness.span("SendStreamingMessage")
    assert span.status.is_ok
    assert dict(span.attributes or {}).get("a2a.task.state") == "TASK_STATE_WORKING"
    assert "otel_a2a.stream.abnormal_end" not in [e.name for e in span.events]
