"""Fixtures for the operations assets: one real Prometheus + Alertmanager stack per session.

``metrics_target`` is the process Prometheus scrapes. It is currently the STAND-IN
tests/ops/metrics_source.py (the DESIGN §4 instruments driven by hand); replace it with a real
instrumented run (the seeded demo) by yielding an object with the same two members:
``target`` ("127.0.0.1:PORT" of its /metrics) and ``bump()`` (make the incident happen, after
Prometheus has scraped the quiet baseline).
"""

from __future__ import annotations

import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.prom import (
    ALERTMANAGER,
    PROMETHEUS,
    Alertmanager,
    Prometheus,
    Timeout,
    WebhookReceiver,
    poll,
    require_binary,
)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "dashboards" / "alerts" / "otel-a2a.rules.yaml"
DASHBOARD = REPO / "dashboards" / "otel-a2a-overview.json"

# The inhibit rule documented at the top of the rules file, proven by the end-to-end test.
INHIBIT_RULES: list[dict[str, Any]] = [
    {
        "source_matchers": [
            'alertname=~"A2ANonCanonicalTaskState|A2ATerminalStateRegression|A2ATaskLost"'
        ],
        "target_matchers": ['alertname="A2ATaskStateDivergence"'],
        "equal": ["a2a_agent_name", "a2a_divergence_reason"],
    }
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the real Prometheus stack carry the ``prometheus`` marker."""
    for item in items:
        if {"ops_stack", "incident_scraped"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.prometheus)


def _readline(stream: IO[str], timeout: float, what: str) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise Timeout(f"no line from {what} within {timeout}s")
    return stream.readline()


@dataclass
class StandInMetricsSource:
    """tests/ops/metrics_source.py in a subprocess (stand-in for a real instrumented run)."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bump(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("bump\n")
        self.proc.stdin.flush()
        line = _readline(self.proc.stdout, 10.0, "metrics source")
        assert line.strip() == "OK bump", line

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # EOF ends it
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture(scope="session")
def metrics_target() -> Iterator[StandInMetricsSource]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("metrics_source.py"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        line = _readline(proc.stdout, 30.0, "metrics source start-up")
        m = re.fullmatch(r"PORT (\d+)\s*", line)
        assert m, f"metrics source printed {line!r} (exit status {proc.poll()})"
        source = StandInMetricsSource(proc, int(m.group(1)))
    except BaseException:
        proc.kill()
        proc.wait(timeout=10)
        raise
    yield source
    source.stop()


@dataclass
class OpsStack:
    prometheus: Prometheus
    alertmanager: Alertmanager
    webhook: WebhookReceiver
    source: StandInMetricsSource
    # Prometheus' active alerts after its rules were evaluated over the quiet baseline.
    alerts_before_incident: list[dict[str, Any]] = field(default_factory=list)


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
    tmp_path_factory: pytest.TempPathFactory, metrics_target: StandInMetricsSource
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
        group_by=("alertname", "a2a_agent_name", "a2a_divergence_reason"),
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
        # Baseline scraped: every divergence series exists, all at 0 (first scrape takes ~5 s).
        result = prom.wait_for(
            "a2a_divergence_total",
            lambda r: len(r) >= 5,
            timeout=30,
            what="the first scrape of the baseline",
        )
        assert all(float(s["value"][1]) == 0 for s in result), result
        scraped_at = float(result[0]["value"][0])
        # ...and the rules were evaluated after it, so the "quiet" alerts below mean something.
        assert prom is not None
        live = prom
        poll(
            lambda: all(
                _rfc3339(g["lastEvaluation"]) > scraped_at + 1.0 for g in live.rule_groups()
            ),
            timeout=15,
            what="a rule evaluation after the baseline scrape",
        )
        before = prom.alerts()
        metrics_target.bump()
        yield OpsStack(prom, am, webhook, metrics_target, before)
    finally:
        if prom is not None:
            prom.stop()
        am.stop()
        webhook.stop()


@pytest.fixture(scope="session")
def incident_scraped(ops_stack: OpsStack) -> OpsStack:
    """The stack once Prometheus has scraped the incident (divergence counters moved)."""
    ops_stack.prometheus.wait_for(
        "sum(a2a_divergence_total)",
        lambda r: bool(r) and float(r[0]["value"][1]) >= 5,
        timeout=15,
        what="the incident to be scraped",
    )
    # one more scrape so rate() has two samples past the step
    t = time.time()
    ops_stack.prometheus.wait_for(
        "timestamp(a2a_tasks_stale)",
        lambda r: bool(r) and min(float(s["value"][1]) for s in r) > t,
        timeout=15,
        what="a scrape after the incident",
    )
    return ops_stack
