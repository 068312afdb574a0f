"""Cross-runtime correlation: feed beliefs, get findings. Pure, bounded, no I/O.

``cross_runtime_conflict``: two different services' beliefs about the same task overlap in time
and their canonical states differ in a way that matters: one terminal and the other not, or two
different non-terminal states (two different terminal states agree that the task is over, and
``unknown`` authorises nothing, so neither conflicts). A belief that its own service superseded
(a status event followed by a newer one on the same stream) is trimmed by ``grace`` at its end:
the newer state reaching the next hop a few milliseconds later is propagation, not a conflict.

``renormalized_state``: the same task's same canonical state was carried with different wire
spellings at different hops: by two services at overlapping times or within one trace, or by
two spans of one service where one is an ancestor of the other (followed through any spans,
A2A or not, of the trace).

Findings are deduplicated per (task, reason, service pair). Memory is bounded whatever a
client sends: at most ``max_tasks`` tasks and ``max_total_beliefs`` beliefs in all (least
recently seen tasks evicted first), ``max_beliefs`` beliefs per task (the oldest dropped),
``max_pairs`` reported (reason, service pair) keys per task and ``max_findings`` findings per
belief (what is past them is dropped and counted in ``Stats.findings_dropped``: ever-new
services claiming one task cannot grow a task's record or the output), and ``max_links``
parent links in ``max_traces`` traces (oldest traces evicted first). :meth:`Correlator.within`
derives every bound from one memory budget.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from otel_a2a.analyze.model import NANOS, Batch, Belief, Finding, SpanLink
from otel_a2a.detect.verdict import DivergenceReason
from otel_a2a.protocol.states import TaskState

_MAX_DEPTH = 64  # parent hops followed when deciding ancestry

# Bytes one entry costs on CPython 3.11 (tracemalloc, tests/analyze/test_correlate.py keeps
# them honest): a belief of a tracked task, a task's own record, a parent link, a trace's
# map, a reported pair; and each structure's share of a memory budget.
BELIEF_BYTES = 1_000
TASK_BYTES = 1_800  # its record, deque, map entry and up to a few reported pairs
LINK_BYTES = 180
TRACE_BYTES = 480
_SHARES = {"beliefs": 0.45, "tasks": 0.12, "links": 0.35, "traces": 0.08}
DEFAULT_MEMORY_MB = 256


def states_conflict(a: TaskState, b: TaskState) -> bool:
    """True when holding ``a`` and ``b`` at once splits liveness decisions."""
    if a is b or TaskState.UNKNOWN in (a, b):
        return False
    if a.is_terminal != b.is_terminal:
        return True
    return not a.is_terminal


@dataclass
class _Task:
    beliefs: deque[Belief]
    reported: set[tuple[DivergenceReason, str, str]] = field(default_factory=set)


@dataclass
class Stats:
    spans: int = 0
    beliefs: int = 0
    errors: int = 0
    findings: int = 0
    tasks_evicted: int = 0
    findings_dropped: int = 0  # past max_pairs or max_findings
    traces_evicted: int = 0  # to keep max_traces or max_links


class Correlator:
    """Not thread-safe: callers serialise ``feed``/``add`` (the receiver holds a lock)."""

    def __init__(
        self,
        *,
        max_tasks: int = 10_000,
        max_beliefs: int = 64,
        max_traces: int = 10_000,
        max_spans: int = 1_024,
        grace: float = 1.0,
        max_total_beliefs: int = 120_000,
        max_links: int = 500_000,
        max_pairs: int = 16,
        max_findings: int = 8,
    ) -> None:
        bounds = (max_tasks, max_beliefs, max_traces, max_spans, max_total_beliefs, max_links)
        if min(*bounds, max_pairs, max_findings) < 1 or grace < 0:
            raise ValueError("bounds must be >= 1 and grace >= 0")
        self.max_tasks, self.max_beliefs = max_tasks, max_beliefs
        self.max_traces, self.max_spans = max_traces, max_spans
        self.max_total_beliefs, self.max_links = max_total_beliefs, max_links
        self.max_pairs, self.max_findings = max_pairs, max_findings
        self.grace_ns = int(grace * NANOS)
        self.stats = Stats()
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._parents: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._n_beliefs = 0
        self._n_links = 0

    @classmethod
    def within(
        cls,
        memory_mb: float = DEFAULT_MEMORY_MB,
        *,
        max_tasks: int | None = None,
        grace: float = 1.0,
    ) -> Correlator:
        """A correlator whose structures hold at most about ``memory_mb`` MiB in all, each
        to its share (``max_tasks``, when given, lowers the task bound further)."""
        budget = memory_mb * 1024 * 1024
        tasks = max(1, int(budget * _SHARES["tasks"] / TASK_BYTES))
        return cls(
            max_tasks=min(tasks, max_tasks) if max_tasks is not None else tasks,
            max_total_beliefs=max(1, int(budget * _SHARES["beliefs"] / BELIEF_BYTES)),
            max_links=max(1, int(budget * _SHARES["links"] / LINK_BYTES)),
            max_traces=max(1, int(budget * _SHARES["traces"] / TRACE_BYTES)),
            grace=grace,
        )

    @property
    def tasks(self) -> int:
        return len(self._tasks)

    def feed(self, batch: Batch) -> list[Finding]:
        """Links first (a parent's chain is known when it arrives), then beliefs in order."""
        self.stats.spans += batch.spans
        self.stats.errors += batch.errors
        for link in batch.links:
            self.link(link)
        findings: list[Finding] = []
        for belief in batch.beliefs:
            findings.extend(self.add(belief))
        return findings

    def link(self, link: SpanLink) -> None:
        spans = self._parents.get(link.trace_id)
        if spans is None:
            spans = self._parents[link.trace_id] = {}
            while len(self._parents) > self.max_traces:
                self._evict_trace()
        else:
            self._parents.move_to_end(link.trace_id)
        if len(spans) < self.max_spans and link.span_id not in spans:
            spans[link.span_id] = link.parent_span_id
            self._n_links += 1
            while self._n_links > self.max_links and len(self._parents) > 1:
                self._evict_trace()

    def _evict_trace(self) -> None:
        _trace, spans = self._parents.popitem(last=False)
        self._n_links -= len(spans)
        self.stats.traces_evicted += 1

    def add(self, belief: Belief) -> list[Finding]:
        """Record ``belief`` and return the new (not yet reported) findings it completes."""
        record = self._tasks.get(belief.task_id)
        if record is None:
            record = self._tasks[belief.task_id] = _Task(deque(maxlen=self.max_beliefs))
            while len(self._tasks) > self.max_tasks:
                self._evict_task()
        else:
            self._tasks.move_to_end(belief.task_id)
        if any(_same(belief, seen) for seen in record.beliefs):
            return []  # a re-exported span (retry) or the same file read twice
        self.stats.beliefs += 1
        findings: list[Finding] = []
        for seen in record.beliefs:
            reason = self._judge(seen, belief)
            if reason is None:
                continue
            first, second = sorted((seen, belief), key=lambda b: (b.start_ns, b.service))
            lo, hi = sorted((first.service, second.service))
            key = (reason, lo, hi)
            if key in record.reported:
                continue
            if len(record.reported) >= self.max_pairs or len(findings) >= self.max_findings:
                self.stats.findings_dropped += 1
                continue
            record.reported.add(key)
            findings.append(Finding(reason, belief.task_id, first, second))
        if len(record.beliefs) < self.max_beliefs:
            self._n_beliefs += 1
        record.beliefs.append(belief)
        while self._n_beliefs > self.max_total_beliefs and len(self._tasks) > 1:
            self._evict_task()
        self.stats.findings += len(findings)
        return findings

    def _evict_task(self) -> None:
        _task, old = self._tasks.popitem(last=False)
        self._n_beliefs -= len(old.beliefs)
        self.stats.tasks_evicted += 1

    def _judge(self, x: Belief, y: Belief) -> DivergenceReason | None:
        if x.state is TaskState.UNKNOWN or y.state is TaskState.UNKNOWN:
            return None
        if x.state is not y.state:
            if (
                x.service != y.service
                and states_conflict(x.state, y.state)
                and x.start_ns <= self._held_until(y)
                and y.start_ns <= self._held_until(x)
            ):
                return DivergenceReason.CROSS_RUNTIME_CONFLICT
            return None
        if x.raw == y.raw:
            return None
        same_trace = bool(x.trace_id) and x.trace_id == y.trace_id
        if x.service != y.service:
            overlap = x.start_ns <= y.end_ns and y.start_ns <= x.end_ns
            return DivergenceReason.RENORMALIZED_STATE if overlap or same_trace else None
        if same_trace and (self._ancestor(x, y) or self._ancestor(y, x)):
            return DivergenceReason.RENORMALIZED_STATE
        return None

    def _held_until(self, b: Belief) -> int:
        return max(b.start_ns, b.end_ns - self.grace_ns) if b.superseded else b.end_ns

    def _ancestor(self, old: Belief, young: Belief) -> bool:
        """Is ``old``'s span an ancestor of ``young``'s (same trace)?"""
        if not old.span_id or old.span_id == young.span_id:
            return False
        spans = self._parents.get(young.trace_id, {})
        current = young.parent_span_id
        for _ in range(_MAX_DEPTH):
            if not current:
                return False
            if current == old.span_id:
                return True
            current = spans.get(current, "")
        return False


def _same(a: Belief, b: Belief) -> bool:
    return (
        a.span_id == b.span_id
        and a.trace_id == b.trace_id
        and a.start_ns == b.start_ns
        and a.raw == b.raw
        and a.service == b.service
    )
