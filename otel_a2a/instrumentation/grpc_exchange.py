"""One A2A call over gRPC, from the request leaving to its status.

The gRPC twin of ``exchange.Exchange``: the same span (``{a2a.method.name}``, kind CLIENT, the same
attributes), the same judgements through the same ``Runtime`` methods, but fed protobuf
messages (read by field access in ``protocol.grpc``) and a status instead of HTTP bytes. Every
method contains its own failures (counted, never raised) and may be called from the
application's thread or task, or from grpc's callback thread: ending is taken once, under a
lock.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from otel_a2a import semconv as sc
from otel_a2a.instrumentation import own_spans
from otel_a2a.instrumentation.exchange import card_attributes
from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.locks import fork_safe
from otel_a2a.protocol import A2ARequest, Operation, ResponseFacts, StateClass, TaskReport
from otel_a2a.protocol import grpc as wire
from otel_a2a.protocol.card import extended_card
from otel_a2a.protocol.states import semconv_state

_ACTIVE = StateClass.ACTIVE
_GET_TASK = Operation.GET_TASK
_EXTENDED_CARD = Operation.GET_EXTENDED_AGENT_CARD
_DECISION_OPS = frozenset(
    {
        Operation.SEND_MESSAGE,
        Operation.SEND_STREAMING_MESSAGE,
        Operation.CANCEL_TASK,
        Operation.CREATE_PUSH_CONFIG,
    }
)
_SPAN_NAMES = {op.value: sc.span_name(op.value) for op in Operation}
_DECISION_VALUES = frozenset(op.value for op in _DECISION_OPS)
_end_lock = threading.Lock()  # ending is taken once; held for a test-and-set only
fork_safe(sys.modules[__name__], "_end_lock")
_MAX_STREAM_TASKS = 16  # as over HTTP: a stream is about one task, a few at most
_OK = 0


class GrpcExchange:
    __slots__ = (
        "_attrs",
        "_ended",
        "_last_report",
        "_stream_tasks",
        "_swapped",
        "_terminal_seen",
        "a2a",
        "peer",
        "rt",
        "span",
        "streaming",
    )

    def __init__(
        self, rt: Runtime, a2a: A2ARequest, origin: str, method: str, streaming: bool
    ) -> None:
        self.rt = rt
        self.a2a = a2a
        self.streaming = streaming
        self._ended = False
        self._attrs: dict[str, str | bool | int | float] = {}  # set on the span once, at its end
        self._stream_tasks: set[str] = set()
        self._last_report: TaskReport | None = None
        self._swapped: str | None = None
        self._terminal_seen = False
        self.peer = peer = rt.peer(origin + method, origin)
        op = a2a.operation
        name = op._value_  # Enum ``.value`` is a slow property on CPython 3.11
        attrs: dict[str, str | bool] = {
            sc.RPC_SYSTEM: sc.RPC_SYSTEM_A2A,
            sc.RPC_METHOD: name,
            sc.OPERATION: name,
            sc.AGENT_URL: peer.key,
            sc.BINDING: a2a.binding._value_,
        }
        if a2a.version is not None:
            attrs[sc.PROTOCOL_VERSION] = a2a.version
        if peer.name:
            attrs[sc.AGENT_NAME] = peer.name
        if a2a.task_id:
            attrs[sc.TASK_ID] = a2a.task_id
            if name in _DECISION_VALUES:
                attrs[sc.LIVENESS_DECISION] = True
        if a2a.context_id:
            attrs[sc.CONTEXT_ID] = a2a.context_id
        if peer.etag and op is not _EXTENDED_CARD:  # a card span carries its own
            attrs[sc.CARD_ETAG] = peer.etag
        self.span: Span = own_spans.start(rt.tracer, _SPAN_NAMES[name], SpanKind.CLIENT, attrs)
        if streaming and a2a.task_id:
            self._stream_tasks.add(a2a.task_id)

    def before_send(self) -> None:
        """Judge implicit liveness decisions and redundant polls, before the call leaves."""
        a2a = self.a2a
        task_id = a2a.task_id
        if not task_id:
            return
        now = time.monotonic()
        if a2a.operation is _GET_TASK:
            self.rt.poll(self.peer, task_id, now)
        elif a2a.operation._value_ in _DECISION_VALUES:
            self.rt.decide(self.span, task_id, self.peer, a2a.operation._value_, now)

    # -- messages ------------------------------------------------------------------------

    def on_message(self, message: object) -> None:
        """A reply, or one message of a stream, as the application receives it."""
        if self._ended:
            return
        try:
            if self.a2a.operation is _EXTENDED_CARD:
                self._card(message)
                return
            now = time.monotonic()
            facts = wire.response_facts(self.a2a.operation, message, self.a2a.version)
            reported = self._apply(facts, now) if facts.reports else ()
            if self.streaming:  # any message keeps the stream's tasks alive
                self.rt.stream_alive(self._stream_tasks.difference(reported), now)
        except Exception as exc:
            self.rt.error(exc)

    def reply(self, message: object, code: Any) -> None:
        """A unary call's reply and its ``OK`` status: the whole exchange, in one step."""
        self.on_message(message)
        self.finish(code)

    def _card(self, message: Any) -> None:
        """An extended card: its own etag and fields on the span only, as over HTTP (it never
        moves the etag in force). Read in its ProtoJSON form, the HTTP bindings' body, so both
        give it the same etag; a card is fetched rarely, unlike a task."""
        from google.protobuf.json_format import MessageToDict

        card = extended_card(MessageToDict(message))
        if card is None:
            return
        card_attributes(self._attrs, card, card.etag, card.heartbeat)

    def _apply(self, facts: ResponseFacts, now: float) -> Iterable[str]:
        rt, span, a2a = self.rt, self.span, self.a2a
        recording = span.is_recording()
        streamed = self.streaming
        operation = a2a.operation._value_
        for report in facts.reports:
            if streamed and len(self._stream_tasks) < _MAX_STREAM_TASKS:
                self._stream_tasks.add(report.task_id)
            if report.state is None:
                continue
            self._last_report = report
            state = report.state.state
            if state.state_class is not _ACTIVE:  # terminal or interrupted
                self._terminal_seen = True
            elif streamed:
                self._terminal_seen = False
            if recording and streamed and report.kind == "status-update":
                span.add_event(
                    sc.EVENT_TASK_STATUS,
                    {
                        sc.TASK_ID: report.task_id,
                        sc.TASK_STATE: semconv_state(state),
                        sc.TASK_STATE_RAW: report.state.raw,
                    },
                )
        peer = rt.fresh(self.peer)  # a card fetched since the call left is in force now
        rt.observe(span, peer, facts.reports, operation, now)
        last = self._last_report
        if last is None or last.state is None or not recording:
            return [r.task_id for r in facts.reports]
        named = a2a.task_id
        if named is not None and last.task_id != named:
            if last.task_id != self._swapped:  # the agent answered another task: shown once
                self._swapped = last.task_id
                self._attrs[sc.AUTHORITATIVE] = True
                span.add_event(
                    sc.EVENT_TASK_SWAPPED,
                    {
                        sc.TASK_ID: last.task_id,
                        sc.TASK_ID_REQUESTED: named,
                        sc.TASK_STATE: semconv_state(last.state.state),
                        sc.TASK_STATE_RAW: last.state.raw,
                    },
                )
            return [r.task_id for r in facts.reports]
        attrs = self._attrs
        attrs[sc.TASK_STATE] = semconv_state(last.state.state)
        attrs[sc.TASK_STATE_RAW] = last.state.raw
        attrs[sc.AUTHORITATIVE] = True
        if named is None:
            attrs[sc.TASK_ID] = last.task_id
        if last.context_id and last.context_id != a2a.context_id:
            attrs[sc.CONTEXT_ID] = last.context_id
        if peer.etag and peer.etag != self.peer.etag:
            attrs[sc.CARD_ETAG] = peer.etag
        return [r.task_id for r in facts.reports]

    # -- the end -------------------------------------------------------------------------

    def finish(
        self,
        code: Any = None,
        details: object = None,
        trailing_metadata: Iterable[tuple[str, Any]] | None = None,
        failure: BaseException | None = None,
    ) -> None:
        """The call ended: ``code`` a ``grpc.StatusCode`` when a status is known, ``failure``
        what the application got instead of a reply or the next message. Idempotent."""
        with _end_lock:
            if self._ended:
                return
            self._ended = True
        span = self.span
        try:
            self._status(code, details, trailing_metadata, failure)
            if self._attrs and span.is_recording():
                own_spans.set_attributes(span, self._attrs)
            abnormal = self.streaming and self._stream_tasks and not self._terminal_seen
            if abnormal and span.is_recording():
                last = self._last_report
                attrs = {sc.TASK_ID: last.task_id} if last else {}
                if last is not None and last.state is not None:
                    attrs[sc.TASK_STATE] = semconv_state(last.state.state)
                span.add_event(sc.EVENT_STREAM_ABNORMAL_END, attrs)
        except Exception as exc:
            self.rt.error(exc)
        finally:
            self._stream_tasks = set()
            try:
                own_spans.end(span)  # runs every span processor, the application's too
            except Exception as exc:
                self.rt.error(exc)

    def _status(
        self,
        code: Any,
        details: object,
        trailing_metadata: Iterable[tuple[str, Any]] | None,
        failure: BaseException | None,
    ) -> None:
        span = self.span
        number = _code_number(code)
        if number is not None:
            self._attrs[sc.RPC_RESPONSE_STATUS_CODE] = getattr(code, "name", str(number))
        if number == _OK or (number is None and failure is None):
            return
        if number is None:  # no status: the failure is all there is
            kind = type(failure).__qualname__
            self._attrs[sc.ERROR_TYPE] = kind
            if span.is_recording():
                span.set_status(Status(StatusCode.ERROR, kind))
            return
        name = getattr(code, "name", str(number))
        error = wire.status_error(self.a2a, name, trailing_metadata, details)
        self._attrs[sc.ERROR_TYPE] = name
        if error.reason:
            self._attrs[sc.ERROR_REASON] = error.reason
        if span.is_recording():
            span.set_status(Status(StatusCode.ERROR, error.reason or name))
        task_id = self.a2a.task_id
        if error.task_not_found and task_id:
            self.rt.task_not_found(span, task_id, self.a2a.operation.value, time.monotonic())
        elif error.report is not None:  # a refusal that states the task's state
            report = error.report
            if report.state is not None and report.state.state.is_terminal:
                self._terminal_seen = True
            self.rt.error_reply(self.rt.fresh(self.peer), report, time.monotonic())


def _code_number(code: Any) -> int | None:
    """The number of a ``grpc.StatusCode`` (its value is ``(number, name)``)."""
    value = getattr(code, "_value_", None)
    if isinstance(value, tuple) and value and isinstance(value[0], int):
        return value[0]
    return None
