"""The real path: two instrumented processes export over OTLP/HTTP protobuf to the detector.

A "gateway" process and an "orchestrator" process (both plain httpx clients instrumented only
by ``OTEL_A2A_ENABLED=true``, each with its own ``OTEL_SERVICE_NAME``) read the same tasks at
the same time from two loopback A2A agents that disagree: for one task the gateway's agent
spells ``TASK_STATE_WORKING`` and the orchestrator's ``Working`` (renormalised at a
boundary); for the other the gateway's agent says ``TASK_STATE_FAILED`` while the
orchestrator's still says ``TASK_STATE_WORKING`` (the seeded incident's split brain). The
agents hold each answer until both processes asked (a barrier), so the spans overlap in time.
``otel-a2a detector`` runs as a subprocess and must print both findings, count them on
``otel_a2a_divergence_total``, stop cleanly on SIGINT and leave a dump that ``otel-a2a analyze``
reads back to the same findings.

The detector's bounds, from its own flags, as a subprocess too: a burst of 200 connections is
queued and answered (no reset), a declared-huge body is refused at once, a body past
``--body-timeout`` answered 408.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

from otel_a2a.cli import main
from tests.support.fake_agent import FakeAgent, Reply

CLIENT = Path(__file__).with_name("view_client.py")
DEADLINE = 60.0


class _Agents:
    """Two fake agents answering GetTask from a table; each answer waits for both processes."""

    VIEWS = ("gateway", "orchestrator")

    def __init__(self, answers: dict[str, dict[str, str]]) -> None:
        barriers = {task: threading.Barrier(2, timeout=DEADLINE) for task in answers}

        def both_asked(agent: FakeAgent, request: httpx.Request) -> Reply | None:
            try:
                barriers[json.loads(request.content)["params"]["id"]].wait()
            except threading.BrokenBarrierError:
                return Reply(500, {"Content-Type": "text/plain"}, b"the other process never asked")
            return None  # both processes are mid-request now: answer from the table

        self._stack = contextlib.ExitStack()
        self.urls = {
            view: self._stack.enter_context(
                FakeAgent(
                    rpc_path="/a2a/jsonrpc",
                    states={task: views[view] for task, views in answers.items()},
                    misbehave=both_asked,
                ).serve()
            )
            for view in self.VIEWS
        }

    def url(self, view: str) -> str:
        return self.urls[view]

    def close(self) -> None:
        self._stack.close()


class _Lines:
    """Lines of a subprocess stream, collected by a thread, awaited with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))

    def wait_for(self, found: Callable[[list[str]], bool], what: str) -> list[str]:
        deadline = time.monotonic() + DEADLINE
        while not found(self.seen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}; got {self.seen}")
            try:
                self.seen.append(self._queue.get(timeout=min(left, 1.0)))
            except queue.Empty:
                continue
        return self.seen


