"""``otel-a2a detector`` against hostile clients, as a subprocess at its default bounds.

The rows the tracker measured against the receiver before it moved onto h11 (one 256 MiB
chunk took its RSS from 31 to 271 MiB before the 413; a declared-huge Content-Length was
answered 500 after 30 s; 8 drippers made every export wait 10 s for a 503; 63 of 200
simultaneous connections were reset):

- peak RSS growth (``VmHWM`` in ``/proc``, after a warm-up export) while a client sends one
  256 MiB chunk, until its 413 arrives (default ``--max-body-bytes`` 16 MiB);
- how soon a request announcing 1 TB, of which 2 bytes are sent, is answered 413;
- how long an export takes while 8 clients announce 16 MiB each and have sent 1 byte;
- how many of 200 connections opened at once are answered 200;
- peak RSS growth of a detector started with ``--max-memory-mb 64`` while a client floods it
  with 400,000 spans: ever-new tasks, ever-new traces of parent links, and one task claimed
  by ever-new services; the structures must stay within their budget (the rest of the
  growth is the bodies in hand, at most 8 of 16 MiB, and the interpreter's free lists).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

from bench import Row, check

CHUNK = 256 * 1024 * 1024
RSS_TARGET_MIB = 32.0
ANSWER_TARGET_MS = 1000.0
CONNECTIONS = 200
DEADLINE = 60.0
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
EXPORT = b'{"resourceSpans": []}'
MIB = 1024 * 1024


FLOOD_BUDGET_MIB = 64
FLOOD_SPANS = 400_000
FLOOD_BATCH = 10_000


@contextlib.contextmanager
def _detector(*options: str) -> Iterator[tuple[int, int]]:
    """A running ``otel-a2a detector``: its pid and port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0", *options],
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
            sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n{" % (16 * MIB))
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


def _flood_body(first: int) -> bytes:
    """``FLOOD_BATCH`` spans from one new service: a new task and trace for most, a third
    of them claiming one shared task in alternating states."""
    import json

    spans = []
    for i in range(first, first + FLOOD_BATCH):
        task = "shared" if i % 3 == 0 else f"task-{i}"
        state = "TASK_STATE_WORKING" if i % 2 else "TASK_STATE_COMPLETED"
        attrs = [
            {"key": "a2a.task.id", "value": {"stringValue": task}},
            {"key": "a2a.task.state", "value": {"stringValue": state.lower()[11:]}},
            {"key": "a2a.task.state.raw", "value": {"stringValue": state}},
            {"key": "a2a.observation.authoritative", "value": {"boolValue": True}},
        ]
        spans.append(
            {
                "traceId": f"{i:032x}",
                "spanId": f"{i:016x}",
                "parentSpanId": f"{i + 1:016x}",
                "name": "A2A GetTask",
                "kind": 3,
                "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000010000000000",
                "attributes": attrs,
            }
        )
    service = {"key": "service.name", "value": {"stringValue": f"svc-{first}"}}
    doc = {
        "resourceSpans": [{"resource": {"attributes": [service]}, "scopeSpans": [{"spans": spans}]}]
    }
    return json.dumps(doc).encode()


def _flood(port: int) -> None:
    for first in range(0, FLOOD_SPANS, FLOOD_BATCH):
        body = _flood_body(first)
        with _connect(port) as sock:
            sock.sendall(HEAD + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
            sock.sendall(body)
            _answer(sock)


def _flood_row() -> Row:
    with _detector("--max-memory-mb", str(FLOOD_BUDGET_MIB)) as (pid, port):
        _export(port)
        before = _peak_rss(pid)
        _flood(port)
        growth = (_peak_rss(pid) - before) / MIB
    return check(
        f"detector: peak RSS growth, {FLOOD_SPANS:,} hostile spans, --max-memory-mb "
        f"{FLOOD_BUDGET_MIB}",
        growth,
        ".1f",
        FLOOD_BUDGET_MIB + 32,
        "MiB",
    )


def run() -> list[Row]:
    rows: list[Row] = [_flood_row()]
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
