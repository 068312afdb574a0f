"""The seeded incident end to end: real processes on loopback, in a temporary folder.

Topology: orchestrator (Python a2a-sdk client, instrumented only by ``OTEL_A2A_ENABLED=true``)
→ gateway (Python) → worker (``@a2a-js/sdk`` under Node, durable file task store).

:func:`run_scenario` starts the three processes on free ports, plays one variant, collects
what fired (the orchestrator's console spans and its Prometheus ``/metrics``), judges it
against the specification and returns a :class:`ScenarioResult`; :func:`render` prints it.
``otel-a2a demo`` and the end-to-end tests (``tests/e2e``) both go through here.

Variants:

- ``restart``: the worker is killed mid-task (SIGKILL) and started again on the same store; it
  rehydrates the task as failed while its card keeps advertising ``streaming: true``;
- ``forget``: the same, but the worker comes back with an empty store (``task_lost``);
- ``spelling``: the gateway re-spells task states (``Working``): ``non_canonical_state``;
- ``both``: ``restart`` and ``spelling`` together;
- ``redeploy``: the worker comes back with a new card version (``etag_changed``);
- ``healthy``: no fault; the orchestrator over-polls (zero divergences, redundant GetTask).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from otel_a2a.protocol import parse_timestamp

DEMO_DIR = Path(__file__).resolve().parent
NODE_DIR = DEMO_DIR / "node"
WORKER = NODE_DIR / "worker.mjs"
GATEWAY = DEMO_DIR / "gateway.py"
ORCHESTRATOR = DEMO_DIR / "orchestrator.py"

VARIANTS = ("restart", "spelling", "both", "healthy", "forget", "redeploy")
BINDINGS = ("JSONRPC", "HTTP+JSON")
RESPELLING = frozenset({"spelling", "both"})
EXPECTED_AFTER_RESTART: dict[str, frozenset[str]] = {
    "restart": frozenset({"heartbeat_gap", "terminal_state"}),
    "both": frozenset({"heartbeat_gap", "terminal_state"}),
    "forget": frozenset({"heartbeat_gap", "terminal_state", "task_lost"}),
    "redeploy": frozenset({"etag_changed"}),
}
RESTARTING = frozenset(EXPECTED_AFTER_RESTART)
# the orchestrator's log when its Prometheus exporter could not bind (otel-a2a's set-up warning)
PORT_TAKEN = "could not set up OpenTelemetry (OSError: [Errno 98] Address already in use)"
Progress = Callable[[str], None]


class ScenarioError(RuntimeError):
    """The topology could not be set up (missing Node, a process that did not start, ...)."""


@dataclass(frozen=True)
class Timings:
    """Seconds. ``scaled`` (default) keeps a run under 30 s; ``real`` uses the seed's values."""

    heartbeat: float
    card_ttl: float
    tick: float
    timeout: float
    poll_interval: float
    export_interval: float
    job_seconds: float

    @classmethod
    def scaled(cls, heartbeat: float = 1.5) -> Timings:
        tick = 2 * heartbeat
        return cls(
            heartbeat=heartbeat,
            card_ttl=round(0.8 * tick, 3),
            tick=tick,
            timeout=4 * tick,
            poll_interval=round(heartbeat / 3, 3),
            export_interval=1.0,
            job_seconds=600.0,
        )

    @classmethod
    def real(cls) -> Timings:
        return cls(
            heartbeat=30.0,
            card_ttl=300.0,
            tick=60.0,
            timeout=360.0,
            poll_interval=10.0,
            export_interval=5.0,
            job_seconds=3600.0,
        )


@dataclass(frozen=True)
class ScenarioConfig:
    variant: str = "restart"
    binding: str = "JSONRPC"
    streaming: bool = True
    timings: Timings = field(default_factory=Timings.scaled)
    keep_dir: bool = False


@dataclass
class Check:
    """One promise of the seeded incident, checked on this run.

    ``timing`` marks a promise measured on the wall clock (how soon, not whether): the demo
    shows and counts it, the end-to-end tests leave it to ``make bench`` (``bench_incident``),
    since a loaded machine can miss it by scheduling alone.
    """

    name: str
    passed: bool
    detail: str
    timing: bool = False