def _client_env(service: str, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_A2A_ENABLED="true",
        OTEL_SERVICE_NAME=service,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    return env


@pytest.fixture
def detector(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], _Lines, _Lines, Path]]:
    dump = tmp_path / "spans.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--metrics-port", "0", "--dump", str(dump)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield proc, _Lines(proc.stdout), _Lines(proc.stderr), dump
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_detector_finds_the_split_brain_of_two_real_processes(
    detector: tuple[subprocess.Popen[str], _Lines, _Lines, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    proc, out, err, dump = detector
    banner = err.wait_for(lambda seen: any("OTLP/HTTP on" in s for s in seen), "the banner")
    match = re.search(
        r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)/v1/traces.*metrics on (\S+)", banner[0]
    )
    assert match, banner
    endpoint, metrics_url = match.group(1), match.group(2)

    renorm, conflict = f"renorm-{uuid.uuid4()}", f"conflict-{uuid.uuid4()}"
    agents = _Agents(
        {
            renorm: {"gateway": "TASK_STATE_WORKING", "orchestrator": "Working"},
            conflict: {"gateway": "TASK_STATE_FAILED", "orchestrator": "TASK_STATE_WORKING"},
        }
    )
    clients: list[subprocess.Popen[str]] = []
    try:
        clients += [
            subprocess.Popen(
                [sys.executable, str(CLIENT), agents.url(view), renorm, conflict],
                env=_client_env(view, endpoint),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for view in ("gateway", "orchestrator")
        ]
        for client in clients:
            stdout, stderr = client.communicate(timeout=DEADLINE)
            assert client.returncode == 0, stderr
            assert stdout.count("TASK ") == 2, stdout
    finally:
        for client in clients:
            if client.poll() is None:  # a client that timed out is not left running
                client.kill()
                client.wait()
        agents.close()

    def both(seen: list[str]) -> bool:
        return any("cross_runtime_conflict" in s for s in seen) and any(
            "renormalized_state" in s for s in seen
        )

    lines = out.wait_for(both, "both findings")
    conflict_line = next(s for s in lines if "cross_runtime_conflict" in s)
    assert conflict_line.startswith(f"task {conflict}: cross_runtime_conflict: ")
    assert "gateway failed ('TASK_STATE_FAILED'" in conflict_line
    assert "orchestrator working ('TASK_STATE_WORKING'" in conflict_line
    renorm_line = next(s for s in lines if "renormalized_state" in s)
    assert renorm_line.startswith(f"task {renorm}: renormalized_state: ")
    assert "'TASK_STATE_WORKING'" in renorm_line and "'Working'" in renorm_line
    assert len(lines) == 2, lines  # deduplicated, nothing else

    metrics = httpx.get(metrics_url, timeout=10).text
    counted = {
        reason: [
            line
            for line in metrics.splitlines()
            if line.startswith("otel_a2a_divergence_total{") and f'"{reason}"' in line
        ]
        for reason in ("cross_runtime_conflict", "renormalized_state")
    }
    for reason, found in counted.items():
        assert len(found) == 1 and found[0].endswith(" 1.0"), (reason, metrics)
        assert 'a2a_method_name="GetTask"' in found[0]

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=DEADLINE) == 0
    err.wait_for(lambda seen: any("stopped after" in s for s in seen), "the shutdown summary")
    assert not any("Traceback" in s for s in err.seen), err.seen

    assert main(["analyze", "--json", str(dump)]) == 1
    offline = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((f["reason"], f["task_id"]) for f in offline) == [
        ("cross_runtime_conflict", conflict),
        ("renormalized_state", renorm),
    ]
    services = {tuple(sorted(f["services"])) for f in offline}
    assert services == {("gateway", "orchestrator")}


@pytest.fixture
def bounded_detector() -> Iterator[int]:
    """``otel-a2a detector`` with small bounds; its port. Stopped with SIGINT, it must exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--max-body-bytes", "1000", "--body-timeout", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    err = _Lines(proc.stderr)
    try:
        banner = err.wait_for(lambda seen: any("OTLP/HTTP on" in s for s in seen), "the banner")
        match = re.search(r"OTLP/HTTP on http://127\.0\.0\.1:(\d+)/v1/traces", banner[0])
        assert match, banner
        yield int(match.group(1))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE) == 0
        assert not any("Traceback" in s for s in err.seen), err.seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


async def _burst(port: int, count: int) -> list[bytes | BaseException]:
    """``count`` connections opened at once, then one export on each; every answer (or why
    there is none), each with a deadline."""
    body = b'{"resourceSpans": []}'
    request = HEAD + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with asyncio.timeout(DEADLINE):
            return await asyncio.open_connection("127.0.0.1", port)

    async def export(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        async with asyncio.timeout(DEADLINE):
            writer.write(request)
            await writer.drain()
            answer = await reader.read()
            writer.close()
            return answer

    opened = await asyncio.gather(*(connect() for _ in range(count)), return_exceptions=True)
    return await asyncio.gather(
        *(export(*c) for c in opened if not isinstance(c, BaseException)),
        return_exceptions=True,
    ) + [c for c in opened if isinstance(c, BaseException)]


def test_a_burst_of_connections_is_queued_not_reset(bounded_detector: int) -> None:
    answers = asyncio.run(_burst(bounded_detector, 200))
    failed = [a for a in answers if not (isinstance(a, bytes) and a.startswith(b"HTTP/1.1 200"))]
    assert failed == [], f"{len(failed)} of 200 not answered 200: {failed[:3]}"


def _answer_to(port: int, request: bytes) -> bytes:
    """The answer to a request of which the client sends only ``request`` (with a deadline)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(request)
        assert select.select([sock], [], [], DEADLINE)[0], "no answer"
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_the_body_bounds_are_the_flags(bounded_detector: int) -> None:
    huge = _answer_to(bounded_detector, HEAD + b"Content-Length: 1000000000000\r\n\r\n{}")
    assert huge.startswith(b"HTTP/1.1 413") and b"\r\nRetry-After: 1\r\n" in huge, huge
    over = _answer_to(bounded_detector, HEAD + b"Content-Length: 1001\r\n\r\n")
    assert over.startswith(b"HTTP/1.1 413"), over
    stalled = _answer_to(bounded_detector, HEAD + b"Content-Length: 1000\r\n\r\n{")
    assert stalled.startswith(b"HTTP/1.1 408"), stalled  # after --body-timeout 1
    url = f"http://127.0.0.1:{bounded_detector}/v1/traces"
    assert httpx.post(url, json={"resourceSpans": []}, timeout=DEADLINE).status_code == 200


@pytest.mark.parametrize("budget", [64, 512])
def test_the_memory_budget_sets_every_share(budget: int) -> None:
    """``--max-memory-mb`` reaches each structure: the banner states the shares in force."""
    from otel_a2a.analyze.budget import shares

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--max-memory-mb", str(budget)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    err = _Lines(proc.stderr)
    try:
        seen = err.wait_for(lambda seen: any("memory budget" in s for s in seen), "the budget")
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE) == 0
    s = shares(budget)
    assert (
        f"otel-a2a detector: memory budget {budget} MiB: bodies up to {s.max_body} bytes, "
        f"{s.bodies} bytes of bodies held at once, {s.tasks} bytes of task records, "
        f"{s.links} bytes of parent links"
    ) in seen


def test_a_body_limit_the_budget_cannot_hold_is_refused_at_start() -> None:
    argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0"]
    done = subprocess.run(
        [*argv, "--max-body-bytes", str(16 * 1024 * 1024)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 2
    assert "--max-body-bytes 16777216 needs --max-memory-mb 3120 or more" in done.stderr


def test_stopping_with_an_idle_keep_alive_connection_is_clean() -> None:
    """An exporter's connection left open between exports is closed at stop without an error
    traceback (Python 3.11's start_server logged the cancelled connection task as one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    match = re.search(r":(\d+)/v1/traces", proc.stderr.readline())
    assert match
    with httpx.Client(timeout=DEADLINE) as client:  # keep-alive: the connection stays open
        url = f"http://127.0.0.1:{match.group(1)}/v1/traces"
        assert client.post(url, json={"resourceSpans": []}).status_code == 200
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0
    assert "Traceback" not in err and "stopped after 1 requests" in err, err
