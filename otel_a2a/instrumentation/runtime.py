"""Process-wide state of an instrumented process: settings, detector, tracer, instruments.

Everything that reports a verdict goes through :class:`Runtime` so that a divergence is always
reported the same way: span event, log record and metric, at the instant it is found.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, SeverityNumber, get_logger
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from otel_a2a import semconv as sc
from otel_a2a.detect import Detector, Verdict
from otel_a2a.instrumentation import collection
from otel_a2a.instrumentation.config import Settings
from otel_a2a.instrumentation.metrics import A2AMetrics, activate
from otel_a2a.version import __version__

_log = logging.getLogger("otel_a2a")
_MAX_MEMO_URLS = 1024  # distinct request URLs remembered (task ids in REST paths vary)
UNKNOWN_AGENT = "_UNKNOWN"  # the agent of a decision on a task never seen, no URL given


class Runtime:
    def __init__(
        self,
        settings: Settings,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        self.settings = settings
        self.detector = Detector(
            max_tasks=settings.max_tracked_tasks,
            default_heartbeat=settings.default_heartbeat,
            heartbeat_overrides=settings.heartbeat_overrides,
        )
        self.tracer: Tracer = trace.get_tracer(sc.SCOPE, __version__, tracer_provider)
        self.events = get_logger(sc.SCOPE, __version__, logger_provider)
        self.metrics = A2AMetrics(self.detector, meter_provider)
        # "configure": set up the SDK at the first A2A operation if nothing else did
        # (OTEL_A2A_ENABLED); "attach": add the span processor once a provider exists.
        self.setup_pending: str | None = None
        self.setup_lock = threading.Lock()
        self._agents_by_url: dict[str, str] = {}
        # a new value at every card fetch (``next`` on a count is atomic): a lookup that began
        # before one may hold the previous answer and must not stay memoised
        self._card_fetches = itertools.count(1)
        self._cards_seen = 0

    def agent_for_url(self, url: str, interface: str | None = None) -> str:
        """The agent a request URL belongs to, memoised by ``interface`` (the URL without its
        A2A suffix, which holds task ids in HTTP+JSON paths) or else by the URL: the same few
        interfaces serve every request, and the answer only changes when a card is fetched
        (see ``cards_changed``)."""
        key = interface or url
        agent = self._agents_by_url.get(key)
        if agent is None:
            seen = self._cards_seen
            agent = self.detector.registry.agent_for_url(url)
            memo = self._agents_by_url
            if len(memo) >= _MAX_MEMO_URLS:
                memo.clear()
            memo[key] = agent
            if seen != self._cards_seen:  # a card arrived meanwhile: the answer may be stale
                memo.pop(key, None)
        return agent

    def cards_changed(self) -> None:
        self._cards_seen = next(self._card_fetches)  # first, then clear: see agent_for_url
        self._agents_by_url.clear()

    def error(self, exc: BaseException | str) -> None:
        """Count an internal failure; the host never sees it."""
        kind = exc if isinstance(exc, str) else type(exc).__name__
        if collection.collecting_here():  # a metric now could wait on a lock held here
            collection.count_later(kind)
            return
        try:
            self.metrics.errors.add(1, {sc.ERROR_TYPE: kind})
            _log.debug("otel-a2a internal error: %s", kind, exc_info=not isinstance(exc, str))
        except Exception:  # the error path itself must not raise into the host
            pass

    def resolve_agent(self, task_id: str, hint: object = None) -> str:
        """The agent of an explicit decision: the URL given, else where the task was seen."""
        if isinstance(hint, str) and hint:
            return self.agent_for_url(hint)
        observation = self.detector.ledger.get(task_id)
        return observation.agent if observation is not None else UNKNOWN_AGENT

    def report(self, span: Span | None, verdict: Verdict, operation: str) -> None:
        """Emit one divergence: span event (span live), log record, ``a2a.divergence`` metric."""
        if verdict.reason is None:
            return
        ev = verdict.evidence
        attrs: dict[str, AttributeValue] = {
            sc.DIVERGENCE_REASON: verdict.reason.value,
            sc.TASK_ID: ev.task_id,
            sc.CARD_HEARTBEAT: ev.heartbeat,
        }
        if ev.last_state is not None:
            attrs[sc.TASK_STATE] = ev.last_state.value
        if ev.age is not None:
            attrs[sc.OBSERVATION_AGE] = round(ev.age, 6)
        if ev.etag_now is not None:
            attrs[sc.CARD_ETAG] = ev.etag_now
        if ev.etag_observed is not None:
            attrs[sc.CARD_ETAG_OBSERVED] = ev.etag_observed
        agent = self.metrics.agent(ev.agent) if ev.agent else sc.OTHER
        self.metrics.divergence.add(
            1,
            {
                sc.DIVERGENCE_REASON: verdict.reason.value,
                sc.OPERATION: operation,
                sc.AGENT_NAME: agent,
            },
        )
        if span is not None and span.is_recording():
            span.add_event(sc.EVENT_DIVERGENCE, attrs)
        self.events.emit(
            event_name=sc.EVENT_DIVERGENCE,
            body=f"A2A divergence: {verdict.reason.value}",
            severity_number=SeverityNumber.WARN,
            severity_text="WARN",
            attributes={**attrs, sc.OPERATION: operation, sc.AGENT_NAME: agent},
            context=trace.set_span_in_context(span) if span is not None else None,
        )

    def decide(
        self,
        span: Span,
        task_id: str,
        agent: str,
        operation: str,
        now: float | None = None,
        assumes_live: bool = True,
    ) -> Verdict:
        """Judge one liveness decision and account for it (metrics, event). The span already
        carries ``a2a.liveness.decision`` and the etag in force from its start (set once).

        The verdict survives a failure of the accounting (counted): enforce mode acts on it.
        """
        if now is None:
            now = time.monotonic()
        verdict = self.detector.decide(task_id, agent, now, assumes_live)
        try:
            label = self.metrics.agent(agent)
            outcome = "authoritative" if verdict.ok else "divergent"
            self.metrics.decisions.add(1, {sc.DECISION_OUTCOME: outcome, sc.AGENT_NAME: label})
            if verdict.evidence.age is not None:
                self.metrics.observation_age.record(verdict.evidence.age, {sc.AGENT_NAME: label})
            self.report(span, verdict, operation)
        except Exception as exc:
            self.error(exc)
        return verdict


_runtime: Runtime | None = None


def current() -> Runtime | None:
    return _runtime


def install(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime
    activate(runtime.metrics if runtime is not None else None)
