"""The invariant judged from spans, per service and task: the detector's side of it. Pure.

A service with otel-a2a inside judges its own decisions. One without (a Go, JVM or Node
caller) leaves spans only; when they follow OpenTelemetry's A2A convention (or a dialect
:mod:`~otel_a2a.analyze.dialects` reads) they say what it observed and what it decided, and
this module judges those with the in-process rules themselves: one
:class:`~otel_a2a.detect.Detector`, its ledger keyed by service and task, its card registry by
service and agent, the clock being span time.

What a span is (:func:`span_acts`):

- an **observation**: a ``CLIENT`` span carrying a task state for its task, at its end, and
  each ``otel_a2a.task.status`` event of a stream span, at the event's time. With an
  ``error.type`` it is an error reply that stated the state (recorded, not judged, as
  in-process); an error reply saying TaskNotFound (``otel_a2a.error.reason`` ``TASK_NOT_FOUND``
  or JSON-RPC ``-32001``) is the answer ``task_lost`` is judged on;
- a **decision**, at its start: a ``CLIENT`` ``CancelTask`` or
  ``CreateTaskPushNotificationConfig`` naming a task, a ``SendMessage`` or
  ``SendStreamingMessage`` following up on one, and any span marked
  ``otel_a2a.liveness.decision`` (its ``otel_a2a.decision.assumed_state`` read as in-process).
  The convention's ``a2a.task.id`` does not say whether the request named the task or the reply
  created it, so a send is a follow-up when the task existed before it: the service observed
  it, or a reply or status event of any service had named it before the send started (the
  sharded tier sends all of a task's spans to one detector). A span's start is no proof: the
  caller's request that a gateway forwards starts first and names the task only by its reply;
- a **card fetch**: a ``CLIENT`` ``GetAgentCard`` span with ``otel_a2a.card.etag`` or
  ``otel_a2a.card.heartbeat_interval``: the etag in force for that service and agent, and its
  heartbeat (else ``--heartbeat-overrides``, else ``--default-heartbeat``, as
  ``OTEL_A2A_HEARTBEAT_OVERRIDES`` and ``OTEL_A2A_DEFAULT_HEARTBEAT`` in-process).

The agent is ``otel_a2a.agent.url`` when a span has it, else ``server.address`` and
``server.port``. A service whose spans come from the ``otel_a2a`` instrumentation scope, or
carry ``otel_a2a.observation.authoritative`` (only otel-a2a's runtime writes it), judges
itself: none of its spans is judged here, from the first such span on.

Order: spans reach the detector in batches, late, and not in the order they happened. Each
act waits ``hold`` seconds of the detector's clock after it arrived, in a queue ordered by
span time, and leaves it only once every act before it in span time has left: acts are judged
in span-time order. An act that arrives after a later one of its service and task was judged
is late: a late observation is recorded only when newer than what is held (the ledger's own
rule) and a late decision is not judged; both are counted (``Stats.late``).
"""

from __future__ import annotations

import heapq
import itertools
import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import quote

from otel_a2a import semconv as sc
from otel_a2a.analyze import dialects
from otel_a2a.analyze.model import (
    NANOS,
    Act,
    Finding,
    finding_json,
    format_time,
    render_finding,
)
from otel_a2a.detect.detector import Agent, Detector
from otel_a2a.detect.registry import DEFAULT_HEARTBEAT
from otel_a2a.detect.verdict import DivergenceReason, Verdict
from otel_a2a.protocol.model import Binding, CardInfo, Operation, TaskReport
from otel_a2a.protocol.states import StateReading, TaskState, normalize_task_state, read_state

OBSERVE = "observe"
ERROR_REPLY = "error-reply"
LOST = "lost"
DECIDE = "decide"
CARD = "card"
SEEN = "seen"  # a span of a service that judges itself, or not a client's: the task existed


CLIENT = 3  # SpanKind.SPAN_KIND_CLIENT in OTLP (the protobuf and OTLP JSON value)
CLIENT_NAME = "SPAN_KIND_CLIENT"  # the same, as MessageToDict writes it without integers
SCOPE = sc.SCOPE  # otel-a2a's instrumentation scope: a service judging itself
_SEP = "\x1f"  # between service and task in the ledger's key (never in an id read here)

