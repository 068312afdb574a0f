"""Process-wide state of an instrumented process: settings, detector, tracer, instruments.

Everything that reports a verdict goes through :class:`Runtime` so that a divergence is always
reported the same way: span event, log record and metric, at the instant it is found.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, SeverityNumber, get_logger
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from otel_a2a import semconv as sc
from otel_a2a.detect import CardUpdate, Detector, Verdict
from otel_a2a.detect.ledger import Ledger, TaskLedger
from otel_a2a.detect.resolutions import Outcome
from otel_a2a.detect.webhooks import Webhooks
from otel_a2a.instrumentation.config import Settings
from otel_a2a.instrumentation.metrics import A2AMetrics
from otel_a2a.instrumentation.reentry import GUARD
from otel_a2a.locks import fork_safe
from otel_a2a.protocol import CardInfo, TaskReport
from otel_a2a.protocol.states import TaskState, semconv_state
from otel_a2a.version import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from otel_a2a.instrumentation.exchange import Attributes, TemplateKey

_log = logging.getLogger("otel_a2a")
_MAX_MEMO_URLS = 1024  # distinct request URLs remembered (task ids in REST paths vary)
UNKNOWN_AGENT = "_UNKNOWN"  # the agent of a decision on a task never seen, no URL given
LEDGER_UNAVAILABLE = "ledger_unavailable"  # OTEL_A2A_LEDGER_PATH cannot be opened
LEDGER_OPERATION_FAILED = "ledger_operation_failed"  # the shared ledger failed one operation
LEDGER_LOST = "ledger_lost"  # the shared ledger became unusable (corrupt, full): memory from now


class Peer:
    """An agent as one exchange or decision sees it, resolved once: its key (URL), the card
    etag in force, the heartbeat (seconds) and the card's name, all as of card generation
    ``generation`` (see ``Runtime.fresh``); ``label`` is its ``otel_a2a.agent.name`` metric label,
    taken only when a metric needs it (labels are capped)."""

    __slots__ = (
        "_label",
        "_metrics",
        "description",
        "etag",
        "generation",
        "heartbeat",
        "key",
        "name",
        "version",
    )

    def __init__(
        self,
        key: str,
        etag: str | None,
        heartbeat: float,
        name: str | None,
        generation: int,
        metrics: A2AMetrics,
        card: CardInfo | None = None,
    ) -> None:
        self.key = key
        self.etag = etag
        self.heartbeat = heartbeat
        self.name = name
        # the card's version and description, for the convention's gen_ai.agent.* attributes
        self.version = card.version if card is not None else None
        self.description = card.description if card is not None else None
        self.generation = generation
        self._metrics = metrics
        self._label: str | None = None

    @property
    def label(self) -> str:
        label = self._label
        if label is None:
            label = self._label = self._metrics.label(self.key, self.name)
        return label


class Runtime:
    def __init__(
        self,
        settings: Settings,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        self.settings = settings
        ledger, failure = self._shared_ledger(settings)
        self.detector = Detector(
            max_tasks=settings.max_tracked_tasks,
            default_heartbeat=settings.default_heartbeat,
            heartbeat_overrides=settings.heartbeat_overrides,
            ledger=ledger,
        )
        self.tracer: Tracer = trace.get_tracer(
            sc.SCOPE, __version__, tracer_provider, schema_url=sc.SCHEMA_URL
        )
        self.events = get_logger(sc.SCOPE, __version__, logger_provider, schema_url=sc.SCHEMA_URL)
        self.metrics = A2AMetrics(self.detector, meter_provider, _active_metrics)
        # the webhooks the application registered for push notifications (``webhook``)
        self.webhooks = Webhooks(settings.max_tracked_tasks)
        if failure:
            self.error(LEDGER_UNAVAILABLE)
        # "configure": set up the SDK at the first A2A operation if nothing else did
        # (OTEL_A2A_ENABLED); "attach": add the span processor once a provider exists.
        self.setup_pending: str | None = None
        self.setup_lock = threading.Lock()
        fork_safe(self, "setup_lock")
        self._peers: dict[str, Peer] = {}
        # a new value at every card fetch (``next`` on a count is atomic): a peer resolved
        # under an older one may be stale (another etag, heartbeat, name or route)
        self._card_fetches = itertools.count(1)
        self._generation = 0
        self.warned: set[str] = set()  # what was warned about once already
        # the span-attribute templates of the exchanges (``exchange``), bounded there
        self.templates: dict[TemplateKey, Attributes] = {}
        # Spans each span-processor hook has judged, whichever processor instance did: a
        # second DivergenceSpanProcessor on a provider (the application added one, otel-a2a
        # another) leaves them alone, under a ConcurrentMultiSpanProcessor too. Only decision
        # spans and spans carrying a task id get here; weak references keep no span alive.
        self.judged: dict[str, weakref.WeakSet[ReadableSpan]] = {
            "start": weakref.WeakSet(),
            "end": weakref.WeakSet(),
        }
        # re-entrant: adding to a set may run the garbage collector, which may finalise a
        # generator suspended inside a span and so end that span here, in this very thread
        self.judged_lock = threading.RLock()
        fork_safe(self, "judged_lock")

    def _shared_ledger(self, settings: Settings) -> tuple[Ledger | None, bool]:
        """The ledger in ``OTEL_A2A_LEDGER_PATH``, and whether it failed to open (then one
        warning here, a count once the metrics exist, and the detector keeps its own)."""
        path = settings.ledger_path
        if path is None:
            return None, False
        from otel_a2a.store.sqlite import LedgerStoreError, SqliteLedger  # only when asked for

        try:
            ledger = SqliteLedger(
                path,
                settings.max_tracked_tasks,
                on_error=self._ledger_failed,
                on_fatal=self._ledger_lost,
            )
        except LedgerStoreError as exc:
            _log.warning(
                "otel-a2a: OTEL_A2A_LEDGER_PATH cannot be used (%s); observations stay in this "
                "process",
                exc,
            )
            return None, True
        return ledger, False

    def _ledger_lost(self, exc: BaseException) -> None:
        """The shared file became unusable (corrupt pages an operation met, a full disk):
        every later operation would fail and every decision read ``no_observation``. This
        process keeps its observations in memory from now on, as when the file cannot be
        opened; said once."""
        self.detector.ledger = TaskLedger(self.settings.max_tracked_tasks)
        self.error(LEDGER_LOST)
        _log.warning(
            "otel-a2a: the shared ledger %s cannot be used any more (%s); observations stay in "
            "this process from now on",
            self.settings.ledger_path,
            exc,
        )

    def _ledger_failed(self, exc: BaseException) -> None:
        """One operation of the shared ledger failed (it answered as for an unknown task)."""
        _log.debug("otel-a2a: shared ledger operation failed", exc_info=exc)
        self.error(LEDGER_OPERATION_FAILED)

    def peer(self, url: str, interface: str | None = None) -> Peer:
        """The agent a request URL belongs to, memoised by ``interface`` (the URL without its
        A2A suffix, which holds task ids in HTTP+JSON paths) or else by the URL: the same few
        interfaces serve every request, and the answer only changes when a card is fetched."""
        key = interface or url
        peer = self._peers.get(key)
        if peer is None or peer.generation != self._generation:
            generation = self._generation  # first: a card fetched meanwhile makes it stale
            peer = self._resolve(self.detector.registry.agent_for_url(url), generation)
            memo = self._peers
            if len(memo) >= _MAX_MEMO_URLS:
                memo.clear()
            memo[key] = peer
        return peer

    def agent_for_url(self, url: str, interface: str | None = None) -> str:
        return self.peer(url, interface).key

    def peer_of(self, agent: str) -> Peer:
        """The agent of a key (``resolve_agent``'s answer), resolved now."""
        return self._resolve(agent, self._generation)

    def fresh(self, peer: Peer) -> Peer:
        """``peer``, or its agent resolved again if a card was fetched since: an exchange
        that outlives a card fetch (a stream) observes under the card now in force."""
        return peer if peer.generation == self._generation else self.peer_of(peer.key)

    def _resolve(self, agent: str, generation: int) -> Peer:
        registry = self.detector.registry
        heartbeat = registry.heartbeat(agent)[0]
        card = registry.card(agent)
        name = card.name if card is not None else None
        return Peer(agent, registry.etag(agent), heartbeat, name, generation, self.metrics, card)

    def first_sight(self, hook: str, span: ReadableSpan) -> bool:
        """Whether ``span`` reaches span-processor hook ``hook`` for the first time."""
        seen = self.judged[hook]
        with self.judged_lock:
            if span in seen:
                return False
            seen.add(span)
            return True

    def error(self, exc: BaseException | str, n: int = 1) -> None:
        """Count an internal failure (``n`` of them); the host never sees it."""
        kind = exc if isinstance(exc, str) else type(exc).__name__
        try:
            self.metrics.errors.add(n, {sc.ERROR_TYPE: kind})
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
        """Emit one divergence: span event (span live), log record, ``otel_a2a.divergence``
        metric."""
        if verdict.reason is None:
            return
        ev = verdict.evidence
        attrs: dict[str, AttributeValue] = {
            sc.DIVERGENCE_REASON: verdict.reason.value,
            sc.TASK_ID: ev.task_id,
            sc.CARD_HEARTBEAT: ev.heartbeat,
        }
        if ev.last_state is not None:
            attrs[sc.TASK_STATE] = semconv_state(ev.last_state)
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
                sc.AGENT_LABEL: agent,
            },
        )
        if span is not None and span.is_recording():
            span.add_event(sc.EVENT_DIVERGENCE, attrs)
        self.events.emit(
            event_name=sc.EVENT_DIVERGENCE,
            body=f"A2A divergence: {verdict.reason.value}",
            severity_number=SeverityNumber.WARN,
            severity_text="WARN",
            attributes={**attrs, sc.OPERATION: operation, sc.AGENT_LABEL: agent},
            context=trace.set_span_in_context(span) if span is not None else None,
        )

    def decide(
        self,
        span: Span,
        task_id: str,
        peer: Peer,
        operation: str,
        now: float | None = None,
        assumes_live: bool = True,
    ) -> Verdict:
        """Judge one liveness decision and account for it (metrics, event). The span already
        carries ``otel_a2a.liveness.decision`` and the etag in force from its start (set once).

        The verdict survives a failure of the accounting (counted): enforce mode acts on it.
        """
        if now is None:
            now = time.monotonic()
        verdict = self.detector.decide(task_id, peer, now, assumes_live)
        try:
            label = peer.label
            outcome = "authoritative" if verdict.ok else "divergent"
            self.metrics.decisions.add(1, {sc.DECISION_OUTCOME: outcome, sc.AGENT_LABEL: label})
            if verdict.evidence.age is not None:
                self.metrics.observation_age.record(verdict.evidence.age, {sc.AGENT_LABEL: label})
            self.report(span, verdict, operation)
        except Exception as exc:
            self.error(exc)
        return verdict

    def observe(
        self,
        span: Span | None,
        peer: Peer,
        reports: Sequence[TaskReport],
        operation: str,
        now: float,
        accepted: str | None = None,
    ) -> None:
        """Record authoritative observations of ``peer``'s tasks and report what they
        contradict, on ``span`` when it is live: the one way a task state read anywhere (a
        response, a stream frame, another instrumentation's span) becomes an observation.
        ``accepted``: the task a successful reply to an action (a follow-up, a cancel) is
        about, which the agent took (see ``Resolutions.resolve``)."""
        detector = self.detector
        for verdict in detector.on_reports(peer, reports, operation, now):
            self.report(span, verdict, operation)
        if detector.resolutions:  # a divergence waits for its task's next observation
            for report in reports:
                if report.state is not None:
                    task_id = report.task_id
                    self._settle(span, task_id, report.state.state, now, task_id == accepted)

    def _settle(
        self,
        span: Span | None,
        task_id: str,
        state: TaskState | None,
        now: float,
        accepted: bool = False,
    ) -> None:
        """What an authoritative observation of ``task_id`` (``state`` None: TaskNotFound)
        makes of the divergences earlier decisions on it raised: each confirmed or refuted,
        once, as a span event (on ``span``, the observation's, when live), a log record and
        the ``otel_a2a.divergence.resolutions`` metric."""
        for found in self.detector.resolve(task_id, state, now, accepted):
            reason, outcome = found.reason.value, found.outcome.value
            attrs: dict[str, AttributeValue] = {
                sc.DIVERGENCE_REASON: reason,
                sc.DIVERGENCE_OUTCOME: outcome,
                sc.TASK_ID: task_id,
                sc.DIVERGENCE_AGE: round(found.age, 6),
            }
            if state is not None:
                attrs[sc.TASK_STATE] = semconv_state(state)
            self.metrics.resolutions.add(
                1, {sc.DIVERGENCE_REASON: reason, sc.DIVERGENCE_OUTCOME: outcome}
            )
            if span is not None and span.is_recording():
                span.add_event(sc.EVENT_DIVERGENCE_RESOLVED, attrs)
            confirmed = found.outcome is Outcome.CONFIRMED
            self.events.emit(
                event_name=sc.EVENT_DIVERGENCE_RESOLVED,
                body=f"A2A divergence {outcome}: {reason}",
                severity_number=SeverityNumber.WARN if confirmed else SeverityNumber.INFO,
                severity_text="WARN" if confirmed else "INFO",
                attributes=attrs,
                context=trace.set_span_in_context(span) if span is not None else None,
            )

    def error_reply(self, span: Span | None, peer: Peer, report: TaskReport, now: float) -> None:
        """An error reply stated the task's state: recorded, never reported by itself (see
        ``Detector.on_error_reply``), and it resolves the task's open divergences by that
        state. The rare path: error replies only."""
        detector = self.detector
        detector.on_error_reply(peer, report, now)
        if report.state is not None and detector.resolutions:
            self._settle(span, report.task_id, report.state.state, now)

    def poll(self, peer: Peer, task_id: str, now: float) -> None:
        """A ``GetTask`` about to leave: counted when it cannot tell anything new."""
        if self.detector.redundant_get(task_id, peer, now):
            self.metrics.redundant.add(peer.label)

    def task_not_found(self, span: Span, task_id: str, operation: str, now: float) -> None:
        """The agent answered TaskNotFound: ``task_lost`` if the task was live; the task's
        open divergences are resolved as lost."""
        detector = self.detector
        verdict = detector.on_task_not_found(task_id, now)
        if verdict is not None:
            self.report(span, verdict, operation)
        if detector.resolutions:
            self._settle(span, task_id, None, now)

    def stream_alive(self, task_ids: Iterable[str], now: float) -> None:
        """A frame of an open stream (an event or ``: ping``) refreshes its tasks."""
        detector = self.detector
        for task_id in task_ids:
            detector.on_stream_frame(task_id, now)

    def card_fetched(self, url: str, card: CardInfo | None, variant: str | None) -> CardUpdate:
        """A well-known card response (``card`` None for ``304``): the registry updated, the
        peers resolved before it made stale, an etag change counted."""
        update = self.detector.on_card(url, card, variant, time.monotonic())
        if card is not None:  # after the update: see ``peer``
            self._generation = next(self._card_fetches)
        if update.etag_changed:
            self.metrics.etag_changes.add(1, {sc.AGENT_LABEL: self.metrics.agent(update.agent)})
        return update


# The runtime in force: the one pointer every entry point reads (as the API's global
# providers), set by ``A2AInstrumentor`` only.
_runtime: Runtime | None = None


def current() -> Runtime | None:
    return _runtime


def _active_metrics() -> A2AMetrics | None:
    """The instruments the observable callbacks report: the runtime in force's (see
    ``A2AMetrics``)."""
    return _runtime.metrics if _runtime is not None else None


def install(runtime: Runtime | None) -> None:
    """Put ``runtime`` in force (None: none); deferred work's failures count on it."""
    global _runtime
    _runtime = runtime
    GUARD.on_error = runtime.error if runtime is not None else None
    if runtime is not None:
        GUARD.start()
