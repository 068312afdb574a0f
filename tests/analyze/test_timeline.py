"""What the page draws, read from spans: lanes, bars, marks, flags, blind windows, bounds."""

from __future__ import annotations

import json
from pathlib import Path

from otel_a2a import semconv as sc
from otel_a2a.analyze import Correlator, parse_request
from otel_a2a.analyze.timeline import (
    CARD,
    DECISION,
    DIVERGENCE,
    ETAG,
    FINDING,
    OBSERVATION,
    TimelineBuilder,
)
from tests.analyze.samples import MS, T0, kv, request, span, status_event

FIXTURE = Path(__file__).parents[1] / "fixtures" / "otlp" / "jvm-split-brain.jsonl"


def _feed(builder: TimelineBuilder, correlator: Correlator, doc: dict[str, object]) -> None:
    batch = parse_request(doc)
    builder.add(doc, batch.beliefs, correlator.feed(batch))


def test_the_recorded_split_brain_draws_two_lanes_a_flag_and_the_blind_window() -> None:
    builder, correlator = TimelineBuilder(), Correlator()
    for line in FIXTURE.read_text().splitlines():
        _feed(builder, correlator, json.loads(line))
    [view] = builder.view().tasks
    assert view.services == ["orchestrator", "jvm-worker"]
    assert {(b.service, b.raw) for b in view.bars} == {
        ("orchestrator", "TASK_STATE_WORKING"),
        ("jvm-worker", "TASK_STATE_FAILED"),
    }
    [flag] = [m for m in view.marks if m.kind == FINDING]
    assert flag.label == "cross_runtime_conflict" and flag.service == "jvm-worker"
    assert flag.span is not None and flag.span.name == "GetTask" and flag.span.span_id
    [window] = view.windows
    assert window.service == "orchestrator"
    assert (
        "orchestrator believed 'TASK_STATE_WORKING' while jvm-worker held 'TASK_STATE_FAILED'"
        in (window.label)
    )
    # a failed task stays failed: blind until the orchestrator's belief ended, not only the
    # instant both spans overlapped
    working = next(b for b in view.bars if b.service == "orchestrator")
    assert window.start_ns == flag.t_ns and window.end_ns == working.end_ns > flag.t_ns
    assert [m.label for m in view.marks if m.kind == OBSERVATION].count(
        "observed TASK_STATE_WORKING"
    ) >= 4


def test_cards_decisions_and_divergence_events_become_marks() -> None:
    task, agent = "t-1", "http://127.0.0.1:9/"
    card = span(
        None,
        None,
        0,
        5,
        name="GetAgentCard",
        span_id="c" * 16,
        extra={sc.AGENT_URL: agent, sc.CARD_ETAG: '"v1"', sc.AGENT_VERSION: "1.0.0"},
    )
    changed = span(
        None,
        None,
        100,
        105,
        name="GetAgentCard",
        span_id="d" * 16,
        extra={sc.AGENT_URL: agent, sc.CARD_ETAG: '"v2"', sc.CARD_ETAG_CHANGED: True},
    )
    elsewhere = span(
        None,
        None,
        50,
        55,
        name="GetAgentCard",
        span_id="e" * 16,
        extra={sc.AGENT_URL: "http://other/"},
    )
    stream = span(
        task,
        "TASK_STATE_WORKING",
        10,
        90,
        name="SendStreamingMessage",
        span_id="a" * 16,
        extra={sc.AGENT_URL: agent},
        events=[status_event(task, "TASK_STATE_WORKING", 20)],
    )
    decision = span(
        task,
        None,
        110,
        111,
        name="orchestrator wait_on_task",
        span_id="b" * 16,
        extra={sc.LIVENESS_DECISION: True, sc.ASSUMED_STATE: "working"},
    )
    decision["events"] = [
        {
            "timeUnixNano": str(T0 + 110 * MS),
            "name": sc.EVENT_DIVERGENCE,
            "attributes": [
                kv(sc.DIVERGENCE_REASON, "heartbeat_gap"),
                kv(sc.TASK_ID, task),
                kv(sc.OBSERVATION_AGE, 2.5),
            ],
        }
    ]
    builder = TimelineBuilder()
    builder.add(request("orchestrator", card, elsewhere, stream, changed, decision))
    [view] = builder.view().tasks
    kinds = [(m.kind, m.label) for m in view.marks]
    assert (CARD, "card fetched (version 1.0.0)") in kinds
    assert (ETAG, "card etag changed") in kinds
    assert len([k for k in kinds if k[0] in (CARD, ETAG)]) == 2  # not the other agent's card
    assert (DECISION, "decision: assumes working") in kinds
    [flag] = [m for m in view.marks if m.kind == DIVERGENCE]
    assert flag.label == "heartbeat_gap" and f"{sc.OBSERVATION_AGE}=2.5" in flag.detail
    assert flag.span is not None and flag.span.span_id == "b" * 16
    assert [m.t_ns for m in view.marks] == sorted(m.t_ns for m in view.marks)


