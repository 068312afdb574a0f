"""OTLP JSON to beliefs: the file exporter's shape, protobuf-JSON ids, and bad input."""

from __future__ import annotations

import base64
import json

from otel_a2a.analyze import parse_lines, parse_request
from otel_a2a.analyze.otlp import attributes, normalize_id
from otel_a2a.protocol import TaskState
from tests.analyze.samples import MS, T0, TRACE, kv, request, span, status_event


def test_a2a_span_becomes_one_belief_and_other_spans_only_links() -> None:
    doc = request(
        "orchestrator",
        span("t1", "TASK_STATE_WORKING", 0, 5, extra={"gen_ai.agent.name": "gateway"}),
        span(None, None, 0, 9, name="POST", span_id="2222222222222222", parent="3333333333333333"),
    )
    batch = parse_request(doc)
    assert batch.spans == 2 and batch.errors == 0
    (belief,) = batch.beliefs
    assert belief.service == "orchestrator" and belief.task_id == "t1"
    assert belief.state is TaskState.WORKING and belief.raw == "TASK_STATE_WORKING"
    assert belief.authoritative is True
    assert (belief.start_ns, belief.end_ns) == (T0, T0 + 5 * MS)
    assert belief.trace_id == TRACE and belief.span_id == "1111111111111111"
    assert belief.operation == "GetTask" and belief.agent_name == "gateway"
    assert [(link.span_id, link.parent_span_id) for link in batch.links] == [
        ("2222222222222222", "3333333333333333")
    ]


def test_canonical_only_and_missing_service_name() -> None:
    doc = request("x", span("t1", None, 0, 1, extra={"a2a.task.state": "TASK_STATE_COMPLETED"}))
    doc["resourceSpans"][0]["resource"]["attributes"] = []
    (belief,) = parse_request(doc).beliefs
    assert belief.service == "unknown_service"
    assert belief.state is TaskState.COMPLETED and belief.raw == "TASK_STATE_COMPLETED"
    assert belief.authoritative is False


