"""Start and stop the real A2A test peers as subprocesses.

Three peers with the same behaviour (see ``tests/peers/python_peer.py``):

- ``"python"``: a2a-sdk 1.3 (``tests/peers/python_peer.py``), run with this interpreter;
- ``"node"``: @a2a-js/sdk 1.3.0 (``demo/node/echo_peer.mjs``, beside the demo's Node worker
  with which it shares ``node_modules``), run with ``node``;
- ``"go"``: a2a-go v2 (``demo/go/gateway/peer.go``: the demo's Go gateway binary in its
  ``--serve`` mode, built by ``make tools`` into ``.tools/bin``). a2a-go runs one execution per
  task at a time: a follow-up to a waiting ``slow`` task is refused, not handed to it.
- ``"jvm"``: the A2A Java SDK (the demo's JVM worker jar, ``make jvm``, with
  ``--agent behave``), run with ``java``; v1.0 only (the SDK line served here has no v0.3
  compatibility layer).

Both listen on 127.0.0.1 on a free port chosen at run time and print ``READY <base_url>`` once
they accept connections. Nothing is written to disk: stdout and stderr are read through pipes
(stderr kept in a bounded buffer for error messages).

    with running_peer("python") as peer:
        httpx.get(peer.base_url + "/.well-known/agent-card.json")
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from tests.support import free_port

Runtime = Literal["python", "node", "go", "jvm"]
RUNTIMES: tuple[Runtime, ...] = ("python", "node", "go", "jvm")

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_PEER = REPO_ROOT / "tests" / "peers" / "python_peer.py"
NODE_DIR = REPO_ROOT / "demo" / "node"  # one package.json, one `npm ci`, for every Node peer
NODE_PEER = NODE_DIR / "echo_peer.mjs"
GO_SOURCE = REPO_ROOT / "demo" / "go" / "gateway"
GO_PEER = REPO_ROOT / ".tools" / "bin" / "a2a-go-gateway"  # `make go-gateway`, `make tools`
JVM_JAR = REPO_ROOT / ".tools" / "jvm" / "a2a-jvm-worker.jar"  # `make jvm` builds it

DEFAULT_READY_TIMEOUT = 30.0
_STDERR_LINES = 400
_EOF = object()


def node_problem() -> str | None:
    """Why the Node peer cannot run here (no ``node``, or no ``npm ci`` in ``NODE_DIR``)."""
    if shutil.which("node") is None:
        return "`node` is not on PATH (Node >= 20 is needed for the @a2a-js/sdk peer)"
    modules = NODE_DIR / "node_modules"
    for package in ("@a2a-js/sdk", "express"):
        if not (modules / package / "package.json").is_file():
            return f"{modules / package} is missing: run `make setup` (npm ci in {NODE_DIR})"
    return None


def go_problem() -> str | None:
    """Why the Go peer cannot run here: its binary is missing or older than its source."""
    hint = "run `make go-gateway` (Go >= 1.26 with the Go module proxy)"
    if not GO_PEER.is_file():
        return f"{GO_PEER} is missing: {hint}"
    built = GO_PEER.stat().st_mtime
    sources = [GO_SOURCE / "go.mod", GO_SOURCE / "go.sum", *GO_SOURCE.glob("*.go")]
    if any(p.stat().st_mtime > built for p in sources if p.is_file()):
        return f"{GO_PEER} is older than its source in {GO_SOURCE}: {hint}"
    return None


def jvm_problem() -> str | None:
    """Why the JVM peer cannot run here (no ``java``, or no jar: ``make jvm``)."""
    if shutil.which("java") is None:
        return "`java` is not on PATH (Java >= 17 is needed for the A2A Java SDK peer)"
    if not JVM_JAR.is_file():
        return f"{JVM_JAR} is missing: run `make jvm`"
    return None


def problem(runtime: Runtime) -> str | None:
    """Why ``runtime``'s peer cannot run here, or None."""
    problems = {"node": node_problem, "go": go_problem, "jvm": jvm_problem}
    return problems[runtime]() if runtime in problems else None


class PeerStartError(RuntimeError):
    """A peer did not print its READY line before the deadline (or exited first)."""


def peer_command(
    runtime: Runtime, port: int, slow_timeout: float | None = None, options: Sequence[str] = ()
) -> list[str]:
    """The argv that starts ``runtime``'s peer on ``port`` (``options``: more of its flags)."""
    extra = [] if slow_timeout is None else ["--slow-timeout", str(slow_timeout)]
    extra += options
    if runtime == "python":
        return [sys.executable, str(PYTHON_PEER), "--port", str(port), *extra]
    if runtime == "node":
        node = shutil.which("node") or "node"
        return [node, str(NODE_PEER), "--port", str(port), *extra]
    if runtime == "go":
        return [str(GO_PEER), "--serve", "--port", str(port), *extra]
    if runtime == "jvm":
        java = shutil.which("java") or "java"
        flags = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        return [
            java,
            *flags,
            "-jar",
            str(JVM_JAR),
            "--agent",
            "behave",
            "--port",
            str(port),
            *extra,
        ]
    raise ValueError(f"unknown peer runtime {runtime!r}")


