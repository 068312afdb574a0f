"""One A2A operation, whatever the transport: its span and every judgement made of it.

Each semantic rule lives here once; the transport adapters turn what they see into the
protocol layer's facts and call these methods: ``http_exchange`` (httpx and httpx2: bytes,
SSE, content encodings) and ``grpc_exchange`` (grpcio: protobuf messages and a status).

The span starts with every attribute known before the request leaves, given to
``start_span``; what is learnt later (the state answered, the status, an error) is gathered
and set in one ``set_attributes`` just before ``end()``. Events (a divergence, a status
update, a task swap) go on the span when they happen. Every method is called from the host's
path, grpc's callback thread or the re-entry guard's drain thread, and contains its own
failures (counted, never raised). Ending is taken once, without a lock (``list.pop`` is
atomic), so a finaliser may end an exchange.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from urllib.parse import urlsplit

from opentelemetry import context as context_api
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context

from otel_a2a import semconv as sc
from otel_a2a.detect.webhooks import Registration
from otel_a2a.instrumentation.runtime import Peer, Runtime
from otel_a2a.protocol import (
    A2AError,
    A2ARequest,
    CardInfo,
    Operation,
    ResponseFacts,
    StateClass,
    StateReading,
    TaskReport,
)
from otel_a2a.protocol.states import TaskState, semconv_state

Value = str | bool | int | float | tuple[str, ...]
Attributes = dict[str, Value]

# plain ``str`` values by member (a member is a ``str`` too, but no attribute value: an exporter
# may print it as ``Operation.GET_TASK``); a lookup skips the Python-level ``.value``
OP_NAMES: dict[Operation, str] = {op: op.value for op in Operation}
_GET_TASK = Operation.GET_TASK.value
_CARD_OPS = frozenset({Operation.GET_AGENT_CARD.value, Operation.GET_EXTENDED_AGENT_CARD.value})
_DECISION_OPS = frozenset(
    op.value
    for op in (
        Operation.SEND_MESSAGE,
        Operation.SEND_STREAMING_MESSAGE,
        Operation.CANCEL_TASK,
        Operation.CREATE_PUSH_CONFIG,
    )
)
_ACTIVE = StateClass.ACTIVE
_CLIENT = SpanKind.CLIENT
# Tasks one stream keeps alive (its frames refresh their observations). A stream is about one
# task; a peer naming thousands on one stream must not make every frame cost thousands.
_MAX_STREAM_TASKS = 16
_MAX_TEMPLATES = 256  # (peer, operation, wire) templates a runtime keeps; cleared when full

Server = tuple[str, int | None]


def server_of(origin: str) -> Server | None:
    """(``server.address``, ``server.port``) of ``scheme://host[:port]``: the host without
    brackets, the port when written (a scheme's default is not guessed for ``grpc://``)."""
    try:
        parts = urlsplit(origin)
        host, port = parts.hostname, parts.port
    except ValueError:  # a port out of range, a bracket unclosed: nothing to say
        return None
    if not host:
        return None
    if port is None:
        port = _DEFAULT_PORTS.get(parts.scheme)
    return host, port


_DEFAULT_PORTS = {"http": 80, "https": 443}
TemplateKey = tuple[Peer, str, str | None, str | None, str | None, str]


def card_attributes(
    attrs: Attributes, card: CardInfo | None, etag: str | None, heartbeat: float | None
) -> Attributes:
    """``attrs`` with what a card puts on the span of its fetch, over any binding."""
    if card is not None:
        if card.name:
            attrs[sc.AGENT_NAME] = card.name
        if card.version:
            attrs[sc.AGENT_VERSION] = card.version
        if card.description:
            attrs[sc.AGENT_DESCRIPTION] = card.description
        if card.streaming is not None:
            attrs[sc.CARD_STREAMING] = card.streaming
    if etag:
        attrs[sc.CARD_ETAG] = etag
    if heartbeat is not None:
        attrs[sc.CARD_HEARTBEAT] = heartbeat
    return attrs


def state_attributes(attrs: Attributes, reading: StateReading) -> Attributes:
    """``attrs`` with a state as the convention spells it (``a2a.task.state``) and, when the
    wire said something else or said it inexactly for its version and binding, that spelling
    (``otel_a2a.task.state.raw``, as otel-a2a's Go interceptor and server spans record it):
    an absent spelling is the convention's value, exact. Every state a span shows goes
    through here, so a later state never leaves an earlier one's spelling behind."""
    value = semconv_state(reading.state)
    attrs[sc.TASK_STATE] = value
    if reading.raw != value or not reading.exact:
        attrs[sc.TASK_STATE_RAW] = reading.raw
    else:
        attrs.pop(sc.TASK_STATE_RAW, None)
    return attrs


def _template(templates: dict[TemplateKey, Attributes], key: TemplateKey) -> Attributes:
    """The attributes every span of one operation to one peer starts with (the peer as
    resolved under one card generation: a card fetch makes new peers), built once per
    runtime; a request adds its task and context ids."""
    peer, op, version, binding, jsonrpc_method, origin = key
    server = server_of(origin)  # parsed once per template, not per request
    attrs: Attributes = {
        sc.OPERATION: op,
        sc.AGENT_URL: peer.key,
    }
    if version is not None:
        attrs[sc.PROTOCOL_VERSION] = version
    if binding is not None:
        attrs[sc.BINDING] = binding
    if jsonrpc_method and jsonrpc_method != op:  # v0.3's ``tasks/get``: what it was called
        attrs[sc.JSONRPC_METHOD] = jsonrpc_method
    if peer.name:
        attrs[sc.AGENT_NAME] = peer.name
    if peer.version:
        attrs[sc.AGENT_VERSION] = peer.version
    if peer.description:
        attrs[sc.AGENT_DESCRIPTION] = peer.description
    if server is not None:
        attrs[sc.SERVER_ADDRESS] = server[0]
        if server[1] is not None:
            attrs[sc.SERVER_PORT] = server[1]
    if peer.etag and op not in _CARD_OPS:  # card spans carry their own
        attrs[sc.CARD_ETAG] = peer.etag
    if len(templates) >= _MAX_TEMPLATES:
        templates.clear()
    templates[key] = attrs
    return attrs


class Exchange:
    """The span of one A2A operation and what its request and response tell the detector."""

    __slots__ = (
        "_attrs",
        "_last_report",
        "_named_seen",
        "_open",
        "_push",
        "_recording",
        "_stream_tasks",
        "_streaming",
        "_swapped",
        "_terminal_seen",
        "a2a",
        "context",
        "op",
        "peer",
        "rt",
        "span",
    )

    def __init__(
        self, rt: Runtime, a2a: A2ARequest, peer: Peer, binding: str | None, origin: str
    ) -> None:
        """Start the span. ``binding``: the ``otel_a2a.binding`` to record (None: none, as for
        a well-known card fetch, which is not version-negotiated); ``origin``: where the
        request goes (``scheme://host[:port]``, a path after it ignored), the convention's
        ``server.*``."""
        self.rt = rt
        self.a2a = a2a
        self.peer = peer
        self.op = op = OP_NAMES[a2a.operation]
        self._attrs: Attributes = {}  # learnt after the start: set once, before the end
        self._stream_tasks: set[str] = set()
        self._streaming = False
        self._last_report: TaskReport | None = None
        self._swapped: str | None = None  # the last other task answered for the one named
        self._named_seen = False  # a stream frame reported the task the request named
        self._terminal_seen = False
        self._open = [True]  # popped by the one call that ends the exchange
        self._push: Registration | None = None  # a webhook the request registers, no task yet
        templates = rt.templates
        key = (peer, op, a2a.version, binding, a2a.jsonrpc_method, origin)
        template = templates.get(key)
        if template is None:
            template = _template(templates, key)
        attrs = template.copy()
        task_id = a2a.task_id
        if task_id:
            attrs[sc.TASK_ID] = task_id
            if op in _DECISION_OPS:  # judged in ``before_send``
                attrs[sc.LIVENESS_DECISION] = True
        if a2a.context_id:
            attrs[sc.CONTEXT_ID] = a2a.context_id
        if a2a.message_id:
            attrs[sc.MESSAGE_ID] = a2a.message_id
        if a2a.reference_task_ids:
            attrs[sc.MESSAGE_REFERENCE_TASK_IDS] = a2a.reference_task_ids
        if a2a.tenant:
            attrs[sc.TENANT] = a2a.tenant
        # the context is read once: the SDK would read it again for the parent, for each
        # sampler step and for the context the transport makes current during the call
        parent = context_api.get_current()
        # named ``{a2a.method.name}`` (the convention's), whatever the binding or version
        self.span: Span = rt.tracer.start_span(op, parent, kind=_CLIENT, attributes=attrs)
        # current while the call runs: an inner instrumentation's span is the span's child
        self.context: Context = set_span_in_context(self.span, parent)
        self._recording = self.span.is_recording()

    @property
    def ended(self) -> bool:
        return not self._open

    # -- before the request leaves ------------------------------------------------------

    def before_send(self) -> None:
        """Judge implicit liveness decisions and redundant polls, and remember a webhook the
        request registers, before the request leaves (its first push may come before the
        reply)."""
        task_id = self.a2a.task_id
        push = self.a2a.push
        if push is not None:
            reg = self.rt.webhooks.register(push, self.peer.key, task_id)
            if task_id is None:
                self._push = reg  # the reply names its task
        if not task_id:
            return
        op = self.op
        if op == _GET_TASK:
            self.rt.poll(self.peer, task_id, time.monotonic())
        elif op in _DECISION_OPS:
            self.rt.decide(self.span, task_id, self.peer, op, time.monotonic())

    # -- what the response tells --------------------------------------------------------

    def stream_opened(self) -> None:
        """The response is a stream: its frames keep its tasks alive, its end is judged."""
        self._streaming = True
        if self.a2a.task_id:
            self._stream_tasks.add(self.a2a.task_id)  # the first of at most 16

    def stream_lost(self) -> None:
        """The stream is no longer observed: its end is not judged (it was not seen)."""
        self._streaming = False

    def frame(self, reported: Iterable[str], now: float) -> None:
        """One stream frame (an event, a message, a ``: ping``) arrived: the stream's tasks
        not reported in it (those were observed) are alive."""
        if self._streaming:
            self.rt.stream_alive(self._stream_tasks.difference(reported), now)

    def observe(self, facts: ResponseFacts, now: float | None = None) -> None:
        """The facts of one response body or one stream frame."""
        if now is None:
            now = time.monotonic()
        if facts.error is not None:
            self.on_error(facts.error, now)
        reports = facts.reports
        if not reports:
            return
        streamed = self._streaming
        if streamed:
            self._stream_reports(reports)
        else:  # one body: only its last state counts (how it ends is judged of streams only)
            for report in reports:
                if report.state is not None:
                    self._last_report = report
        rt = self.rt
        if self._push is not None:
            rt.webhooks.bind(self._push, reports[0].task_id)
            self._push = None
        peer = rt.fresh(self.peer)  # a card fetched since the request left is in force now
        named = self.a2a.task_id
        # a reply that is no error to an action on the task named: the agent took it
        accepted = named if facts.error is None and self.op in _DECISION_OPS else None
        rt.observe(self.span, peer, reports, self.op, now, accepted)
        last = self._last_report
        if last is None or last.state is None:
            return
        if named is not None and last.task_id != named:
            self._swap(last, last.state, named)  # the span stays about the named task
            return
        if streamed:
            self._named_seen = True
        attrs = self._attrs
        state_attributes(attrs, last.state)  # a later frame's state replaces an earlier one's
        attrs[sc.AUTHORITATIVE] = True
        if named is None:  # a request naming no task: the span is about the one answered
            attrs[sc.TASK_ID] = last.task_id
        if last.context_id and last.context_id != self.a2a.context_id:
            attrs[sc.CONTEXT_ID] = last.context_id
        if peer.etag and peer.etag != self.peer.etag:
            attrs[sc.CARD_ETAG] = peer.etag

    def _stream_reports(self, reports: Iterable[TaskReport]) -> None:
        """A stream's reports: the tasks it keeps alive, whether it stands at a terminal (or
        interrupted) state, one ``otel_a2a.task.status`` event per status update."""
        for report in reports:
            if len(self._stream_tasks) < _MAX_STREAM_TASKS:
                self._stream_tasks.add(report.task_id)
            if report.state is None:
                continue
            self._last_report = report
            state = report.state.state
            # terminal or interrupted; a later live state reopens it
            self._terminal_seen = state.state_class is not _ACTIVE
            if self._recording and report.kind == "status-update":
                self.span.add_event(
                    sc.EVENT_TASK_STATUS,
                    state_attributes({sc.TASK_ID: report.task_id}, report.state),
                )

    def _swap(self, report: TaskReport, state: StateReading, named: str) -> None:
        """The agent answered the task the request named with another one (fasta2a answers
        a follow-up with a new task). That task was observed as itself (``Runtime.observe``)
        and the named one is left as it was: a stream that did not report it first no longer
        refreshes it (one that did is about both). The span keeps the named task in
        ``a2a.task.id`` (so it carries no state of it) and shows the swap, once per other
        task, with that task's state."""
        if not self._named_seen:
            self._stream_tasks.discard(named)
        if report.task_id == self._swapped:
            return
        self._swapped = report.task_id
        self._attrs[sc.AUTHORITATIVE] = True
        if self._recording:
            self.span.add_event(
                sc.EVENT_TASK_SWAPPED,
                state_attributes({sc.TASK_ID: report.task_id, sc.TASK_ID_REQUESTED: named}, state),
            )

    def on_error(self, error: A2AError, now: float) -> None:
        """An error reply: on the span, and what it says of the task named (lost, or in a
        state it names)."""
        error_type, description = self.describe(error)
        self.failed(error_type, description)
        if error.reason:  # what error.type's code cannot tell apart (400 over HTTP+JSON)
            self._attrs[sc.ERROR_REASON] = error.reason
        task_id = self.a2a.task_id
        if error.task_not_found and task_id:
            self.rt.task_not_found(self.span, task_id, self.op, now)
        elif error.report is not None:
            self._error_reply(error.report, now)

    def describe(self, error: A2AError) -> tuple[str, str]:
        """(``error.type``, status description) of an error reply; the transport's own
        attributes of it go on the span meanwhile."""
        return sc.ERROR_TYPE_OTHER, error.reason or sc.ERROR_TYPE_OTHER

    def failed(self, error_type: str, description: str) -> None:
        """The operation failed: ``error.type`` and an error status."""
        self._attrs[sc.ERROR_TYPE] = error_type
        if self._recording:
            self.span.set_status(Status(StatusCode.ERROR, description))

    def _error_reply(self, report: TaskReport, now: float) -> None:
        """An error reply stated the named task's state: the ledger records it (nothing is
        reported on it), the span carries it in ``otel_a2a.error.task_state`` (the task's
        state is what a reply carried as the task, which an error reply does not), and a
        stream it ends at a terminal state ended normally."""
        if report.state is not None:
            state = report.state.state
            if report.task_id == self.a2a.task_id and state is not TaskState.UNKNOWN:
                self._attrs[sc.ERROR_TASK_STATE] = semconv_state(state)
            if report.state.state.is_terminal:
                self._terminal_seen = True
        self.rt.error_reply(self.span, self.rt.fresh(self.peer), report, now)

    def extended_card(self, card: CardInfo | None) -> None:
        """An extended card: its own etag and fields on the span only (it never moves the
        etag in force)."""
        if card is not None:
            card_attributes(self._attrs, card, card.etag, card.heartbeat)

    def set(self, key: str, value: Value) -> None:
        """One attribute learnt after the start, set with the others before the end."""
        self._attrs[key] = value

    # -- the end -------------------------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        """The request, the call or the read failed: the exception's type only, and the end."""
        if not self._open:
            return
        kind = type(exc).__qualname__
        self.failed(kind, kind)
        self.finish()

    def finish(self, end_time: int | None = None) -> None:
        """End the exchange: a stream that stopped short of a terminal (or interrupted) state
        ended abnormally; what was learnt goes on the span; the span ends. Once; a later call
        does nothing. ``end_time`` (ns since the epoch): when a dropped response was
        collected."""
        try:
            self._open.pop()
        except IndexError:
            return
        span, rt = self.span, self.rt
        try:
            if self._recording:
                if self._streaming and self._stream_tasks and not self._terminal_seen:
                    last = self._last_report
                    attrs: Attributes = {sc.TASK_ID: last.task_id} if last else {}
                    if last is not None and last.state is not None:
                        attrs[sc.TASK_STATE] = semconv_state(last.state.state)
                    span.add_event(sc.EVENT_STREAM_ABNORMAL_END, attrs, end_time)
                if self._attrs:
                    span.set_attributes(self._attrs)
        except Exception as exc:
            rt.error(exc)
        finally:
            self._stream_tasks = set()
            try:
                span.end(end_time)  # runs every span processor, the application's too
            except Exception as exc:
                rt.error(exc)
