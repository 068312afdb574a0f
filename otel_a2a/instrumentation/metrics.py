"""The metric contract's instruments (docs/semantic-conventions.md), on meter ``otel_a2a``.

Metrics are recorded whatever the trace sampler decides: detection must not depend on sampling.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation, get_meter

from otel_a2a import semconv as sc
from otel_a2a.detect import Detector
from otel_a2a.instrumentation.reentry import GUARD
from otel_a2a.locks import fork_safe
from otel_a2a.version import __version__


class Tally:
    """Per-agent counts kept in process and reported by an observable counter.

    A synchronous ``Counter.add`` costs tens of µs in the SDK; redundant polls are the one
    count taken on the hot path of every over-polling client, so they are tallied here (a
    lock and a dict) and read at collection. Labels are capped, so the dict is bounded.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        fork_safe(self, "_lock")

    def add(self, label: str) -> None:
        with self._lock:
            self._counts[label] = self._counts.get(label, 0) + 1

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            counts = list(self._counts.items())
        return [Observation(n, {sc.AGENT_LABEL: label}) for label, n in counts]


class A2AMetrics:
    """The metric contract's instruments for one runtime.

    A meter returns the instrument it already has for a name, and keeps that instrument's
    callbacks: after ``uninstrument()`` and ``instrument()`` on the same meter provider, the
    first callbacks would still read the first runtime's ledger. So the observable
    instruments read whichever ``A2AMetrics`` ``active`` answers (the runtime in force's),
    and nothing holds a retired ledger.
    """

    def __init__(
        self,
        detector: Detector,
        meter_provider: MeterProvider | None,
        active: Callable[[], A2AMetrics | None],
    ) -> None:
        meter: Meter = get_meter(sc.SCOPE, __version__, meter_provider, schema_url=sc.SCHEMA_URL)
        self.detector = detector
        self.labels = sc.AgentLabels()
        self.redundant = Tally()
        self.divergence = meter.create_counter(
            sc.M_DIVERGENCE,
            unit="{divergence}",
            description="Divergent liveness decisions and observations, by reason",
        )
        self.decisions = meter.create_counter(
            sc.M_DECISIONS, unit="{decision}", description="Liveness decisions by outcome"
        )
        self.observation_age = meter.create_histogram(
            sc.M_OBSERVATION_AGE,
            unit="s",
            description="Age of the last authoritative observation when a decision was taken",
            explicit_bucket_boundaries_advisory=list(sc.AGE_BUCKETS),
        )
        self.etag_changes = meter.create_counter(
            sc.M_ETAG_CHANGES, unit="{change}", description="Agent Card etag changes seen"
        )
        self.errors = meter.create_counter(
            sc.M_ERRORS, unit="{error}", description="Internal failures of otel-a2a (contained)"
        )
        self.resolutions = meter.create_counter(
            sc.M_RESOLUTIONS,
            unit="{divergence}",
            description="Divergences resolved by the next authoritative observation of their "
            "task, by reason and outcome (confirmed: the decision's belief was wrong; refuted: "
            "it held)",
        )
        meter.create_observable_gauge(
            sc.M_UNRESOLVED,
            [functools.partial(_observe_unresolved, active)],
            unit="{divergence}",
            description="Divergences no observation of their task has resolved for longer than "
            f"{sc.UNRESOLVED_AFTER:g} s, by reason",
        )
        # the worker's side (instrumentation/server)
        self.unfinished = meter.create_counter(
            sc.M_TASKS_UNFINISHED,
            unit="{task}",
            description="Tasks a worker accepted and never finished: neither terminal nor "
            "interrupted, with no live execution",
        )
        self.push_deliveries = meter.create_counter(
            sc.M_PUSH_DELIVERIES,
            unit="{delivery}",
            description="Push notifications the application's webhooks received, by outcome",
        )
        meter.create_observable_counter(
            sc.M_GET_REDUNDANT,
            [functools.partial(_observe_redundant, active)],
            unit="{request}",
            description="GetTask requests sent while the last observation was authoritative",
        )
        meter.create_observable_counter(
            sc.M_EVICTED,
            [functools.partial(_observe_evicted, active)],
            unit="{task}",
            description="Tasks evicted from the bounded ledger",
        )
        meter.create_observable_gauge(
            sc.M_TRACKED,
            [functools.partial(_observe_tracked, active)],
            unit="{task}",
            description="Tracked tasks",
        )
        meter.create_observable_gauge(
            sc.M_STALE,
            [functools.partial(_observe_stale, active)],
            unit="{task}",
            description="Non-terminal tasks whose last observation is older than the heartbeat",
        )

    def agent(self, agent: str) -> str:
        """The ``otel_a2a.agent.name`` label of an agent key: its card's name, else the key."""
        return self.label(agent, self.detector.registry.name(agent))

    def label(self, agent: str, name: str | None) -> str:
        """The label of an agent key whose card's name is ``name``."""
        return self.labels(name) if name else self.labels(agent, address=True)


Active = Callable[[], A2AMetrics | None]

# The callbacks that take a lock are otel-a2a's work (see ``reentry``): a collection inside
# one may run a finaliser that reaches otel-a2a. The SDK is collecting: nothing deferred runs.


def _observe_redundant(active: Active, options: CallbackOptions) -> Iterable[Observation]:
    m = active()
    if m is None or not GUARD.enter(run_deferred=False):
        return []
    try:
        return m.redundant.observe(options)
    finally:
        GUARD.leave()


def _observe_evicted(active: Active, _options: CallbackOptions) -> Iterable[Observation]:
    m = active()
    return [Observation(m.detector.evicted_total)] if m is not None else []


def _observe_tracked(active: Active, _options: CallbackOptions) -> Iterable[Observation]:
    m = active()
    if m is None or not GUARD.enter(run_deferred=False):
        return []
    try:
        counts = m.detector.tracked_by_class()
    finally:
        GUARD.leave()
    return [Observation(n, {sc.TASK_STATE_CLASS: cls.value}) for cls, n in counts.items()]


def _observe_stale(active: Active, _options: CallbackOptions) -> Iterable[Observation]:
    m = active()
    if m is None or not GUARD.enter(run_deferred=False):
        return []
    try:
        totals: dict[str, int] = {}
        for agent, n in m.detector.stale_by_agent(time.monotonic()).items():
            label = m.agent(agent)
            totals[label] = totals.get(label, 0) + n
    finally:
        GUARD.leave()
    return [Observation(n, {sc.AGENT_LABEL: label}) for label, n in totals.items()]


def _observe_unresolved(active: Active, _options: CallbackOptions) -> Iterable[Observation]:
    m = active()
    if m is None or not GUARD.enter(run_deferred=False):
        return []
    try:
        counts = m.detector.resolutions.unresolved(time.monotonic(), sc.UNRESOLVED_AFTER)
    finally:
        GUARD.leave()
    return [Observation(n, {sc.DIVERGENCE_REASON: r.value}) for r, n in counts.items()]
