"""End to end on real processes: `make stack`'s launcher (deploy/local/stack.py) runs the
collector built by `make tools` on the shipped ``otelcol.yaml``, Jaeger v2, Prometheus with
the shipped rules and Alertmanager, all on free 127.0.0.1 ports (``--free-ports``; a 1 s
scrape and rule interval instead of the shipped 5 s).

A plain a2a-sdk orchestrator (``e2e_orchestrator.py``: no otel_a2a import, only
``OTEL_A2A_ENABLED=true`` and standard OTLP variables, OTLP/gRPC as the distro's default)
talks to the real a2a-sdk test peer and twice sends a follow-up to a task it never observed
(``no_observation``): the second one after Prometheus has scraped the first, as a continuing
incident does (a divergence series is born at 1, and the alert pages a first event only
once Prometheus is two minutes old; see the rules file's header). Then Jaeger's query API
returns the ``SendMessage`` spans with their ``otel_a2a.divergence`` events by
``a2a.task.id``, Prometheus holds ``otel_a2a_divergence_total`` by reason, the shipped alert fires
at Alertmanager, and Ctrl-C (SIGINT) stops every process of the stack.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.peers import running_peer
from tests.support.pipeline import JAEGER, OTELCOL, REPO, require_tool
from tests.support.prom import ALERTMANAGER, PROMETHEUS, http_get, poll, require_binary

ORCHESTRATOR = Path(__file__).with_name("e2e_orchestrator.py")
LAUNCHER = REPO / "deploy" / "local" / "stack.py"
DEADLINE = 60.0
SERVICE = "orchestrator"


def _get_json(url: str) -> Any:
    status, body = http_get(url)
    assert status == 200, (url, status, body[:500])
    return json.loads(body)


@dataclass
class Stack:
    proc: subprocess.Popen[bytes]
    urls: dict[str, str]
    pids: dict[str, int]
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": expr})
        result: list[dict[str, Any]] = _get_json(f"{self.urls['prometheus']}/api/v1/query?{q}")[
            "data"
        ]["result"]
        return result

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=DEADLINE)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    for tool in (OTELCOL, JAEGER):
        require_tool(tool)
    for binary in (PROMETHEUS, ALERTMANAGER):
        require_binary(binary)
    root = tmp_path_factory.mktemp("stack")
    ready, log = root / "ready.json", root / "stack.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, str(LAUNCHER), "--free-ports", "--interval", "1s"),
                *("--state", str(root / "state"), "--ready-file", str(ready)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the stack exited with {proc.returncode}:\n{log.read_text()}")
        return ready.exists() and bool(ready.read_text())

    try:
        poll(up, timeout=2 * DEADLINE, what="the stack's ready file")
        found = json.loads(ready.read_text())
        pids = found.pop("pids")
        yield Stack(proc, found, pids, log)
    finally:
        if proc.poll() is None:
            proc.kill()  # the launcher's own children outlive it only if it is killed
            proc.wait()
            for pid in json.loads(ready.read_text() or "{}").get("pids", {}).values():
                _kill(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


@dataclass
class Incident:
    stack: Stack
    strays: list[str] = field(default_factory=list)


def _line(stream: IO[str], prefix: str) -> str:
    line = stream.readline()
    assert line.startswith(prefix), line
    return line.split()[1]


@pytest.fixture(scope="module")
def incident(stack: Stack) -> Incident:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_A2A_ENABLED="true",
        OTEL_SERVICE_NAME=SERVICE,
        OTEL_EXPORTER_OTLP_ENDPOINT=stack.urls["otlp_grpc"],
        OTEL_METRIC_EXPORT_INTERVAL="1000",
        OTEL_BSP_SCHEDULE_DELAY="200",
    )
    found = Incident(stack)
    reason = 'otel_a2a_divergence_total{otel_a2a_divergence_reason="no_observation"}'
    with running_peer("python") as peer:
        orchestrator = subprocess.Popen(
            [sys.executable, str(ORCHESTRATOR), peer.base_url],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert orchestrator.stdin is not None and orchestrator.stdout is not None
        try:
            _line(orchestrator.stdout, "TASK")
            for n in (1, 2):
                orchestrator.stdin.write("\n")
                orchestrator.stdin.flush()
                found.strays.append(_line(orchestrator.stdout, "STRAY"))
                poll(
                    lambda n=n: [r for r in stack.query(reason) if float(r["value"][1]) == n],
                    timeout=DEADLINE,
                    what=f"Prometheus scraping divergence number {n} from the collector",
                )
            orchestrator.stdin.close()
            assert orchestrator.wait(timeout=DEADLINE) == 0, orchestrator.stderr.read()
        finally:
            if orchestrator.poll() is None:
                orchestrator.kill()
                orchestrator.wait()
    return found


def _divergent_spans(stack: Stack, task_id: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode(
        {"service": SERVICE, "tags": json.dumps({"a2a.task.id": task_id}), "limit": "20"}
    )
    traces = _get_json(f"{stack.urls['jaeger']}/api/traces?{q}")["data"]
    return [
        span
        for trace in traces
        for span in trace["spans"]
        if any(
            {"key": "event", "type": "string", "value": "otel_a2a.divergence"} in log["fields"]
            for log in span["logs"]
        )
    ]


def test_jaeger_returns_the_divergent_spans_by_task_id(incident: Incident) -> None:
    for task_id in incident.strays:
        spans = poll(
            lambda t=task_id: _divergent_spans(incident.stack, t),
            timeout=DEADLINE,
            what=f"Jaeger holding the divergent span of task {task_id}",
        )
        assert [s["operationName"] for s in spans] == ["SendMessage"]
        (event,) = [
            {f["key"]: f["value"] for f in log["fields"]}
            for log in spans[0]["logs"]
            if {"key": "event", "type": "string", "value": "otel_a2a.divergence"} in log["fields"]
        ]
        assert event["otel_a2a.divergence.reason"] == "no_observation"
        assert event["a2a.task.id"] == task_id
        tags = {t["key"]: t["value"] for t in spans[0]["tags"]}
        assert tags["a2a.task.id"] == task_id and tags["span.kind"] == "client"


def test_prometheus_holds_the_divergences_by_reason(incident: Incident) -> None:
    result = incident.stack.query(f'otel_a2a_divergence_total{{job="{SERVICE}"}}')
    by_reason = {r["metric"]["otel_a2a_divergence_reason"]: float(r["value"][1]) for r in result}
    assert by_reason == {"no_observation": 2.0}
    assert result[0]["metric"]["a2a_method_name"] == "SendMessage"


def test_the_shipped_alert_fires_at_alertmanager(incident: Incident) -> None:
    def firing() -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = _get_json(
            f"{incident.stack.urls['alertmanager']}/api/v2/alerts"
        )
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "A2ATaskStateDivergence"
            and a["labels"].get("otel_a2a_divergence_reason") == "no_observation"
            and a["status"]["state"] == "active"
        ]

    (alert,) = poll(firing, timeout=DEADLINE, what="A2ATaskStateDivergence at Alertmanager")
    assert alert["labels"]["job"] == SERVICE
    assert alert["labels"]["a2a_method_name"] == "SendMessage"


def test_jaeger_serves_a_placeholder_instead_of_its_ui(stack: Stack) -> None:
    """What the docs say: the module build has no UI bundle; the query API is the way in."""
    status, body = http_get(stack.urls["jaeger"] + "/")
    assert status == 200
    assert b"This is not the Jaeger UI you are looking for" in body
    services = _get_json(stack.urls["jaeger"] + "/api/services")["data"]
    assert isinstance(services, list)


def test_ctrl_c_stops_every_process(stack: Stack) -> None:
    assert set(stack.pids) == {"otelcol", "jaeger", "prometheus", "alertmanager"}
    assert all(_alive(pid) for pid in stack.pids.values())
    assert stack.stop() == 0, stack.log.read_text()
    assert not [name for name, pid in stack.pids.items() if _alive(pid)]
    assert "stack: stopping" in stack.log.read_text()
