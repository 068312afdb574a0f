"""Shared ledger benchmark (``OTEL_A2A_LEDGER_PATH``): what a SQLite file shared by the
processes of a host adds per observation and per decision over the in-memory ledger.

Both ledgers hold 100,000 tasks (the default ``OTEL_A2A_MAX_TRACKED_TASKS``); the same calls
are timed on each, and the ``added`` rows are the difference. Then the same observations with
a second process writing the same file all along (the contended case of a pre-fork server).
The file is in the system's temporary directory: a slower disk costs more at checkpoints.
Run: ``python bench/bench_shared_ledger.py`` (about half a minute).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench import Row
from otel_a2a.detect import Detector, Observation
from otel_a2a.detect.ledger import Ledger
from otel_a2a.protocol.model import CardInfo
from otel_a2a.protocol.states import TaskState
from otel_a2a.store.sqlite import SqliteLedger

N = 100_000
SAMPLE = 5_000  # operations per timing loop (the in-memory side too: same keys)
AGENT = "http://worker:9001"
ETAG = '"v1"'
WORKING = TaskState.WORKING

# a second process observing its own tasks in the same file as fast as it can
_RIVAL = """
import sys, time, uuid
from otel_a2a.detect import Observation
from otel_a2a.protocol.states import TaskState
from otel_a2a.store.sqlite import SqliteLedger
ledger = SqliteLedger(sys.argv[1], int(sys.argv[2]), busy_timeout=5.0)
print("READY", flush=True)
while True:
    ledger.observe(Observation(
        "rival-" + str(uuid.uuid4()), "http://rival", TaskState.WORKING, "TASK_STATE_WORKING",
        True, time.monotonic(), None, "GetTask"))
"""


def _us(fn: Callable[[], None], ops: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best / ops * 1e6


def _card() -> CardInfo:
    return CardInfo(ETAG, "header", "worker", "1", True, (), None, None, None, ("1.0",))


def _obs(task_id: str, at: float) -> Observation:
    return Observation(task_id, AGENT, WORKING, "TASK_STATE_WORKING", True, at, ETAG, "GetTask")


def _times(det: Detector, ids: list[str], fresh: list[str]) -> dict[str, float]:
    """µs per operation on ``det``'s ledger, filled with ``ids`` already."""
    ledger: Ledger = det.ledger
    sample = ids[:SAMPLE]
    agent = det.agent(AGENT)
    clock = iter(range(10**9))

    def observe() -> None:
        at = 10.0 + next(clock)
        for task_id in sample:
            ledger.observe(_obs(task_id, at))

    def touch() -> None:
        at = 10.0 + next(clock)
        for task_id in sample:
            ledger.touch(task_id, at)

    def decide() -> None:
        for task_id in sample:
            det.decide(task_id, agent, 11.0)

    new = iter(fresh)

    def evict() -> None:
        for _ in range(SAMPLE):
            ledger.observe(_obs(next(new), 1e6))

    return {
        "observe (re-observe)": _us(observe, SAMPLE),
        "observe of a new task at capacity (evicts)": _us(evict, SAMPLE, repeat=1),
        "touch (stream frame)": _us(touch, SAMPLE),
        "decide (Detector.decide)": _us(decide, SAMPLE),
    }


def _filled(ledger: Ledger | None, ids: list[str]) -> Detector:
    det = Detector(max_tasks=N, ledger=ledger)
    det.on_card(AGENT + "/.well-known/agent-card.json", _card())
    for i, task_id in enumerate(ids):
        det.ledger.observe(_obs(task_id, i * 1e-4))
    return det


def run() -> list[Row]:
    ids = [str(uuid.uuid4()) for _ in range(N)]
    fresh = [str(uuid.uuid4()) for _ in range(2 * SAMPLE)]
    rows: list[Row] = []
    memory = _times(_filled(None, ids), ids, fresh[:SAMPLE])
    with tempfile.TemporaryDirectory(prefix="otel-a2a-bench-") as tmp:
        path = Path(tmp) / "ledger.db"
        start = time.perf_counter()
        det = _filled(SqliteLedger(path, N), ids)
        rows.append(
            Row("shared ledger: fill 100,000 tasks (s)", f"{time.perf_counter() - start:.1f}")
        )
        shared = _times(det, ids, fresh[SAMPLE:])
        for name, us in shared.items():
            rows.append(Row(f"shared ledger: us/{name}", f"{us:.1f}"))
            rows.append(
                Row("shared ledger:   added over in-memory (us)", f"{us - memory[name]:.1f}")
            )

        def stale() -> None:
            det.stale_by_agent(1e9)

        rows.append(
            Row("shared ledger: ms stale_by_agent, 100k tasks", f"{_us(stale, 1) / 1e3:.0f}")
        )
        rows.append(Row("shared ledger: file size (MiB)", f"{_size(path) / 2**20:.1f}"))
        rows.extend(_contended(det, path, ids))
    return rows


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _contended(det: Detector, path: Path, ids: list[str]) -> list[Row]:
    rival = subprocess.Popen(
        [sys.executable, "-c", _RIVAL, str(path), str(N)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert rival.stdout is not None and rival.stdout.readline().strip() == "READY"
        sample = ids[:SAMPLE]
        worst = 0.0

        def observe() -> None:
            nonlocal worst
            for task_id in sample:
                t0 = time.perf_counter()
                det.ledger.observe(_obs(task_id, time.monotonic()))
                worst = max(worst, time.perf_counter() - t0)

        us = _us(observe, SAMPLE, repeat=1)
        return [
            Row("shared ledger: us/observe, another process writing", f"{us:.1f}"),
            Row("shared ledger: ms slowest of those observes", f"{worst * 1e3:.1f}"),
        ]
    finally:
        rival.kill()
        rival.wait()


def main() -> None:
    from bench import format_table

    print(format_table(run()))


if __name__ == "__main__":
    main()
