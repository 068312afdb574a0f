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

Findings are deduplicated per (task, reason, service pair). Memory is bounded: at most
``max_tasks`` tasks (least recently seen evicted first), ``max_beliefs`` beliefs per task (the
oldest dropped), ``max_pairs`` reported (reason, service pair) keys per task, ``max_traces``
traces of ``max_spans`` parent links each; and in bytes: task records (beliefs and reported
pairs with them) take at most ``max_bytes``, parent links ``max_link_bytes``, least recently
seen tasks and traces evicted first. Bytes are counted as entries arrive, from per-entry costs
measured with tracemalloc (tests/analyze/test_budget.py checks them) plus the sizes of the
strings an entry holds, so long names cost what they take.

Output is bounded too: a task whose record of reported pairs is full reports no new pair
(beliefs from ever-new services about one task would otherwise grow it and print a line per
pair), and one span yields at most ``max_span_findings`` findings. What these bounds drop
is counted in ``Stats.findings_dropped``.
"""

from __future__ import annotations

import operator
import sys
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from otel_a2a.analyze.model import NANOS, Batch, Belief, Finding, SpanLink
from otel_a2a.detect.verdict import DivergenceReason
from otel_a2a.protocol.states import TaskState

_MAX_DEPTH = 64  # parent hops followed when deciding ancestry
# Bytes an entry takes beyond its strings, measured with tracemalloc (CPython 3.11, 64-bit)
# and rounded up: a task's record (its dict slot, record, deque of 64, empty set) 1,130; a
# belief (tuple, two ints, deque slot) 256; a reported pair (key tuple, set slot) 95; a trace
# (its dict slot, dict) 250; a parent link (dict slot and its two 16-hex-digit ids) 155.
TASK_BYTES = 1_200
BELIEF_BYTES = 280
PAIR_BYTES = 120
TRACE_BYTES = 300 + sys.getsizeof("0" * 32)
LINK_BYTES = 40 + 2 * sys.getsizeof("0" * 16)
_size = sys.getsizeof
_STRING_FIELDS = (
    "service",
    "task_id",
    "raw",
    "span_name",
    "span_id",
    "trace_id",
    "parent_span_id",
    "operation",
    "agent_name",
)
_strings = operator.itemgetter(*(Belief._fields.index(name) for name in _STRING_FIELDS))


def belief_bytes(b: Belief) -> int:
    """What holding ``b`` costs (its strings counted whole, even where shared)."""
    return BELIEF_BYTES + sum(map(_size, _strings(b)))


def states_conflict(a: TaskState, b: TaskState) -> bool:
    """True when holding ``a`` and ``b`` at once splits liveness decisions."""
    if a is b or TaskState.UNKNOWN in (a, b):
        return False
    if a.is_terminal != b.is_terminal:
        return True
    return not a.is_terminal


@dataclass(slots=True)
class _Task:
    beliefs: deque[Belief]
    size: int  # bytes held, as counted
    reported: set[tuple[DivergenceReason, str, str]] = field(default_factory=set)


@dataclass
class Stats:
    spans: int = 0
    beliefs: int = 0
    errors: int = 0
    findings: int = 0
    findings_dropped: int = 0
    tasks_evicted: int = 0
    traces_evicted: int = 0


class Correlator:
    """Not thread-safe: callers serialise ``feed``/``add`` (the receiver holds a lock)."""

    def __init__(
        self,
        *,
        max_tasks: int = 10_000,
        max_beliefs: int = 64,
        max_traces: int = 10_000,
        max_spans: int = 1_024,
        max_pairs: int = 64,
        max_span_findings: int = 16,
        max_bytes: int = 64 * 1024 * 1024,
        max_link_bytes: int = 32 * 1024 * 1024,
        grace: float = 1.0,
    ) -> None:
        bounds = (max_tasks, max_beliefs, max_traces, max_spans, max_pairs, max_span_findings)
        if min(bounds) < 1 or min(max_bytes, max_link_bytes) < 0 or grace < 0:
            raise ValueError("bounds must be >= 1 and grace >= 0")
        self.max_tasks, self.max_beliefs = max_tasks, max_beliefs
        self.max_traces, self.max_spans = max_traces, max_spans
        self.max_pairs, self.max_span_findings = max_pairs, max_span_findings
        self.max_bytes, self.max_link_bytes = max_bytes, max_link_bytes
        self.held = 0  # bytes of task records, as counted
        self.link_held = 0  # bytes of parent links, as counted
        self.grace_ns = int(grace * NANOS)
        self.stats = Stats()
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._parents: OrderedDict[str, dict[str, str]] = OrderedDict()

    @property
    def tasks(self) -> int:
        return len(self._tasks)

    def feed(self, batch: Batch) -> list[Finding]:
        """Links first (a parent's chain is known when it arrives), then beliefs in order;
        at most ``max_span_findings`` findings from the beliefs of one span (a span's beliefs
        are consecutive in a batch)."""
        self.stats.spans += batch.spans
        self.stats.errors += batch.errors
        for link in batch.links:
            self.link(link)
        findings: list[Finding] = []
        span = None
        room = 0
        for belief in batch.beliefs:
            if span is None or (
                belief.span_id != span.span_id
                or belief.trace_id != span.trace_id
                or belief.service != span.service
            ):
                span, room = belief, self.max_span_findings
            found = self.add(belief, room)
            if found:
                room -= len(found)
                findings.extend(found)
        return findings

    def link(self, link: SpanLink) -> None:
        spans = self._parents.get(link.trace_id)
        if spans is None:
            spans = self._parents[link.trace_id] = {}
            self.link_held += TRACE_BYTES
        else:
            self._parents.move_to_end(link.trace_id)
        if link.span_id in spans:
            spans[link.span_id] = link.parent_span_id
        elif len(spans) < self.max_spans:
            spans[link.span_id] = link.parent_span_id
            self.link_held += LINK_BYTES
        if self.link_held > self.max_link_bytes or len(self._parents) > self.max_traces:
            self._evict_traces()

    def _evict_traces(self) -> None:
        """Least recently seen traces out while over a bound (never the one just seen)."""
        while len(self._parents) > 1 and (
            len(self._parents) > self.max_traces or self.link_held > self.max_link_bytes
        ):
            _trace, evicted = self._parents.popitem(last=False)
            self.link_held -= TRACE_BYTES + LINK_BYTES * len(evicted)
            self.stats.traces_evicted += 1

    def add(self, belief: Belief, limit: int | None = None) -> list[Finding]:
        """Record ``belief`` and return the new (not yet reported) findings it completes, at
        most ``limit`` (default ``max_span_findings``); the others are dropped and counted."""
        if limit is None:
            limit = self.max_span_findings
        record = self._tasks.get(belief.task_id)
        if record is None:
            size = TASK_BYTES + _size(belief.task_id)
            record = self._tasks[belief.task_id] = _Task(deque(maxlen=self.max_beliefs), size)
            self.held += size
        else:
            self._tasks.move_to_end(belief.task_id)
        for seen in record.beliefs:
            if (
                seen.span_id == belief.span_id
                and seen.start_ns == belief.start_ns
                and seen.trace_id == belief.trace_id
                and seen.raw == belief.raw
                and seen.service == belief.service
            ):
                return []  # a re-exported span (retry) or the same file read twice
        before = record.size
        findings = self._record(record, belief, limit)
        self.held += record.size - before
        if self.held > self.max_bytes or len(self._tasks) > self.max_tasks:
            self._evict()
        return findings

    def _evict(self) -> None:
        """Least recently seen tasks out while over a bound (never the one just seen)."""
        while len(self._tasks) > 1 and (
            len(self._tasks) > self.max_tasks or self.held > self.max_bytes
        ):
            _task, evicted = self._tasks.popitem(last=False)
            self.held -= evicted.size
            self.stats.tasks_evicted += 1

    def _record(self, record: _Task, belief: Belief, limit: int) -> list[Finding]:
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
            if len(findings) >= limit or len(record.reported) >= self.max_pairs:
                self.stats.findings_dropped += 1  # not recorded: a later belief may report it
                continue
            record.reported.add(key)
            record.size += PAIR_BYTES + _size(lo) + _size(hi)
            findings.append(Finding(reason, belief.task_id, first, second))
        if len(record.beliefs) == record.beliefs.maxlen:
            record.size -= belief_bytes(record.beliefs[0])  # about to fall off
        record.beliefs.append(belief)
        record.size += belief_bytes(belief)
        self.stats.findings += len(findings)
        return findings

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
