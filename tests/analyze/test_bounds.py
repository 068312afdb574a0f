"""The detector's memory and output stay bounded whatever an unauthenticated client sends.

An attacker's traffic through the real receiver over HTTP: one task claimed by ever-new
services in conflicting states (each belief conflicts with every one held), and floods of
parent links. The per-task record of reported pairs, the findings per span, the beliefs, the
links and the traces all keep their bounds; what is past them is counted, never silently
grown. The bounds follow ``--max-memory-mb``, and the per-entry costs they are derived from
are measured here (tracemalloc), so a change that makes an entry dearer fails.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import httpx

from otel_a2a.analyze.correlate import (
    BELIEF_BYTES,
    LINK_BYTES,
    TASK_BYTES,
    Correlator,
)
from otel_a2a.analyze.live import LiveAnalyzer
from otel_a2a.analyze.model import Belief, SpanLink
from otel_a2a.analyze.receiver import Receiver
from otel_a2a.cli import build_parser
from otel_a2a.protocol.states import TaskState
from tests.analyze.samples import request, span


def _claims(n_services: int, per_request: int) -> list[bytes]:
    """Requests each from a new service, alternating working/completed for task ``t-1``."""
    bodies = []
    for i in range(0, n_services, per_request):
        spans = []
        for j in range(i, i + per_request):
            raw = "TASK_STATE_WORKING" if j % 2 else "TASK_STATE_COMPLETED"
            spans.append(span("t-1", raw, 0, 10_000, span_id=f"{j:016x}"))
        doc = request(f"svc-{i}", *spans)
        bodies.append(json.dumps(doc).encode())
    return bodies


def test_ever_new_services_on_one_task_are_bounded_and_counted(tmp_path: Path) -> None:
    found: list[object] = []
    correlator = Correlator(max_pairs=16, max_findings=8)
    analyzer = LiveAnalyzer(correlator, found.append)
    receiver = Receiver(analyzer, "127.0.0.1", 0)
    receiver.start()
    try:
        with httpx.Client(timeout=30) as client:
            for body in _claims(n_services=400, per_request=10):  # 40 requests
                reply = client.post(
                    f"http://127.0.0.1:{receiver.port}/v1/traces",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                assert reply.status_code == 200
    finally:
        receiver.stop()
        analyzer.close()
    [record] = correlator._tasks.values()
    assert len(record.reported) <= 16  # the task's record of reported pairs
    assert len(found) == correlator.stats.findings <= 16  # the output, not 1.3 million lines
    assert correlator.stats.findings_dropped > 1000  # and what was past it, counted


def test_findings_per_belief_are_capped() -> None:
    correlator = Correlator(max_pairs=1000, max_findings=8)
    for i in range(60):  # sixty services believe the task working
        belief = _belief(f"svc-{i}", "t", TaskState.WORKING, i)
        correlator.add(belief)
    found = correlator.add(_belief("odd-one", "t", TaskState.FAILED, 100))
    assert len(found) == 8 and correlator.stats.findings_dropped == 52


def test_links_and_traces_keep_their_bounds() -> None:
    correlator = Correlator(max_links=1000, max_traces=50, max_spans=1024)
    for i in range(20_000):
        correlator.link(SpanLink(f"{i // 100:032x}", f"{i:016x}", f"{i + 1:016x}"))
    assert correlator._n_links <= 1000
    assert sum(len(spans) for spans in correlator._parents.values()) == correlator._n_links
    assert len(correlator._parents) <= 50 and correlator.stats.traces_evicted >= 190


def test_beliefs_in_all_keep_their_bound() -> None:
    correlator = Correlator(max_tasks=100_000, max_beliefs=64, max_total_beliefs=500)
    for i in range(5_000):
        correlator.add(_belief(f"svc-{i % 3}", f"t-{i // 10}", TaskState.WORKING, i))
    assert correlator._n_beliefs <= 500
    held = sum(len(record.beliefs) for record in correlator._tasks.values())
    assert held == correlator._n_beliefs and correlator.stats.tasks_evicted > 0


def test_the_bounds_follow_the_memory_flag() -> None:
    small, large = Correlator.within(64), Correlator.within(256)
    for name in ("max_tasks", "max_total_beliefs", "max_links", "max_traces"):
        assert getattr(large, name) == getattr(small, name) * 4 or (
            abs(getattr(large, name) - 4 * getattr(small, name)) <= 4
        ), name
    args = build_parser().parse_args(["detector", "--max-memory-mb", "64"])
    assert args.max_memory_mb == 64 and args.max_tasks is None
    capped = Correlator.within(64, max_tasks=10)
    assert capped.max_tasks == 10 and capped.max_links == small.max_links
    # what the bounds add up to stays within the budget
    budget = 256 * 1024 * 1024
    held = (
        large.max_total_beliefs * BELIEF_BYTES
        + large.max_tasks * TASK_BYTES
        + large.max_links * LINK_BYTES
        + large.max_traces * 480
    )
    assert held <= budget


def _belief(service: str, task: str, state: TaskState, at: int) -> Belief:
    return Belief(
        service,
        task,
        state,
        "TASK_STATE_" + state.name,
        True,
        at,
        10**12,
        "A2A GetTask",
        os.urandom(8).hex(),
        os.urandom(16).hex(),
        os.urandom(8).hex(),
        "GetTask",
        "agent",
    )


def test_the_per_entry_costs_the_bounds_assume_hold() -> None:
    """Measured, not guessed: a belief of a tracked task, a task's record, a parent link."""
    n = 5_000
    correlator = Correlator(max_tasks=10**9, max_total_beliefs=10**9, max_links=10**9)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):  # a new task each: its record and one belief
            correlator.add(_belief(f"svc-{i % 3}", f"task-{i}", TaskState.WORKING, i))
        per_task = (tracemalloc.get_traced_memory()[0] - before) / n
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):  # more beliefs of tracked tasks
            correlator.add(_belief(f"svc-{i % 3}", f"task-{i}", TaskState.WORKING, n + i))
        per_belief = (tracemalloc.get_traced_memory()[0] - before) / n
        before = tracemalloc.get_traced_memory()[0]
        trace = os.urandom(16).hex()
        for _ in range(n):
            correlator.link(SpanLink(trace, os.urandom(8).hex(), os.urandom(8).hex()))
        per_link = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_task <= TASK_BYTES + BELIEF_BYTES, per_task
    assert per_belief <= BELIEF_BYTES, per_belief
    assert per_link <= LINK_BYTES, per_link
