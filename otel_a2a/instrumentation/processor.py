"""``DivergenceSpanProcessor``: judges decisions marked on any span, from any tracer.

The instrumentation judges its own spans directly (whatever the sampler decides), so spans of
scope ``otel_a2a`` are skipped here: no decision is judged twice. Events can only be added
while a span is live, hence the work happens in ``on_start``; ``on_end`` only turns foreign
spans that carry a task state into observations.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from otel_a2a import semconv as sc
from otel_a2a.detect import assumes_live
from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT
from otel_a2a.protocol import (
    MAX_ID_LEN,
    Binding,
    Operation,
    StateReading,
    TaskReport,
    TaskState,
    normalize_task_state,
    read_state,
)

_E = TypeVar("_E", Binding, Operation)
# versions and bindings whose exact spellings differ: v1.0 any, v0.3 JSON-RPC, gRPC
_ANY_WIRE = (("1.0", Binding.JSONRPC), ("0.3", Binding.JSONRPC), ("0.3", Binding.GRPC))


def _enum(kind: type[_E], value: object) -> _E | None:
    try:
        return kind(value)
    except ValueError:
        return None


def _attributes(span: ReadableSpan) -> Mapping[str, object] | None:
    """The span's attributes (the public ``attributes``), as a plain dict where the SDK gives
    a read-only view of its own mapping: a key the view lacks costs a ``KeyError`` raised and
    caught in Python (``Mapping.get``, ``Mapping.__contains__``), several times the cost of
    copying the few attributes of a span in C. Every span of the process passes here, mostly
    to miss."""
    attrs = span.attributes
    if isinstance(attrs, MappingProxyType):
        try:
            return attrs.copy()
        except AttributeError:  # a view of a mapping that cannot copy itself
            pass
    return attrs


# A span ended inside otel-a2a's own work in this thread (a generator suspended inside it,
# collected there: see ``reentry``) is observed at the next drain, at the time it ended.
# Only the text attributes ``_observe`` reads are kept, bounded: no span is kept alive.
_ASIDE_KEYS = (
    sc.TASK_STATE_RAW,
    sc.TASK_STATE,
    sc.PROTOCOL_VERSION,
    sc.BINDING,
    sc.OPERATION,
    sc.AGENT_URL,
)
_MAX_ASIDE_TEXT = 1024  # more than any id or value _observe uses; bounds what is kept


def _put_aside(rt: runtime.Runtime, task_id: str, attrs: Mapping[str, object]) -> None:
    """Defer the observation of a span ended inside otel-a2a's own work (``on_end`` bounded
    its task id already); only bounded text is kept."""
    kept: dict[str, object] = {}
    for key in _ASIDE_KEYS:
        value = attrs.get(key)
        if isinstance(value, str):
            kept[key] = value[:_MAX_ASIDE_TEXT]
    observe = DivergenceSpanProcessor._observe
    GUARD.defer(functools.partial(observe, rt, task_id, kept, time.monotonic()))


_NOT_SEEN = object()


class DivergenceSpanProcessor(SpanProcessor):
    """Add it to an SDK ``TracerProvider``; otel-a2a adds one itself to the provider in use
    (one added by the application as well is harmless: each span is judged once)."""

    def __init__(self) -> None:
        # otel-a2a's scope object once seen (the SDK shares one among the spans of a tracer):
        # the hooks compare it first, so only other scopes' names are read
        self._own_scope: object = _NOT_SEEN

    def _ours(self, scope: InstrumentationScope | None) -> bool:
        """Whether a span of ``scope`` (not the one remembered) is otel-a2a's own."""
        if scope is not None and scope.name == sc.SCOPE:
            self._own_scope = scope
            return True
        return False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # every span of the process passes here: otel-a2a's own (judged where they are made)
        # are told by their scope (the remembered object first) before any attribute is read
        scope = span.instrumentation_scope
        if scope is self._own_scope or self._ours(scope):
            return
        attrs = _attributes(span)
        if not attrs or attrs.get(sc.LIVENESS_DECISION) is not True:
            return
        rt = runtime.current()
        if rt is None or not rt.first_sight("start", span):
            return
        if not GUARD.enter():  # inside otel-a2a's own work: not judged, counted
            GUARD.defer(functools.partial(rt.error, REENTRANT))
            return
        try:
            task_id = attrs.get(sc.TASK_ID)
            # an overlong id (see ``on_end``, which counts it) is not judged
            if not isinstance(task_id, str) or len(task_id) > MAX_ID_LEN:
                return
            peer = rt.peer_of(rt.resolve_agent(task_id, attrs.get(sc.AGENT_URL)))
            live = assumes_live(attrs.get(sc.ASSUMED_STATE))
            verdict = rt.decide(span, task_id, peer, sc.OP_DECISION, assumes_live=live)
            etag = verdict.evidence.etag_now
            if etag is not None and span.is_recording():
                span.set_attribute(sc.CARD_ETAG, etag)
        except Exception as exc:
            rt.error(exc)
        finally:
            GUARD.leave()

    def on_end(self, span: ReadableSpan) -> None:
        scope = span.instrumentation_scope
        if scope is self._own_scope or self._ours(scope):
            return
        attrs = _attributes(span)
        if not attrs or sc.TASK_ID not in attrs:
            return
        rt = runtime.current()
        if rt is None or not rt.first_sight("end", span):
            return
        task_id = attrs.get(sc.TASK_ID)
        if not isinstance(task_id, str):
            return
        # the wire path's bound: no foreign span makes the ledger keep a megabyte per task
        overlong = len(task_id) > MAX_ID_LEN
        if not GUARD.enter():  # inside otel-a2a's own work: see ``_put_aside``
            if overlong:
                GUARD.defer(functools.partial(rt.error, "task_id_too_long"))
            else:
                _put_aside(rt, task_id, attrs)
            return
        try:
            if overlong:
                rt.error("task_id_too_long")
            else:
                self._observe(rt, task_id, attrs)
        except Exception as exc:
            rt.error(exc)
        finally:
            GUARD.leave()

    @staticmethod
    def _observe(
        rt: runtime.Runtime, task_id: str, attrs: Mapping[str, object], at: float | None = None
    ) -> None:
        """A foreign span's task state becomes an observation. A wire spelling is judged
        under the version and binding the span names; when it names none, a spelling exact
        under any of them is exact. A canonical ``a2a.task.state`` alone is exact."""
        raw, version = attrs.get(sc.TASK_STATE_RAW), attrs.get(sc.PROTOCOL_VERSION)
        binding = _enum(Binding, attrs.get(sc.BINDING))
        if isinstance(raw, str):
            if isinstance(version, str) and binding is not None:
                reading = read_state(raw, version, binding)
            else:
                readings = [read_state(raw, v, b) for v, b in _ANY_WIRE]
                reading = next((r for r in readings if r.exact), readings[0])
        else:
            state = attrs.get(sc.TASK_STATE)
            if not isinstance(state, str):
                return
            canonical = normalize_task_state(state)
            reading = StateReading(state, canonical, canonical is not TaskState.UNKNOWN, True)
        operation = _enum(Operation, attrs.get(sc.OPERATION))
        source = operation.value if operation is not None else sc.OP_UNKNOWN
        report = TaskReport(task_id, None, reading, "task")
        peer = rt.peer_of(rt.resolve_agent(task_id, attrs.get(sc.AGENT_URL)))
        rt.observe(None, peer, (report,), source, time.monotonic() if at is None else at)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
