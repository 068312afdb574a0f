"""The demo's a2a-sdk worker (``demo/python_worker.py``) as a subprocess of a test, and what
it exported: its spans (OTLP JSON lines) and its log records (JSON lines)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from demo.processes import DEMO_DIR

WORKER = DEMO_DIR / "python_worker.py"
REPO = DEMO_DIR.parent
DEADLINE = 20.0  # seconds: a condition not met by then fails the test


def poll(done: Callable[[], Any], what: str) -> Any:
    """Wait until ``done()`` gives something true (and return it), with a deadline."""
    deadline = time.monotonic() + DEADLINE
    while not (found := done()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


class Worker:
    """One worker process on ``store``, writing to ``spans``."""

    def __init__(self, store: Path, spans: Path, *extra: str, env: dict[str, str]) -> None:
        argv = [sys.executable, str(WORKER), "--store", str(store), "--spans", str(spans)]
        child = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **env}
        self.spans = spans
        self.proc = subprocess.Popen(
            [*argv, *extra], cwd=REPO, env=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()  # READY, or EOF if it exited
        if not line.startswith("READY "):
            self.proc.wait(timeout=10)
            raise AssertionError(f"no READY: {self.proc.stderr.read().decode()}")  # type: ignore[union-attr]
        self.url = line.split(" ", 1)[1].strip()
        self.rpc = self.url + "/a2a/jsonrpc"

    def kill(self) -> None:
        """SIGKILL: a crash mid-task, nothing flushed or closed."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def spans(path: Path) -> Iterator[dict[str, Any]]:
    """Every span in an OTLP JSON lines file, with its attributes as a dict (``attrs``) and
    its service (``service``)."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            resource = _attrs(rs.get("resource", {}).get("attributes", []))
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["attrs"] = _attrs(span.get("attributes", []))
                    span["service"] = resource.get("service.name")
                    for event in span.get("events", []):
                        event["attrs"] = _attrs(event.get("attributes", []))
                    yield span


def _attrs(items: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        value = item["value"]
        if "arrayValue" in value:
            out[item["key"]] = [next(iter(v.values())) for v in value["arrayValue"]["values"]]
        else:
            out[item["key"]] = next(iter(value.values()))
    return out


def findings(path: Path) -> list[dict[str, Any]]:
    """The ``otel_a2a.task.unfinished`` spans."""
    return [s for s in spans(path) if s["name"] == "otel_a2a.task.unfinished"]


def logs(path: Path) -> list[dict[str, Any]]:
    logs_path = Path(f"{path}.logs")
    if not logs_path.exists():
        return []
    return [json.loads(line) for line in logs_path.read_text().splitlines()]
