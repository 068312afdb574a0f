"""A real Prometheus scrapes a real instrumented run: exact counts through the HTTP API.

The run (tests/support/instrumented_run.py) is a plain httpx A2A client instrumented only by
``OTEL_A2A_ENABLED=true``; its baseline is quiet and each incident round produces a known set
of divergences against the real Python and Node test peers and a scripted misbehaving agent.
What Prometheus returns for ``otel_a2a_divergence_total`` by reason (and the other metric
series) must equal those numbers exactly: nothing lost, nothing double counted, on the scrape
path the dashboard and the alert rules read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.ops.conftest import ROUNDS, OpsStack
from tests.support.instrumented_run import (
    AGENTS,
    DECISIONS_BASELINE,
    DECISIONS_PER_ROUND,
    DIVERGENCES_PER_ROUND,
    ERRORS_PER_ROUND,
    ETAG_CHANGES_PER_ROUND,
    REDUNDANT_GETS_PER_ROUND,
    STALE_PER_ROUND,
    times,
)


def _values(result: list[dict[str, Any]], *labels: str) -> dict[Any, float]:
    out: dict[Any, float] = {}
    for series in result:
        key = tuple(series["metric"].get(label, "") for label in labels)
        out[key[0] if len(key) == 1 else key] = float(series["value"][1])
    return out


def test_divergences_by_reason_are_exact(incident_scraped: OpsStack) -> None:
    result = incident_scraped.prometheus.query(
        "sum by (otel_a2a_divergence_reason) (otel_a2a_divergence_total)"
    )
    expected: Counter[str] = Counter()
    for (reason, _op, _agent), n in DIVERGENCES_PER_ROUND.items():
        expected[reason] += n * ROUNDS
    assert _values(result, "otel_a2a_divergence_reason") == dict(expected)
    assert dict(expected) == {
        "heartbeat_gap": 4,
        "no_observation": 4,
        "task_lost": 2,
        "terminal_regression": 2,
        "non_canonical_state": 2,
        "unknown_state": 2,
        "etag_changed": 2,
    }


def test_divergences_by_reason_operation_and_agent_are_exact(
    incident_scraped: OpsStack,
) -> None:
    result = incident_scraped.prometheus.query("otel_a2a_divergence_total")
    got = _values(result, "otel_a2a_divergence_reason", "a2a_method_name", "otel_a2a_agent_name")
    assert got == times(DIVERGENCES_PER_ROUND, ROUNDS)
    # one series per (reason, operation, agent): no task or message id leaked into labels
    labels = {name for s in result for name in s["metric"]}
    assert labels == {
        "__name__",
        "job",
        "instance",
        "otel_a2a_divergence_reason",
        "a2a_method_name",
        "otel_a2a_agent_name",
        "otel_scope_name",
        "otel_scope_version",
        "otel_scope_schema_url",
    }, labels


def test_baseline_had_no_divergence(incident_scraped: OpsStack) -> None:
    baseline = incident_scraped.baseline
    assert baseline["otel_a2a_divergence_total"] == []
    assert _values(
        baseline["otel_a2a_liveness_decisions_total"],
        "otel_a2a_decision_outcome",
        "otel_a2a_agent_name",
    ) == {k: float(v) for k, v in DECISIONS_BASELINE.items()}
    assert baseline["otel_a2a_task_get_redundant_total"] == []
    assert baseline["otel_a2a_card_etag_changes_total"] == []


def test_decisions_and_other_counters_are_exact(incident_scraped: OpsStack) -> None:
    prom = incident_scraped.prometheus
    decisions = _values(
        prom.query("otel_a2a_liveness_decisions_total"),
        "otel_a2a_decision_outcome",
        "otel_a2a_agent_name",
    )
    assert decisions == times(DECISIONS_PER_ROUND, ROUNDS, DECISIONS_BASELINE)
    redundant = _values(prom.query("otel_a2a_task_get_redundant_total"), "otel_a2a_agent_name")
    assert redundant == times(REDUNDANT_GETS_PER_ROUND, ROUNDS)
    etags = _values(prom.query("otel_a2a_card_etag_changes_total"), "otel_a2a_agent_name")
    assert etags == times(ETAG_CHANGES_PER_ROUND, ROUNDS)
    errors = _values(prom.query("otel_a2a_instrumentation_errors_total"), "error_type")
    assert errors == times(ERRORS_PER_ROUND, ROUNDS)
    # every decision is in the age histogram except the no_observation ones (no age)
    counts = _values(prom.query("otel_a2a_observation_age_seconds_count"), "otel_a2a_agent_name")
    no_age = times(
        {a: n for (r, _, a), n in DIVERGENCES_PER_ROUND.items() if r == "no_observation"},
        ROUNDS,
    )
    by_agent: Counter[str] = Counter()
    for (_outcome, agent), n in decisions.items():
        by_agent[agent] += int(n)
    assert counts == {a: float(by_agent[a] - no_age.get(a, 0)) for a in AGENTS}


def test_stale_and_tracked_tasks(incident_scraped: OpsStack) -> None:
    prom = incident_scraped.prometheus
    stale = _values(prom.query("otel_a2a_task_stale"), "otel_a2a_agent_name")
    assert stale == times(STALE_PER_ROUND, ROUNDS)
    tracked = _values(prom.query("otel_a2a_task_tracked"), "otel_a2a_task_state_class")
    # the stale slow tasks are the only live ones; the bounded ledger evicted terminal ones
    assert tracked["active"] == sum(times(STALE_PER_ROUND, ROUNDS).values())
    assert tracked["interrupted"] == 0 and tracked["terminal"] > 0
    evicted = prom.query("otel_a2a_task_evicted_total")
    assert evicted and float(evicted[0]["value"][1]) > 0
