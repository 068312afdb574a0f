"""A decoded protobuf ``ExportTraceServiceRequest`` to beliefs, read field by field.

The receiver's fast path: no ``MessageToDict``, no JSON form. Each span's attributes are read
once, keeping only the keys beliefs are made of (:data:`~otel_a2a.analyze.otlp.BELIEF_KEYS`);
a span that names no task and has no events yields its parent link and is left there. The
values read are what the OTLP JSON path reads of the same message (``MessageToDict``, then
:func:`~otel_a2a.analyze.otlp.parse_request`): a double that is not finite, a bytes, array or
key-value list value, and a time of 0 (an unset field, which ``MessageToDict`` omits) count as
absent; ids of the wrong length as none. tests/analyze/test_otlp_protobuf.py checks that both
give the same beliefs, links and counts. Nothing here recurses: nested values are never
entered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from otel_a2a.analyze import fleet
from otel_a2a.analyze.dialects import CARD_KEYS
from otel_a2a.analyze.model import Act, Batch, Belief, SpanLink
from otel_a2a.analyze.otlp import (
    BELIEF_KEYS,
    TASK_KEYS,
    Event,
    service_of,
    span_beliefs,
)

_READ_KEYS = TASK_KEYS | CARD_KEYS  # a span with none of these (and no events) gives no belief


_MAX_TEXT = 256
_new = tuple.__new__  # a named tuple's generated ``__new__`` costs a µs per span


def _scalars(items: Iterable[Any]) -> dict[str, object]:
    """The belief keys of a ``KeyValue`` list, with their scalar values (later ones win)."""
    out: dict[str, object] = {}
    for item in items:
        key = item.key
        if key in BELIEF_KEYS:
            value = item.value
            text = value.string_value  # "" when unset or another kind: then ask which
            if text:
                out[key] = text
                continue
            kind = value.WhichOneof("value")
            if kind == "string_value":
                out[key] = text
            elif kind == "bool_value":
                out[key] = value.bool_value
            elif kind == "int_value":
                out[key] = value.int_value
            elif kind == "double_value" and math.isfinite(value.double_value):
                out[key] = value.double_value
    return out


def _events(events: Iterable[Any]) -> list[Event]:
    return [
        Event(event.name or None, _scalars(event.attributes), event.time_unix_nano or None)
        for event in events
    ]


def parse_message(message: Any) -> Batch:
    """Beliefs and parent links of one decoded ``ExportTraceServiceRequest``."""
    beliefs: list[Belief] = []
    links: list[SpanLink] = []
    acts: list[Act] = []
    known: dict[str, int] = {}  # tasks of services judging themselves: when first known
    self_judging: set[str] = set()
    spans = errors = 0
    for resource_spans in message.resource_spans:
        service = service_of(_scalars(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            ours = fleet.judges_itself(scope_spans.scope.name, {})
            for span in scope_spans.spans:
                spans += 1
                try:
                    trace_id, span_id = span.trace_id, span.span_id
                    parent = span.parent_span_id
                    trace_id = trace_id.hex() if len(trace_id) == 16 else ""
                    span_id = span_id.hex() if len(span_id) == 8 else ""
                    parent = parent.hex() if len(parent) == 8 else ""
                    if trace_id and span_id and parent:
                        links.append(_new(SpanLink, (trace_id, span_id, parent)))
                    start = span.start_time_unix_nano
                    if not start:
                        errors += 1  # no start time: counted, skipped
                        continue
                    if ours:
                        self_judging.add(service)
                    attrs = _scalars(span.attributes)
                    events = span.events
                    if not events and _READ_KEYS.isdisjoint(attrs):
                        continue  # names no task, fetched no card: its link is all it gives
                    end = span.end_time_unix_nano or None
                    read = _events(events) if events else ()
                    beliefs.extend(
                        span_beliefs(
                            service,
                            attrs,
                            start,
                            end,
                            span.name[:_MAX_TEXT],
                            span_id,
                            trace_id,
                            parent,
                            read,
                        )
                    )
                    if ours or service in self_judging or fleet.judges_itself("", attrs):
                        self_judging.add(service)
                        fleet.note_known(known, attrs, start, end)
                        continue
                    acts.extend(
                        fleet.span_acts(
                            service, False, span.kind, attrs, start, end, read, span_id, trace_id
                        )
                    )
                except Exception:  # never raise on input, whatever its shape
                    errors += 1
    acts.extend(fleet.seen_acts(known))
    return Batch(beliefs, links, spans, errors, acts, frozenset(self_judging))