def test_stream_span_yields_one_belief_per_status_event() -> None:
    events = [
        status_event("t1", "TASK_STATE_SUBMITTED", 1),
        status_event("t1", "TASK_STATE_WORKING", 3),
        status_event("t1", "TASK_STATE_COMPLETED", 8),
    ]
    doc = request(
        "orch",
        span("t1", "TASK_STATE_COMPLETED", 0, 10, name="SendStreamingMessage", events=events),
    )
    beliefs = parse_request(doc).beliefs
    got = [(b.state, (b.start_ns - T0) // MS, (b.end_ns - T0) // MS, b.superseded) for b in beliefs]
    assert got == [
        (TaskState.SUBMITTED, 1, 3, True),
        (TaskState.WORKING, 3, 8, True),
        (TaskState.COMPLETED, 8, 10, False),
    ]


def test_heartbeat_frames_restating_a_state_extend_its_belief() -> None:
    """Workers re-send ``working`` on open streams (a heartbeat frame, more often than the
    grace): each restates the belief, none supersedes it, so it holds from the first frame to
    the next change (else every belief but the last would be trimmed to an instant)."""
    events = [
        status_event("t1", "TASK_STATE_SUBMITTED", 1),
        *(status_event("t1", "TASK_STATE_WORKING", ms) for ms in (2, 4, 6, 8)),
        status_event("t1", "TASK_STATE_FAILED", 9),
    ]
    doc = request(
        "orch",
        span("t1", "TASK_STATE_FAILED", 0, 10, name="SendStreamingMessage", events=events),
    )
    beliefs = parse_request(doc).beliefs
    got = [(b.state, (b.start_ns - T0) // MS, (b.end_ns - T0) // MS, b.superseded) for b in beliefs]
    assert got == [
        (TaskState.SUBMITTED, 1, 2, True),
        (TaskState.WORKING, 2, 9, True),
        (TaskState.FAILED, 9, 10, False),
    ]


def test_the_java_sdk_extras_attributes_are_a_belief() -> None:
    """A span of the A2A Java SDK's OpenTelemetry extras names its task
    ``gen_ai.agent.a2a.task_id`` and the state ``gen_ai.agent.a2a.status``; ours win."""
    java = {"gen_ai.agent.a2a.task_id": "t1", "gen_ai.agent.a2a.status": "TASK_STATE_FAILED"}
    doc = request("jvm", span(None, None, 0, 1, name="GetTask", extra=java))
    (belief,) = parse_request(doc).beliefs
    assert (belief.task_id, belief.state, belief.raw) == (
        "t1",
        TaskState.FAILED,
        "TASK_STATE_FAILED",
    )
    both = request("jvm", span("t2", "TASK_STATE_WORKING", 0, 1, extra=java))
    (belief,) = parse_request(both).beliefs
    assert (belief.task_id, belief.state) == ("t2", TaskState.WORKING)
    assert (
        parse_request(
            request("jvm", span(None, None, 0, 1, extra={"gen_ai.agent.a2a.task_id": "t1"}))
        ).beliefs
        == []
    )


def test_a_swapped_task_is_a_belief_about_the_task_answered() -> None:
    """A follow-up on t1 answered with a new task t2: the span stays about t1 and carries no
    state of it; its ``otel_a2a.task.swapped`` event is the belief about t2, to the span's end."""
    swapped = {
        **status_event("t2", "submitted", 4),
        "name": "otel_a2a.task.swapped",
    }
    swapped["attributes"].append(kv("otel_a2a.task.id.requested", "t1"))
    doc = request(
        "orch",
        span(
            "t1",
            None,
            0,
            10,
            name="SendMessage",
            events=[swapped],
            extra={"otel_a2a.observation.authoritative": True},
        ),
    )
    (belief,) = parse_request(doc).beliefs
    assert (belief.task_id, belief.state, belief.raw) == ("t2", TaskState.SUBMITTED, "submitted")
    assert ((belief.start_ns - T0) // MS, (belief.end_ns - T0) // MS) == (4, 10)
    assert belief.authoritative is True and belief.superseded is False


def test_protobuf_json_ids_in_base64_and_integer_times() -> None:
    s = span("t1", "working", 0, 1)
    s["traceId"] = base64.b64encode(bytes.fromhex(TRACE)).decode()
    s["spanId"] = base64.b64encode(bytes.fromhex("00000000000000ff")).decode()
    s["startTimeUnixNano"] = T0
    (belief,) = parse_request(request("a", s)).beliefs
    assert belief.trace_id == TRACE and belief.span_id == "00000000000000ff"
    assert belief.start_ns == T0
    assert normalize_id("zz", 8) == "" and normalize_id(None, 16) == ""


def test_attribute_values() -> None:
    got = attributes(
        [kv("s", "x"), kv("b", True), kv("i", 7), kv("d", 1.5), {"key": "arr", "value": {}}, 3]
    )
    assert got == {"s": "x", "b": True, "i": 7, "d": 1.5}


def test_bad_input_never_raises() -> None:
    bad: list[object] = [
        None,
        [],
        "x",
        {"resourceSpans": "nope"},
        {"resourceSpans": [1, {"scopeSpans": [None, {"spans": [7, {"attributes": "x"}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]},
        request("a", span("t1", "working", 5, 1)),  # end before start: clamped
    ]
    for doc in bad:
        batch = parse_request(doc)
        assert all(b.end_ns >= b.start_ns for b in batch.beliefs)
    assert parse_request(None).errors == 1
    lines = ["", "not json", json.dumps(request("a", span("t1", "working", 0, 1))), "[1]"]
    batches = list(parse_lines(lines))
    assert [len(b.beliefs) for b in batches] == [0, 1, 0]
    assert [b.errors for b in batches] == [1, 0, 1]


def test_processes_left_unnamed_are_told_apart_by_their_instance_id() -> None:
    """Every process at the SDK's default name would be one service, never compared with
    another; named services keep their name (replicas of one stay one service)."""

    def belief_service(name: str, instance: str | None) -> str:
        doc = request(name, span("t1", "TASK_STATE_WORKING", 0, 10))
        if instance is not None:
            resource = doc["resourceSpans"][0]["resource"]["attributes"]
            resource.append(kv("service.instance.id", instance))
        (belief,) = parse_request(doc).beliefs
        return belief.service

    uuid = "874f66aa-fc2e-4167-80ec-c0850d46f7b9"
    assert belief_service("unknown_service:python", uuid) == f"unknown_service:python#{uuid}"
    assert belief_service("unknown_service:python", None) == "unknown_service:python"
    assert belief_service("gateway", uuid) == "gateway"
