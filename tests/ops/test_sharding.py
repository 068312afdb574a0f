"""The sharded tier on real processes: 2 tier-1 collectors on the shipped
``otelcol-sharded.yaml`` -> 2 tier-2 collectors on ``otelcol-shard.yaml`` -> 2
``otel-a2a detector`` shards, and beside them the same traffic through a third tier-2
collector (fed by tier 1's ``otlp/jaeger`` copy) into one reference detector.

The workload mixes what breaks per-trace routing. Three services (each instrumented only by
``OTEL_A2A_ENABLED=true``) read the same 15 tasks from their own view of a split-brain agent:
the orchestrator reads all of them inside one trace (it fans out while serving one request),
the auditor joins that same trace, and the gateway reads half of them in a second shared trace
and the others each in a trace of its own. The orchestrator exports to one tier-1 collector,
the gateway and the auditor to the other. The agents hold each answer until all three
services asked (a barrier), so the beliefs overlap in time and the detector's findings are
fixed in advance: ``renormalized_state`` and ``cross_runtime_conflict`` per task pair.
Beside them a fourth service without otel-a2a, a Go router (its OpenTelemetry A2A convention
spans posted by the test as OTLP JSON with explicit times, all in one trace, its observations
to one tier-1 collector and its decisions to the other), is judged by the fleet judge: its
findings (``heartbeat_gap``, ``terminal_state``, ``no_observation``) are fixed in advance too.

Proven: every span naming a task reaches one shard only, all of a task's spans the same
shard, with the trace ids it was emitted with; both shards hold tasks; and the findings of
the two shards together equal those of the single detector, which are the expected ones.
The same traffic through a naive tier 1 (``routing_key: attributes`` on ``a2a.task.id``, no
trace rewrite) splits tasks over both shards: the rewrite is what makes the guarantee.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.pipeline import (
    SHARD,
    SHARDED,
    Detector,
    addr,
    attribute,
    collector,
    detector,
    free_ports,
    spans,
)
from tests.support.prom import poll

CLIENT = Path(__file__).with_name("fanout_client.py")
S = 1_000_000_000
DEADLINE = 60.0
SERVICES = ("orchestrator", "gateway", "auditor")
# The wire state each service's view of the agent answers, per kind of task.
VIEWS = {
    "renorm": {
        "orchestrator": "TASK_STATE_WORKING",
        "gateway": "Working",
        "auditor": "TASK_STATE_WORKING",
    },
    "conflict": {
        "orchestrator": "TASK_STATE_WORKING",
        "gateway": "TASK_STATE_FAILED",
        "auditor": "TASK_STATE_FAILED",
    },
    "agree": {s: "TASK_STATE_COMPLETED" for s in SERVICES},
}
# What a single detector must find per kind of task: (reason, services) pairs.
EXPECTED = {
    "renorm": {
        ("renormalized_state", ("gateway", "orchestrator")),
        ("renormalized_state", ("auditor", "gateway")),
    },
    "conflict": {
        ("cross_runtime_conflict", ("gateway", "orchestrator")),
        ("cross_runtime_conflict", ("auditor", "orchestrator")),
    },
    "agree": set(),
}
TASKS = [f"{kind}-{n}" for n in range(5) for kind in VIEWS]
TRACE_1 = "0af7651916cd43dd8448eb211c80319c"  # the orchestrator's request, joined by the auditor
TRACE_2 = "4bf92f3577b34da6a3ce929d0e0e4736"  # the gateway's batch job
TRACE_3 = "5b8efff798038103d269b633813fc60c"  # the Go router's: every one of its tasks
ROUTER = "go-router"  # no otel-a2a in it: judged by the detectors from its spans
# Its tasks: (what its GetTask said, or None: never asked; seconds from it to its CancelTask),
# and what one detector must find, judging the default heartbeat of 30 s.
ROUTED = {
    "route-0": ("TASK_STATE_WORKING", 1.0, None),
    "route-1": ("TASK_STATE_WORKING", 1.0, None),
    "route-2": ("TASK_STATE_WORKING", 60.0, "heartbeat_gap"),
    "route-3": ("TASK_STATE_WORKING", 60.0, "heartbeat_gap"),
    "route-4": ("TASK_STATE_COMPLETED", 1.0, "terminal_state"),
    "route-5": (None, 1.0, "no_observation"),
}


def _traceparent(trace_id: str) -> str:
    return f"00-{trace_id}-00f067aa0ba902b7-01"


class SplitBrainAgents:
    """One loopback A2A agent per service, answering ``GetTask`` from :data:`VIEWS`; each
    answer waits until every service asked for that task (so their beliefs overlap)."""

    def __init__(self) -> None:
        self.barriers = {t: threading.Barrier(len(SERVICES), timeout=DEADLINE) for t in TASKS}
        self.servers = {view: self._server(view) for view in SERVICES}
        for server in self.servers.values():
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def url(self, view: str) -> str:
        return f"http://{addr(self.servers[view].server_address[1])}"

    def _server(self, view: str) -> ThreadingHTTPServer:
        agents = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                task_id = body["params"]["id"]
                try:
                    agents.barriers[task_id].wait()
                except threading.BrokenBarrierError:
                    self.send_error(500, "another service never asked")
                    return
                state = VIEWS[task_id.split("-")[0]][view]
                task = {"id": task_id, "contextId": "ctx-" + task_id, "status": {"state": state}}
                data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": task}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        return server

    def close(self) -> None:
        for server in self.servers.values():
            server.shutdown()
            server.server_close()


@dataclass
class Run:
    shards: list[Detector]
    reference: Detector


NAIVE = {
    "exporters::loadbalancing::routing_key": "attributes",
    "exporters::loadbalancing::routing_attributes": ["a2a.task.id"],
    "service::pipelines::traces/shards::processors": ["memory_limiter", "batch"],
}


def _client_env(service: str, front_http: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_A2A_ENABLED="true",
        OTEL_SERVICE_NAME=service,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{addr(front_http)}",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    return env


def _router_spans(decisions: bool) -> dict[str, Any]:
    """The Go router's GetTask spans (or its CancelTask spans) as one OTLP JSON request: the
    convention's client spans (kind CLIENT), as ``go/otela2a`` makes them, ten minutes ago."""
    t0 = (time.time_ns() // 1_000_000_000 - 600) * 1_000_000_000
    out = []
    for n, (task, (state, gap, _)) in enumerate(ROUTED.items()):
        if decisions:
            method, start, attrs = "CancelTask", t0 + n * S + int(gap * S), []
        elif state is None:
            continue
        else:
            method, start = "GetTask", t0 + n * S
            attrs = [{"key": "a2a.task.state", "value": {"stringValue": state}}]
        attrs += [
            {"key": "a2a.method.name", "value": {"stringValue": method}},
            {"key": "a2a.task.id", "value": {"stringValue": task}},
            {"key": "a2a.protocol.version", "value": {"stringValue": "1.0"}},
            {"key": "server.address", "value": {"stringValue": "worker.internal"}},
            {"key": "server.port", "value": {"intValue": "9000"}},
        ]
        out.append(
            {
                "traceId": TRACE_3,
                "spanId": f"{(2 if decisions else 1) << 56 | n:016x}",
                "name": method,
                "kind": 3,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(start + S // 100),
                "attributes": attrs,
            }
        )
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": ROUTER}}]}
    scope = {"name": "github.com/otel-a2a/otel-a2a/go/otela2a", "version": "0.1.0"}
    return {
        "resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": out}]}]
    }


