"""Fixtures for the operations assets: one real Prometheus + Alertmanager stack per session.

``metrics_target`` is the process Prometheus scrapes: a REAL instrumented run
(tests/support/instrumented_run.py): a plain httpx A2A client, instrumented only by
``OTEL_A2A_ENABLED=true`` and serving its metrics with the OpenTelemetry Prometheus reader,
talking to the real Python and Node test peers and to a scripted misbehaving agent. Its
``bump()`` runs one incident round, after Prometheus has scraped the quiet baseline.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import in_ci
from tests.support.instrumented_run import (
    DIVERGENCES_PER_ROUND,
    InstrumentedRun,
    start_instrumented_run,
)
from tests.support.peers import node_problem
from tests.support.prom import (
    ALERTMANAGER,
    PROMETHEUS,
    Alertmanager,
    Prometheus,
    WebhookReceiver,
    poll,
    require_binary,
)

REPO = Path(__file__).resolve().parents[2]
# Incident rounds: a divergence series is born at its first event, which increase() cannot
# see; the second round moves every series again, as a continuing incident does.
ROUNDS = 2
HEARTBEAT = 1.0  # OTEL_A2A_DEFAULT_HEARTBEAT and the peers' override in the run
RULES = REPO / "dashboards" / "alerts" / "otel-a2a.rules.yaml"
DASHBOARD = REPO / "dashboards" / "otel-a2a-overview.json"


def _documented_inhibit_rules() -> list[dict[str, Any]]:
    """The ``inhibit_rules:`` block quoted in the rules file's header comment, parsed as
    written there: the end-to-end test proves the rule users copy, not a copy of it."""
    lines = RULES.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "#   inhibit_rules:")
    block = []
    for line in lines[start:]:
        if not line.startswith("#   "):
            break
        block.append(line[4:])
    rules: list[dict[str, Any]] = yaml.safe_load("\n".join(block))["inhibit_rules"]
    return rules


INHIBIT_RULES = _documented_inhibit_rules()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the real Prometheus stack carry the ``prometheus`` marker."""
    for item in items:
        if {"ops_stack", "incident_scraped"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.prometheus)


@pytest.fixture(scope="session")
def metrics_target() -> Iterator[InstrumentedRun]:
    """The instrumented run, its quiet baseline done and served on /metrics."""
    problem = node_problem()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI=true but the Node test peer cannot run: {problem}", pytrace=False)
        pytest.skip(f"the instrumented run needs the Node test peer: {problem}")
    run = start_instrumented_run(heartbeat=HEARTBEAT)
    try:
        yield run
    finally:
        run.stop()


@dataclass
class OpsStack:
    prometheus: Prometheus
    alertmanager: Alertmanager
    webhook: WebhookReceiver
    source: InstrumentedRun
    # Prometheus' active alerts after its rules were evaluated over the quiet baseline.
    alerts_before_incident: list[dict[str, Any]] = field(default_factory=list)
    # What Prometheus had scraped of the baseline: query -> result.
    baseline: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _rfc3339(ts: str) -> float:
    # Prometheus prints nanoseconds; datetime takes microseconds.
    m = re.fullmatch(r"(.+?T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", ts)
    if not m:
        raise ValueError(ts)
    frac = (m.group(2) or ".0")[:7]
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + tz).timestamp()


@pytest.fixture(scope="session")
def ops_stack(
    tmp_path_factory: pytest.TempPathFactory, metrics_target: InstrumentedRun
) -> Iterator[OpsStack]:
    """Prometheus (rules loaded, scraping the metrics target every 1 s) -> Alertmanager ->
    webhook, with the incident triggered once the quiet baseline has been scraped and judged."""
    require_binary(PROMETHEUS)
    require_binary(ALERTMANAGER)
    root = tmp_path_factory.mktemp("ops-stack")
    webhook = WebhookReceiver().start()
    am = Alertmanager(
        root / "alertmanager",
        webhook.url,
        inhibit_rules=INHIBIT_RULES,
        group_by=("alertname", "otel_a2a_agent_name", "otel_a2a_divergence_reason"),
    )
    prom: Prometheus | None = None
    try:
        am.start()
        prom = Prometheus(
            root / "prometheus",
            targets=[metrics_target.target],
            rule_files=[RULES],
            alertmanager=am.address,
        ).start()
        # Baseline scraped: one authoritative decision per agent, nothing else moved.
        decisions = prom.wait_for(
            "otel_a2a_liveness_decisions_total",
            lambda r: len(r) >= 3,
            timeout=30,
            what="the first scrape of the baseline",
        )
        scraped_at = float(decisions[0]["value"][0])
        baseline = {
            q: prom.query(q)
            for q in (
                "otel_a2a_liveness_decisions_total",
                "otel_a2a_divergence_total",
                "otel_a2a_task_stale",
                "otel_a2a_instrumentation_errors_total",
                "otel_a2a_task_get_redundant_total",
                "otel_a2a_card_etag_changes_total",
            )
        }
        # ...and the rules were evaluated after it, so the "quiet" alerts below mean something.
        live = prom
        poll(
            lambda: all(
                _rfc3339(g["lastEvaluation"]) > scraped_at + 1.0 for g in live.rule_groups()
            ),
            timeout=15,
            what="a rule evaluation after the baseline scrape",
        )
        before = prom.alerts()
        per_round = sum(DIVERGENCES_PER_ROUND.values())
        for n in range(1, ROUNDS + 1):
            metrics_target.bump()
            _wait_scrape_after(prom, time.time())
            total = prom.query("sum(otel_a2a_divergence_total)")
            assert total and float(total[0]["value"][1]) == n * per_round, (n, total)
        yield OpsStack(prom, am, webhook, metrics_target, before, baseline)
    finally:
        if prom is not None:
            prom.stop()
        am.stop()
        webhook.stop()


def _wait_scrape_after(prom: Prometheus, t: float) -> None:
    """Until Prometheus holds a scrape of the run that started after ``t`` (unix seconds)."""
    prom.wait_for(
        'timestamp(up{job="otel-a2a"})',
        lambda r: bool(r) and float(r[0]["value"][1]) > t,
        timeout=15,
        what="a scrape of the instrumented run after the incident round",
    )


@pytest.fixture(scope="session")
def incident_scraped(ops_stack: OpsStack) -> OpsStack:
    """The stack once Prometheus has scraped every incident round (and one scrape more)."""
    _wait_scrape_after(ops_stack.prometheus, time.time())
    return ops_stack