_DECISION_OPS = frozenset(
    {
        Operation.CANCEL_TASK.value,
        Operation.CREATE_PUSH_CONFIG.value,
    }
)
_SEND_OPS = frozenset({Operation.SEND_MESSAGE.value, Operation.SEND_STREAMING_MESSAGE.value})
_CARD_OP = Operation.GET_AGENT_CARD.value
_RAW_KEYS = (sc.TASK_STATE_RAW, dialects.LEGACY_STATE_RAW)
_AUTHORITATIVE = (sc.AUTHORITATIVE, dialects.LEGACY_AUTHORITATIVE)
_TASK_NOT_FOUND = "TASK_NOT_FOUND"
_JSONRPC_TASK_NOT_FOUND = "-32001"
# a spelling judged when a span names no version and binding: exact under any of them is exact
# (as the in-process span processor reads another tracer's span)
_ANY_WIRE = (("1.0", Binding.JSONRPC), ("0.3", Binding.JSONRPC), ("0.3", Binding.GRPC))
_MAX_TEXT = 256
# Bytes one held act costs (the tuple, its heap entry, two ints; strings counted apart)
ACT_BYTES = 400


def _text(attrs: Mapping[str, object], key: str) -> str:
    value = attrs.get(key)
    return value[:_MAX_TEXT] if isinstance(value, str) else ""


def agent_url(attrs: Mapping[str, object]) -> str:
    """Where the span's request went: ``otel_a2a.agent.url``, else ``server.address`` and
    ``server.port`` as a URL (their ``host[:port]`` is what heartbeat overrides name)."""
    url = _text(attrs, sc.AGENT_URL)
    if url:
        return url
    host = _text(attrs, sc.SERVER_ADDRESS)
    if not host:
        return ""
    if ":" in host:
        host = f"[{host}]"
    port = attrs.get(sc.SERVER_PORT)
    if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
        return f"{'https' if port == 443 else 'http'}://{host}:{port}"
    return f"http://{host}"


def state_reading(attrs: Mapping[str, object]) -> StateReading | None:
    """The state a span (or event) carries: its wire spelling judged under the span's version
    and binding when it has both (any of them when not), else the canonical value, which is
    exact (``non_canonical_state`` needs the spelling)."""
    for key in _RAW_KEYS:
        raw = attrs.get(key)
        if isinstance(raw, str) and raw:
            raw = raw[:_MAX_TEXT]
            version = attrs.get(sc.PROTOCOL_VERSION)
            binding = _binding(attrs.get(sc.BINDING))
            if isinstance(version, str) and binding is not None:
                return read_state(raw, version, binding)
            readings = [read_state(raw, v, b) for v, b in _ANY_WIRE]
            return next((r for r in readings if r.exact), readings[0])
    reading = dialects.read(attrs).state
    if reading is None:
        return None
    state, raw = reading
    return StateReading(raw, state, state is not TaskState.UNKNOWN, True)


def _binding(value: object) -> Binding | None:
    try:
        return Binding(value)
    except ValueError:
        return None


def judges_itself(scope: str, attrs: Mapping[str, object]) -> bool:
    """Whether a span shows its service running otel-a2a in-process: its scope, or an
    authoritative observation of a task (a span naming none is not read on every path)."""
    return scope == SCOPE or (
        not dialects.TASK_KEYS.isdisjoint(attrs)
        and any(attrs.get(key) is True for key in _AUTHORITATIVE)
    )


