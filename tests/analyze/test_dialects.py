"""Every dialect in tests/fixtures/dialects/ yields the belief its span holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_a2a.analyze import dialects
from otel_a2a.analyze.otlp import parse_request
from otel_a2a.protocol.states import TaskState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dialects"

# file -> (service, raw spelling, method name, agent name); None: no belief
EXPECTED: dict[str, tuple[str, str, str, str] | None] = {
    "convention": ("orchestrator", "TASK_STATE_WORKING", "GetTask", "Billing"),
    "otel-a2a-previous": ("orchestrator", "working", "GetTask", "Billing"),
    "a2a-java-extras": ("jvm-worker", "TASK_STATE_WORKING", "GetTask", ""),
    "kong": ("kong", "working", "GetTask", ""),
    "agentgateway": ("agentgateway", "working", "GetTask", ""),
    "bifrost": None,
}


def test_every_fixture_is_expected() -> None:
    assert {p.stem for p in FIXTURES.glob("*.json")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_dialect_yields_its_belief(name: str) -> None:
    batch = parse_request(json.loads((FIXTURES / f"{name}.json").read_text()))
    assert batch.errors == 0
    expected = EXPECTED[name]
    if expected is None:
        assert batch.beliefs == []
        return
    (belief,) = batch.beliefs
    service, raw, method, agent = expected
    assert (belief.service, belief.task_id, belief.state, belief.raw) == (
        service,
        "task-1",
        TaskState.WORKING,
        raw,
    )
    assert (belief.operation, belief.agent_name) == (method, agent)


def test_authoritative_in_both_of_otel_a2a_dialects_only() -> None:
    for name in EXPECTED:
        doc = json.loads((FIXTURES / f"{name}.json").read_text())
        beliefs = parse_request(doc).beliefs
        assert all(b.authoritative == name.startswith(("convention", "otel-a2a")) for b in beliefs)


def test_a_wire_spelling_wins_over_a_canonical_value() -> None:
    reading = dialects.read(
        {
            "a2a.task.id": "t",
            "a2a.task.state": "TASK_STATE_WORKING",
            "otel_a2a.task.state.raw": "Working",
        }
    )
    assert reading.state == (TaskState.WORKING, "Working")


def test_method_spellings_read_as_v1_names() -> None:
    assert dialects.method_name("message/send") == "SendMessage"
    assert dialects.method_name("tasks/resubscribe") == "SubscribeToTask"
    assert dialects.method_name("GetAgentCard") == "GetAgentCard"
    assert dialects.method_name("made/up") == "made/up"


def test_the_same_task_across_dialects_is_one_task() -> None:
    """The point of reading dialects: a conflict between runtimes is found whatever each
    spoke. A worker on the Java extras answering failed while an orchestrator on the previous
    names believes working is a cross-runtime conflict."""
    from otel_a2a.analyze.correlate import Correlator

    java = json.loads((FIXTURES / "a2a-java-extras.json").read_text())
    attrs = java["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    for item in attrs:
        if item["key"] == "gen_ai.agent.a2a.status":
            item["value"] = {"stringValue": "TASK_STATE_FAILED"}
    correlator = Correlator()
    findings = correlator.feed(parse_request(java))
    findings += correlator.feed(
        parse_request(json.loads((FIXTURES / "otel-a2a-previous.json").read_text()))
    )
    assert [f.reason.value for f in findings] == ["cross_runtime_conflict"]
