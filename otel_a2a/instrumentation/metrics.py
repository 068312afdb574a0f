"""The metric contract's instruments (docs/semantic-conventions.md), on meter ``otel_a2a``.

Metrics are recorded whatever the trace sampler decides: detection must not depend on sampling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation, get_meter

from otel_a2a import semconv as sc
from otel_a2a.detect import Detector
from otel_a2a.instrumentation import collection
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
        return [Observation(n, {sc.AGENT_NAME: label}) for label, n in counts]


class A2AMetrics:
    """The metric contract's instruments for one runtime.

    A meter returns the instrument it already has for a name, and keeps that instrument's
    callbacks: after ``uninstrument()`` and ``instrument()`` on the same meter provider, the
    first callbacks would still read the first runtime's ledger. So the observable
    instruments read whichever ``A2AMetrics`` is active (see :func:`activate`), and nothing
    holds a retired ledger.
    """

    def __init__(self, detector: Detector, meter_provider: MeterProvider | None = None) -> None:
        meter: Meter = get_meter(sc.SCOPE, __version__, meter_provider)
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
        # the worker's side (instrumentation/server)
        self.unfinished = meter.create_counter(
            sc.M_TASKS_UNFINISHED,
            unit="{task}",
            description="Tasks a worker accepted and never finished: neither terminal nor "
            "interrupted, with no live execution",
        )
        meter.create_observable_counter(
            sc.M_GET_REDUNDANT,
            [_observe_redundant],
            unit="{request}",
            description="GetTask requests sent while the last observation was authoritative",
        )
        meter.create_observable_counter(
            sc.M_EVICTED,
            [_observe_evicted],
            unit="{task}",
            description="Tasks evicted from the bounded ledger",
        )
        meter.create_observable_gauge(
            sc.M_TRACKED, [_observe_tracked], unit="{task}", description="Tracked tasks"
        )
        meter.create_observable_gauge(
            sc.M_STALE,
            [_observe_stale],
            unit="{task}",
            description="Non-terminal tasks whose last observation is older than the heartbeat",
        )

    def agent(self, agent: str) -> str:
        """The ``a2a.agent.name`` label of an agent key: its card's name, else the key."""
        return self.label(agent, self.detector.registry.name(agent))

    def label(self, agent: str, name: str | None) -> str:
        """The label of an agent key whose card's name is ``name``."""
        return self.labels(name) if name else self.labels(agent, address=True)


_active: A2AMetrics | None = None


def activate(metrics: A2AMetrics | None) -> None:
    """Make ``metrics`` the one the observable instruments report (None: report nothing)."""
    global _active
    _active = metrics


# The callbacks that take a lock are otel-a2a's work (see ``collection``): a collection inside
# one may run a finaliser that reaches otel-a2a. The SDK is collecting: no drain here.


def _observe_redundant(options: CallbackOptions) -> Iterable[Observation]:
    m = _active
    if m is None or not collection.enter(drain=False):
        return []
    try:
        return m.redundant.observe(options)
    finally:
        collection.leave()


def _observe_evicted(_options: CallbackOptions) -> Iterable[Observation]:
    m = _active
    return [Observation(m.detector.evicted_total)] if m is not None else []


def _observe_tracked(_options: CallbackOptions) -> Iterable[Observation]:
    m = _active
    if m is None or not collection.enter(drain=False):
        return []
    try:
        counts = m.detector.tracked_by_class()
    finally:
        collection.leave()
    return [Observation(n, {sc.TASK_STATE_CLASS: cls.value}) for cls, n in counts.items()]


def _observe_stale(_options: CallbackOptions) -> Iterable[Observation]:
    m = _active
    if m is None or not collection.enter(drain=False):
        return []
    try:
        totals: dict[str, int] = {}
        for agent, n in m.detector.stale_by_agent(time.monotonic()).items():
            label = m.agent(agent)
            totals[label] = totals.get(label, 0) + n
    finally:
        collection.leave()
    return [Observation(n, {sc.AGENT_NAME: label}) for label, n in totals.items()]
