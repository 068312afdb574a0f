"""The detector: ledger + card registry + invariant, in the calls the instrumentation makes.

Pure: no I/O, no clock (every call takes ``now``, monotonic seconds), no OpenTelemetry. The
instrumentation turns the verdicts into span events, log records and metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from otel_a2a.detect.generations import GAP, Generations
from otel_a2a.detect.invariant import (
    is_redundant_get,
    judge_decision,
    judge_observation,
    judge_task_not_found,
)
from otel_a2a.detect.ledger import LATE, Ledger, Observation, TaskLedger
from otel_a2a.detect.registry import DEFAULT_HEARTBEAT, CardRegistry
from otel_a2a.detect.resolutions import Resolution, Resolutions
from otel_a2a.detect.verdict import DivergenceReason, Evidence, Verdict
from otel_a2a.protocol.model import CardInfo, Operation, TaskReport
from otel_a2a.protocol.states import StateClass, TaskState

ERROR_REPLY = "error-reply"  # the source of observations read from error replies
_UNKNOWN = TaskState.UNKNOWN
_TERMINAL = StateClass.TERMINAL
_ACTIVE = StateClass.ACTIVE


class AgentView(Protocol):
    """An agent as resolved at one moment: its key, the card etag then in force (None without
    a card) and its heartbeat in seconds. A caller resolves it once (:meth:`Detector.agent`)
    for the calls of one exchange instead of every call looking the registry up again."""

    @property
    def key(self) -> str: ...

    @property
    def etag(self) -> str | None: ...

    @property
    def heartbeat(self) -> float: ...


class Agent(NamedTuple):
    """The plain :class:`AgentView`."""

    key: str
    etag: str | None
    heartbeat: float


@dataclass(frozen=True, slots=True)
class CardUpdate:
    """Result of a card fetch: the agent key, the etag of the card fetched (the one in
    force, unless the server serves one card per ``A2A-Version``), whether it changed."""

    agent: str
    etag: str | None
    etag_changed: bool
    heartbeat: float
    heartbeat_source: str
    card: CardInfo | None  # the agent's card now (a 304 keeps the one recorded)


class Detector:
    """Tracks observations and judges decisions against the invariant. Thread-safe.

    ``heartbeat_overrides`` maps ``host[:port]`` to seconds. ``ledger`` is where the
    observations live: by default a :class:`TaskLedger` of ``max_tasks`` in this process.
    """

    def __init__(
        self,
        max_tasks: int = 100_000,
        default_heartbeat: float = DEFAULT_HEARTBEAT,
        heartbeat_overrides: Mapping[str, float] | None = None,
        *,
        max_agents: int = 1000,
        ledger: Ledger | None = None,
    ) -> None:
        self.ledger: Ledger = TaskLedger(max_tasks) if ledger is None else ledger
        self.generations = Generations(max_tasks)
        self.resolutions = Resolutions(max_tasks)
        self.registry = CardRegistry(
            max_agents,
            default_heartbeat=default_heartbeat,
            heartbeat_overrides=heartbeat_overrides,
        )

    # -- inputs ---------------------------------------------------------------------------------

    def on_card(
        self,
        card_url: str,
        card: CardInfo | None,
        variant: str | None = None,
        now: float | None = None,
    ) -> CardUpdate:
        """A well-known card response from ``card_url`` at ``now``; ``card`` None for
        ``304``; ``variant`` which card the fetch asked for (see ``CardRegistry.update``)."""
        registry = self.registry
        agent = registry.agent_key(card_url)
        if card is None:
            registry.touch_304(agent)
            changed = False
        else:
            changed = registry.update(agent, card, variant, now)
        heartbeat, source = registry.heartbeat(agent)
        etag = registry.variant_etag(agent, variant)
        return CardUpdate(agent, etag, changed, heartbeat, source, registry.card(agent))

    def agent(self, key: str) -> Agent:
        """The agent of ``key`` as it stands now."""
        return Agent(key, self.registry.etag(key), self.registry.heartbeat(key)[0])

    def on_reports(
        self,
        agent: AgentView,
        reports: Sequence[TaskReport],
        source: Operation | str,
        now: float,
    ) -> list[Verdict]:
        """Record authoritative observations; return the observation-side divergences.

        Each report with a state becomes the task's last observation under ``agent.etag``. A
        report without a state (an artifact update) only refreshes the time of a task already
        tracked. The wire layer already judged each spelling's exactness against the
        protocol version and binding (``StateReading.exact``).
        """
        verdicts: list[Verdict] = []
        if not reports:
            return verdicts
        key, etag = agent.key, agent.etag
        op = (
            source
            if type(source) is str
            else (source.value if isinstance(source, Operation) else str(source))
        )
        ledger = self.ledger
        for report in reports:
            reading = report.state
            if report.generation is not None:  # A2A 1.1 peers only
                late = reading is not None and self._late(report, now)
                if not late:
                    self._generation(agent, report, report.generation, verdicts)
            if reading is None:
                ledger.touch(report.task_id, now)
                continue
            state = reading.state
            cls = state.state_class
            terminal = cls is _TERMINAL
            if (
                reading.exact
                and reading.mapped
                and not terminal
                and ledger.reobserve(report.task_id, key, state, reading.raw, True, op, etag, now)
            ):
                continue  # the same observation again, only later: nothing to judge
            stamp = report.timestamp
            obs = Observation(
                report.task_id,
                key,
                state,
                reading.raw,
                reading.exact,
                now,
                etag,
                op,
                # kept where order matters (a state owing no heartbeat); parsed only then
                None if cls is _ACTIVE else stamp,
            )
            prev = ledger.observe(obs, None if terminal else stamp)
            if prev is LATE:  # older than what the ledger holds: no transition to judge,
                prev = None  # but its spelling is still what the agent sent
            if (
                reading.exact
                and reading.mapped
                and (prev is None or prev._kind.state_class is not _TERMINAL)
            ):
                continue  # fast path: nothing on the observation side can hold
            verdicts.extend(
                judge_observation(
                    prev,
                    reading,
                    task_id=report.task_id,
                    etag_now=etag,
                    heartbeat=agent.heartbeat,
                    now=now,
                    agent=key,
                )
            )
        return verdicts

    def _late(self, report: TaskReport, now: float) -> bool:
        """Whether ``report`` is older than the task's recorded observation by its status
        timestamp (a frame overtaken by a newer one): its generation says nothing new."""
        held = self.ledger.get(report.task_id)
        stamp = report.timestamp
        return (
            held is not None
            and stamp is not None
            and held.stamp is not None
            and stamp < held.stamp
            and len(stamp) == len(held.stamp)
        )

    def _generation(
        self, agent: AgentView, report: TaskReport, generation: int, verdicts: list[Verdict]
    ) -> None:
        found = self.generations.see(report.task_id, generation, report.kind)
        if found is None:
            return
        reading = report.state
        reason = (
            DivergenceReason.GENERATION_GAP
            if found == GAP
            else DivergenceReason.GENERATION_REGRESSION
        )
        evidence = Evidence(
            report.task_id,
            agent.key,
            reading.state if reading is not None else None,
            reading.raw if reading is not None else None,
            0.0,
            agent.etag,
            agent.etag,
            agent.heartbeat,
        )
        verdicts.append(Verdict(reason, evidence))

    def on_error_reply(self, agent: AgentView, report: TaskReport, now: float) -> bool:
        """An error reply stated the task's state (``report``, kind ``"error-reply"``): record
        it as an observation of source :data:`ERROR_REPLY`. Returns whether it was recorded.

        Nothing is judged on it: the task ended between the caller's last observation and its
        request, a race, which the decision taken before the request was already judged on;
        the next decision is judged on what the reply said (a stated terminal state:
        ``terminal_state``). A reply that leaves the state unsaid (TaskNotCancelable without
        one) records an ``unknown`` observation, which authorises nothing, when it contradicts
        a belief that the task is live; it is consistent with a terminal observation or with
        none, so neither changes. A stated non-terminal state never reopens a terminal task.
        """
        reading = report.state
        if reading is None:
            return False
        prev = self.ledger.get(report.task_id)
        held_terminal = prev is not None and prev.state.is_terminal
        if reading.state is _UNKNOWN:
            if prev is None or held_terminal:
                return False
        elif held_terminal and not reading.state.is_terminal:
            return False
        obs = Observation(
            report.task_id,
            agent.key,
            reading.state,
            reading.raw,
            reading.exact,
            now,
            agent.etag,
            ERROR_REPLY,
        )
        return self.ledger.observe(obs) is not LATE

    def on_stream_frame(self, task_id: str, now: float) -> bool:
        """Any frame on an open stream for the task (event or ``: ping``) refreshes it."""
        return self.ledger.touch(task_id, now)

    def on_task_not_found(self, task_id: str, now: float) -> Verdict | None:
        """The agent answered TaskNotFound: ``task_lost`` if it was live; forget it either way."""
        prev = self.ledger.forget(task_id)
        if prev is None:
            return None
        return judge_task_not_found(
            prev,
            now=now,
            etag_now=self.registry.etag(prev.agent),
            heartbeat=self.registry.heartbeat(prev.agent)[0],
        )

    # -- judgements -----------------------------------------------------------------------------

    def decide(
        self, task_id: str, agent: AgentView | None, now: float, assumes_live: bool = True
    ) -> Verdict:
        """Judge a liveness decision on the task at ``agent`` (None: where it was observed);
        ``assumes_live=False`` for a decision that assumes the task ended."""
        obs = self.ledger.get(task_id)
        if agent is None and obs is not None:
            agent = self.agent(obs.agent)
        if agent is None:
            heartbeat = self.registry.default_heartbeat
            verdict = judge_decision(task_id, obs, None, heartbeat, now, None, assumes_live)
        else:
            verdict = judge_decision(
                task_id, obs, agent.etag, agent.heartbeat, now, agent.key, assumes_live
            )
        if verdict.reason is not None:
            self.resolutions.open(task_id, verdict.reason, assumes_live, now)
        return verdict

    def resolve(
        self, task_id: str, state: TaskState | None, now: float, accepted: bool = False
    ) -> list[Resolution]:
        """The divergences of earlier decisions on ``task_id`` that an authoritative
        observation of ``state`` at ``now`` resolves (``state`` None: the agent answered
        TaskNotFound; ``accepted``: the agent's successful reply to an action on the task);
        see :mod:`otel_a2a.detect.resolutions`."""
        return self.resolutions.resolve(task_id, state, now, accepted)

    def redundant_get(self, task_id: str, agent: AgentView, now: float) -> bool:
        """Whether a ``GetTask`` issued now is redundant; call it before recording its result."""
        obs = self.ledger.get(task_id)
        if obs is None:
            return False
        return is_redundant_get(obs, agent.etag, now, agent.heartbeat)

    # -- gauges ---------------------------------------------------------------------------------

    def stale_by_agent(self, now: float) -> dict[str, int]:
        """``otel_a2a.task.stale`` per agent key: active tasks past the heartbeat (0 for agents
        with non-terminal tasks, none stale; interrupted tasks wait for the caller, never
        stale)."""
        registry = self.registry
        return self.ledger.stale_by_agent(now, lambda agent: registry.heartbeat(agent)[0])

    def tracked_by_class(self) -> dict[StateClass, int]:
        """``otel_a2a.task.tracked`` per state class."""
        return self.ledger.counts_by_class()

    @property
    def evicted_total(self) -> int:
        """``otel_a2a.task.evicted`` (monotonic count since start)."""
        return self.ledger.evicted_total