@dataclass
class Divergence:
    t: float  # wall clock (epoch seconds)
    reason: str
    span: str
    operation: str
    attributes: dict[str, Any]
    span_attributes: dict[str, Any]


@dataclass
class Mark:
    """Something the scenario itself did or saw (worker killed, stale gauge rose, ...)."""

    t: float
    side: str
    text: str


@dataclass
class ScenarioResult:
    config: ScenarioConfig
    ok: bool = False
    checks: list[Check] = field(default_factory=list)
    start: float = 0.0
    timeline: list[dict[str, Any]] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    metrics_url: str = ""
    restart_at: float | None = None
    restarted_at: float | None = None
    stale_before: float | None = None  # a2a_tasks_stale just before the restart
    stale_at: float | None = None
    detected_at: float | None = None
    baseline_at: float | None = None
    orchestrator_code: int | None = None
    workdir: str = ""
    otlp_endpoint: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)
    port_taken: bool = False  # the orchestrator's metrics port was taken before it bound it
    attempts: int = 1  # 2 when run again because of that

    def reasons(self) -> list[str]:
        return [d.reason for d in self.divergences]

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        total = 0.0
        for key, value in self.metrics.items():
            metric, sample_labels = _split_key(key)
            if metric == name and all(sample_labels.get(k) == v for k, v in labels.items()):
                total += value
        return total


# ---------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def node_problem() -> str | None:
    """Why the Node A2A peers (the demo's worker, the tests' echo peer) cannot run here."""
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


