"""The receiver's protobuf walk against the path it replaced: a decoded request read field by
field (``parse_message``) gives exactly the beliefs, links, counts and findings that
``MessageToDict`` then ``parse_request`` give, on the recorded exports and on generated
traffic full of odd values; malformed and deeply nested bodies are refused, never a crash or
an unbounded recursion.

One difference is left on purpose: the old path read a base64 id of the wrong length whose
text happened to be all hex digits (an id of 24 bytes in 32 such characters, say) as a hex
id; the walk reads ids by their length in bytes. Generated ids never hit it (the chance is
about 1e-15 per id)."""

from __future__ import annotations

import base64
import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_a2a.analyze import Batch, Correlator, finding_json
from otel_a2a.analyze.live import PROTOBUF, BadRequest, decode_body, to_json
from otel_a2a.analyze.otlp import parse_request
from otel_a2a.analyze.otlp_protobuf import parse_message

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "otlp"
T0 = 1_700_000_000_000_000_000


def _old(message: ExportTraceServiceRequest) -> Batch:
    """What the receiver did before: the message as OTLP JSON, then the JSON path."""
    return parse_request(to_json(message))


def _findings(batches: list[Batch]) -> list[dict[str, object]]:
    c = Correlator()
    return [finding_json(f) for b in batches for f in c.feed(b)]


def _assert_same(messages: list[ExportTraceServiceRequest]) -> list[Batch]:
    new = [parse_message(m) for m in messages]
    old = [_old(m) for m in messages]
    assert new == old
    assert _findings(new) == _findings(old)
    return new


def _from_json(doc: dict[str, Any]) -> ExportTraceServiceRequest:
    """OTLP JSON (hex ids, as the file exporter writes) to the decoded protobuf form."""
    doc = copy.deepcopy(doc)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for owner in (span, *span.get("links", [])):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if owner.get(key):
                            owner[key] = base64.b64encode(bytes.fromhex(owner[key])).decode()
    message = ExportTraceServiceRequest()
    ParseDict(doc, message, ignore_unknown_fields=True)
    return message


