"""Run real Prometheus and Alertmanager (Debian packages) on 127.0.0.1 for tests.

Everything binds loopback on free ports inside a temporary directory, is polled with a
deadline (never slept on), and is stopped by its own PID. Under ``CI=true`` a missing binary
fails the test instead of skipping it: CI installs them (Makefile target ``.stamp-apt``).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.support import free_port, in_ci

T = TypeVar("T")

PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
ALERTMANAGER = "prometheus-alertmanager"  # Debian's name for the alertmanager binary


def require_binary(name: str) -> str:
    """Path of ``name``; fails under CI=true, skips locally, when it is not installed."""
    path = shutil.which(name)
    if path:
        return path
    msg = (
        f"{name} not found on PATH: install it with `make .stamp-apt` "
        "(apt-get install prometheus prometheus-alertmanager)"
    )
    if in_ci():
        pytest.fail(f"{msg}; CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(msg)


class Timeout(AssertionError):
    pass


class Fatal(RuntimeError):
    """A condition no amount of waiting will change."""


def poll(
    fn: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> T:
    """Call ``fn`` until it returns something truthy, or fail after ``timeout`` seconds.

    Exceptions from ``fn`` count as "not yet" and the last one is reported on timeout, except
    :class:`Fatal`, which ends the wait at once (a process that died will not come up).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = fn()
            if value:
                return value
            last = value
        except Fatal:
            raise
        except Exception as exc:  # reported below when the deadline passes
            last = exc
        if time.monotonic() >= deadline:
            raise Timeout(f"timed out after {timeout:.1f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


@dataclass
class ManagedProcess:
    """A child process with its output in a log file; ``stop()`` terminates then kills it."""

    name: str
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("wb")
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise Fatal(
                f"{self.name} exited with status {self.proc.returncode}:\n{self.log_tail()}"
            )

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _wait_ready(process: ManagedProcess, url: str, timeout: float) -> None:
    def ready() -> bool:
        process.check_alive()  # a crash is reported at once, with its log
        status, _ = http_get(url, timeout=1.0)
        return status == 200

    try:
        poll(ready, timeout=timeout, what=f"{process.name} at {url}", interval=0.05)
    except Timeout as exc:
        raise Timeout(f"{exc}\n--- {process.name} log ---\n{process.log_tail()}") from None


def _launch(
    name: str,
    executable: str,
    workdir: Path,
    config: dict[str, Any],
    port: int,
    flags: Sequence[str],
    timeout: float,
) -> tuple[int, ManagedProcess]:
    """Write ``config``, start the Prometheus-family daemon on 127.0.0.1, wait for ``/-/ready``."""
    binary = require_binary(executable)
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"{name}.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    chosen = port
    for attempt in range(3):
        # a port picked free may be taken before the daemon binds it: pick again then
        port = chosen or free_port()
        argv = [
            binary,
            f"--config.file={config_path}",
            *flags,
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
        process = ManagedProcess(name, argv, workdir / f"{name}.{attempt}.log")
        process.start()
        try:
            _wait_ready(process, f"http://127.0.0.1:{port}/-/ready", timeout)
        except Fatal:
            if chosen or attempt == 2 or "address already in use" not in process.log_tail():
                raise
            continue
        return port, process
    raise AssertionError("unreachable")


class PromQueryError(AssertionError):
    pass


@dataclass
class Prometheus:
    """A real Prometheus scraping ``targets`` every second and evaluating ``rule_files``."""

    workdir: Path
    targets: Sequence[str]
    rule_files: Sequence[Path] = ()
    alertmanager: str | None = None
    interval: str = "1s"
    port: int = 0
    process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval},
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {"job_name": "otel-a2a", "static_configs": [{"targets": list(self.targets)}]}
            ],
        }
        if self.alertmanager:
            cfg["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]
            }
        return cfg

    def start(self, timeout: float = 20.0) -> Prometheus:
        storage = f"--storage.tsdb.path={self.workdir / 'data'}"
        self.port, self.process = _launch(
            "prometheus", PROMETHEUS, self.workdir, self.config(), self.port, [storage], timeout
        )
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def api(self, path: str, params: Sequence[tuple[str, str]] = ()) -> Any:
        query = urllib.parse.urlencode(list(params))
        status, body = http_get(f"{self.url}/api/v1/{path}" + (f"?{query}" if query else ""))
        try:
            doc = json.loads(body)
        except ValueError:
            raise PromQueryError(f"GET {path}: HTTP {status}, not JSON: {body[:200]!r}") from None
        if doc.get("status") != "success":
            raise PromQueryError(
                f"GET {path} {dict(params)}: {doc.get('errorType')}: {doc.get('error')}"
            )
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; raises PromQueryError on a parse or evaluation error."""
        data = self.api("query", [("query", expr)])
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def wait_for(
        self,
        expr: str,
        predicate: Callable[[list[dict[str, Any]]], bool] = bool,
        *,
        timeout: float = 20.0,
        what: str | None = None,
    ) -> list[dict[str, Any]]:
        """Poll ``expr`` until ``predicate(result)`` holds. A query error fails at once."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while True:
            result = self.query(expr)  # PromQueryError propagates: polling can't fix syntax
            if predicate(result):
                return result
            if time.monotonic() >= deadline:
                raise Timeout(
                    f"timed out after {timeout:.1f}s waiting for {what or expr!r}; "
                    f"last result: {result!r}"
                )
            time.sleep(0.2)

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def rule_groups(self) -> list[dict[str, Any]]:
        return list(self.api("rules")["groups"])