def _pump(stream: IO[bytes], sink: queue.Queue[object] | None, keep: deque[str] | None) -> None:
    """Read ``stream`` line by line until EOF, into a queue or a bounded buffer."""
    try:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if sink is not None:
                sink.put(line)
            if keep is not None:
                keep.append(line)
    except (OSError, ValueError):
        pass
    finally:
        if sink is not None:
            sink.put(_EOF)


@dataclass
class RunningPeer:
    """A started peer. ``base_url`` is ``http://127.0.0.1:<port>`` (no trailing slash)."""

    runtime: Runtime
    base_url: str
    port: int
    process: subprocess.Popen[bytes]
    _stderr: deque[str] = field(default_factory=lambda: deque(maxlen=_STDERR_LINES))
    _threads: list[threading.Thread] = field(default_factory=list)
    grpc_target: str | None = None  # ``127.0.0.1:<port>`` when it serves gRPC (``--grpc``)

    @property
    def card_url(self) -> str:
        return self.base_url + "/.well-known/agent-card.json"

    def stderr_text(self) -> str:
        """The last lines the peer wrote on stderr."""
        return "\n".join(self._stderr)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Returns the exit code."""
        _terminate(self.process, timeout)
        for thread in self._threads:
            thread.join(timeout=1.0)
        return self.process.returncode


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(timeout=timeout)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _start_once(
    runtime: Runtime,
    port: int,
    ready_timeout: float,
    slow_timeout: float | None,
    env: Mapping[str, str] | None,
    options: Sequence[str] = (),
) -> RunningPeer:
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    process = subprocess.Popen(
        peer_command(runtime, port, slow_timeout, options),
        cwd=str(NODE_DIR if runtime == "node" else REPO_ROOT),
        env=child_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    lines: queue.Queue[object] = queue.Queue()
    stderr: deque[str] = deque(maxlen=_STDERR_LINES)
    threads = [
        threading.Thread(
            target=_pump, args=(process.stdout, lines, None), name=f"{runtime}-peer-stdout"
        ),
        threading.Thread(
            target=_pump, args=(process.stderr, None, stderr), name=f"{runtime}-peer-stderr"
        ),
    ]
    for thread in threads:
        thread.daemon = True
        thread.start()

    deadline = time.monotonic() + ready_timeout
    seen: list[str] = []
    grpc_target: str | None = None
    while True:
        remaining = deadline - time.monotonic()
        item: object = None
        if remaining > 0:
            with contextlib.suppress(queue.Empty):
                item = lines.get(timeout=remaining)
        if isinstance(item, str):
            seen.append(item)
            if item.startswith("GRPC "):
                grpc_target = item.split(" ", 1)[1].strip()
            if item.startswith("READY "):
                base_url = item.split(" ", 1)[1].strip().rstrip("/")
                return RunningPeer(runtime, base_url, port, process, stderr, threads, grpc_target)
            continue
        # EOF (the peer exited) or the deadline passed
        why = "exited before READY" if item is _EOF else f"no READY within {ready_timeout:.0f} s"
        _terminate(process, 2.0)
        for thread in threads:
            thread.join(timeout=1.0)
        raise PeerStartError(
            f"{runtime} peer on port {port} {why} (exit code {process.returncode});\n"
            f"stdout: {seen!r}\nstderr:\n" + "\n".join(stderr)
        )


def start_peer(
    runtime: Runtime,
    *,
    port: int | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    slow_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> RunningPeer:
    """Start ``runtime``'s peer and wait for its READY line (``options``: its flags).

    ``port=None`` picks a free port (bind to 0 first); if another process grabs it before the
    peer binds, a fresh port is tried (three attempts). ``slow_timeout`` bounds the wait of
    ``slow`` tasks (peer default 30 s). Raises ``PeerStartError`` with the peer's stderr.
    """
    reason = problem(runtime)
    if reason is not None:
        raise PeerStartError(f"{runtime} peer unavailable: {reason}")
    attempts = 1 if port is not None else 3
    last: PeerStartError | None = None
    for _ in range(attempts):
        chosen = port if port is not None else free_port()
        try:
            return _start_once(runtime, chosen, ready_timeout, slow_timeout, env, options)
        except PeerStartError as exc:
            last = exc
            text = str(exc).lower()
            if "address already in use" not in text and "eaddrinuse" not in text:
                raise
    assert last is not None
    raise last


@contextlib.contextmanager
def running_peer(
    runtime: Runtime,
    *,
    port: int | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    slow_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[RunningPeer]:
    """``start_peer`` as a context manager that always stops the peer."""
    peer = start_peer(
        runtime,
        port=port,
        ready_timeout=ready_timeout,
        slow_timeout=slow_timeout,
        env=env,
        options=options,
    )
    try:
        yield peer
    finally:
        peer.stop()