def _post_router_spans(fronts: list[int]) -> None:
    """Observations to one tier-1 collector, then decisions to the other: both reach a task's
    shard by different paths (the detectors' hold puts them back in span-time order)."""
    for front, decisions in ((fronts[1], False), (fronts[0], True)):
        reply = httpx.post(
            f"http://{addr(front)}/v1/traces", json=_router_spans(decisions), timeout=10.0
        )
        assert reply.status_code == 200, reply.text


def _task_spans(det: Detector) -> dict[str, tuple[str, str]]:
    """span id -> (task id, trace id) of every span naming a task that ``det`` received."""
    out = {}
    for request in det.requests():
        for _, span in spans(request):
            task = attribute(span, "a2a.task.id")
            assert attribute(span, "otel_a2a.shard.trace_id") is None, span  # tier 2 drops it
            if task:
                out[span["spanId"]] = (task, span["traceId"])
    return out


def _finding_keys(findings: list[dict[str, Any]]) -> Counter[tuple[str, str, tuple[str, ...]]]:
    return Counter((f["reason"], f["task_id"], tuple(sorted(f["services"]))) for f in findings)


def _run_traffic(tmp: Path, front_overrides: dict[str, object]) -> Iterator[Run]:
    ports = iter(free_ports(40))
    started: list[Any] = []
    agents: SplitBrainAgents | None = None
    try:
        detectors = [
            detector(n, next(ports), next(ports), tmp) for n in ("shard-0", "shard-1", "reference")
        ]
        started += [d.service for d in detectors]
        tier2 = []
        for det in detectors:
            grpc = next(ports)
            tier2.append(grpc)
            started.append(
                collector(
                    f"tier2-{det.service.name}",
                    SHARD,
                    {
                        "receivers::otlp::protocols::grpc::endpoint": addr(grpc),
                        "exporters::otlphttp/detector::endpoint": det.endpoint,
                    },
                    next(ports),
                    tmp,
                )
            )
        fronts = []
        for name in ("tier1-a", "tier1-b"):
            http = next(ports)
            fronts.append(http)
            overrides = {
                "receivers::otlp::protocols::grpc::endpoint": addr(next(ports)),
                "receivers::otlp::protocols::http::endpoint": addr(http),
                "exporters::loadbalancing::resolver::static::hostnames": [
                    addr(p) for p in tier2[:2]
                ],
                "exporters::otlp/jaeger::endpoint": addr(tier2[2]),
                "exporters::prometheus::endpoint": addr(next(ports)),
                **front_overrides,
            }
            started.append(collector(name, SHARDED, overrides, next(ports), tmp))
        for service in started:
            service.wait_ready()

        agents = SplitBrainAgents()
        plan = {
            "orchestrator": (fronts[0], ["--traceparent", _traceparent(TRACE_1)]),
            "auditor": (fronts[1], ["--traceparent", _traceparent(TRACE_1)]),
            "gateway": (
                fronts[1],
                ["--traceparent", _traceparent(TRACE_2)]
                + [a for t in TASKS[1::2] for a in ("--own-trace", t)],
            ),
        }
        clients = {
            service: subprocess.Popen(
                [sys.executable, str(CLIENT), agents.url(service), *TASKS, *extra],
                env=_client_env(service, front),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for service, (front, extra) in plan.items()
        }
        try:
            for service, client in clients.items():
                out, err = client.communicate(timeout=DEADLINE)
                assert client.returncode == 0, (service, err)
                assert out.count("TASK ") == len(TASKS), (service, out)
        finally:
            for client in clients.values():
                if client.poll() is None:
                    client.kill()
                    client.wait()

        _post_router_spans(fronts)
        total = (
            len(SERVICES) * len(TASKS)
            + len(ROUTED)
            + sum(state is not None for state, _, _ in ROUTED.values())
        )
        shards, reference = detectors[:2], detectors[2]
        poll(
            lambda: (
                len(_task_spans(reference)) == total
                and sum(len(_task_spans(d)) for d in shards) >= total
            ),
            timeout=DEADLINE,
            what=f"all {total} task spans at the reference detector and at the shards",
        )
        for det in detectors:  # findings are complete once each has stopped
            det.service.stop()
            assert det.service.exited() == 0, det.service.log_tail()
        yield Run(shards, reference)
    finally:
        if agents is not None:
            agents.close()
        for service in reversed(started):
            service.stop()


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield from _run_traffic(tmp_path_factory.mktemp("sharded"), {})


@pytest.fixture(scope="module")
def naive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield from _run_traffic(tmp_path_factory.mktemp("naive"), NAIVE)


def test_the_workload_mixes_tasks_services_and_traces(shipped: Run) -> None:
    by_trace: dict[str, set[str]] = defaultdict(set)
    services: dict[str, set[str]] = defaultdict(set)
    for request in shipped.reference.requests():
        for resource, span in spans(request):
            task = attribute(span, "a2a.task.id")
            if task and resource["service.name"] != ROUTER:
                by_trace[span["traceId"]].add(task)
                services[task].add(resource["service.name"])
    assert by_trace[TRACE_1] == set(TASKS)  # one trace naming every task, two services in it
    assert by_trace[TRACE_2] == set(TASKS[0::2])
    assert len(by_trace) == 2 + len(TASKS[1::2])
    assert all(found == set(SERVICES) for found in services.values()), services


def test_every_span_naming_a_task_reaches_that_tasks_shard_with_its_own_trace_id(
    shipped: Run,
) -> None:
    reference = _task_spans(shipped.reference)
    routed = len(ROUTED) + sum(state is not None for state, _, _ in ROUTED.values())
    assert len(reference) == len(SERVICES) * len(TASKS) + routed
    per_shard = [_task_spans(d) for d in shipped.shards]
    assert not set(per_shard[0]) & set(per_shard[1]), "a span reached both shards"
    assert {**per_shard[0], **per_shard[1]} == reference  # every span, its trace id restored
    tasks = [{task for task, _ in held.values()} for held in per_shard]
    assert tasks[0] and tasks[1], f"one shard got every task: {tasks}"
    assert not tasks[0] & tasks[1], f"tasks on both shards: {tasks[0] & tasks[1]}"


def test_two_shards_find_what_one_detector_finds(shipped: Run) -> None:
    single = _finding_keys(shipped.reference.findings())
    expected = Counter(
        (reason, task, pair) for task in TASKS for reason, pair in EXPECTED[task.split("-")[0]]
    ) + Counter(
        (reason, task, (ROUTER,)) for task, (_, _, reason) in ROUTED.items() if reason is not None
    )
    assert single == expected
    sharded = _finding_keys(shipped.shards[0].findings()) + _finding_keys(
        shipped.shards[1].findings()
    )
    assert sharded == single


def test_routing_by_attribute_alone_splits_tasks(naive: Run) -> None:
    """The control: the loadbalancing exporter keys each trace by its first span, so the
    trace naming every task goes whole to one shard while the tasks' other spans go to
    theirs."""
    per_shard = [_task_spans(d) for d in naive.shards]
    tasks = [{task for task, _ in held.values()} for held in per_shard]
    assert tasks[0] & tasks[1], "no task was split: the control shows nothing"
