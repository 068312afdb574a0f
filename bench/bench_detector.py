"""``otel-a2a detector`` against hostile clients, as a subprocess at its default bounds.

Its memory first: the peak RSS (``VmHWM``) of a fresh detector at the default
``--max-memory-mb`` (256) after three floods over one connection, each of bodies of the
largest accepted size: 2,000,000 parent links, 1,024 a trace (before the budget, 1,000,000
took it from 31 to 640 MB); 20,000 beliefs about ever-new tasks with every name at its
longest (256 characters outside the BMP); and 10 bodies of empty spans, the worst a protobuf
body takes while decoded.

The rows the tracker measured against the receiver before it moved onto h11 (one 256 MiB
chunk took its RSS from 31 to 271 MiB before the 413; a declared-huge Content-Length was
answered 500 after 30 s; 8 drippers made every export wait 10 s for a 503; 63 of 200
simultaneous connections were reset):

- peak RSS growth (``VmHWM`` in ``/proc``, after a warm-up export) while a client sends one
  256 MiB chunk, until its 413 arrives;
- how soon a request announcing 1 TB, of which 2 bytes are sent, is answered 413;
- how long an export takes while 8 clients announce the largest body each and have sent 1
  byte;
- how many of 200 connections opened at once are answered 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

from bench import Row, check
from otel_a2a.analyze import budget

CHUNK = 256 * 1024 * 1024
RSS_TARGET_MIB = 32.0
ANSWER_TARGET_MS = 1000.0
CONNECTIONS = 200
DEADLINE = 60.0
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
EXPORT = b'{"resourceSpans": []}'
MIB = 1024 * 1024
PROTOBUF = "application/x-protobuf"
LINKS = 2_000_000
LONG_BELIEFS = 20_000
EMPTY_BODIES = 10
LONG = "\U0001f600" * 250  # with the index in front: names of (about) 256 characters


@contextlib.contextmanager
def _detector() -> Iterator[tuple[int, int]]:
    """A running ``otel-a2a detector``: its pid and port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        match = re.search(r":(\d+)/v1/traces", proc.stderr.readline())
        if match is None:
            raise RuntimeError("the detector printed no banner")
        yield proc.pid, int(match.group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=DEADLINE)


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        line = next(x for x in status if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(DEADLINE)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def _export(port: int) -> bytes:
    with _connect(port) as sock:
        sock.sendall(
            HEAD + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(EXPORT) + EXPORT
        )
        return _answer(sock)


def _huge_chunk(port: int) -> bytes:
    """One 256 MiB chunk, sent until the answer is there; the answer."""
    piece = b" " * 65536
    sent = 0
    with _connect(port) as sock:
        sock.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % CHUNK)
        sock.setblocking(False)
        while sent < CHUNK:
            readable, writable, _ = select.select([sock], [sock], [], DEADLINE)
            if readable or not writable:
                break
            with contextlib.suppress(BlockingIOError):
                sent += sock.send(piece[: CHUNK - sent])
        return _answer(sock)


def _declared_huge(port: int) -> float:
    """Seconds until a request announcing 1 TB, 2 bytes of it sent, has its answer."""
    with _connect(port) as sock:
        started = time.perf_counter()
        sock.sendall(HEAD + b"Content-Length: 1000000000000\r\n\r\n{}")
        select.select([sock], [], [], DEADLINE)
        return time.perf_counter() - started