def span_acts(
    service: str,
    self_judging: bool,
    kind: object,
    attrs: Mapping[str, object],
    start: int,
    end: int | None,
    events: Sequence[tuple[object, Mapping[str, object], int | None]],
    span_id: str,
    trace_id: str,
) -> list[Act]:
    """The acts of one span (see the module). A span of a service that judges itself
    (``self_judging``) only says that its task existed by the span's end."""
    end = start if end is None or end < start else end
    client = kind in (CLIENT, CLIENT_NAME)
    if self_judging or not (client or dialects.decision(attrs)):
        # the task existed: all such a span gives (read alone: most spans a detector gets)
        task_id = dialects.task_id(attrs)
        return (
            [_act(SEEN, start, service, task_id, start, end, span_id, trace_id)] if task_id else []
        )
    said = dialects.read(attrs)
    task_id, op, explicit = said.task_id, said.operation, said.decision
    url, name = agent_url(attrs), said.agent_name

    def act(what: str, at: int, task: str, reading: StateReading | None = None) -> Act:
        known = at if what == OBSERVE else end  # a status event's time, else the reply's
        return _act(
            what, at, service, task, start, known, span_id, trace_id, url, name, op,
            reading=reading,
        )  # fmt: skip

    if client and op == _CARD_OP:
        etag = _text(attrs, sc.CARD_ETAG) or None
        beat = attrs.get(sc.CARD_HEARTBEAT)
        heartbeat = float(beat) if isinstance(beat, (int, float)) and beat > 0 else None
        if not url or (etag is None and heartbeat is None):
            return []
        return [act(CARD, end, "")._replace(etag=etag, heartbeat=heartbeat)]
    if not task_id:
        return []
    acts: list[Act] = []
    if explicit or (client and (op in _DECISION_OPS or op in _SEND_OPS)):
        decision = act(DECIDE, start, task_id)._replace(explicit=explicit)
        if explicit:
            assumed = attrs.get(sc.ASSUMED_STATE)
            live = assumed is None or not normalize_task_state(assumed).is_terminal
            decision = decision._replace(assumes_live=live, operation=op or sc.OP_DECISION)
        acts.append(decision)
    if not client:
        return acts
    for event_name, event_attrs, when in events:
        if event_name in dialects.STATUS_EVENTS and when is not None:
            event_task = _text(event_attrs, sc.TASK_ID)
            reading = state_reading(event_attrs)
            if event_task and reading is not None:
                acts.append(act(OBSERVE, min(max(when, start), end), event_task, reading))
    error_type = _text(attrs, sc.ERROR_TYPE)
    if error_type and (
        _text(attrs, sc.ERROR_REASON) == _TASK_NOT_FOUND or error_type == _JSONRPC_TASK_NOT_FOUND
    ):
        acts.append(act(LOST, end, task_id))
        return acts
    reading = state_reading(attrs)
    if reading is not None:
        acts.append(act(ERROR_REPLY if error_type else OBSERVE, end, task_id, reading))
    return acts


def _act(
    kind: str,
    at: int,
    service: str,
    task_id: str,
    born: int,
    known: int,
    span_id: str,
    trace_id: str,
    agent: str = "",
    agent_name: str = "",
    operation: str = "",
    *,
    reading: StateReading | None = None,
) -> Act:
    return _new(Act, (
        at, kind, service, task_id, agent, agent_name, operation, reading, None, None, True,
        False, born, known, span_id, trace_id,
    ))  # fmt: skip


_new = tuple.__new__  # a named tuple's generated ``__new__`` costs a µs per span


def note_known(
    known: dict[str, int], attrs: Mapping[str, object], start: int, end: int | None
) -> None:
    """A span of a service that judges itself: all it gives the judge is that its task existed
    by the span's end, and of a batch's spans only the earliest per task counts (one act per
    task instead of one per span: most spans a detector gets are of such services)."""
    task_id = dialects.task_id(attrs)
    if task_id:
        at = start if end is None or end < start else end
        if at < known.get(task_id, at + 1):
            known[task_id] = at


def seen_acts(known: Mapping[str, int]) -> list[Act]:
    """The acts :func:`note_known` gathered (as :func:`span_acts` gives them, one per task)."""
    return [_act(SEEN, at, "", task_id, at, at, "", "") for task_id, at in known.items()]


class ServiceFinding(NamedTuple):
    """A divergence of one service's decision or observation, judged from its spans."""

    reason: DivergenceReason
    service: str
    task_id: str
    operation: str
    agent: str
    agent_name: str
    at_ns: int
    span_id: str
    trace_id: str
    last_state: TaskState | None
    last_state_raw: str | None
    age: float | None
    heartbeat: float
    etag_now: str | None
    etag_observed: str | None

    @property
    def services(self) -> tuple[str]:
        return (self.service,)


def render_service_finding(f: ServiceFinding) -> str:
    """One readable line: task, reason, the service and what it did, the evidence."""
    seen = (
        "no observation"
        if f.last_state is None
        else f"last observed {f.last_state.value} ({f.last_state_raw!r}) {f.age:.3f}s before"
    )
    etags = f", etag {f.etag_observed!r} then, {f.etag_now!r} now" if f.etag_now else ""
    agent = f.agent_name or f.agent or "-"
    return (
        f"task {f.task_id}: {f.reason.value}: {f.service} {f.operation} to {agent} at "
        f"{format_time(f.at_ns)} ({f.span_id or '-'}): {seen}, heartbeat {f.heartbeat:g}s{etags}"
    )


