"""Ledger benchmark: memory per tracked task and time per operation at 1,000,000 tasks.

Targets (detection core): <= 250 bytes per tracked task, <= 2 us per ledger operation.
Run: ``python bench/bench_ledger.py`` (about a minute; memory is measured with tracemalloc,
which slows the fill). Times depend on the machine, so the first row calibrates it: the cost of
one iteration of a plain ``d[k] = v`` loop over existing keys (about 20-30 ns on a current
laptop).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable

from otel_a2a.detect import Detector, Observation
from otel_a2a.protocol.model import CardInfo
from otel_a2a.protocol.states import TaskState

N = 1_000_000
SAMPLE = 200_000  # operations per timing loop
AGENT = "http://worker:9001"
ETAG = '"v1"'


def _best_us(fn: Callable[[], None], ops: int, repeat: int = 3) -> float:
    """Best of ``repeat`` runs, in microseconds per operation (timeit's convention)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best / ops * 1e6


def _card() -> CardInfo:
    return CardInfo(ETAG, "header", "worker", "1", True, (), None, None, None, ("1.0",))


def run() -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    rows.append(("python", sys.version.split()[0]))

    keys = [str(i) for i in range(SAMPLE)]

    d = dict.fromkeys(keys, 0)

    def calibrate() -> None:
        for k in keys:
            d[k] = 1

    rows.append(
        ("calibration: ns per `d[k] = v` loop step", f"{_best_us(calibrate, SAMPLE) * 1e3:.0f}")
    )

    ids = [str(uuid.uuid4()) for _ in range(N)]  # A2A task ids are UUIDs: 36 characters
    id_bytes = sum(sys.getsizeof(i) for i in ids) / N
    det = Detector(max_tasks=N)
    det.on_card(AGENT + "/.well-known/agent-card.json", _card())
    ledger = det.ledger
    working = TaskState.WORKING

    # -- memory: everything the fill allocates (records, dict, floats), ids allocated before --
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    for i, task_id in enumerate(ids):
        ledger.observe(
            Observation(
                task_id, AGENT, working, "TASK_STATE_WORKING", True, i * 1e-6, ETAG, "GetTask"
            )
        )
    fill_s = time.perf_counter() - start
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    per_task = traced / N
    dict_fresh = sys.getsizeof(ledger._index)
    rows.append(("tasks tracked", f"{len(ledger):,}"))
    rows.append(("bytes/task, tracemalloc (task id strings not counted)", f"{per_task:.1f}"))
    rows.append(("bytes/task incl. 36-char task id strings", f"{per_task + id_bytes:.1f}"))
    rows.append(("  of which the index dict", f"{dict_fresh / N:.1f}"))
    rows.append(("fill time under tracemalloc (s)", f"{fill_s:.1f}"))

    now = 1.0  # all observations are fresh (heartbeat 30 s)
    sample_ids = ids[:SAMPLE]

    def observe_existing() -> None:
        for task_id in sample_ids:
            ledger.observe(
                Observation(
                    task_id, AGENT, working, "TASK_STATE_WORKING", True, now, ETAG, "GetTask"
                )
            )

    prebuilt = [
        Observation(t, AGENT, working, "TASK_STATE_WORKING", True, now, ETAG, "GetTask")
        for t in sample_ids
    ]

    def observe_only() -> None:
        for obs in prebuilt:
            ledger.observe(obs)

    rows.append(
        (
            "us/observe incl. building the Observation (re-observe)",
            f"{_best_us(observe_existing, SAMPLE):.2f}",
        )
    )
    rows.append(
        ("us/observe, Observation prebuilt", f"{_best_us(observe_only, SAMPLE, repeat=1):.2f}")
    )

    def touch() -> None:
        for task_id in sample_ids:
            ledger.touch(task_id, now)

    def get() -> None:
        for task_id in sample_ids:
            ledger.get(task_id)

    agent = det.agent(AGENT)

    def decide() -> None:
        for task_id in sample_ids:
            det.decide(task_id, agent, now)

    def redundant() -> None:
        for task_id in sample_ids:
            det.redundant_get(task_id, agent, now)

    rows.append(("us/touch (stream frame)", f"{_best_us(touch, SAMPLE):.2f}"))
    rows.append(("us/get", f"{_best_us(get, SAMPLE):.2f}"))
    rows.append(
        (
            "us/decide (Detector.decide: get + judge + Verdict, agent resolved)",
            f"{_best_us(decide, SAMPLE):.2f}",
        )
    )
    rows.append(("us/redundant_get", f"{_best_us(redundant, SAMPLE):.2f}"))

    # -- churn at capacity: every new task evicts the oldest --------------------------------
    fresh_ids = [str(uuid.uuid4()) for _ in range(SAMPLE)]

    def churn() -> None:
        for task_id in fresh_ids:
            ledger.observe(
                Observation(
                    task_id, AGENT, working, "TASK_STATE_WORKING", True, 2.0, ETAG, "GetTask"
                )
            )

    rows.append(
        (
            "us/observe of a new task at capacity (evicts)",
            f"{_best_us(churn, SAMPLE, repeat=1):.2f}",
        )
    )
    rows.append(("evicted", f"{det.evicted_total:,}"))
    dict_churned = sys.getsizeof(ledger._index)
    rows.append(
        (
            "bytes/task after churn (records as measured + index dict now)",
            f"{per_task - dict_fresh / N + dict_churned / N:.1f}",
        )
    )

    # -- stale gauge callback -----------------------------------------------------------------
    def stale_fresh() -> None:
        det.stale_by_agent(3.0)

    def stale_all() -> None:
        det.ledger._old_fraction = 0.0  # force the walk from the oldest end: a full pass
        det.stale_by_agent(1e9)

    rows.append(
        ("ms stale_by_agent, none stale (early stop)", f"{_best_us(stale_fresh, 1) / 1e3:.2f}")
    )
    rows.append(
        (
            "ms stale_by_agent, all 1M stale, full pass",
            f"{_best_us(stale_all, 1, repeat=1) / 1e3:.0f}",
        )
    )
    return rows


def main() -> None:
    rows = run()
    width = max(len(name) for name, _ in rows)
    for name, figure in rows:
        print(f"{name:<{width}}  {figure:>12}")


if __name__ == "__main__":
    main()
