"""What the timeline page draws, per task: each service's beliefs and the marks around them.

Built from the same exported spans as the analysis (OTLP JSON requests) and its findings;
pure and bounded, no I/O. A task's view holds its services' beliefs as bars (state, wire
spelling), card fetches and etag changes (of the agents the task's spans name), observations
and liveness decisions as points, the in-process detector's ``a2a.divergence`` events and
the analyzer's findings as flags, and the blind windows: the time a caller believed a state
that another service no longer held (the overlap of a ``cross_runtime_conflict``).

Bounds: ``max_tasks`` tasks (a task without a finding, least recently seen, is dropped
first), per task ``max_items`` bars and ``max_items`` points (the oldest dropped and
counted), ``MAX_FLAGS`` flags, ``max_cards`` card fetches per service for ``MAX_SERVICES``
services. What was dropped is counted and said on the page.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from otel_a2a import semconv as sc
from otel_a2a.analyze import dialects
from otel_a2a.analyze.model import Belief, Finding, render_finding
from otel_a2a.analyze.otlp import (
    attributes,
    normalize_id,
    parse_request,
    service_of,
)
from otel_a2a.detect.verdict import DivergenceReason
from otel_a2a.protocol import Operation

# what a point or flag is (the page's legend names them)
CARD = "card"
ETAG = "etag"
OBSERVATION = "observation"
DECISION = "decision"
DIVERGENCE = "divergence"  # an a2a.divergence event of the in-process detector
FINDING = "finding"  # a cross-runtime finding of the analyzer
NOTE = "note"  # something the caller knows that no span says (the demo's worker restart)
FLAGS = frozenset({DIVERGENCE, FINDING})

MAX_FLAGS = 500
MAX_SERVICES = 100
MAX_TEXT = 200
_CARD_OPERATIONS = frozenset(
    {Operation.GET_AGENT_CARD.value, Operation.GET_EXTENDED_AGENT_CARD.value}
)
# event attributes shown with a divergence flag, in this order
_DIVERGENCE_DETAIL = (
    sc.TASK_STATE,
    sc.OBSERVATION_AGE,
    sc.CARD_HEARTBEAT,
    sc.CARD_ETAG_OBSERVED,
    sc.CARD_ETAG,
)


class SpanRef(NamedTuple):
    """The span a bar or mark comes from (what hovering it shows)."""

    name: str
    service: str
    trace_id: str
    span_id: str


class Bar(NamedTuple):
    """``service`` believed ``state`` (spelled ``raw``) from ``start_ns`` to ``end_ns``."""

    service: str
    state: str
    raw: str
    start_ns: int
    end_ns: int
    authoritative: bool
    span: SpanRef


class Mark(NamedTuple):
    """A point (card, etag, observation, decision, note) or flag (divergence, finding)."""

    kind: str
    service: str
    t_ns: int
    label: str
    detail: str
    span: SpanRef | None


class Window(NamedTuple):
    """A blind window on ``service``'s lane: it believed a state another no longer held."""

    service: str
    start_ns: int
    end_ns: int
    label: str


class TaskView(NamedTuple):
    """One task as drawn: its lanes (services, in order of first appearance) and what is on
    them; ``dropped`` counts the bars and points left out by the bounds."""

    task_id: str
    services: list[str]
    bars: list[Bar]
    marks: list[Mark]
    windows: list[Window]
    dropped: int


class Timeline(NamedTuple):
    """The tasks to draw, and how many more there were (``omitted``) beyond the bounds."""

    tasks: list[TaskView]
    omitted: int
    max_items: int


@dataclass
class _Task:
    bars: deque[Bar]
    points: deque[Mark]
    flags: list[Mark] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    agents: set[str] = field(default_factory=set)
    seen: set[tuple[str, str, int, str]] = field(default_factory=set)
    dropped: int = 0
    findings: int = 0


def _text(value: object) -> str:
    return value[:MAX_TEXT] if isinstance(value, str) else ""


def _nanos(value: object) -> int | None:
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _ref(b: Belief) -> SpanRef:
    return SpanRef(b.span_name, b.service, b.trace_id, b.span_id)


