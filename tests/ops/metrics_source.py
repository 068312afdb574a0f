"""STAND-IN metrics source for the ops tests — to be replaced by a real instrumented run.

It creates exactly the DESIGN §4 instruments (meter ``otel_a2a``, same names, units, attributes
and histogram buckets) with the OpenTelemetry SDK and serves them with
``opentelemetry-exporter-prometheus`` + ``prometheus_client``, the scrape path the dashboard and
alert rules target. It proves the harness (real Prometheus scraping, PromQL of every panel, rule
evaluation, Alertmanager delivery) before ``otel_a2a.instrumentation`` is finished; the lead
swaps the ``metrics_target`` fixture in tests/ops/conftest.py for a seeded demo run.

Protocol (line based, so a test drives it without sleeping):
  stdout ``PORT <n>``  once the endpoint is serving on 127.0.0.1:<n> with every series created at
                       its baseline (counters at 0, one observation per agent in the histogram);
  stdin  ``bump``      records one divergence scenario (every §4 instrument moves) and answers
                       ``OK bump``;
  stdin  ``exit`` / EOF ends the process.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import start_http_server

AGE_BUCKETS = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0]

AGENT = "a2a.agent.name"
REASON = "a2a.divergence.reason"
OPERATION = "a2a.operation"
OUTCOME = "a2a.decision.outcome"
STATE_CLASS = "a2a.task.state.class"
ERROR_TYPE = "error.type"

# (reason, operation, agent): the series created at 0 and bumped by the scenario.
DIVERGENCES = [
    ("heartbeat_gap", "SendMessage", "worker"),
    ("etag_changed", "CancelTask", "gateway"),
    ("non_canonical_state", "GetTask", "worker"),
    ("terminal_regression", "GetTask", "worker"),
    ("task_lost", "GetTask", "worker"),
]
AGENTS = ["worker", "gateway"]


class Source:
    def __init__(self) -> None:
        reader = PrometheusMetricReader()
        self.provider = MeterProvider(
            metric_readers=[reader],
            resource=Resource.create({"service.name": "otel-a2a-metrics-stand-in"}),
        )
        meter = self.provider.get_meter("otel_a2a")
        self.lock = threading.Lock()
        self.tracked = {"active": 2, "interrupted": 1, "terminal": 4}
        self.stale = dict.fromkeys(AGENTS, 0)

        self.divergence = meter.create_counter("a2a.divergence", unit="{divergence}")
        self.decisions = meter.create_counter("a2a.liveness.decisions", unit="{decision}")
        self.age = meter.create_histogram(
            "a2a.observation.age", unit="s", explicit_bucket_boundaries_advisory=AGE_BUCKETS
        )
        self.etag_changes = meter.create_counter("a2a.card.etag.changes", unit="{change}")
        self.redundant = meter.create_counter("a2a.task.get.redundant", unit="{request}")
        self.evicted = meter.create_counter("a2a.tasks.evicted", unit="{task}")
        self.errors = meter.create_counter("a2a.instrumentation.errors", unit="{error}")
        meter.create_observable_gauge("a2a.tasks.tracked", [self._tracked], unit="{task}")
        meter.create_observable_gauge("a2a.tasks.stale", [self._stale], unit="{task}")

        # Baseline: every series exists before the first scrape, so increase()/rate() see the
        # first real event (a counter first scraped at 1 shows no increase).
        for reason, op, agent in DIVERGENCES:
            self.divergence.add(0, {REASON: reason, OPERATION: op, AGENT: agent})
        for agent in AGENTS:
            self.decisions.add(0, {OUTCOME: "authoritative", AGENT: agent})
            self.decisions.add(0, {OUTCOME: "divergent", AGENT: agent})
            self.age.record(0.2, {AGENT: agent})
            self.etag_changes.add(0, {AGENT: agent})
            self.redundant.add(0, {AGENT: agent})
        self.evicted.add(0)
        self.errors.add(0, {ERROR_TYPE: "ParseError"})

    def _tracked(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self.lock:
            return [Observation(n, {STATE_CLASS: c}) for c, n in self.tracked.items()]

    def _stale(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self.lock:
            return [Observation(n, {AGENT: a}) for a, n in self.stale.items()]

    def bump(self) -> None:
        """The seeded incident in numbers: the worker restarted and lost/failed a task."""
        for reason, op, agent in DIVERGENCES:
            self.divergence.add(1, {REASON: reason, OPERATION: op, AGENT: agent})
        for agent in AGENTS:
            self.decisions.add(5, {OUTCOME: "authoritative", AGENT: agent})
            self.decisions.add(1, {OUTCOME: "divergent", AGENT: agent})
            self.redundant.add(3, {AGENT: agent})
        for age in (0.4, 3.0, 12.0, 45.0):
            self.age.record(age, {AGENT: "worker"})
        self.age.record(1.5, {AGENT: "gateway"})
        self.etag_changes.add(1, {AGENT: "worker"})
        self.evicted.add(4)
        self.errors.add(1, {ERROR_TYPE: "ParseError"})
        with self.lock:
            self.tracked = {"active": 3, "interrupted": 1, "terminal": 6}
            self.stale["worker"] = 2


def main() -> int:
    source = Source()
    server, _thread = start_http_server(port=0, addr="127.0.0.1")
    print(f"PORT {server.server_port}", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "bump":
            source.bump()
            print("OK bump", flush=True)
        elif command == "exit":
            break
    server.shutdown()
    source.provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
