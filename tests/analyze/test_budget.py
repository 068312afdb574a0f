"""The detector's memory budget: shares that follow ``--max-memory-mb``, and per-entry costs
that cover what the correlator's structures really take (tracemalloc) when an attacker
chooses their shape: ever-new tasks with the longest names, full records of reported pairs,
one parent link per trace or a full trace."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest

from otel_a2a.analyze import Belief, Correlator, SpanLink
from otel_a2a.analyze.budget import (
    AMPLIFICATION,
    BASELINE_MB,
    MAX_BODY_CEILING,
    MIB,
    MIN_MAX_MEMORY_MB,
    shares,
)
from otel_a2a.protocol import TaskState

LONG = "\U0001f600" * 256  # the longest text kept (256 characters), 4 bytes a character


def test_the_shares_follow_the_flag() -> None:
    small, default, large = shares(64), shares(), shares(1024)
    for budget, s in ((64, small), (256, default), (1024, large)):
        rest = (budget - BASELINE_MB) * MIB
        assert s.bodies == rest // 8 and s.tasks == rest // 4 and s.links == rest // 8
        assert s.max_body == min(MAX_BODY_CEILING, rest // 2 // AMPLIFICATION)
        decoded = s.max_body * AMPLIFICATION
        assert BASELINE_MB * MIB + decoded + s.bodies + s.tasks + s.links <= budget * MIB
    assert small.tasks < default.tasks < large.tasks
    assert 1 * MIB < default.max_body < 2 * MIB
    assert shares(256, max_body=1000).max_body == 1000


def test_a_budget_that_cannot_hold_its_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="minimum"):
        shares(MIN_MAX_MEMORY_MB - 1)
    with pytest.raises(ValueError, match="--max-memory-mb 3120 or more"):
        shares(256, max_body=16 * MIB)
    assert shares(3120, max_body=16 * MIB).max_body == 16 * MIB


def _measured(fill: Callable[[], object]) -> int:
    """Bytes still allocated after ``fill`` (what it built and keeps), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        kept = fill()
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return size


def _belief(task: str, service: str, failed: bool, i: int, text: str) -> Belief:
    """As the parser makes them: fresh strings for every span."""
    return Belief(
        service=service,
        task_id=task,
        state=TaskState.FAILED if failed else TaskState.WORKING,
        raw=(text + ("TASK_STATE_FAILED" if failed else "TASK_STATE_WORKING"))[-256:],
        authoritative=True,
        start_ns=1_700_000_000_000_000_000 + i,
        end_ns=1_700_000_001_000_000_000 + i,
        span_name=(text + "GetTask")[-256:],
        span_id=f"{i:016x}",
        trace_id=f"{i:032x}",
        parent_span_id=f"{i + 1:016x}",
        operation=(text + "GetTask")[-256:],
        agent_name=(text + "agent")[-256:],
    )


@pytest.mark.parametrize(
    "shape",
    ["new tasks, short names", "new tasks, longest names", "full pair records"],
)
def test_task_records_stay_within_their_share(shape: str) -> None:
    share = 2 * MIB
    c = Correlator(max_tasks=10**9, max_bytes=share)

    def fill() -> Correlator:
        for i in range(6_000):
            if shape == "full pair records":  # 64 services per task, alternating states
                task, service = f"{i // 64:08x}-task", f"svc-{i}"
            else:
                task, service = f"{i:08x}-6d1b-4b7e-9a55-0c8d2e41f7a1", "gateway"
            text = LONG if shape == "new tasks, longest names" else ""
            c.add(_belief(task + text[: 256 - len(task)], service + text, i % 2 == 0, i, text))
        return c

    used = _measured(fill)
    assert c.stats.tasks_evicted > 0, "the share was never reached"
    assert c.held <= share
    assert used <= c.held * 1.05, f"counted {c.held} bytes, measured {used}"


@pytest.mark.parametrize("per_trace", [1, 1024])
def test_parent_links_stay_within_their_share(per_trace: int) -> None:
    share = 2 * MIB
    c = Correlator(max_traces=10**9, max_link_bytes=share)

    def fill() -> Correlator:
        for i in range(40_000):
            c.link(SpanLink(f"{i // per_trace:032x}", f"{i:016x}", f"{i + 1:016x}"))
        return c

    used = _measured(fill)
    assert c.stats.traces_evicted > 0, "the share was never reached"
    assert c.link_held <= share
    assert used <= c.link_held * 1.05, f"counted {c.link_held} bytes, measured {used}"