def service_finding_json(f: ServiceFinding) -> dict[str, object]:
    """The ``--json`` form (one object per line)."""
    return {
        "reason": f.reason.value,
        "task_id": f.task_id,
        "service": f.service,
        "services": [f.service],
        "operation": f.operation,
        "agent": f.agent,
        "agent_name": f.agent_name,
        "at_ns": f.at_ns,
        "at": format_time(f.at_ns),
        "span_id": f.span_id,
        "trace_id": f.trace_id,
        "last_state": f.last_state.value if f.last_state is not None else None,
        "last_state_raw": f.last_state_raw,
        "age": f.age,
        "heartbeat": f.heartbeat,
        "etag_now": f.etag_now,
        "etag_observed": f.etag_observed,
    }


def render_any_finding(f: Finding | ServiceFinding) -> str:
    return render_service_finding(f) if isinstance(f, ServiceFinding) else render_finding(f)


def any_finding_json(f: Finding | ServiceFinding) -> dict[str, object]:
    return service_finding_json(f) if isinstance(f, ServiceFinding) else finding_json(f)


class FleetJudgeOptions(NamedTuple):
    """The judge's flags: ``--default-heartbeat``, ``--heartbeat-overrides``, ``--hold``."""

    default_heartbeat: float = DEFAULT_HEARTBEAT
    heartbeat_overrides: Mapping[str, float] = {}
    hold: float = 2.0


def summary(judge: FleetJudge | None) -> str:
    """The judge's part of the line printed at the end of a run."""
    if judge is None:
        return "no service judged"
    s = judge.stats
    return (
        f"{s.judged} decisions judged from spans, {s.findings} service findings, {s.late} late "
        f"span act(s), {s.in_process} act(s) of services judging themselves left alone"
    )


@dataclass
class Stats:
    acts: int = 0
    judged: int = 0  # decisions judged
    findings: int = 0
    late: int = 0  # acts that arrived after a later act of their service and task was judged
    not_follow_up: int = 0  # sends that created their task: no decision
    in_process: int = 0  # acts of services that judge themselves, left alone
    forced: int = 0  # acts judged before their hold ended: the queue was full


class _Held(NamedTuple):
    at_ns: int
    seq: int
    arrived: float
    act: Act


def _act_bytes(act: Act) -> int:
    return ACT_BYTES + sum(
        sys.getsizeof(s) for s in (act.service, act.task_id, act.agent, act.span_id)
    )


