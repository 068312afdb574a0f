"""The correlator: conflicts, renormalised spellings, dedupe and bounds."""

from __future__ import annotations

import pytest

from otel_a2a.analyze import Batch, Belief, Correlator, SpanLink, states_conflict
from otel_a2a.analyze.model import render_finding
from otel_a2a.detect import DivergenceReason
from otel_a2a.protocol import TaskState, normalize_task_state
from tests.analyze.samples import MS, T0, TRACE

CONFLICT = DivergenceReason.CROSS_RUNTIME_CONFLICT
RENORM = DivergenceReason.RENORMALIZED_STATE


def belief(
    service: str,
    raw: str,
    start_ms: int,
    end_ms: int,
    *,
    task: str = "t1",
    span_id: str = "",
    parent: str = "",
    trace: str = "",
    superseded: bool = False,
) -> Belief:
    return Belief(
        service=service,
        task_id=task,
        state=normalize_task_state(raw),
        raw=raw,
        authoritative=True,
        start_ns=T0 + start_ms * MS,
        end_ns=T0 + end_ms * MS,
        span_name="GetTask",
        span_id=span_id or f"{abs(hash((service, raw, start_ms))) % 16**16:016x}",
        trace_id=trace,
        parent_span_id=parent,
        operation="GetTask",
        superseded=superseded,
    )


def test_overlapping_terminal_and_live_beliefs_conflict() -> None:
    c = Correlator()
    assert c.add(belief("gateway", "TASK_STATE_FAILED", 0, 10)) == []
    (finding,) = c.add(belief("orchestrator", "TASK_STATE_WORKING", 5, 20))
    assert finding.reason is CONFLICT and finding.task_id == "t1"
    assert finding.services == ("gateway", "orchestrator")
    assert finding.a.state is TaskState.FAILED and finding.b.state is TaskState.WORKING
    assert finding.overlap_ns == (T0 + 5 * MS, T0 + 10 * MS)
    line = render_finding(finding)
    assert "task t1: cross_runtime_conflict: gateway failed ('TASK_STATE_FAILED'" in line
    assert "orchestrator working ('TASK_STATE_WORKING'" in line and "for 0.005s" in line


def test_no_conflict_when_times_do_not_overlap() -> None:
    c = Correlator()
    c.add(belief("orchestrator", "TASK_STATE_WORKING", 0, 10))
    assert c.add(belief("gateway", "TASK_STATE_FAILED", 11, 20)) == []


def test_no_conflict_within_one_service() -> None:
    c = Correlator()
    c.add(belief("orchestrator", "TASK_STATE_WORKING", 0, 10))
    assert c.add(belief("orchestrator", "TASK_STATE_FAILED", 5, 20)) == []


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("working", "failed", True),
        ("input-required", "completed", True),
        ("submitted", "working", True),
        ("working", "input-required", True),
        ("completed", "failed", False),  # both say the task is over
        ("working", "unknown", False),  # unknown authorises nothing
        ("working", "working", False),
    ],
)
def test_which_state_pairs_matter(a: str, b: str, expected: bool) -> None:
    assert states_conflict(TaskState(a), TaskState(b)) is expected


def test_superseded_stream_state_within_grace_is_propagation() -> None:
    c = Correlator(grace=0.5)
    # the gateway learned completed at 100 ms; the orchestrator's stream moved on at 103 ms
    c.add(belief("gateway", "TASK_STATE_COMPLETED", 100, 200))
    late = belief("orchestrator", "TASK_STATE_WORKING", 10, 103, superseded=True)
    assert c.add(late) == []
    # but a span-long belief (a GetTask answered while the gateway knew better) conflicts
    (finding,) = c.add(belief("orchestrator", "TASK_STATE_WORKING", 150, 152))
    assert finding.reason is CONFLICT


def test_renormalized_spelling_across_a_parent_child_hop() -> None:
    c = Correlator()
    # orchestrator's GetTask (root) -> gateway server span (not A2A) -> gateway's GetTask
    c.link(SpanLink(TRACE, "bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa"))
    c.link(SpanLink(TRACE, "cccccccccccccccc", "bbbbbbbbbbbbbbbb"))
    child = belief(
        "gateway",
        "TASK_STATE_WORKING",
        2,
        4,
        span_id="cccccccccccccccc",
        parent="bbbbbbbbbbbbbbbb",
        trace=TRACE,
    )
    parent = belief("orchestrator", "Working", 0, 6, span_id="aaaaaaaaaaaaaaaa", trace=TRACE)
    assert c.add(child) == []
    (finding,) = c.add(parent)
    assert finding.reason is RENORM
    assert {finding.a.raw, finding.b.raw} == {"TASK_STATE_WORKING", "Working"}
    assert finding.a.state is finding.b.state is TaskState.WORKING


