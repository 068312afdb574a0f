"""OTLP JSON (``ExportTraceServiceRequest``) to beliefs. Pure, no OpenTelemetry import.

Reads what the collector's file exporter writes (one request per line, ids in hex, 64-bit
integers as strings) and what ``google.protobuf.json_format.MessageToDict`` makes of the
protobuf form (ids in base64). Attributes are read in any dialect ``dialects`` knows (the
OpenTelemetry A2A convention, otel-a2a's previous names, the A2A Java SDK extras, Kong,
agentgateway). Spans without a task id and a task state are not A2A observations and yield no
belief, but every span's parent link is kept so chains can be followed across server spans.
Nothing here raises on bad input: a malformed span is counted
in ``Batch.errors`` and skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from otel_a2a.analyze import dialects, fleet
from otel_a2a.analyze.model import Act, Batch, Belief, SpanLink
from otel_a2a.protocol.states import TaskState

SERVICE_NAME = "service.name"
UNKNOWN_SERVICE = "unknown_service"
SERVICE_INSTANCE_ID = "service.instance.id"
_INSTANCE_CHARS = 36  # a UUID; longer ids are cut (they only tell processes apart)

_HEX = re.compile(r"[0-9a-fA-F]*")
_MAX_TEXT = 256  # ids, names and spellings are short; never hold a huge attribute value


def _text(value: object) -> str:
    return value[:_MAX_TEXT] if isinstance(value, str) else ""


def normalize_id(value: object, size: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex, from hex or base64; else ''."""
    if not isinstance(value, str) or not value:
        return ""
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ""
    return raw.hex() if len(raw) == size else ""


def _any_value(value: object) -> object:
    """The scalar inside an OTLP ``AnyValue`` (string, bool, int, double); None otherwise."""
    if not isinstance(value, Mapping):
        return None
    if "stringValue" in value:
        return value["stringValue"] if isinstance(value["stringValue"], str) else None
    if "boolValue" in value:
        return value["boolValue"] if isinstance(value["boolValue"], bool) else None
    if "intValue" in value:
        number = value["intValue"]
        if isinstance(number, int) and not isinstance(number, bool):
            return number
        if isinstance(number, str):
            try:
                return int(number)
            except ValueError:
                return None
        return None
    if "doubleValue" in value:
        number = value["doubleValue"]
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return float(number)
        return None
    return None


def attributes(items: object) -> dict[str, object]:
    """OTLP ``KeyValue`` list to a dict of scalars; malformed entries are skipped."""
    out: dict[str, object] = {}
    if not isinstance(items, list):
        return out
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            value = _any_value(item.get("value"))
            if value is not None:
                out[item["key"]] = value
    return out


def _nanos(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):  # a JSON number written with an exponent (1.7e18)
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            return None
        return number if number >= 0 else None
    return None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


# The attributes beliefs are read from: of a span (and of its resource, for the service)
BELIEF_KEYS = dialects.KEYS | {SERVICE_NAME, SERVICE_INSTANCE_ID}
# A span with none of these (and no events) holds no belief: only its parent link is kept
TASK_KEYS = dialects.TASK_KEYS


_new = tuple.__new__  # a named tuple's generated ``__new__`` costs a µs per span


class Event(NamedTuple):
    """A span event as beliefs need it: ``when`` None if unreadable."""

    name: object
    attrs: Mapping[str, object]
    when: int | None


def span_beliefs(
    service: str,
    attrs: Mapping[str, object],
    start: int,
    end: int | None,
    name: str,
    span_id: str,
    trace_id: str,
    parent_span_id: str,
    span_events: Sequence[Event],
) -> list[Belief]:
    """The beliefs of one span, read from its attribute scalars (``attributes``' form) and
    events, whichever form (OTLP JSON or protobuf) they were read from."""
    end = start if end is None or end < start else end
    reading = dialects.read(attrs)
    authoritative, operation, agent_name = (
        reading.authoritative,
        reading.operation,
        reading.agent_name,
    )
    task_id, state = reading.task_id, reading.state
    if not span_events:  # the common case: one belief or none
        if not task_id or state is None:
            return []
        return [
            _new(Belief, (
                service, task_id, state[0], state[1], authoritative, start, end, name,
                span_id, trace_id, parent_span_id, operation, agent_name, False,
            ))
        ]  # fmt: skip
    beliefs: list[Belief] = []
    # stream spans: one belief per status event, until the next one for that task; a swapped
    # event names the other task a reply carried (the span keeps the one named)
    per_task: dict[str, list[tuple[int, TaskState, str]]] = {}
    for event in span_events:
        if event.name not in dialects.BELIEF_EVENTS:
            continue
        said, when = dialects.read(event.attrs), event.when
        if said.task_id and said.state is not None and when is not None:
            per_task.setdefault(said.task_id, []).append((min(max(when, start), end), *said.state))
    for event_task, events in per_task.items():
        events.sort(key=lambda e: e[0])
        # a frame restating the state it follows (a heartbeat frame) confirms the belief,
        # it does not supersede it: one belief per run of equal states
        events[:] = [e for i, e in enumerate(events) if i == 0 or e[1:] != events[i - 1][1:]]
        for i, (when, event_state, raw) in enumerate(events):
            last = i == len(events) - 1
            until = end if last else events[i + 1][0]
            beliefs.append(
                Belief(
                    service, event_task, event_state, raw, authoritative, when, until, name,
                    span_id, trace_id, parent_span_id, operation, agent_name, not last,
                )
            )  # fmt: skip
    if task_id and state is not None:
        seen = per_task.get(task_id)
        if not seen:
            at = start
        elif (seen[-1][1], seen[-1][2]) != state:
            at = end  # the final state came in a frame that is not a status event (a Task)
        else:
            return beliefs
        beliefs.append(
            Belief(
                service, task_id, state[0], state[1], authoritative, at, end, name, span_id,
                trace_id, parent_span_id, operation, agent_name,
            )
        )  # fmt: skip
    return beliefs


