"""``python -m bench`` (``make bench``): run every benchmark, print one table, exit 0.

A benchmark that misses its target or even crashes is reported in the table, never as a
failing exit status: benchmarks inform, they do not gate the build.
"""

from __future__ import annotations

import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from importlib.metadata import version

from bench import Row, check, format_table

LEDGER_BYTES_TARGET = 250.0
LEDGER_US_TARGET = 2.0


def _ledger() -> list[Row]:
    """``bench_ledger.run()`` rows, (name, figure) pairs, with the issue's targets attached."""
    from bench import bench_ledger

    rows: list[Row] = []
    for name, figure in bench_ledger.run():
        if name == "python":
            continue  # in the machine notes
        label = f"ledger: {name}"
        if name.startswith("bytes/task"):
            rows.append(check(label, float(figure), ".1f", LEDGER_BYTES_TARGET))
        elif name.startswith("us/"):
            rows.append(check(label, float(figure), ".2f", LEDGER_US_TARGET))
        else:
            rows.append(Row(label, figure))
    return rows


def _suites() -> list[tuple[str, Callable[[], list[Row]]]]:
    from bench import (
        bench_detector,
        bench_detector_speed,
        bench_e2e,
        bench_exit,
        bench_grpc,
        bench_incident,
        bench_instructions,
        bench_large_body,
        bench_overhead,
        bench_protocol,
        bench_shared_ledger,
        bench_startup,
    )

    return [
        ("protocol", bench_protocol.run),
        ("overhead", bench_overhead.run),
        ("instructions", bench_instructions.run),
        ("grpc", bench_grpc.run),
        ("e2e", bench_e2e.run),
        ("large body", bench_large_body.run),
        ("startup", bench_startup.run),
        ("exit", bench_exit.run),
        ("ledger", _ledger),
        ("shared ledger", bench_shared_ledger.run),
        ("incident", bench_incident.run),
        ("detector", bench_detector.run),
        ("detector speed", bench_detector_speed.run),
    ]


def _notes() -> list[str]:
    sdk = version("opentelemetry-sdk")
    httpx_inst = version("opentelemetry-instrumentation-httpx")
    grpc_inst = version("opentelemetry-instrumentation-grpc")
    return [
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}, nproc {os.cpu_count()}, "
        f"load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())} at start",
        f"opentelemetry-sdk {sdk}, opentelemetry-instrumentation-httpx {httpx_inst}, "
        f"httpx {version('httpx')}, opentelemetry-instrumentation-grpc {grpc_inst}, "
        f"grpcio {version('grpcio')}, otel-a2a {version('otel-a2a')}",
    ]


def main() -> int:
    notes = _notes()
    rows: list[Row] = []
    started = time.perf_counter()
    for label, run in _suites():
        print(f"bench: {label} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            rows.extend(run())
        except Exception as exc:  # report and go on: a benchmark never fails the build
            traceback.print_exc()
            rows.append(Row(f"{label}: ERROR {type(exc).__name__}: {exc}", "-", "", False))
        print(f"bench: {label} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    elapsed = time.perf_counter() - started
    print()
    for note in notes:
        print(note)
    print()
    print(format_table(rows))
    missed = [r.name.strip() for r in rows if r.met is False]
    print()
    print(f"{len(rows)} rows, {len(missed)} target(s) missed; total {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
