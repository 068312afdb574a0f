"""``otel-a2a detector`` against the project's own collector, side by side on the same traffic.

120,000 A2A spans of three services (:mod:`bench._otlp_traffic`), as OTLP/HTTP protobuf
requests of 512 spans, sent over one keep-alive connection to each receiver in turn: the
detector at its defaults, then the built collector (``.tools/bin/otelcol-a2a``, an ``otlp``
receiver into a ``debug`` exporter, its own telemetry off). Each process's CPU (user +
system, every thread, from ``/proc``) over the traffic, divided by the spans; both warmed up
by one request per service first (imports, first allocations). Three rounds, the two
interleaved; the medians are compared. The detector's peak RSS is reported too.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench import Row, check, median
from bench._otlp_traffic import bodies

SPANS = 120_000
WARMUP_SPANS = 1_536  # one request per service, tasks of their own
RATIO_TARGET = 5.0
ROUNDS = 3
DEADLINE = 60.0
REPO = Path(__file__).resolve().parents[1]
OTELCOL = REPO / ".tools" / "bin" / "otelcol-a2a"
COLLECTOR_CONFIG = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
"""
MIB = 1024 * 1024
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """Seconds of CPU ``pid`` used so far, every thread, user and system."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        line = next(x for x in status if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _send(port: int, requests: list[bytes]) -> None:
    """Every request over one keep-alive connection, each answered 200 before the next."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        for body in requests:
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            answer = conn.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"answered {answer.status}")
    finally:
        conn.close()


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.05)
    raise RuntimeError("not listening in time")


@contextlib.contextmanager
def _process(argv: list[str], port: int) -> Iterator[int]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=DEADLINE)


def _cpu_per_span(
    argv: list[str], port: int, warmup: list[bytes], traffic: list[bytes]
) -> tuple[float, int]:
    """µs of CPU per span, and the peak RSS."""
    with _process(argv, port) as pid:
        _send(port, warmup)
        before = _cpu(pid)
        _send(port, traffic)
        used = _cpu(pid) - before
        return used / SPANS * 1e6, _peak_rss(pid)


def run() -> list[Row]:
    if not OTELCOL.is_file():
        return [Row("detector speed: skipped, .tools/bin/otelcol-a2a missing (make tools)", "-")]
    warmup = bodies(WARMUP_SPANS, first_task=10_000_000)
    traffic = bodies(SPANS)
    detector: list[float] = []
    collector: list[float] = []
    rss: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "otelcol.yaml"
        for _ in range(ROUNDS):  # interleaved: a load that comes and goes hits both
            port = _free_port()
            argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", str(port)]
            us, peak = _cpu_per_span(argv, port, warmup, traffic)
            detector.append(us)
            rss.append(peak)
            port = _free_port()
            config.write_text(COLLECTOR_CONFIG.format(port=port))
            argv = [str(OTELCOL), f"--config=file:{config}"]
            collector.append(_cpu_per_span(argv, port, warmup, traffic)[0])
    ratios = sorted(d / c for d, c in zip(detector, collector, strict=True))
    detector_us, collector_us = median(detector), median(collector)
    return [
        Row(
            f"detector speed: {SPANS:,} A2A spans, 3 services, protobuf, one connection",
            f"{len(traffic)} requests",
        ),
        Row(
            f"detector speed: otel-a2a detector, CPU per span, median of {ROUNDS} (us)",
            f"{detector_us:.1f}",
        ),
        Row(
            f"detector speed: otelcol-a2a otlp -> debug, CPU per span, median of {ROUNDS} (us)",
            f"{collector_us:.2f}",
        ),
        check(
            "detector speed: detector / collector CPU per span",
            detector_us / collector_us,
            ".1f",
            RATIO_TARGET,
            "x",
        ),
        Row("  per-round ratios", " ".join(f"{r:.1f}" for r in ratios)),
        Row("  detector spans per CPU second", f"{1e6 / detector_us:,.0f}"),
        Row("  detector peak RSS (MiB)", f"{max(rss) / MIB:.0f}"),
    ]


if __name__ == "__main__":
    from bench import format_table

    print(format_table(run()))