def _span(
    span: Mapping[str, Any], service: str, self_judging: bool, known: dict[str, int]
) -> tuple[list[Belief], list[Act], bool]:
    """The beliefs and acts of one span, and whether it shows its service judging itself (its
    task then goes to ``known``: see :func:`~otel_a2a.analyze.fleet.note_known`)."""
    start = _nanos(span.get("startTimeUnixNano"))
    if start is None:
        raise ValueError("span without a readable startTimeUnixNano")  # counted, skipped
    events = [
        Event(
            event.get("name"),
            attributes(event.get("attributes")),
            _nanos(event.get("timeUnixNano")),
        )
        for event in _list(span.get("events"))
        if isinstance(event, Mapping)
    ]
    attrs = attributes(span.get("attributes"))
    end = _nanos(span.get("endTimeUnixNano"))
    span_id = normalize_id(span.get("spanId"), 8)
    trace_id = normalize_id(span.get("traceId"), 16)
    beliefs = span_beliefs(
        service,
        attrs,
        start,
        end,
        _text(span.get("name")),
        span_id,
        trace_id,
        normalize_id(span.get("parentSpanId"), 8),
        events,
    )
    if self_judging or fleet.judges_itself("", attrs):
        fleet.note_known(known, attrs, start, end)
        return beliefs, [], True
    acts = fleet.span_acts(
        service, False, span.get("kind"), attrs, start, end, events, span_id, trace_id
    )
    return beliefs, acts, False


def service_of(resource_attrs: Mapping[str, Any]) -> str:
    """The service a span's beliefs belong to: ``service.name``; for a process left at the
    SDK's default name (``unknown_service:python``), with its ``service.instance.id``
    (the SDK draws one per process), or every unnamed process would be one service and never
    be compared with another."""
    name = _text(resource_attrs.get(SERVICE_NAME)) or UNKNOWN_SERVICE
    if name.startswith(UNKNOWN_SERVICE):
        instance = _text(resource_attrs.get(SERVICE_INSTANCE_ID))
        if instance:
            return f"{name}#{instance[:_INSTANCE_CHARS]}"
    return name


def parse_request(doc: object) -> Batch:
    """Beliefs and parent links of one ``ExportTraceServiceRequest`` in OTLP JSON form."""
    beliefs: list[Belief] = []
    links: list[SpanLink] = []
    acts: list[Act] = []
    known: dict[str, int] = {}  # tasks of services judging themselves: when first known
    self_judging: set[str] = set()
    spans = errors = 0
    if not isinstance(doc, Mapping):
        return Batch(beliefs, links, 0, 1)
    for resource_spans in _list(doc.get("resourceSpans")):
        if not isinstance(resource_spans, Mapping):
            errors += 1
            continue
        resource = resource_spans.get("resource")
        resource_attrs = (
            attributes(resource.get("attributes")) if isinstance(resource, Mapping) else {}
        )
        service = service_of(resource_attrs)
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            if not isinstance(scope_spans, Mapping):
                errors += 1
                continue
            scope = scope_spans.get("scope")
            ours = fleet.judges_itself(
                _text(scope.get("name")) if isinstance(scope, Mapping) else "", {}
            )
            for span in _list(scope_spans.get("spans")):
                spans += 1
                if not isinstance(span, Mapping):
                    errors += 1
                    continue
                try:
                    trace_id = normalize_id(span.get("traceId"), 16)
                    span_id = normalize_id(span.get("spanId"), 8)
                    parent = normalize_id(span.get("parentSpanId"), 8)
                    if trace_id and span_id and parent:
                        links.append(SpanLink(trace_id, span_id, parent))
                    said, did, judging = _span(
                        span, service, ours or service in self_judging, known
                    )
                    beliefs.extend(said)
                    acts.extend(did)
                    if judging:
                        self_judging.add(service)
                except Exception:  # never raise on input, whatever its shape
                    errors += 1
    acts.extend(fleet.seen_acts(known))
    return Batch(beliefs, links, spans, errors, acts, frozenset(self_judging))


def parse_lines(lines: Iterable[str]) -> Iterator[Batch]:
    """One batch per non-empty line (the file exporter's format); a bad line is one error."""
    for _doc, batch in parse_documents(lines):
        yield batch


def parse_documents(lines: Iterable[str]) -> Iterator[tuple[object, Batch]]:
    """Each non-empty line's request and its batch; a bad line is None and one error."""
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            yield None, Batch([], [], 0, 1)
            continue
        yield doc, parse_request(doc)
