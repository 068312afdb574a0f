"""How long a process instrumented by ``OTEL_A2A_ENABLED=true`` takes to exit when no collector
listens (target: 1 s after its last line).

The child (``_exit_child.py``) exports traces and metrics to the console and leaves logs at the
OTLP default, pointed at a loopback port nobody listens on; its one ``otel_a2a.divergence`` log
record then meets the exporter's retry schedule (about 7 s) at exit. The figure is the time
from the child's last line (``DONE``) to its exit, median of ``RUNS``; the same with logs off
is the floor every exit pays (interpreter teardown, the final metric export). A third run sends
all three signals to that port (``OTEL_*_EXPORTER`` unset: the OTLP default).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench import Row, check, median

RUNS = 3
TARGET_S = 1.0
CHILD = Path(__file__).with_name("_exit_child.py")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _exit_delay(env: dict[str, str]) -> tuple[float, str]:
    """Seconds from the child's ``DONE`` to its exit, and its stderr."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    done = None
    for line in child.stdout:
        if line.startswith("DONE"):
            done = time.perf_counter()
            break
    _, err = child.communicate(timeout=120)
    if done is None or child.returncode != 0:
        raise RuntimeError(f"the exit child failed ({child.returncode}): {err[-2000:]}")
    return time.perf_counter() - done, err


def run() -> list[Row]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    base.update(
        OTEL_A2A_ENABLED="true",
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="console",
        OTEL_SERVICE_NAME="bench-exit",
    )
    closed = {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    variants = {
        "closed": closed,
        "all": {k: v for k, v in closed.items() if not k.endswith("_EXPORTER")},
        "off": {**base, "OTEL_LOGS_EXPORTER": "none"},
    }
    delays: dict[str, list[float]] = {key: [] for key in variants}
    lines: dict[str, list[int]] = {key: [] for key in variants}
    for _ in range(RUNS):  # interleaved: every variant sees the same machine load
        for key, env in variants.items():
            delay, err = _exit_delay(env)
            delays[key].append(delay)
            lines[key].append(len(err.splitlines()))
    return [
        check(
            f"exit: last line to exit, logs to a closed OTLP port, median of {RUNS} (s)",
            median(delays["closed"]),
            ".2f",
            TARGET_S,
        ),
        Row("  stderr lines per run", "/".join(map(str, lines["closed"]))),
        check(
            "exit: the same, traces, metrics and logs to that port (s)",
            median(delays["all"]),
            ".2f",
            TARGET_S,
        ),
        Row("  stderr lines per run", "/".join(map(str, lines["all"]))),
        Row(
            "exit: logs off, traces and metrics to the console: the floor (s)",
            f"{median(delays['off']):.2f}",
        ),
    ]