def test_tasks_without_findings_are_drawn_only_when_asked() -> None:
    quiet = request("gateway", span("quiet", "TASK_STATE_WORKING", 0, 10))
    builder = TimelineBuilder()
    builder.add(quiet)
    assert builder.view().tasks == []
    asked = TimelineBuilder(tasks=["quiet"])
    asked.add(quiet)
    asked.add(request("gateway", span("other", "TASK_STATE_WORKING", 0, 10, span_id="2" * 16)))
    assert [v.task_id for v in asked.view().tasks] == ["quiet"]


def _conflict(task: str, at: int) -> list[dict[str, object]]:
    return [
        request("orchestrator", span(task, "TASK_STATE_WORKING", at, at + 100, span_id="1" * 16)),
        request("worker", span(task, "TASK_STATE_FAILED", at + 10, at + 20, span_id="2" * 16)),
    ]


def test_bounds_drop_the_oldest_and_say_how_many() -> None:
    builder, correlator = TimelineBuilder(max_items=10, max_tasks=3), Correlator()
    for i in range(30):
        _feed(
            builder,
            correlator,
            request(
                "gateway", span("busy", "TASK_STATE_WORKING", i, i + 1, span_id=f"{i + 1:016x}")
            ),
        )
    for doc in _conflict("busy", 100):
        _feed(builder, correlator, doc)
    # quiet tasks go first; tasks with a finding stay
    for i in range(5):
        _feed(builder, correlator, request("gateway", span(f"q{i}", "TASK_STATE_WORKING", 0, 1)))
    for i in range(3):
        for doc in _conflict(f"c{i}", 0):
            _feed(builder, correlator, doc)
    timeline = builder.view(max_tasks=2)
    assert len(timeline.tasks) == 2
    assert timeline.omitted == 2  # one more with a finding beyond the drawing bound, one evicted
    assert timeline.max_items == 10
    assert {v.task_id for v in timeline.tasks} == {"c1", "c2"}
    busy = TimelineBuilder(max_items=10, tasks=["busy"])
    for i in range(30):
        busy.add(
            request(
                "gateway", span("busy", "TASK_STATE_WORKING", i, i + 1, span_id=f"{i + 1:016x}")
            )
        )
    [view] = busy.view().tasks
    assert len(view.bars) == 10 and view.bars[0].start_ns == T0 + 20 * MS
    assert view.dropped == 20 + 20  # 20 bars and 20 observation points


def test_bad_spans_are_skipped_not_raised() -> None:
    builder = TimelineBuilder()
    builder.add(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                None,
                                {"name": 3},
                                {"startTimeUnixNano": "x", "attributes": "no"},
                            ]
                        }
                    ]
                },
                "junk",
            ]
        }
    )
    builder.add(None)
    builder.add([1, 2])
    assert builder.view().tasks == []
