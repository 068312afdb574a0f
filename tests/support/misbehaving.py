"""A raw asyncio HTTP/1.1 server that misbehaves the ways real peers do.

Frameworks refuse to truncate a body or reset a connection mid-stream, so this server writes
bytes by hand. One request per connection; the case is the last path segment.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import json
import socket
import struct
import threading
import zlib
from collections.abc import Iterator

TASK = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
CARD = {
    "name": "Misbehaving",
    "description": "x",
    "version": "1",
    "supportedInterfaces": [
        {"url": "http://127.0.0.1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "capabilities": {"streaming": True},
    "defaultInputModes": [],
    "defaultOutputModes": [],
    "skills": [],
}
ETAG = 'W/"card-1"'

CASES = (
    "ok",
    "http404",
    "http500",
    "invalid_json",
    "truncated",
    "reset_stream",
    "sse_error",
    "sse_ok",
    "card",
    "card_304",
    "gzip",
    "deflate_raw",
    "gzip_corrupt",
)
# not in CASES (the differential test reads every case four times): 32 MiB in ~32 KB of gzip
BOMB = "gzip_bomb"
BOMB_TEXT_BYTES = 32 * 1024 * 1024


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"HTTP/1.1 {status}",
        *(f"{k}: {v}" for k, v in headers.items()),
        "Connection: close",
        "",
        "",
    ]
    return "\r\n".join(lines).encode()


def _json(status: str, body: bytes, ctype: str = "application/json") -> bytes:
    return _head(status, {"Content-Type": ctype, "Content-Length": str(len(body))}) + body


def _rpc(result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()


def _encoded(body: bytes, encoding: str) -> bytes:
    """A 200 JSON response whose body is sent with ``Content-Encoding``."""
    if encoding == "gzip":
        data = gzip.compress(body, 9)
    else:  # raw deflate (no zlib header), which httpx accepts as "deflate"
        packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        data = packer.compress(body) + packer.flush()
    head = {
        "Content-Type": "application/json",
        "Content-Encoding": "gzip" if encoding == "gzip" else "deflate",
        "Content-Length": str(len(data)),
    }
    return _head("200 OK", head) + data


@functools.cache
def bomb_response() -> bytes:
    task = {**TASK, "history": [{"messageId": "m", "parts": [{"text": "a" * BOMB_TEXT_BYTES}]}]}
    return _encoded(_rpc(task), "gzip")


def _sse(frames: list[bytes]) -> bytes:
    return _head("200 OK", {"Content-Type": "text/event-stream"}) + b"".join(frames)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {
            k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
        }
        length = int(headers.get("content-length", "0"))
        if length:
            await reader.readexactly(length)
        case = path.rstrip("/").rsplit("/", 1)[-1]
        frame = (
            b"data: "
            + _rpc(
                {
                    "statusUpdate": {
                        "taskId": "t-1",
                        "contextId": "c-1",
                        "status": {"state": "TASK_STATE_WORKING"},
                    }
                }
            )
            + b"\n\n"
        )
        if path.endswith("agent-card.json"):
            if headers.get("if-none-match") == ETAG:
                writer.write(_head("304 Not Modified", {"ETag": ETAG, "Content-Length": "0"}))
            else:
                body = json.dumps(CARD).encode()
                writer.write(
                    _head(
                        "200 OK",
                        {
                            "Content-Type": "application/json",
                            "ETag": ETAG,
                            "Content-Length": str(len(body)),
                        },
                    )
                    + body
                )
        elif case == "ok":
            writer.write(_json("200 OK", _rpc(TASK)))
        elif case == "gzip":
            writer.write(_encoded(_rpc(TASK), "gzip"))
        elif case == "deflate_raw":
            writer.write(_encoded(_rpc(TASK), "deflate"))
        elif case == "gzip_corrupt":  # a gzip header, then 256 KiB that inflate to nothing
            body = b"\x1f\x8b\x08\x00" + bytes(range(256)) * 1024
            head = {
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "Content-Length": str(len(body)),
            }
            writer.write(_head("200 OK", head) + body)
        elif case == BOMB:
            writer.write(bomb_response())
        elif case == "http404":
            body = json.dumps({"error": {"code": 404, "status": "NOT_FOUND", "message": "no"}})
            writer.write(_json("404 Not Found", body.encode()))
        elif case == "http500":
            writer.write(_json("500 Internal Server Error", b"boom", "text/plain"))
        elif case == "invalid_json":
            writer.write(_json("200 OK", b'{"jsonrpc": "2.0", "result": {"id": '))
        elif case == "truncated":
            body = _rpc(TASK)
            writer.write(
                _head(
                    "200 OK",
                    {"Content-Type": "application/json", "Content-Length": str(len(body) + 500)},
                )
                + body
            )
        elif case == "reset_stream":
            writer.write(_sse([frame]))
            await writer.drain()
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        elif case == "sse_error":
            error = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "internal"}}
            ).encode()
            writer.write(_sse([frame, b"event: error\ndata: " + error + b"\n\n"]))
        elif case == "sse_ok":
            done = (
                b"data: "
                + _rpc(
                    {
                        "statusUpdate": {
                            "taskId": "t-1",
                            "contextId": "c-1",
                            "status": {"state": "TASK_STATE_COMPLETED"},
                        }
                    }
                )
                + b"\n\n"
            )
            writer.write(_sse([b": ping\n\n", frame, done]))
        else:
            writer.write(_json("400 Bad Request", b"unknown case", "text/plain"))
        await writer.drain()
        writer.close()
    except (ConnectionError, asyncio.IncompleteReadError):
        writer.transport.abort()


@contextlib.contextmanager
def misbehaving_server() -> Iterator[str]:
    """Run the server on 127.0.0.1 (free port) in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, asyncio.AbstractServer] = {}

    async def start() -> None:
        holder["server"] = await asyncio.start_server(_handle, "127.0.0.1", 0)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    assert ready.is_set()
    port = holder["server"].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:

        async def stop() -> None:
            holder["server"].close()
            await holder["server"].wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
