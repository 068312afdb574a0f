"""What the analyzer reasons about: beliefs read from spans, and the findings they produce.

Pure data, no OpenTelemetry: a :class:`Belief` is one service's view of one task's state over
a time interval, read from an exported span (the span contract); a :class:`Finding` is
an analyzer divergence (``cross_runtime_conflict`` / ``renormalized_state``) with
both beliefs as evidence.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import NamedTuple

from otel_a2a.detect.verdict import DivergenceReason
from otel_a2a.protocol.states import StateReading, TaskState

NANOS = 1_000_000_000


class Belief(NamedTuple):
    """``service`` held ``state`` (spelled ``raw`` on the wire) for ``task_id`` in [start, end].

    ``start_ns``/``end_ns`` are Unix nanoseconds. A span without per-status events yields one
    belief over the span's lifetime; a stream span yields one belief per ``otel_a2a.task.status``
    event, from the event until the next one (``superseded`` is then True: the service itself
    moved on to a newer state at ``end_ns``) or until the span ended.
    """

    service: str
    task_id: str
    state: TaskState
    raw: str
    authoritative: bool
    start_ns: int
    end_ns: int
    span_name: str
    span_id: str
    trace_id: str
    parent_span_id: str = ""
    operation: str = ""
    agent_name: str = ""
    superseded: bool = False


class SpanLink(NamedTuple):
    """``span_id``'s parent in ``trace_id`` (any span, A2A or not: chains cross server spans)."""

    trace_id: str
    span_id: str
    parent_span_id: str


class Act(NamedTuple):
    """One thing a service did about a task, read from a span: observed, decided, fetched a
    card. ``at_ns`` orders it (Unix nanoseconds of span time); ``born_ns`` is the span's start;
    ``known_ns`` when it shows the task existed: its span's end (the reply named the task), or
    its status event's time."""

    at_ns: int
    kind: str
    service: str
    task_id: str
    agent: str  # the agent's URL, '' when the span names none
    agent_name: str
    operation: str
    reading: StateReading | None
    etag: str | None
    heartbeat: float | None
    assumes_live: bool
    explicit: bool  # a decision marked so (no follow-up rule needed)
    born_ns: int
    known_ns: int
    span_id: str
    trace_id: str


class Batch(NamedTuple):
    """What one OTLP export request (or one file line) contributes: beliefs and links for the
    correlator, acts and the services that judge themselves for the fleet judge."""

    beliefs: list[Belief]
    links: list[SpanLink]
    spans: int
    errors: int
    acts: Sequence[Act] = ()
    self_judging: frozenset[str] = frozenset()


class Finding(NamedTuple):
    """An analyzer divergence about ``task_id`` between beliefs ``a`` and ``b`` (a earlier)."""

    reason: DivergenceReason
    task_id: str
    a: Belief
    b: Belief

    @property
    def services(self) -> tuple[str, str]:
        return (self.a.service, self.b.service)

    @property
    def overlap_ns(self) -> tuple[int, int]:
        """The interval both beliefs were held (may be empty for same-trace renormalisation)."""
        return (max(self.a.start_ns, self.b.start_ns), min(self.a.end_ns, self.b.end_ns))


def format_time(ns: int) -> str:
    """UTC ISO-8601 with milliseconds."""
    moment = datetime.datetime.fromtimestamp(ns / NANOS, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _side(b: Belief) -> str:
    return f"{b.service} {b.state.value} ({b.raw!r}, {b.span_name} {b.span_id or '-'})"


def render_finding(f: Finding) -> str:
    """One readable line: task, reason, both services with states and spellings, times."""
    lo, hi = f.overlap_ns
    if lo <= hi:
        when = f"at {format_time(lo)} for {(hi - lo) / NANOS:.3f}s"
    else:
        when = (
            f"in trace {f.b.trace_id or '-'} at {format_time(f.a.start_ns)} "
            f"and {format_time(f.b.start_ns)}"
        )
    return f"task {f.task_id}: {f.reason.value}: {_side(f.a)} vs {_side(f.b)} {when}"


def _belief_json(b: Belief) -> dict[str, object]:
    return {
        "service": b.service,
        "state": b.state.value,
        "state_raw": b.raw,
        "authoritative": b.authoritative,
        "start_ns": b.start_ns,
        "end_ns": b.end_ns,
        "start": format_time(b.start_ns),
        "end": format_time(b.end_ns),
        "span_name": b.span_name,
        "span_id": b.span_id,
        "parent_span_id": b.parent_span_id,
        "trace_id": b.trace_id,
        "operation": b.operation,
        "agent_name": b.agent_name,
    }


def finding_json(f: Finding) -> dict[str, object]:
    """The ``--json`` form of a finding (one object per line)."""
    return {
        "reason": f.reason.value,
        "task_id": f.task_id,
        "services": list(f.services),
        "a": _belief_json(f.a),
        "b": _belief_json(f.b),
    }