class TimelineBuilder:
    """Feed export requests (:meth:`add`) and findings; :meth:`view` gives what to draw.

    With ``tasks`` only those tasks are kept; else every task, those with a finding drawn.
    Not thread-safe: the live page holds a lock around it."""

    def __init__(
        self,
        *,
        tasks: Collection[str] = (),
        max_tasks: int = 200,
        max_items: int = 5_000,
        max_cards: int = 1_000,
    ) -> None:
        if min(max_tasks, max_items, max_cards) < 1:
            raise ValueError("bounds must be >= 1")
        self.asked = frozenset(tasks)
        self.max_tasks, self.max_items, self.max_cards = max_tasks, max_items, max_cards
        self.evicted = 0  # tasks with a flag dropped by the bound
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._cards: dict[str, deque[tuple[str, Mark]]] = {}

    # -- feeding ------------------------------------------------------------------------------
    def add(
        self,
        doc: object,
        beliefs: Iterable[Belief] | None = None,
        findings: Iterable[Finding] = (),
    ) -> None:
        """One export request (OTLP JSON form), its beliefs when already parsed, and the
        findings the analysis made of it. Never raises on the request's content."""
        for belief in parse_request(doc).beliefs if beliefs is None else beliefs:
            self.belief(belief)
        if isinstance(doc, Mapping):
            for resource_spans in _list(doc.get("resourceSpans")):
                if not isinstance(resource_spans, Mapping):
                    continue
                resource = resource_spans.get("resource")
                service = service_of(
                    attributes(resource.get("attributes")) if isinstance(resource, Mapping) else {}
                )
                for scope_spans in _list(resource_spans.get("scopeSpans")):
                    if isinstance(scope_spans, Mapping):
                        for span in _list(scope_spans.get("spans")):
                            if isinstance(span, Mapping):
                                self._span(span, service)
        for finding in findings:
            self.finding(finding)

    def belief(self, b: Belief) -> None:
        task = self._task(b.task_id)
        if task is None:
            return
        key = (b.span_id, b.raw, b.start_ns, b.service)
        if key in task.seen:
            return
        if len(task.seen) < 4 * self.max_items:
            task.seen.add(key)
        bar = Bar(b.service, b.state.value, b.raw, b.start_ns, b.end_ns, b.authoritative, _ref(b))
        self._push(task, task.bars, bar)

    def finding(self, f: Finding) -> None:
        """A flag where the finding begins, both beliefs as bars, and for a conflict the
        blind window of the side that believed the task live (or the earlier side)."""
        task = self._task(f.task_id, finding=True)
        if task is None:
            return
        self.belief(f.a)
        self.belief(f.b)
        task.findings += 1
        lo, hi = f.overlap_ns
        self._flag(
            task,
            Mark(
                FINDING,
                f.b.service,
                max(lo, f.b.start_ns),
                f.reason.value,
                render_finding(f),
                _ref(f.b),
            ),
        )
        if f.reason is DivergenceReason.CROSS_RUNTIME_CONFLICT and lo <= hi:
            blind, other = (f.b, f.a) if f.a.state.is_terminal else (f.a, f.b)
            if other.state.is_terminal:  # a terminal state holds on: blind until it learns
                hi = max(hi, blind.end_ns)
            label = (
                f"blind window: {blind.service} believed {blind.raw!r} while "
                f"{other.service} held {other.raw!r} ({(hi - lo) / 1e9:.3f} s)"
            )
            if len(task.windows) < MAX_FLAGS:
                task.windows.append(Window(blind.service, lo, hi, label))

    def note(self, task_id: str, service: str, t_ns: int, label: str, detail: str = "") -> None:
        """Something no span says (a restart the caller made), drawn on ``service``'s lane."""
        task = self._task(task_id)
        if task is not None:
            self._push(task, task.points, Mark(NOTE, service, t_ns, label[:MAX_TEXT], detail, None))

    def window(self, task_id: str, service: str, start_ns: int, end_ns: int, label: str) -> None:
        """A blind window known otherwise than by a finding (the demo knows its restart)."""
        task = self._task(task_id)
        if task is not None and len(task.windows) < MAX_FLAGS:
            task.windows.append(Window(service, start_ns, max(start_ns, end_ns), label))

    def _task(self, task_id: str, *, finding: bool = False) -> _Task | None:
        if not task_id or (self.asked and task_id not in self.asked):
            return None
        task = self._tasks.get(task_id)
        if task is not None:
            self._tasks.move_to_end(task_id)
            return task
        task = self._tasks[task_id] = _Task(deque(), deque())
        if len(self._tasks) > self.max_tasks:
            # the least recently seen task without a finding goes first (the new one last)
            victim = next(
                (k for k, t in self._tasks.items() if not t.findings and k != task_id),
                next(iter(self._tasks)),
            )
            if self._tasks.pop(victim).flags:
                self.evicted += 1  # it would have been drawn
        return task

    def _push(self, task: _Task, where: deque[Any], item: Bar | Mark) -> None:
        if len(where) >= self.max_items:
            where.popleft()
            task.dropped += 1
        where.append(item)

    def _flag(self, task: _Task, mark: Mark) -> None:
        if len(task.flags) < MAX_FLAGS:
            task.flags.append(mark)
        else:
            task.dropped += 1

    def _span(self, span: Mapping[str, Any], service: str) -> None:
        attrs = attributes(span.get("attributes"))
        start = _nanos(span.get("startTimeUnixNano"))
        if start is None:
            return
        end = _nanos(span.get("endTimeUnixNano"))
        end = start if end is None or end < start else end
        ref = SpanRef(
            _text(span.get("name")),
            service,
            normalize_id(span.get("traceId"), 16),
            normalize_id(span.get("spanId"), 8),
        )
        reading = dialects.read(attrs)
        operation, agent = reading.operation, _text(attrs.get(sc.AGENT_URL))
        if operation in _CARD_OPERATIONS:
            self._card(service, agent, end, attrs, ref)
        task = self._task(reading.task_id) if reading.task_id else None
        if task is not None:
            if agent and len(task.agents) < MAX_SERVICES:
                task.agents.add(agent)
            if reading.decision or operation == sc.OP_DECISION:
                assumed = _text(attrs.get(sc.ASSUMED_STATE)) or "live"
                self._push(
                    task,
                    task.points,
                    Mark(
                        DECISION,
                        service,
                        start,
                        f"decision: assumes {assumed}",
                        _details(attrs, (sc.DECISION_OUTCOME, sc.CARD_ETAG)),
                        ref,
                    ),
                )
            elif reading.state is not None:
                raw = reading.state[1]
                said = "authoritative" if reading.authoritative else "not authoritative"
                self._push(
                    task,
                    task.points,
                    Mark(
                        OBSERVATION,
                        service,
                        end,
                        f"observed {raw}",
                        f"{operation or ref.name}, {said}",
                        ref,
                    ),
                )
        for event in _list(span.get("events")):
            if not isinstance(event, Mapping):
                continue
            name = event.get("name")
            event_attrs = attributes(event.get("attributes"))
            when = _nanos(event.get("timeUnixNano"))
            when = start if when is None else when
            told = dialects.read(event_attrs)
            event_task = self._task(told.task_id) or task
            if event_task is None:
                continue
            if name in dialects.DIVERGENCE_EVENTS:
                reason = dialects.divergence_reason(event_attrs) or "?"
                self._flag(
                    event_task,
                    Mark(
                        DIVERGENCE,
                        service,
                        when,
                        reason,
                        _details(event_attrs, _DIVERGENCE_DETAIL),
                        ref,
                    ),
                )
            elif name in dialects.STATUS_EVENTS and told.state is not None:
                raw = told.state[1]
                if raw:
                    self._push(
                        event_task,
                        event_task.points,
                        Mark(
                            OBSERVATION,
                            service,
                            when,
                            f"observed {raw}",
                            f"{sc.EVENT_TASK_STATUS} event",
                            ref,
                        ),
                    )

    def _card(
        self, service: str, agent: str, t_ns: int, attrs: Mapping[str, object], ref: SpanRef
    ) -> None:
        cards = self._cards.get(service)
        if cards is None:
            if len(self._cards) >= MAX_SERVICES:
                return
            cards = self._cards[service] = deque(maxlen=self.max_cards)
        changed = attrs.get(sc.CARD_ETAG_CHANGED) is True
        version = _text(attrs.get(sc.AGENT_VERSION))
        label = ("card etag changed" if changed else "card fetched") + (
            f" (version {version})" if version else ""
        )
        detail = _details(
            attrs, (sc.AGENT_URL, sc.CARD_ETAG, sc.CARD_HEARTBEAT, sc.HTTP_STATUS_CODE)
        )
        cards.append((agent, Mark(ETAG if changed else CARD, service, t_ns, label, detail, ref)))

    # -- reading ------------------------------------------------------------------------------
    def view(self, *, max_tasks: int = 50) -> Timeline:
        """The tasks to draw, most recently seen first: those asked for, else those with a
        finding or a divergence flag; at most ``max_tasks``."""
        chosen = [
            (task_id, task)
            for task_id, task in reversed(self._tasks.items())
            if self.asked or task.flags
        ]
        views = [self._task_view(task_id, task) for task_id, task in chosen[:max_tasks]]
        return Timeline(views, len(chosen) - len(views) + self.evicted, self.max_items)

    def _task_view(self, task_id: str, task: _Task) -> TaskView:
        marks = [*task.points, *task.flags]
        times = [b.start_ns for b in task.bars] + [b.end_ns for b in task.bars]
        times += [m.t_ns for m in marks]
        services = list(
            dict.fromkeys([*(b.service for b in task.bars), *(m.service for m in marks)])
        )
        if times:
            lo, hi = min(times), max(times)
            margin = max((hi - lo) // 4, 1)
            for service in services:
                for agent, card in self._cards.get(service, ()):
                    if lo - margin <= card.t_ns <= hi and (
                        not agent or not task.agents or agent in task.agents
                    ):
                        marks.append(card)
        marks.sort(key=lambda m: m.t_ns)
        bars = sorted(task.bars, key=lambda b: (b.start_ns, b.service))
        return TaskView(task_id, services, bars, marks, list(task.windows), task.dropped)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _details(attrs: Mapping[str, object], names: Iterable[str]) -> str:
    return ", ".join(f"{n}={attrs[n]}" for n in names if n in attrs)[: 2 * MAX_TEXT]
