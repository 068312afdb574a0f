"""``DivergenceSpanProcessor``: judges decisions marked on any span, from any tracer.

The instrumentation judges its own spans directly (whatever the sampler decides), so spans of
scope ``otel_a2a`` are skipped here: no decision is judged twice. Events can only be added
while a span is live, hence the work happens in ``on_start``; ``on_end`` only turns foreign
spans that carry a task state into observations.
"""

from __future__ import annotations

import time

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_a2a import semconv as sc
from otel_a2a.instrumentation import runtime
from otel_a2a.protocol import Binding, Operation, TaskReport, read_state


def _ours(span: ReadableSpan) -> bool:
    scope = span.instrumentation_scope
    return scope is not None and scope.name == sc.SCOPE


class DivergenceSpanProcessor(SpanProcessor):
    """Add it to an SDK ``TracerProvider``; otel-a2a adds one itself to the provider in use."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attrs = span.attributes
        # every span of the process passes here: the common case must cost one lookup
        if not attrs or attrs.get(sc.LIVENESS_DECISION) is not True:
            return
        rt = runtime.current()
        if rt is None or _ours(span):
            return
        try:
            task_id = attrs.get(sc.TASK_ID)
            if not isinstance(task_id, str):
                return
            agent = rt.resolve_agent(task_id, attrs.get(sc.AGENT_URL))
            etag = rt.decide(span, task_id, agent, "liveness_decision").evidence.etag_now
            if etag is not None and span.is_recording():
                span.set_attribute(sc.CARD_ETAG, etag)
        except Exception as exc:
            rt.error(exc)

    def on_end(self, span: ReadableSpan) -> None:
        attrs = span.attributes
        if not attrs or sc.TASK_ID not in attrs:
            return
        rt = runtime.current()
        if rt is None or _ours(span):
            return
        try:
            task_id, raw = (
                attrs.get(sc.TASK_ID),
                attrs.get(sc.TASK_STATE_RAW, attrs.get(sc.TASK_STATE)),
            )
            if not isinstance(task_id, str) or not isinstance(raw, str):
                return
            version = attrs.get(sc.PROTOCOL_VERSION)
            version = version if isinstance(version, str) else None
            try:
                binding = Binding(attrs.get(sc.BINDING, Binding.JSONRPC.value))
            except ValueError:
                binding = Binding.JSONRPC
            try:
                operation = Operation(attrs.get(sc.OPERATION, Operation.GET_TASK.value))
            except ValueError:
                operation = Operation.GET_TASK
            report = TaskReport(task_id, None, read_state(raw, version, binding), "task")
            agent = rt.resolve_agent(task_id, attrs.get(sc.AGENT_URL))
            for verdict in rt.detector.on_reports(agent, [report], operation, time.monotonic()):
                rt.report(None, verdict, operation.value)
        except Exception as exc:
            rt.error(exc)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