def _export_among_drippers(port: int) -> tuple[float, bytes]:
    drippers = [_connect(port) for _ in range(8)]
    try:
        for sock in drippers:
            sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n{" % budget.shares().max_body)
        started = time.perf_counter()
        answer = _export(port)
        return time.perf_counter() - started, answer
    finally:
        for sock in drippers:
            sock.close()


async def _burst(port: int) -> int:
    """How many of ``CONNECTIONS`` connections opened at once are answered 200."""
    request = HEAD + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(EXPORT) + EXPORT

    async def one(
        opened: tuple[asyncio.StreamReader, asyncio.StreamWriter] | BaseException,
    ) -> bool:
        if isinstance(opened, BaseException):
            return False
        reader, writer = opened
        try:
            async with asyncio.timeout(DEADLINE):
                writer.write(request)
                await writer.drain()
                return (await reader.read()).startswith(b"HTTP/1.1 200")
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()

    connections = await asyncio.gather(
        *(asyncio.open_connection("127.0.0.1", port) for _ in range(CONNECTIONS)),
        return_exceptions=True,
    )
    return sum(await asyncio.gather(*(one(c) for c in connections)))


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _request(resource: bytes, spans: list[bytes]) -> bytes:
    """An ExportTraceServiceRequest of one resource and one scope holding ``spans``."""
    scope = b"".join(_field(2, span) for span in spans)
    return _field(1, _field(1, resource) + _field(2, scope))


def _key_value(key: str, value: str) -> bytes:
    return _field(1, key.encode()) + _field(2, _field(1, value.encode()))


def _bodies(make: Callable[[int], bytes], count: int, limit: int, resource: bytes) -> list[bytes]:
    """``count`` spans ``make(i)`` packed into requests of at most ``limit`` bytes."""
    bodies: list[bytes] = []
    spans: list[bytes] = []
    size = 64 + len(resource)
    for i in range(count):
        span = make(i)
        if spans and size + len(span) + 8 > limit:
            bodies.append(_request(resource, spans))
            spans, size = [], 64 + len(resource)
        spans.append(span)
        size += len(span) + 8
    return [*bodies, _request(resource, spans)] if spans else bodies


def _link(i: int) -> bytes:
    """A span that names no task, with a parent: one parent link, 1,024 a trace."""
    return (
        _field(1, (i // 1024).to_bytes(16, "big"))
        + _field(2, i.to_bytes(8, "big"))
        + _field(4, (i + 1).to_bytes(8, "big"))
        + b"\x39"
        + (1_700_000_000_000_000_000).to_bytes(8, "little")  # start_time_unix_nano, fixed64
    )


def _long_belief(i: int) -> bytes:
    """A belief about a task of its own, every name at its longest."""
    return _link(i) + b"".join(
        _field(9, _key_value(key, f"{i:x}" + LONG))
        for key in (
            "a2a.task.id",
            "otel_a2a.task.state.raw",
            "a2a.method.name",
            "a2a.agent.name",
        )
    )


def _flood(port: int) -> None:
    """Every flood of the module's docstring, over one keep-alive connection."""
    limit = budget.shares().max_body
    service = _field(1, _key_value("service.name", LONG))  # a Resource's attribute
    floods = [
        _bodies(_link, LINKS, limit, b""),
        _bodies(_long_belief, LONG_BELIEFS, limit, service),
        [_request(b"", [b""] * ((limit - 64) // 2))] * EMPTY_BODIES,
    ]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        for bodies in floods:
            for body in bodies:
                if len(body) > limit:
                    raise RuntimeError(f"a flood body of {len(body)} bytes, over {limit}")
                conn.request("POST", "/v1/traces", body, {"Content-Type": PROTOBUF})
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"flood answered {answer.status}")
    finally:
        conn.close()


def run() -> list[Row]:
    rows: list[Row] = []
    with _detector() as (pid, port):
        _flood(port)
        peak = _peak_rss(pid) / MIB
        rows.append(
            check(
                f"detector: peak RSS after floods of {LINKS:,} parent links, {LONG_BELIEFS:,} "
                f"long-named tasks, {EMPTY_BODIES} bodies of empty spans",
                peak,
                ".0f",
                float(budget.DEFAULT_MAX_MEMORY_MB),
                "MiB",
            )
        )
    with _detector() as (pid, port):
        _export(port)
        before = _peak_rss(pid)
        status = _huge_chunk(port)[:12].decode("latin-1")
        growth = (_peak_rss(pid) - before) / MIB
        rows.append(
            check(
                f"detector: peak RSS growth, one 256 MiB chunk ({status})",
                growth,
                ".1f",
                RSS_TARGET_MIB,
                "MiB",
            )
        )
        rows.append(
            check(
                "detector: 413 to a declared 1 TB body",
                _declared_huge(port) * 1000,
                ".0f",
                ANSWER_TARGET_MS,
                "ms",
            )
        )
        took, answer = _export_among_drippers(port)
        status = answer[:12].decode("latin-1")
        rows.append(
            check(
                f"detector: export among 8 drippers ({status})",
                took * 1000,
                ".0f",
                ANSWER_TARGET_MS,
                "ms",
            )
        )
        answered = asyncio.run(_burst(port))
        rows.append(
            Row(
                f"detector: of {CONNECTIONS} connections at once, answered 200",
                str(answered),
                f"= {CONNECTIONS}",
                answered == CONNECTIONS,
            )
        )
    return rows


if __name__ == "__main__":
    from bench import format_table

    print(format_table(run()))
