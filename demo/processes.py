"""Process control for the demo: the children of one run, their ports, their start-up retries.

Each peer kind (the worker behind the gateway, the gateway itself) is a small object that
says why it cannot run here and how to start it; the run picks one of each by name
(:data:`WORKERS`, :data:`GATEWAYS`). A kind for another runtime adds an entry and keeps the
contract the run relies on:

- a **worker** serves A2A (JSON-RPC at ``/a2a/jsonrpc``, HTTP+JSON at ``/a2a/rest``) and its
  card on ``127.0.0.1:<port>``, keeps its tasks in the ``store`` folder (durable across a
  restart on the same folder; ``forget`` starts it empty), advertises ``streaming: true``, the
  card version and the heartbeat it is given, and sends a heartbeat frame on open streams;
- a **gateway** forwards the card (interface URLs rewritten to its own) and everything under
  ``/a2a/`` to ``upstream``, streams chunk by chunk, and with ``respell`` re-spells task states
  (``TASK_STATE_WORKING`` becomes ``Working``);
- both print ``READY <base_url>`` on stdout once they accept connections, pick a free port
  for port 0, and say "address already in use" (or ``EADDRINUSE``) when a port is taken.

A worker kind also gives the environment its process needs on top of the parent's (none but
the Python worker's, which otel-a2a instruments like the orchestrator: its spans go to its
stdout, where the run reads its findings).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from demo.model import Timings

DEMO_DIR = Path(__file__).resolve().parent
NODE_DIR = DEMO_DIR / "node"
GO_GATEWAY_DIR = DEMO_DIR / "go" / "gateway"
GO_GATEWAY_BIN = DEMO_DIR.parent / ".tools" / "bin" / "a2a-go-gateway"  # `make go-gateway`
JVM_DIR = DEMO_DIR / "jvm"
JVM_JAR = DEMO_DIR.parent / ".tools" / "jvm" / "a2a-jvm-worker.jar"  # `make jvm` builds it
ORCHESTRATOR = DEMO_DIR / "orchestrator.py"
READY_TIMEOUT = 30.0


class ScenarioError(RuntimeError):
    """The topology could not be set up (missing Node, a process that did not start, ...)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def address_in_use(text: str) -> bool:
    """Whether a child's error output says its port was taken (Node, Python, Go, JVM words)."""
    lowered = text.lower()
    return "eaddrinuse" in lowered or "address already in use" in lowered