def test_renormalized_within_one_service_needs_the_chain() -> None:
    c = Correlator()
    c.link(SpanLink(TRACE, "cccccccccccccccc", "aaaaaaaaaaaaaaaa"))
    outer = belief("svc", "working", 0, 9, span_id="aaaaaaaaaaaaaaaa", trace=TRACE)
    inner = belief(
        "svc",
        "TASK_STATE_WORKING",
        1,
        2,
        span_id="cccccccccccccccc",
        parent="aaaaaaaaaaaaaaaa",
        trace=TRACE,
    )
    sibling = belief("svc", "Working", 3, 4, span_id="dddddddddddddddd", trace=TRACE)
    c.add(outer)
    assert c.add(sibling) == []  # same service, no parent/child chain: one agent re-spelling
    (finding,) = c.add(inner)
    assert finding.reason is RENORM and finding.services == ("svc", "svc")


def test_same_spelling_or_unrelated_times_are_not_renormalisation() -> None:
    c = Correlator()
    c.add(belief("a", "TASK_STATE_WORKING", 0, 5, trace="1" * 32))
    assert c.add(belief("b", "TASK_STATE_WORKING", 1, 4, trace="1" * 32)) == []
    assert c.add(belief("c", "working", 10, 12, trace="2" * 32)) == []


def test_findings_are_deduplicated_per_task_reason_and_service_pair() -> None:
    c = Correlator()
    c.add(belief("gateway", "TASK_STATE_FAILED", 0, 100))
    assert len(c.add(belief("orchestrator", "TASK_STATE_WORKING", 10, 20))) == 1
    assert c.add(belief("orchestrator", "TASK_STATE_WORKING", 30, 40)) == []
    assert c.add(belief("gateway", "TASK_STATE_FAILED", 0, 100)) == []  # re-export: ignored
    # another pair, another task: new findings
    assert len(c.add(belief("billing", "TASK_STATE_WORKING", 50, 60))) == 1
    c.add(belief("gateway", "TASK_STATE_FAILED", 0, 100, task="t2"))
    assert len(c.add(belief("orchestrator", "TASK_STATE_WORKING", 10, 20, task="t2"))) == 1
    assert c.stats.findings == 3


def test_memory_is_bounded_least_recently_seen_task_first() -> None:
    c = Correlator(max_tasks=3, max_beliefs=4, max_traces=2, max_spans=2)
    for i in range(10):
        c.add(belief("gateway", "TASK_STATE_FAILED", 0, 100, task=f"t{i}"))
    assert c.tasks == 3 and c.stats.tasks_evicted == 7
    # t0 was evicted: its old belief is gone, so no conflict can be found for it
    assert c.add(belief("orchestrator", "TASK_STATE_WORKING", 10, 20, task="t0")) == []
    assert len(c.add(belief("orchestrator", "TASK_STATE_WORKING", 10, 20, task="t9"))) == 1
    for i in range(20):
        c.add(belief("gateway", "TASK_STATE_FAILED", i, i + 1, task="t9"))
    assert len(c._tasks["t9"].beliefs) == 4
    for i in range(5):
        for j in range(5):
            c.link(SpanLink(f"{i:032x}", f"{j:016x}", "f" * 16))
    assert len(c._parents) == 2 and all(len(v) == 2 for v in c._parents.values())


def test_reported_pairs_per_task_are_bounded_and_what_is_dropped_is_counted() -> None:
    """Beliefs from ever-new services about one task: each new service is a new pair."""
    c = Correlator(max_pairs=5, max_span_findings=100)
    found = []
    for i in range(40):
        raw = "TASK_STATE_FAILED" if i % 2 else "TASK_STATE_WORKING"
        found += c.add(belief(f"svc-{i}", raw, 0, 100))
    assert len(found) == 5 and len(c._tasks["t1"].reported) == 5
    assert c.stats.findings == 5 and c.stats.findings_dropped > 0
    # another task has a record of its own
    c.add(belief("gateway", "TASK_STATE_FAILED", 0, 100, task="t2"))
    assert len(c.add(belief("orchestrator", "TASK_STATE_WORKING", 0, 100, task="t2"))) == 1


def test_findings_per_span_are_bounded() -> None:
    """One span's beliefs (a stream span's events, each naming another task) share a bound."""
    c = Correlator(max_span_findings=3)
    for task in ("t1", "t2", "t3", "t4", "t5"):
        c.add(belief("gateway", "TASK_STATE_FAILED", 0, 100, task=task))
    stream = [
        belief("orchestrator", "TASK_STATE_WORKING", 10, 20, task=t, span_id="a" * 16)
        for t in ("t1", "t2", "t3", "t4", "t5")
    ]
    found = c.feed(Batch(stream, [], 1, 0))
    assert [f.task_id for f in found] == ["t1", "t2", "t3"]
    assert c.stats.findings_dropped == 2
    # not recorded as reported: another span may still report them
    again = belief("auditor", "TASK_STATE_WORKING", 10, 20, task="t4", span_id="b" * 16)
    assert len(c.feed(Batch([again], [], 1, 0))) == 1


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        Correlator(max_tasks=0)
    with pytest.raises(ValueError):
        Correlator(grace=-1)
