"""The seeded incident end to end: real processes on loopback, in a temporary folder.

Topology: orchestrator (Python a2a-sdk client, instrumented only by ``OTEL_A2A_ENABLED=true``)
→ gateway (Python, or Go on a2a-go: ``ScenarioConfig.gateway``) → worker (``@a2a-js/sdk``
under Node, the A2A Java SDK, or a2a-sdk in Python, the last one instrumented by
``OTEL_A2A_ENABLED=true`` too: ``ScenarioConfig.worker``), its tasks in a durable store.

:func:`run_scenario` starts the three processes on free ports (``processes``), plays one
variant, collects what fired (the orchestrator's console spans and its Prometheus
``/metrics``), judges it against the specification (``evaluation``) and returns a
:class:`ScenarioResult`; :func:`main` prints it (``rendering``). ``python -m demo`` and the
end-to-end tests (``tests/e2e``) both go through here: ``__all__`` is the demo's public entry.

Variants:

- ``restart``: the worker is killed mid-task (SIGKILL) and started again on the same store; it
  rehydrates the task as failed while its card keeps advertising ``streaming: true`` (the
  Python worker brings it back ``working`` with nothing running it: otel-a2a on the worker
  reports it, ``otel_a2a.task.unfinished``);
- ``forget``: the same, but the worker comes back with an empty store (``task_lost``);
- ``spelling``: the gateway re-spells task states (``Working``): ``non_canonical_state``;
- ``both``: ``restart`` and ``spelling`` together;
- ``redeploy``: the worker comes back with a new card version (``etag_changed``);
- ``follow-up``: the ``restart`` fault once the job runs, and the orchestrator's follow-up
  after it: the gateway routes it to the task the worker rehydrated, a decision on a task it
  has not observed since the restart (``otel-a2a detector`` judges it from the gateway's spans);
- ``healthy``: no fault; the orchestrator over-polls (zero divergences, redundant GetTask).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from demo.evaluation import divergences, judge, parse_console_spans, scrape, unfinished
from demo.model import (
    KEEPS_WORKING,
    LATE_FOLLOW_UP,
    OBSERVED_WORKERS,
    RESPELLING,
    RESTARTING,
    Mark,
    ScenarioConfig,
    ScenarioResult,
    Timings,
    not_applicable,
    total,
)
from demo.processes import (
    GATEWAYS,
    ORCHESTRATOR,
    WORKERS,
    Children,
    Proc,
    ScenarioError,
    child_env,
    free_port,
    orchestrator_problem,
)
from demo.rendering import describe, describe_unfinished, render

__all__ = [
    "ScenarioConfig",
    "ScenarioResult",
    "Timings",
    "main",
    "problem",
    "render",
    "run_scenario",
]

# the orchestrator's log when its Prometheus exporter could not bind (otel-a2a's set-up warning)
PORT_TAKEN = "could not set up OpenTelemetry (OSError: [Errno 98] Address already in use)"
WORKER_ATTEMPTS = 20  # the port of a killed worker may need a moment to be free again
Progress = Callable[[str], None]


def problem(config: ScenarioConfig) -> str | None:
    """Why ``config`` cannot run here (a missing runtime or package, a combination that does
    not apply), or None."""
    return (
        not_applicable(config.variant, config.binding, config.gateway)
        or orchestrator_problem(config.binding)
        or GATEWAYS[config.gateway].problem()
        or WORKERS[config.worker].problem()
    )


class _Run:
    def __init__(self, config: ScenarioConfig, progress: Progress | None) -> None:
        self.config = config
        self.t = config.timings
        self.progress = progress
        self.result = ScenarioResult(config=config)
        self.worker_kind = WORKERS[config.worker]
        self.gateway_kind = GATEWAYS[config.gateway]
        self.work = Path(tempfile.mkdtemp(prefix="otel-a2a-demo-"))  # removed by run()
        self.children = Children(self.work)
        self.store = self.work / "tasks"
        self.result.workdir = str(self.work)
        self.worker: Proc | None = None
        self.worker_port = 0
        self.lock = threading.Lock()
        self.restart_thread: threading.Thread | None = None
        self.otlp = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()

    def say(self, side: str, text: str, t: float | None = None) -> None:
        now = time.time() if t is None else t
        with self.lock:
            self.result.marks.append(Mark(now, side, text))
        if self.progress is not None:
            start = self.result.start or now
            self.progress(f"[{now - start:6.2f}s] {side:<12} {text}")

    # -- processes ----------------------------------------------------------------------------
    def start_worker(self, *, forget: bool = False, card_version: str = "1.0.0") -> Proc:
        argv = self.worker_kind.argv(
            self.worker_port, self.store, self.t, forget=forget, card_version=card_version
        )
        env = child_env(self.worker_kind.env(self.t, otlp=bool(self.otlp)))
        proc, base = self.children.start_ready(
            "worker", argv, self.worker_kind.cwd, attempts=WORKER_ATTEMPTS, env=env
        )
        self.worker_port = int(base.rsplit(":", 1)[1])  # the first start picks it (port 0)
        return proc

    def start(self) -> Proc:
        reason = problem(self.config)
        if reason is not None:
            raise ScenarioError(reason)
        self.worker = self.start_worker()  # on port 0; a restart takes the same port again
        worker_url = f"http://127.0.0.1:{self.worker_port}"
        self.say(
            "worker",
            f"{self.worker_kind.label} ready at {worker_url} (store {self.store.name}/)",
        )
        respell = self.config.variant in RESPELLING
        grpc = self.config.binding == "GRPC"
        gw_argv = self.gateway_kind.argv(worker_url, respell=respell, grpc=grpc)
        _, gateway_url = self.children.start_ready("gateway", gw_argv, self.gateway_kind.cwd)
        fault = " (fault: --respell, TASK_STATE_WORKING -> Working)" if respell else ""
        self.say("gateway", f"ready at {gateway_url}{fault}")

        prom_port = free_port()
        self.result.metrics_url = f"http://127.0.0.1:{prom_port}/metrics"
        otlp = self.result.otlp_endpoint = self.otlp
        env = child_env(
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
            "2" if variant in LATE_FOLLOW_UP else "1",
            "--cancel-tick",
            "3" if variant == "healthy" else "0",
            "--timeline",
            str(self.work / "timeline.jsonl"),
            "--hold",
        ]
        if variant == "healthy":
            argv.append("--over-poll")
        return self.children.start("orchestrator", argv, self.work, env, stdin=subprocess.PIPE)

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
        back = (
            "back as WORKING, nothing runs it"
            if self.config.worker in KEEPS_WORKING
            else "rehydrated as FAILED"
        )
        if forget:
            what = "restarted with an EMPTY store: it forgot the task"
        elif variant == "redeploy":
            what = f"redeployed (card version 2.0.0, same store): task {back}"
        else:
            what = f"restarted on the same store: the in-flight task {back}"
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
                trigger = (
                    step.get("step") == "start"
                    if cfg.variant in LATE_FOLLOW_UP
                    else step.get("step") == "follow_up" and "accepted" in str(step.get("action"))
                )
                if trigger and cfg.variant in RESTARTING and self.restart_thread is None:
                    before = scrape(self.result.metrics_url, timeout=1.0)
                    if before is not None:
                        self.result.stale_before = total(before, "otel_a2a_task_stale")
                    self._start_restart(restart_error)
                    stale_deadline = time.monotonic() + t.heartbeat + t.export_interval + 5.0
            if stale_deadline is not None and self.result.stale_at is None:
                now = time.monotonic()
                if now >= next_scrape and now <= stale_deadline:
                    next_scrape = now + 0.2
                    samples = scrape(self.result.metrics_url, timeout=1.0)
                    if samples is not None and total(samples, "otel_a2a_task_stale") > 0:
                        self.result.stale_at = time.time()
                        self.say(
                            "otel-a2a",
                            f"otel_a2a_task_stale = {total(samples, 'otel_a2a_task_stale'):g} "
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
        self.result.divergences = divergences(self.result.spans)
        for d in self.result.divergences:
            self.say("otel-a2a", describe(d), d.t)
        if self.config.worker in OBSERVED_WORKERS:
            self._read_workers()
        for proc in self.children.procs:
            self.result.logs[proc.name] = proc.stderr_tail(40)
        self.result.port_taken = PORT_TAKEN in orchestrator.stderr_text()

    def _read_workers(self) -> None:
        """The instrumented workers' findings, from their console spans (stopped first: their
        spans flush at exit)."""
        for proc in self.children.procs:
            if not proc.name.startswith("worker"):
                continue
            proc.stop()
            text = proc.stdout_path.read_text("utf-8", "replace")
            self.result.unfinished.extend(unfinished(parse_console_spans(text), proc.name))
        self.result.unfinished.sort(key=lambda u: u.t)
        for u in self.result.unfinished:
            self.say("otel-a2a", describe_unfinished(u), u.t)

    def run(self) -> ScenarioResult:
        self.result.start = time.time()
        try:
            orchestrator = self.start()
            self.monitor(orchestrator)
            self.finish(orchestrator)
            judge(self.result)
        finally:
            self.children.closing.set()
            if self.restart_thread is not None:
                self.restart_thread.join(timeout=40)
            self.result.pids.extend(self.children.stop_all())
            if not self.config.keep_dir:
                shutil.rmtree(self.work, ignore_errors=True)
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


def main(config: ScenarioConfig, quiet: bool = False, html: str | None = None) -> int:
    """Run, print, and return the exit code (0: the detector behaved as specified); with
    ``html`` the run's timeline page is written there first (the report says where)."""

    def progress(text: str) -> None:
        print(text, flush=True)

    if not quiet:
        runtime = WORKERS[config.worker].runtime
        gateway = GATEWAYS[config.gateway].runtime
        print(
            f"otel-a2a demo: variant {config.variant} over {config.binding}; starting the worker "
            f"({runtime}), the gateway ({gateway}) and the instrumented orchestrator ...",
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
    if html:
        from demo.page import page

        try:
            path = Path(html).resolve()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page(result), encoding="utf-8")
            result.page = str(path)
        except OSError as exc:
            print(f"otel-a2a demo: cannot write the page: {exc}", file=sys.stderr)
    render(result)
    if not result.ok:
        for name, text in result.logs.items():
            if text.strip():
                print(f"--- {name} stderr (last lines) ---\n{text}", file=sys.stderr)
    return 0 if result.ok else 1