def finite_values(result: list[dict[str, Any]]) -> list[float]:
    """The finite sample values of an instant-query result (NaN/Inf dropped)."""
    out = []
    for series in result:
        v = float(series["value"][1])
        if math.isfinite(v):
            out.append(v)
    return out


@dataclass
class Alertmanager:
    """A real Alertmanager (clustering off) whose only receiver is ``webhook_url``."""

    workdir: Path
    webhook_url: str
    inhibit_rules: list[dict[str, Any]] = field(default_factory=list)
    group_by: Sequence[str] = ("alertname",)
    port: int = 0
    process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        return {
            "route": {
                "receiver": "webhook",
                "group_by": list(self.group_by),
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [
                {
                    "name": "webhook",
                    "webhook_configs": [{"url": self.webhook_url, "send_resolved": True}],
                }
            ],
            "inhibit_rules": self.inhibit_rules,
        }

    def start(self, timeout: float = 20.0) -> Alertmanager:
        flags = [
            f"--storage.path={self.workdir / 'data'}",
            "--cluster.listen-address=",  # no gossip port on 0.0.0.0:9094
        ]
        self.port, self.process = _launch(
            "alertmanager", ALERTMANAGER, self.workdir, self.config(), self.port, flags, timeout
        )
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts Alertmanager holds, with their status (``inhibitedBy``, ``silencedBy``)."""
        status, body = http_get(f"{self.url}/api/v2/alerts")
        if status != 200:
            raise AssertionError(f"alertmanager /api/v2/alerts: HTTP {status}: {body[:200]!r}")
        return list(json.loads(body))


class WebhookReceiver:
    """Collects the JSON bodies Alertmanager POSTs, on 127.0.0.1 in a background thread."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = {"unparsable": body.decode(errors="replace")}
                with receiver._cond:
                    receiver.payloads.append(doc)
                    receiver._cond.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], bool], *, timeout: float, what: str
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                alerts = [a for p in self.payloads for a in p.get("alerts", [])]
                if predicate(alerts):
                    return alerts
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Timeout(
                        f"timed out after {timeout:.1f}s waiting for {what}; "
                        f"received: {json.dumps(alerts)[:2000]}"
                    )
                self._cond.wait(remaining)


def run_promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    binary = require_binary(PROMTOOL)
    return subprocess.run(
        [binary, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