def missing_modules(*modules: str) -> str | None:
    """Which of the demo's Python peers' packages are not installed here, and how to get them:
    they are otel-a2a's ``dev`` extra, not its own dependencies."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed: run `make setup` (or pip install -e '.[dev]')"
    return None


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment without any OTEL_* setting, plus ``extra``.

    OTLP exporter settings (``OTEL_EXPORTER_OTLP_*``) are kept: they say where to send data.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") or k.startswith("OTEL_EXPORTER_OTLP_")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Proc:
    """A child in its own process group, its output in files of the work folder."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        cwd: Path,
        stdin: int | None = subprocess.DEVNULL,
    ) -> None:
        self.name = name
        self.stdout_path = workdir / f"{name}.out"
        self.stderr_path = workdir / f"{name}.err"
        self._out: IO[bytes] = open(self.stdout_path, "ab")  # noqa: SIM115 - closed in stop()
        self._err: IO[bytes] = open(self.stderr_path, "ab")  # noqa: SIM115
        self.popen = subprocess.Popen(
            list(argv),
            cwd=str(cwd),
            env=dict(env),
            stdin=stdin,
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_ready(self, timeout: float, cancel: threading.Event | None = None) -> str:
        """The URL of the READY line on stdout (``cancel`` set: give up at once)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (cancel is not None and cancel.is_set()):
            text = self.stdout_path.read_bytes().decode("utf-8", "replace")
            match = re.search(r"^READY (\S+)", text, re.M)
            if match:
                return match.group(1).rstrip("/")
            if not self.alive():
                break
            time.sleep(0.05)
        raise ScenarioError(
            f"{self.name} did not become ready within {timeout:g} s "
            f"(exit code {self.popen.poll()}):\n{self.stderr_tail()}"
        )

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def stderr_tail(self, lines: int = 30) -> str:
        return "\n".join(self.stderr_text().splitlines()[-lines:])

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole group and reap it (a crash, not a shutdown)."""
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        self._close()

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM to the group, SIGKILL after ``timeout``; always reaps and closes files."""
        if self.alive():
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=timeout)
        self._close()

    def _close(self) -> None:
        for stream in (self._out, self._err):
            with contextlib.suppress(OSError):
                stream.close()
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()


class Children:
    """Every child of one run: registered as soon as started, so clean-up always sees it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[Proc] = []
        self.closing = threading.Event()  # set by clean-up: no new start, waits give up
        self._lock = threading.Lock()
        self._starts: dict[str, int] = {}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.DEVNULL,
    ) -> Proc:
        proc = Proc(name, argv, self.workdir, child_env({}) if env is None else env, cwd, stdin)
        with self._lock:
            self.procs.append(proc)
        return proc

    def start_ready(
        self,
        name: str,
        argv: Sequence[str],
        cwd: Path,
        *,
        attempts: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> tuple[Proc, str]:
        """Start a server that prints READY and wait for it: its process and base URL.

        While its port is still taken (a killed predecessor's, say), try again, up to
        ``attempts`` times; each of those starts is then named ``<name>-<n>``, counted over the
        run (a restart is ``worker-2``), so that every start keeps its own output files.
        """
        last: ScenarioError | None = None
        for _ in range(attempts):
            if self.closing.is_set():
                raise ScenarioError(f"stopping: no new {name}")
            count = self._starts[name] = self._starts.get(name, 0) + 1
            proc = self.start(f"{name}-{count}" if attempts > 1 else name, argv, cwd, env)
            try:
                return proc, proc.wait_ready(READY_TIMEOUT, self.closing)
            except ScenarioError as exc:
                proc.stop()
                last = exc
                if not address_in_use(str(exc)):
                    raise
                time.sleep(0.25)
        assert last is not None
        raise last

    def stop_all(self) -> list[int]:
        """Stop every child, the last started first; their pids."""
        self.closing.set()
        with self._lock:
            procs = list(reversed(self.procs))
        for proc in procs:
            proc.stop()
        return [proc.popen.pid for proc in procs]


# ---------------------------------------------------------------------------------------------
# peer kinds


class WorkerKind(Protocol):
    """A worker on some runtime (see the module's docstring for what it must do)."""

    runtime: str  # in the first progress line: "starting the worker (Node), ..."
    label: str  # in the timeline: "<label> ready at http://..."
    cwd: Path

    def problem(self) -> str | None:
        """Why it cannot run here (a missing runtime or package), or None."""
        ...

    def argv(
        self, port: int, store: Path, timings: Timings, *, forget: bool, card_version: str
    ) -> list[str]: ...

    def env(self, timings: Timings, *, otlp: bool) -> dict[str, str]:
        """Its settings on top of the parent's environment (``otlp``: an OTLP endpoint is
        configured)."""
        ...


class GatewayKind(Protocol):
    """A gateway on some runtime (see the module's docstring for what it must do)."""

    runtime: str  # in the first progress line: "..., the gateway (Go), ..."
    cwd: Path

    def problem(self) -> str | None: ...

    def argv(self, upstream: str, *, respell: bool, grpc: bool = False) -> list[str]: ...


def node_problem() -> str | None:
    """Why the Node A2A peers (``node/``) cannot run here."""
    if shutil.which("node") is None:
        return "`node` is not on PATH (Node >= 20 is needed for the @a2a-js/sdk peers)"
    modules = NODE_DIR / "node_modules"
    for package in ("@a2a-js/sdk", "express"):
        if not (modules / package / "package.json").is_file():
            return (
                f"{modules / package} is missing: run `npm ci --prefix {NODE_DIR}` "
                "(`make setup` does it in a clone)"
            )
    return None


class NodeWorker:
    """``node/worker.mjs``: @a2a-js/sdk under Node, a durable file task store."""

    runtime = "Node"
    label = "@a2a-js/sdk worker"
    cwd = NODE_DIR

    def problem(self) -> str | None:
        return node_problem()

    def argv(
        self, port: int, store: Path, timings: Timings, *, forget: bool, card_version: str
    ) -> list[str]:
        argv = [
            shutil.which("node") or "node",
            str(NODE_DIR / "worker.mjs"),
            *("--port", str(port), "--store", str(store), "--card-version", card_version),
            *("--heartbeat", f"{timings.heartbeat:g}", "--job-seconds", f"{timings.job_seconds:g}"),
            *("--card-max-age", f"{timings.card_ttl:g}"),
        ]
        return [*argv, "--forget"] if forget else argv

    def env(self, timings: Timings, *, otlp: bool) -> dict[str, str]:
        return {}


def jvm_problem() -> str | None:
    """Why the JVM worker (``jvm/``, built by ``make jvm`` into ``.tools/jvm/``) cannot run
    here: no Java, or a jar that is missing or older than its sources."""
    if shutil.which("java") is None:
        return "`java` is not on PATH (Java >= 17 is needed for the A2A Java SDK worker)"
    if not JVM_JAR.is_file():
        return f"{JVM_JAR} is missing: run `make jvm` (Maven builds it from {JVM_DIR})"
    built = JVM_JAR.stat().st_mtime
    sources = [JVM_DIR / "pom.xml", *(p for p in (JVM_DIR / "src").rglob("*") if p.is_file())]
    if any(p.stat().st_mtime > built for p in sources):
        return f"{JVM_JAR} is older than {JVM_DIR}: run `make jvm` to rebuild it"
    return None


class JvmWorker:
    """``jvm/``: the A2A Java SDK's request handler and transports on the JDK's HTTP server
    (no CDI), a durable file task store, a card served from a static descriptor."""

    runtime = "JVM"
    label = "a2a-java worker"
    cwd = JVM_DIR

    def problem(self) -> str | None:
        return jvm_problem()

    def argv(
        self, port: int, store: Path, timings: Timings, *, forget: bool, card_version: str
    ) -> list[str]:
        argv = [
            shutil.which("java") or "java",
            *("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"),
            *("-jar", str(JVM_JAR)),
            *("--port", str(port), "--store", str(store), "--card-version", card_version),
            *("--heartbeat", f"{timings.heartbeat:g}", "--job-seconds", f"{timings.job_seconds:g}"),
            *("--card-max-age", f"{timings.card_ttl:g}"),
        ]
        return [*argv, "--forget"] if forget else argv

    def env(self, timings: Timings, *, otlp: bool) -> dict[str, str]:
        return {}


class PythonWorker:
    """``python_worker.py``: a2a-sdk on Starlette and uvicorn, tasks in SQLite (a2a-sdk's
    ``DatabaseTaskStore``), run by path with this interpreter and instrumented by
    ``OTEL_A2A_ENABLED=true`` alone, like the orchestrator: its spans on its stdout (and OTLP
    when configured), the heartbeat on its card, its ``otel_a2a.task.unfinished`` findings.

    Unlike the Node and JVM workers it does not fail the task in flight at a restart: a2a-sdk
    brings it back ``working`` with nothing running it, which otel-a2a reports at start-up.
    """

    runtime = "Python"
    label = "a2a-sdk worker"
    cwd = DEMO_DIR
    service = "a2a-python-worker"

    def problem(self) -> str | None:
        return missing_modules("a2a", "uvicorn", "starlette", "sqlalchemy", "aiosqlite")

    def argv(
        self, port: int, store: Path, timings: Timings, *, forget: bool, card_version: str
    ) -> list[str]:
        argv = [
            sys.executable,
            str(DEMO_DIR / "python_worker.py"),
            *("--port", str(port), "--store", str(store), "--card-version", card_version),
            *("--heartbeat", f"{timings.heartbeat:g}", "--job-seconds", f"{timings.job_seconds:g}"),
            *("--card-max-age", f"{timings.card_ttl:g}"),
        ]
        return [*argv, "--forget"] if forget else argv

    def env(self, timings: Timings, *, otlp: bool) -> dict[str, str]:
        return {
            "OTEL_A2A_ENABLED": "true",
            "OTEL_SERVICE_NAME": self.service,
            "OTEL_TRACES_EXPORTER": "console,otlp" if otlp else "console",
            "OTEL_METRICS_EXPORTER": "otlp" if otlp else "none",
            "OTEL_LOGS_EXPORTER": "otlp" if otlp else "none",
            "OTEL_METRIC_EXPORT_INTERVAL": str(int(timings.export_interval * 1000)),
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            # read at interpreter start: the worker's --heartbeat comes too late for it
            "OTEL_A2A_SERVE_HEARTBEAT": f"{timings.heartbeat:g}",
            "OTEL_A2A_SERVE_CHECK_INTERVAL": f"{timings.heartbeat:g}",
            "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false",
        }


class PythonGateway:
    """``gateway.py``: Starlette and httpx under uvicorn, run by path with this interpreter."""

    runtime = "Python"
    cwd = DEMO_DIR

    def problem(self) -> str | None:
        return missing_modules("uvicorn", "starlette")

    def argv(self, upstream: str, *, respell: bool, grpc: bool = False) -> list[str]:
        if grpc:
            raise ScenarioError("the Python gateway serves no gRPC")
        argv = [sys.executable, str(DEMO_DIR / "gateway.py"), "--upstream", upstream, "--port", "0"]
        return [*argv, "--respell"] if respell else argv


def built_problem(binary: Path, source: Path, target: str) -> str | None:
    """Why a binary that the Makefile builds from ``source`` cannot run: missing, or older
    than its source (go.mod, go.sum, a .go file)."""
    hint = f"run `make {target}` (Go >= 1.26 with the Go module proxy builds it)"
    if not binary.is_file():
        return f"{binary} is missing: {hint}"
    inputs = [source / "go.mod", source / "go.sum", *source.glob("*.go")]
    built = binary.stat().st_mtime
    if any(p.stat().st_mtime > built for p in inputs if p.is_file()):
        return f"{binary} is older than its source in {source}: {hint}"
    return None


class GoGateway:
    """``go/gateway``: a2a-go v2's JSON-RPC and HTTP+JSON transports over a forwarding request
    handler, built into ``.tools/bin/a2a-go-gateway`` by the Makefile; with ``grpc``, its gRPC
    server transport too, forwarding to the worker over JSON-RPC (a binding translation)."""

    runtime = "Go"
    cwd = DEMO_DIR

    def problem(self) -> str | None:
        return built_problem(GO_GATEWAY_BIN, GO_GATEWAY_DIR, "go-gateway")

    def argv(self, upstream: str, *, respell: bool, grpc: bool = False) -> list[str]:
        argv = [str(GO_GATEWAY_BIN), "--upstream", upstream, "--port", "0"]
        if grpc:
            argv += ["--grpc", "--grpc-upstream", "JSONRPC"]
        return [*argv, "--respell"] if respell else argv


WORKERS: dict[str, WorkerKind] = {
    "node": NodeWorker(),
    "jvm": JvmWorker(),
    "python": PythonWorker(),
}
GATEWAYS: dict[str, GatewayKind] = {"python": PythonGateway(), "go": GoGateway()}


def orchestrator_problem(binding: str = "JSONRPC") -> str | None:
    """Why the orchestrator (a plain a2a-sdk client) cannot run here (over gRPC: grpcio)."""
    return missing_modules("a2a", *(["grpc"] if binding == "GRPC" else []))