def test_the_recorded_exports_read_the_same() -> None:
    messages = [
        _from_json(json.loads(line))
        for path in sorted(FIXTURES.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert messages
    batches = _assert_same(messages)
    assert sum(len(b.beliefs) for b in batches) > 0 and _findings(batches)


# what generated attributes are made of: the keys beliefs read, and others
KEYS = [
    "a2a.task.id",
    "gen_ai.agent.a2a.task_id",
    "a2a.task.state",
    "otel_a2a.task.state.raw",
    "gen_ai.agent.a2a.status",
    "otel_a2a.observation.authoritative",
    "a2a.method.name",
    "a2a.agent.name",
    "service.name",
    "service.instance.id",
    "rpc.system.name",
    "",
]
STATES = [
    "TASK_STATE_WORKING",
    "TASK_STATE_FAILED",
    "Working",
    "working",
    "completed",
    "input-required",
    "TASK_STATE_UNSPECIFIED",
    "bogus",
    "",
]
TEXTS = ["t1", "t2", "t3", "", "x" * 300, "\U0001f600" * 260, "unknown_service:python"]
EVENTS = ["otel_a2a.task.status", "otel_a2a.task.swapped", "exception", ""]


def _value(rng: random.Random, key: str, out: AnyValue) -> None:
    kind = rng.choice(["string", "string", "string", "bool", "int", "double", "other", "unset"])
    if kind == "string":
        pool = STATES if "state" in key or "status" in key else TEXTS
        out.string_value = rng.choice(pool)
    elif kind == "bool":
        out.bool_value = rng.random() < 0.5
    elif kind == "int":
        out.int_value = rng.choice([0, 1, -5, 2**63 - 1])
    elif kind == "double":
        out.double_value = rng.choice([0.0, 1.5, -2.0, math.nan, math.inf, -math.inf, 1e300])
    elif kind == "other":
        choice = rng.choice(["bytes", "array", "kvlist"])
        if choice == "bytes":
            out.bytes_value = b"\x00\x01"
        elif choice == "array":
            out.array_value.values.add().string_value = "t1"
        else:
            out.kvlist_value.values.add(key="a2a.task.id").value.string_value = "t1"


def _attributes(rng: random.Random, n: int) -> list[KeyValue]:
    """``n`` random attributes, after (most of the time) a task id and a state."""
    out = []
    if rng.random() < 0.7:
        out.append(KeyValue(key="a2a.task.id", value=AnyValue(string_value=rng.choice(TEXTS[:3]))))
        key = rng.choice(["otel_a2a.task.state.raw", "a2a.task.state", "gen_ai.agent.a2a.status"])
        out.append(KeyValue(key=key, value=AnyValue(string_value=rng.choice(STATES))))
    for _ in range(n):
        kv = KeyValue(key=rng.choice(KEYS))
        _value(rng, kv.key, kv.value)
        out.append(kv)
    return out


def _id(rng: random.Random, size: int) -> bytes:
    length = rng.choice([size, size, size, size, 0, size - 1, size + 1, 24])
    return bytes(rng.randrange(256) for _ in range(length))


def _span(rng: random.Random) -> Span:
    span = Span(
        trace_id=rng.choice([_id(rng, 16), b"\x01" * 16]),  # some spans share a trace
        span_id=_id(rng, 8),
        parent_span_id=_id(rng, 8),
        name=rng.choice(["GetTask", "", "x" * 300]),
        start_time_unix_nano=rng.choice([0, T0, T0 + rng.randrange(10**9)]),
        end_time_unix_nano=rng.choice([0, T0 - 1, T0 + rng.randrange(2 * 10**9)]),
    )
    span.attributes.extend(_attributes(rng, rng.randrange(8)))
    for _ in range(rng.choice([0, 0, 1, 3])):
        event = span.events.add(
            name=rng.choice(EVENTS), time_unix_nano=rng.choice([0, T0 + rng.randrange(10**9)])
        )
        event.attributes.extend(_attributes(rng, rng.randrange(5)))
    return span


def _request(rng: random.Random) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    for _ in range(rng.randrange(1, 4)):
        rs = message.resource_spans.add()
        rs.resource.attributes.extend(_attributes(rng, rng.randrange(4)))
        for _ in range(rng.randrange(3)):
            rs.scope_spans.add().spans.extend(_span(rng) for _ in range(rng.randrange(12)))
    return message


@pytest.mark.parametrize("seed", range(8))
def test_generated_traffic_reads_the_same(seed: int) -> None:
    rng = random.Random(seed)
    messages = [_request(rng) for _ in range(60)]
    # through bytes, as the receiver gets them
    decoded = [ExportTraceServiceRequest.FromString(m.SerializeToString()) for m in messages]
    batches = _assert_same(decoded)
    assert sum(len(b.beliefs) for b in batches) > 50
    assert sum(b.errors for b in batches) > 0 and sum(len(b.links) for b in batches) > 0


def test_a_request_of_a2a_spans_reads_the_same() -> None:
    """The shape that matters most: status events, swapped tasks, the Java SDK's names."""
    spans = []
    for i, raw in enumerate(["TASK_STATE_WORKING", "Working", "TASK_STATE_FAILED"]):
        span = Span(
            trace_id=bytes(16) + b"",
            span_id=(i + 1).to_bytes(8, "big"),
            parent_span_id=(i + 2).to_bytes(8, "big"),
            name="SendStreamingMessage",
            start_time_unix_nano=T0,
            end_time_unix_nano=T0 + 10**9,
        )
        span.attributes.add(key="a2a.task.id").value.string_value = "t1"
        span.attributes.add(key="otel_a2a.task.state.raw").value.string_value = raw
        span.attributes.add(key="otel_a2a.observation.authoritative").value.bool_value = True
        for j, state in enumerate(["TASK_STATE_SUBMITTED", "TASK_STATE_SUBMITTED", raw]):
            event = span.events.add(name="otel_a2a.task.status", time_unix_nano=T0 + j * 10**8)
            event.attributes.add(key="a2a.task.id").value.string_value = "t1"
            event.attributes.add(key="otel_a2a.task.state.raw").value.string_value = state
        swapped = span.events.add(name="otel_a2a.task.swapped", time_unix_nano=T0 + 5 * 10**8)
        swapped.attributes.add(key="a2a.task.id").value.string_value = "t2"
        swapped.attributes.add(key="a2a.task.state").value.string_value = "completed"
        spans.append(span)
    java = Span(span_id=b"\x09" * 8, trace_id=b"\x02" * 16, start_time_unix_nano=T0 + 1)
    java.attributes.add(key="gen_ai.agent.a2a.task_id").value.string_value = "t1"
    java.attributes.add(key="gen_ai.agent.a2a.status").value.string_value = "TASK_STATE_FAILED"
    message = ExportTraceServiceRequest()
    for service, span in zip(
        ["orchestrator", "gateway", "worker", "jvm"], [*spans, java], strict=True
    ):
        rs = message.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = service
        rs.scope_spans.add().spans.append(span)
    (batch,) = _assert_same([message])
    assert len(batch.beliefs) == 10 and len(_findings([batch])) >= 3


def _deep_bytes(depth: int) -> bytes:
    """Key-value lists nested ``depth`` deep, written as bytes (no recursion to build it)."""
    inner = b"\x0a\x02t1"  # AnyValue{string_value: "t1"}
    for _ in range(depth):
        kv = b"\x0a\x01k" + b"\x12" + _varint(len(inner)) + inner  # KeyValue{key, value}
        kvlist = b"\x0a" + _varint(len(kv)) + kv  # KeyValueList{values}
        inner = b"\x32" + _varint(len(kvlist)) + kvlist  # AnyValue{kvlist_value}
    attr = b"\x0a\x0ba2a.task.id\x12" + _varint(len(inner)) + inner
    span = b"\x4a" + _varint(len(attr)) + attr
    scope = b"\x12" + _varint(len(span)) + span
    rs = b"\x12" + _varint(len(scope)) + scope
    return b"\x0a" + _varint(len(rs)) + rs


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_nested_values_are_never_entered() -> None:
    """Within protobuf's nesting limit a nested value reads as no task id, by both paths."""
    message = ExportTraceServiceRequest.FromString(_deep_bytes(25))
    (batch,) = _assert_same([message])
    assert batch.beliefs == [] and batch.spans == 1 and batch.errors == 1  # no start time


@pytest.mark.parametrize("depth", [200, 20_000])
def test_deeply_nested_bodies_are_refused(depth: int) -> None:
    with pytest.raises(BadRequest):
        decode_body(_deep_bytes(depth), PROTOBUF)
    deep_json = b'{"resourceSpans": ' + b"[" * depth + b"]" * depth + b"}"
    if depth > 1_000:  # past the JSON decoder's recursion limit
        with pytest.raises(BadRequest):
            decode_body(deep_json, "application/json")
    else:  # within it: read, nothing in it
        batch, _doc = decode_body(deep_json, "application/json")
        assert batch.beliefs == [] and batch.errors == 1


def test_malformed_bodies_are_refused_or_read_without_raising() -> None:
    """Garbage, and every cut of a valid body: a 400 (BadRequest) or a batch, nothing else."""
    rng = random.Random(7)
    body = bytes(_request(rng).SerializeToString())
    cases = [body[:cut] for cut in range(0, len(body), max(1, len(body) // 200))]
    cases += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))) for _ in range(200)]
    read = 0
    for case in cases:
        try:
            batch, doc = decode_body(case, PROTOBUF, as_json=True)
        except BadRequest:
            continue
        assert doc is not None and batch == parse_request(doc)
        read += 1
    assert read > 0