class FleetJudge:
    """Acts in, findings out, in span-time order; see the module. Not thread-safe (the live
    analyzer holds its lock). ``now`` is the caller's monotonic clock, for the hold only."""

    def __init__(
        self,
        *,
        max_tasks: int = 10_000,
        default_heartbeat: float = DEFAULT_HEARTBEAT,
        heartbeat_overrides: Mapping[str, float] | None = None,
        hold: float = 2.0,
        max_bytes: int = 16 * 1024 * 1024,
        max_services: int = 1_000,
    ) -> None:
        self.detector = Detector(
            max_tasks, default_heartbeat, heartbeat_overrides, max_agents=max_tasks
        )
        self.hold = hold
        self.max_bytes = max_bytes
        self.held = 0  # bytes of acts waiting, as counted
        self.max_tasks = max(1, max_tasks)
        self.max_services = max(1, max_services)
        self.stats = Stats()
        self._queue: list[_Held] = []
        self._seq = itertools.count()
        self._known: OrderedDict[str, int] = OrderedDict()  # task -> earliest proof it existed
        self._self_judging: OrderedDict[str, None] = OrderedDict()

    def judging_itself(self, service: str) -> None:
        """``service`` runs otel-a2a in-process: none of its acts is judged from now on."""
        marks = self._self_judging
        if service in marks:
            marks.move_to_end(service)
            return
        marks[service] = None
        if len(marks) > self.max_services:
            marks.popitem(last=False)

    def feed(
        self, acts: Iterable[Act], now: float, self_judging: Iterable[str] = ()
    ) -> list[ServiceFinding]:
        """Queue ``acts`` (arrived at ``now``) and judge those whose hold has ended."""
        for service in self_judging:
            self.judging_itself(service)
        queue = self._queue
        for act in acts:
            if act.task_id:
                self._seen(act.task_id, act.known_ns)
            if act.kind == SEEN:
                continue
            if act.service in self._self_judging:
                self.stats.in_process += 1
                continue
            self.stats.acts += 1
            heapq.heappush(queue, _Held(act.at_ns, next(self._seq), now, act))
            self.held += _act_bytes(act)
        found = []
        while self.held > self.max_bytes and queue:
            self.stats.forced += 1
            found += self._judge(self._pop())
        return found + self.tick(now)

    def tick(self, now: float) -> list[ServiceFinding]:
        """Judge the acts whose hold has ended by ``now``, earliest span time first."""
        queue, found = self._queue, []
        while queue and queue[0].arrived + self.hold <= now:
            found += self._judge(self._pop())
        return found

    def flush(self) -> list[ServiceFinding]:
        """Judge every act waiting (the end of a file, a stop)."""
        found = []
        while self._queue:
            found += self._judge(self._pop())
        return found

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _pop(self) -> Act:
        act = heapq.heappop(self._queue).act
        self.held -= _act_bytes(act)
        return act

    def _agent(self, act: Act) -> Agent | None:
        if not act.agent:
            return None
        return self._view(self._agent_key(act.service, act.agent))

    def _view(self, key: str) -> Agent:
        # a card span that gave a heartbeat alone records the etag '': no etag known
        agent = self.detector.agent(key)
        return agent._replace(etag=agent.etag or None)

    def _agent_key(self, service: str, url: str) -> str:
        return self.detector.registry.agent_key(self._card_url(service, url))

    @staticmethod
    def _card_url(service: str, url: str) -> str:
        # one agent per service and agent URL: each service has its own view of the card in
        # force; the URL's host[:port] still names the agent for the heartbeat overrides
        return f"{url.rstrip('/')}/{quote(service, safe='')}/.well-known/agent-card.json"

    def _seen(self, task_id: str, known: int) -> None:
        """A reply or status event named ``task_id`` at ``known``: the task existed then.
        Recorded as spans arrive (an earliest time is the same whatever order they come in),
        so that it is complete for a decision by the time the decision's hold ends."""
        proofs = self._known
        first = proofs.get(task_id)
        if first is None:
            proofs[task_id] = known
            if len(proofs) > self.max_tasks:
                proofs.popitem(last=False)
            return
        proofs.move_to_end(task_id)
        if known < first:
            proofs[task_id] = known

    def _existed(self, act: Act) -> bool:
        """Whether a reply or status event named ``act``'s task before ``act``'s span started."""
        first = self._known.get(act.task_id)
        return first is not None and first < act.born_ns

    def _judge(self, act: Act) -> list[ServiceFinding]:
        if act.service in self._self_judging:
            self.stats.in_process += 1
            return []
        detector = self.detector
        at = act.at_ns / NANOS
        if act.kind == CARD:
            card = CardInfo(
                act.etag or "", "header", act.agent_name or None, None, None, (),
                act.heartbeat, "card-field" if act.heartbeat is not None else None, None, (),
            )  # fmt: skip
            if act.etag is None:  # a heartbeat alone: the etag in force stays
                etag = detector.registry.etag(self._agent_key(act.service, act.agent))
                card = card._replace(etag=etag or "")
            detector.on_card(self._card_url(act.service, act.agent), card, now=at)
            return []
        key = act.service + _SEP + act.task_id
        held = detector.ledger.get(key)
        agent = self._agent(act)
        if act.kind == DECIDE:
            if held is not None and held.at > at:
                self.stats.late += 1  # a later observation was judged already
                return []
            follow_up = act.explicit or act.operation not in _SEND_OPS or held is not None
            if not follow_up and not self._existed(act):
                self.stats.not_follow_up += 1  # the reply created the task
                return []
            self.stats.judged += 1
            return self._found(act, [detector.decide(key, agent, at, act.assumes_live)])
        if held is not None and held.at > at:
            self.stats.late += 1
        if agent is None:
            agent = (
                self._view(held.agent)
                if held is not None
                else Agent("", None, detector.registry.default_heartbeat)
            )
        if act.kind == LOST:
            lost = detector.on_task_not_found(key, at)
            return self._found(act, [lost] if lost is not None else [])
        if act.reading is None:
            return []
        report = TaskReport(key, None, act.reading, "task")
        if act.kind == ERROR_REPLY:
            detector.on_error_reply(agent, report, at)
            return []
        return self._found(act, detector.on_reports(agent, [report], act.operation, at))

    def _found(self, act: Act, verdicts: list[Verdict]) -> list[ServiceFinding]:
        out = []
        for verdict in verdicts:
            ev = verdict.evidence
            if verdict.reason is None:
                continue
            out.append(
                ServiceFinding(
                    verdict.reason, act.service, act.task_id, act.operation, act.agent,
                    act.agent_name, act.at_ns, act.span_id, act.trace_id, ev.last_state,
                    ev.last_state_raw, ev.age, ev.heartbeat, ev.etag_now, ev.etag_observed,
                )
            )  # fmt: skip
        self.stats.findings += len(out)
        return out