def python_problem() -> str | None:
    """Why the demo's Python peers (a2a-sdk client and server, uvicorn) cannot run here: they
    are the ``demo`` extra, not otel-a2a's own dependencies."""
    missing = [m for m in ("a2a", "uvicorn", "starlette") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed: pip install 'otel-a2a[demo]'"
    return None


def _child_env(extra: Mapping[str, str]) -> dict[str, str]:
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


# ---------------------------------------------------------------------------------------------
# collected data


def parse_console_spans(text: str) -> list[dict[str, Any]]:
    """Spans from ``ConsoleSpanExporter`` output: concatenated JSON objects, maybe with noise."""
    decoder = json.JSONDecoder()
    spans: list[dict[str, Any]] = []
    i, n = 0, len(text)
    while i < n:
        start = text.find("{", i)
        if start < 0:
            break
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        if isinstance(obj, dict) and "name" in obj and "context" in obj:
            spans.append(obj)
        i = end
    return spans


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[str, float]:
    """``{'name{a="1",b="2"}': value}`` for every sample line (labels sorted)."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        pairs = sorted(_LABEL.findall(labels or ""))
        key = name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"
        with contextlib.suppress(ValueError):
            samples[key] = float(value)
    return samples


def _split_key(key: str) -> tuple[str, dict[str, str]]:
    name, _, rest = key.partition("{")
    return name, dict(_LABEL.findall(rest))


def scrape(url: str, timeout: float = 2.0) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body: bytes = response.read()
    except (OSError, ValueError):
        return None
    return parse_prometheus(body.decode("utf-8", "replace"))


def _sum(samples: Mapping[str, float], name: str) -> float:
    return sum(v for k, v in samples.items() if _split_key(k)[0] == name)


def _divergences(spans: Sequence[Mapping[str, Any]]) -> list[Divergence]:
    found: list[Divergence] = []
    for span in spans:
        attrs = span.get("attributes") or {}
        for event in span.get("events") or []:
            if event.get("name") != "a2a.divergence":
                continue
            ev_attrs = event.get("attributes") or {}
            found.append(
                Divergence(
                    t=parse_timestamp(event.get("timestamp"))
                    or parse_timestamp(span.get("start_time"))
                    or 0.0,
                    reason=str(ev_attrs.get("a2a.divergence.reason", "?")),
                    span=str(span.get("name", "?")),
                    operation=str(attrs.get("a2a.operation", span.get("name", "?"))),
                    attributes=dict(ev_attrs),
                    span_attributes=dict(attrs),
                )
            )
    found.sort(key=lambda d: d.t)
    return found


def decision_spans(spans: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out = [s for s in spans if (s.get("attributes") or {}).get("a2a.liveness.decision") is True]
    out.sort(key=lambda s: parse_timestamp(s.get("start_time")) or 0.0)
    return out


def span_reasons(span: Mapping[str, Any]) -> list[str]:
    return [
        str((e.get("attributes") or {}).get("a2a.divergence.reason"))
        for e in span.get("events") or []
        if e.get("name") == "a2a.divergence"
    ]


# ---------------------------------------------------------------------------------------------
# the run


class _Run:
    def __init__(self, config: ScenarioConfig, progress: Progress | None) -> None:
        self.config = config
        self.t = config.timings
        self.progress = progress
        self.result = ScenarioResult(config=config)
        self.procs: list[Proc] = []
        self.worker: Proc | None = None
        self.worker_port = 0
        self.store = Path()
        self.work = Path()
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.restart_thread: threading.Thread | None = None
        self.worker_starts = 0

    def say(self, side: str, text: str, t: float | None = None) -> None:
        now = time.time() if t is None else t
        with self.lock:
            self.result.marks.append(Mark(now, side, text))
        if self.progress is not None:
            start = self.result.start or now
            self.progress(f"[{now - start:6.2f}s] {side:<12} {text}")

    # -- processes ----------------------------------------------------------------------------
    def start_worker(self, *, forget: bool = False, card_version: str = "1.0.0") -> Proc:
        node = shutil.which("node") or "node"
        argv = [
            node,
            str(WORKER),
            "--port",
            str(self.worker_port),
            "--store",
            str(self.store),
            "--card-version",
            card_version,
            "--heartbeat",
            f"{self.t.heartbeat:g}",
            "--job-seconds",
            f"{self.t.job_seconds:g}",
            "--card-max-age",
            f"{self.t.card_ttl:g}",
        ]
        if forget:
            argv.append("--forget")
        last: ScenarioError | None = None
        for _ in range(20):  # the port of a killed worker may need a moment to be free again
            if self.closing.is_set():
                raise ScenarioError("stopping: no new worker")
            self.worker_starts += 1
            name = f"worker-{self.worker_starts}"  # own output files: READY is read from them
            proc = Proc(name, argv, self.work, _child_env({}), NODE_DIR)
            with self.lock:
                self.procs.append(proc)  # registered at once: clean-up always sees it
            try:
                base = proc.wait_ready(30.0, self.closing)
            except ScenarioError as exc:
                proc.stop()
                last = exc
                if "EADDRINUSE" not in str(exc):
                    raise
                time.sleep(0.25)
                continue
            self.worker_port = int(base.rsplit(":", 1)[1])  # the first start picks it (port 0)
            return proc
        assert last is not None
        raise last

    def start(self) -> tuple[str, Proc]:
        problem = python_problem() or node_problem()
        if problem is not None:
            raise ScenarioError(problem)
        self.worker = self.start_worker()  # on port 0; a restart takes the same port again
        worker_url = f"http://127.0.0.1:{self.worker_port}"
        self.say("worker", f"@a2a-js/sdk worker ready at {worker_url} (store {self.store.name}/)")
        gw_argv = [sys.executable, str(GATEWAY), "--upstream", worker_url, "--port", "0"]
        if self.config.variant in RESPELLING:
            gw_argv.append("--respell")
        gateway = Proc("gateway", gw_argv, self.work, _child_env({}), DEMO_DIR)
        self.procs.append(gateway)
        gateway_url = gateway.wait_ready(30.0)
        fault = (
            " (fault: --respell, TASK_STATE_WORKING -> Working)" if "--respell" in gw_argv else ""
        )
        self.say("gateway", f"ready at {gateway_url}{fault}")

        prom_port = free_port()
        self.result.metrics_url = f"http://127.0.0.1:{prom_port}/metrics"
        otlp = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        self.result.otlp_endpoint = otlp
        env = _child_env(
            {
                "OTEL_A2A_ENABLED": "true",
                # the dashboard's Jaeger link searches service "orchestrator" by default
                "OTEL_SERVICE_NAME": os.environ.get("OTEL_SERVICE_NAME", "").strip()
                or "orchestrator",
                "OTEL_TRACES_EXPORTER": "console,otlp" if otlp else "console",
                "OTEL_METRICS_EXPORTER": "prometheus,otlp" if otlp else "prometheus",
                "OTEL_LOGS_EXPORTER": "otlp" if otlp else "none",
                "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
                "OTEL_EXPORTER_PROMETHEUS_PORT": str(prom_port),
                "OTEL_METRIC_EXPORT_INTERVAL": str(int(self.t.export_interval * 1000)),
                "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_A2A_DEFAULT_HEARTBEAT": f"{self.t.heartbeat:g}",
                "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false",
            }
        )
        variant = self.config.variant
        timeout = min(self.t.timeout, 3 * self.t.tick) if variant == "spelling" else self.t.timeout
        argv = [
            sys.executable,
            str(ORCHESTRATOR),  # run by path: the orchestrator never imports otel_a2a
            "--agent",
            gateway_url,
            "--binding",
            self.config.binding,
            "--streaming" if self.config.streaming else "--no-streaming",
            "--card-ttl",
            f"{self.t.card_ttl:g}",
            "--tick",
            f"{self.t.tick:g}",
            "--timeout",
            f"{timeout:g}",
            "--poll-interval",
            f"{self.t.poll_interval:g}",
            "--job-seconds",
            f"{self.t.job_seconds:g}",
            "--follow-up-tick",
            "1",
            "--cancel-tick",
            "3" if variant == "healthy" else "0",
            "--timeline",
            str(self.work / "timeline.jsonl"),
            "--hold",
        ]
        if variant == "healthy":
            argv.append("--over-poll")
        orchestrator = Proc("orchestrator", argv, self.work, env, self.work, stdin=subprocess.PIPE)
        self.procs.append(orchestrator)
        return gateway_url, orchestrator

    def restart_worker(self) -> None:
        """Crash the worker mid-task and bring it back on the same port and store."""
        assert self.worker is not None
        variant = self.config.variant
        self.result.restart_at = time.time()
        self.say("worker", "killed mid-task (SIGKILL): the job is in flight")
        self.worker.kill()
        forget = variant == "forget"
        version = "2.0.0" if variant == "redeploy" else "1.0.0"
        self.worker = self.start_worker(forget=forget, card_version=version)
        self.result.restarted_at = time.time()
        if forget:
            what = "restarted with an EMPTY store: it forgot the task"
        elif variant == "redeploy":
            what = "redeployed (card version 2.0.0, same store): task rehydrated as FAILED"
        else:
            what = "restarted on the same store: the in-flight task rehydrated as FAILED"
        self.say("worker", what + "; card still says streaming: true")

    # -- monitoring ---------------------------------------------------------------------------
    def _start_restart(self, errors: list[BaseException]) -> None:
        """Restart the worker on a thread; a failure lands in ``errors`` for the main loop."""

        def restart() -> None:
            try:
                self.restart_worker()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        self.restart_thread = threading.Thread(target=restart, name="restart", daemon=True)
        self.restart_thread.start()

    def monitor(self, orchestrator: Proc) -> None:
        cfg, t = self.config, self.t
        timeline_path = self.work / "timeline.jsonl"
        deadline = time.monotonic() + t.timeout + 60.0
        seen = 0
        restart_error: list[BaseException] = []
        stale_deadline: float | None = None
        next_scrape = 0.0
        finished = False
        while time.monotonic() < deadline:
            lines: list[str] = []
            with contextlib.suppress(OSError):
                lines = timeline_path.read_text("utf-8").splitlines()
            for line in lines[seen:]:
                if not line.endswith("}"):
                    break  # partially written
                seen += 1
                try:
                    step = json.loads(line)
                except ValueError:
                    continue
                self.result.timeline.append(step)
                self._show(step)
                if step.get("step") == "exit":
                    finished = True
                trigger = step.get("step") == "follow_up" and "accepted" in str(step.get("action"))
                if trigger and cfg.variant in RESTARTING and self.restart_thread is None:
                    before = scrape(self.result.metrics_url, timeout=1.0)
                    if before is not None:
                        self.result.stale_before = _sum(before, "a2a_tasks_stale")
                    self._start_restart(restart_error)
                    stale_deadline = time.monotonic() + t.heartbeat + t.export_interval + 5.0
            if stale_deadline is not None and self.result.stale_at is None:
                now = time.monotonic()
                if now >= next_scrape and now <= stale_deadline:
                    next_scrape = now + 0.2
                    samples = scrape(self.result.metrics_url, timeout=1.0)
                    if samples is not None and _sum(samples, "a2a_tasks_stale") > 0:
                        self.result.stale_at = time.time()
                        self.say(
                            "otel-a2a",
                            f"a2a_tasks_stale = {_sum(samples, 'a2a_tasks_stale'):g} "
                            f"(Prometheus {self.result.metrics_url})",
                        )
            if restart_error:
                raise ScenarioError(f"worker restart failed: {restart_error[0]}")
            if finished or not orchestrator.alive():
                break
            time.sleep(0.05)
        if self.restart_thread is not None:
            self.restart_thread.join(timeout=40)
        if restart_error:
            raise ScenarioError(f"worker restart failed: {restart_error[0]}")
        if not finished and orchestrator.alive():
            self.say("scenario", "the orchestrator did not finish in time; stopping it")

    def _show(self, step: Mapping[str, Any]) -> None:
        kind = step.get("step")
        if kind == "stream" and step.get("action") == "stream frame":
            return  # heartbeat frames: too many to show
        text = f"{step.get('action')}  [believes: {step.get('belief')}]"
        if step.get("detail") and kind not in ("start",):
            text += f"  ({step.get('detail')})"
        self.say("orchestrator", text, float(step.get("t", time.time())))

    def finish(self, orchestrator: Proc) -> None:
        samples = scrape(self.result.metrics_url)
        if samples is not None:
            self.result.metrics = samples
        if orchestrator.popen.stdin is not None:
            with contextlib.suppress(OSError):
                orchestrator.popen.stdin.close()  # ends --hold: spans flush at exit
        try:
            self.result.orchestrator_code = orchestrator.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            orchestrator.stop()
            self.result.orchestrator_code = orchestrator.popen.returncode
        orchestrator.stop()
        text = orchestrator.stdout_path.read_text("utf-8", "replace")
        self.result.spans = parse_console_spans(text)
        self.result.divergences = _divergences(self.result.spans)
        for d in self.result.divergences:
            self.say("otel-a2a", _describe(d), d.t)
        for proc in self.procs:
            self.result.logs[proc.name] = proc.stderr_tail(40)
        self.result.port_taken = PORT_TAKEN in orchestrator.stderr_text()

    def run(self) -> ScenarioResult:
        self.result.start = time.time()
        tmp = tempfile.mkdtemp(prefix="otel-a2a-demo-")
        self.work = Path(tmp)
        self.store = self.work / "tasks"
        self.result.workdir = tmp
        try:
            _, orchestrator = self.start()
            self.monitor(orchestrator)
            self.finish(orchestrator)
            self.result.checks = evaluate(self.result)
            self.result.ok = bool(self.result.checks) and all(c.passed for c in self.result.checks)
        finally:
            self.closing.set()
            if self.restart_thread is not None:
                self.restart_thread.join(timeout=40)
            for proc in reversed(self.procs):
                proc.stop()
                self.result.pids.append(proc.popen.pid)
            if not self.config.keep_dir:
                shutil.rmtree(tmp, ignore_errors=True)
        return self.result


def run_scenario(config: ScenarioConfig, progress: Progress | None = None) -> ScenarioResult:
    """Run one variant end to end; every process is stopped before this returns or raises.

    The orchestrator's metrics port is picked free, then bound by the orchestrator: when another
    process took it in between (its telemetry set-up then failed), the run is made again, once.
    """
    result = _Run(config, progress).run()
    if not result.ok and result.port_taken:
        if progress is not None:
            progress("the orchestrator's metrics port was taken meanwhile: running again")
        result = _Run(config, progress).run()
        result.attempts = 2
    return result


# ---------------------------------------------------------------------------------------------
# judging


def _describe(d: Divergence) -> str:
    a = d.attributes
    text = f"a2a.divergence {d.reason} on span '{d.span}'"
    if d.reason == "heartbeat_gap":
        text += (
            f" (last observation {a.get('a2a.task.state')}, "
            f"{float(a.get('a2a.observation.age', 0)):.2f} s old > heartbeat "
            f"{float(a.get('a2a.card.heartbeat_interval', 0)):g} s)"
        )
    elif d.reason == "terminal_state":
        text += f" (last authoritative observation: {a.get('a2a.task.state')})"
    elif d.reason == "etag_changed":
        text += f" (card etag {a.get('a2a.card.etag.observed')} -> {a.get('a2a.card.etag')})"
    elif d.reason == "non_canonical_state":
        raw = d.span_attributes.get("a2a.task.state.raw")
        text += f" (wire spelling {raw!r} accepted as {d.span_attributes.get('a2a.task.state')})"
    elif d.reason == "task_lost":
        text += " (the worker answered TaskNotFound for a task observed working)"
    return text


def _first_learned(result: ScenarioResult, after: float) -> float | None:
    for step in result.timeline:
        t = float(step.get("t", 0.0))
        if t >= after and (step.get("terminal") or step.get("step") == "learned"):
            return t
    return None


def evaluate(result: ScenarioResult) -> list[Check]:
    """Did the detector behave as specified for this variant?"""
    cfg = result.config
    variant, t = cfg.variant, cfg.timings
    checks: list[Check] = []
    exit_steps = [s for s in result.timeline if s.get("step") == "exit"]
    checks.append(
        Check(
            "orchestrator ran to the end",
            bool(exit_steps) and exit_steps[-1].get("code") == 0,
            f"exit step code {exit_steps[-1].get('code') if exit_steps else 'missing'}, "
            f"process exit code {result.orchestrator_code}",
        )
    )
    a2a_spans = [s for s in result.spans if str(s.get("name", "")).startswith("A2A ")]
    checks.append(
        Check(
            "instrumented by OTEL_A2A_ENABLED alone",
            bool(a2a_spans) and bool(result.metrics),
            f"{len(a2a_spans)} 'A2A *' spans, {len(result.metrics)} Prometheus samples",
        )
    )
    decisions = decision_spans(result.spans)

    if variant in RESTARTING:
        restart = result.restart_at
        after = [
            d
            for d in decisions
            if restart is not None and (parse_timestamp(d.get("start_time")) or 0) >= restart
        ]
        expected = EXPECTED_AFTER_RESTART[variant]
        learned = _first_learned(result, restart or 0.0)
        if not after and not cfg.streaming and learned is not None:
            checks.append(
                Check(
                    "first decision after the restart diverges",
                    True,
                    "polling: the orchestrator's own GetTask saw the failure before any decision "
                    "(no stale belief was acted on)",
                )
            )
        elif not after:
            checks.append(Check("first decision after the restart diverges", False, "no decision"))
        else:
            first = after[0]
            reasons = span_reasons(first)
            checks.append(
                Check(
                    "first decision after the restart diverges",
                    bool(reasons) and reasons[0] in expected,
                    f"'{first.get('name')}' raised {reasons or 'nothing'}; "
                    f"expected one of {sorted(expected)}",
                )
            )
        if variant != "redeploy" and cfg.streaming:
            before = result.stale_before
            checks.append(
                Check(
                    "a2a_tasks_stale 0 before the restart, > 0 after it",
                    before == 0 and result.stale_at is not None,
                    f"before: {'not scraped' if before is None else f'{before:g}'}; after: "
                    + ("never seen" if result.stale_at is None else "> 0"),
                )
            )
            limit = t.heartbeat + t.export_interval
            delay = (
                None if result.stale_at is None or restart is None else result.stale_at - restart
            )
            checks.append(
                Check(
                    "a2a_tasks_stale > 0 within heartbeat + export interval",
                    delay is not None and delay <= limit,
                    "never seen"
                    if delay is None
                    else f"seen {delay:.2f} s after the restart (limit {limit:g} s)",
                    timing=True,
                )
            )
        if variant == "forget":
            lost = [d for d in result.divergences if d.reason == "task_lost"]
            checks.append(
                Check(
                    "task_lost raised",
                    bool(lost),
                    f"on '{lost[0].span}'" if lost else f"reasons seen: {result.reasons()}",
                )
            )
        detections = [d.t for d in result.divergences if restart is not None and d.t >= restart]
        if result.stale_at is not None:
            detections.append(result.stale_at)
        result.detected_at = min(detections) if detections else None
        result.baseline_at = _first_learned(result, restart or 0.0)

    if variant in RESPELLING:
        carried = [
            d
            for d in result.divergences
            if d.reason == "non_canonical_state"
            and not str(d.span_attributes.get("a2a.task.state.raw", "TASK_STATE_")).startswith(
                "TASK_STATE_"
            )
        ]
        checks.append(
            Check(
                "non_canonical_state on the observation that carried it",
                bool(carried),
                f"on '{carried[0].span}' (a2a.task.state.raw="
                f"{carried[0].span_attributes.get('a2a.task.state.raw')!r})"
                if carried
                else f"reasons seen: {result.reasons()}",
            )
        )
        if variant == "spelling":
            result.detected_at = carried[0].t if carried else None
            result.baseline_at = _first_learned(result, 0.0)

    if variant == "healthy":
        counted = _sum(result.metrics, "a2a_divergence_total")
        checks.append(
            Check(
                "zero divergences (no false positive)",
                not result.divergences and counted == 0,
                f"{len(result.divergences)} span events {result.reasons()}, "
                f"a2a_divergence_total = {counted:g}",
            )
        )
        authoritative = result.metric(
            "a2a_liveness_decisions_total", a2a_decision_outcome="authoritative"
        )
        checks.append(
            Check(
                "liveness decisions judged authoritative",
                authoritative > 0 and len(decisions) > 0,
                f"{len(decisions)} decision spans, a2a_liveness_decisions_total"
                f"{{outcome=authoritative}} = {authoritative:g}",
            )
        )
        redundant = _sum(result.metrics, "a2a_task_get_redundant_total")
        checks.append(
            Check(
                "over-polling counted in a2a_task_get_redundant_total",
                redundant > 0,
                f"a2a_task_get_redundant_total = {redundant:g}",
            )
        )
    return checks


# ---------------------------------------------------------------------------------------------
# rendering


def render(result: ScenarioResult, out: IO[str] | None = None) -> None:
    """The timeline, the summary table and where to look."""
    w = out or sys.stdout
    cfg = result.config
    start = result.start or (result.marks[0].t if result.marks else time.time())

    def rel(t: float) -> float:
        return t - start

    def line(text: str = "") -> None:
        w.write(text + "\n")

    t = cfg.timings
    line()
    line(
        f"== otel-a2a demo: variant {cfg.variant}, binding {cfg.binding}, "
        f"{'streaming' if cfg.streaming else 'polling'}; heartbeat {t.heartbeat:g} s, "
        f"card TTL {t.card_ttl:g} s, decision every {t.tick:g} s =="
    )
    line()
    line("Timeline (seconds since the scenario started)")
    for mark in sorted(result.marks, key=lambda m: m.t):
        line(f"  {rel(mark.t):7.2f}  {mark.side:<12} {mark.text}")
    line()
    line("Summary")
    rows: list[tuple[str, str, str]] = []
    restart = result.restart_at
    if restart is not None:
        worker_view = {
            "forget": "task unknown (empty store)",
            "redeploy": "failed (rehydrated), new card",
        }.get(cfg.variant, "failed (rehydrated on restart)")
        rows.append(("worker", "working", f"until {rel(restart):.2f} (killed)"))
        back = result.restarted_at or restart
        rows.append(("worker", worker_view, f"from {rel(back):.2f} (back up)"))
    beliefs: list[tuple[str, float]] = []
    for step in result.timeline:
        belief = str(step.get("belief"))
        if belief == "none":
            continue
        if not beliefs or beliefs[-1][0] != belief:
            beliefs.append((belief, float(step.get("t", start))))
    for belief, since in beliefs:
        rows.append(("orchestrator", belief, f"from {rel(since):.2f}"))
    seen_reasons: dict[str, Divergence] = {}
    for d in result.divergences:
        seen_reasons.setdefault(d.reason, d)
    for reason, d in seen_reasons.items():
        count = sum(1 for x in result.divergences if x.reason == reason)
        rows.append(("otel-a2a", f"{reason} x{count} ({d.operation})", f"first at {rel(d.t):.2f}"))
    if result.stale_at is not None:
        rows.append(("otel-a2a", "a2a_tasks_stale > 0", f"at {rel(result.stale_at):.2f}"))
    if not result.divergences:
        rows.append(("otel-a2a", "no divergence", "-"))
    width = max(len(r[1]) for r in rows) if rows else 10
    line(f"  {'side':<13} {'believed / raised':<{width}}  when (s)")
    for side, what, when in rows:
        line(f"  {side:<13} {what:<{width}}  {when}")
    line()
    if result.detected_at is not None or result.baseline_at is not None:
        origin = restart if restart is not None else start
        what = "the restart" if restart is not None else "the start"
        det = "-" if result.detected_at is None else f"{result.detected_at - origin:.2f} s"
        base = (
            "never (it still believes the task is live)"
            if result.baseline_at is None
            else f"{result.baseline_at - origin:.2f} s"
        )
        line(f"Time to detection after {what}: otel-a2a {det}; uninstrumented baseline {base}")
        line("  (the baseline learns only from a response that says so, or at its own timeout)")
        line()
    redundant = _sum(result.metrics, "a2a_task_get_redundant_total")
    decisions = _sum(result.metrics, "a2a_liveness_decisions_total")
    divergences = _sum(result.metrics, "a2a_divergence_total")
    line(
        f"Metrics at the end: a2a_divergence_total={divergences:g} "
        f"a2a_liveness_decisions_total={decisions:g} a2a_task_get_redundant_total={redundant:g} "
        f"a2a_tasks_stale={_sum(result.metrics, 'a2a_tasks_stale'):g}"
    )
    line()
    line("Checks")
    for check in result.checks:
        line(f"  [{'PASS' if check.passed else 'FAIL'}] {check.name}: {check.detail}")
    line()
    line("Where to look")
    line(
        f"  spans:   console (the orchestrator's stdout; {len(result.spans)} spans, "
        "events named a2a.divergence)"
        + (f"; also OTLP to {result.otlp_endpoint}" if result.otlp_endpoint else "")
    )
    line(f"  metrics: {result.metrics_url} (Prometheus, served by the orchestrator while it ran)")
    if cfg.keep_dir:
        line(f"  files:   {result.workdir} (timeline.jsonl, orchestrator.out, *.err, tasks/)")
    line()
    if result.attempts > 1:
        line("(run twice: the orchestrator's metrics port was taken before it bound it)")
    line(f"RESULT: {'PASS' if result.ok else 'FAIL'}")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so that clean-up runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(config: ScenarioConfig, quiet: bool = False) -> int:
    """Run, print, and return the exit code (0: the detector behaved as specified)."""

    def progress(text: str) -> None:
        print(text, flush=True)

    if not quiet:
        print(
            f"otel-a2a demo: variant {config.variant} over {config.binding}; starting the worker "
            "(Node), the gateway and the instrumented orchestrator ...",
            flush=True,
        )
    try:
        with _sigterm_as_interrupt():
            result = run_scenario(config, None if quiet else progress)
    except KeyboardInterrupt:
        print("interrupted: every process was stopped", file=sys.stderr)
        return 130
    except ScenarioError as exc:
        print(f"otel-a2a demo could not run: {exc}", file=sys.stderr)
        return 2
    render(result)
    if not result.ok:
        for name, text in result.logs.items():
            if text.strip():
                print(f"--- {name} stderr (last lines) ---\n{text}", file=sys.stderr)
    return 0 if result.ok else 1
