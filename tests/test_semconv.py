"""The agent-name label cap shared by the instrumentation and the detector."""

from __future__ import annotations

from otel_a2a.semconv import OTHER, AgentLabels


def test_at_most_100_names_then_other() -> None:
    labels = AgentLabels()
    assert [labels(f"agent-{i}") for i in range(100)] == [f"agent-{i}" for i in range(100)]
    assert labels("agent-100") == OTHER
    assert labels("agent-7") == "agent-7"  # a name once admitted stays


def test_addresses_take_half_of_the_slots_at_most() -> None:
    labels = AgentLabels()
    hosts = [labels(f"http://host{i}.test", address=True) for i in range(80)]
    assert hosts[:50] == [f"http://host{i}.test" for i in range(50)]
    assert set(hosts[50:]) == {OTHER}
    # the agents known by their cards still get their names
    assert [labels(f"card-{i}") for i in range(50)] == [f"card-{i}" for i in range(50)]
    assert labels("card-50") == OTHER
