"""The Go gateway judged from its spans alone (``otel-a2a detector``'s fleet judge).

The seed's runtimes: the Go gateway (a2a-go, with otel-a2a's Go interceptor ``go/otela2a``)
in front of the JVM worker, the orchestrator instrumented by ``OTEL_A2A_ENABLED=true``. The
demo's ``follow-up`` variant: the worker is killed once the job runs and comes back with the
task rehydrated as failed; then the orchestrator sends its follow-up, which the gateway routes
to that task. Routing it is a decision of the gateway's own, on a task it has not observed
since its stream broke. Every process exports OTLP through the collector ``make tools`` builds
to an ``otel-a2a detector``, told the demo's heartbeat (``--default-heartbeat``, as the
orchestrator is by ``OTEL_A2A_DEFAULT_HEARTBEAT``): the detector names the gateway and the
reason from the Go spans; the orchestrator, which judges itself in-process, is not judged again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo.model import Timings
from tests.e2e.test_incident import _assert_ok, _report, _run
from tests.support.pipeline import collector_to_detector
from tests.support.python_worker import poll

pytestmark = [pytest.mark.go, pytest.mark.jvm]
HEARTBEAT = Timings.scaled(heartbeat=1.0).heartbeat  # test_incident's timings
GATEWAY = "a2a-go-gateway"


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The shipped collector config on the built collector, its traces going to an
    ``otel-a2a detector --json``; the demo's processes export to it over OTLP/HTTP (the JVM
    worker's OpenTelemetry SDK ships the HTTP sender only)."""
    with collector_to_detector(tmp_path, "--default-heartbeat", f"{HEARTBEAT:g}") as (
        det,
        _,
        http,
    ):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", http)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        yield det


def test_the_gateways_follow_up_on_the_rehydrated_task_is_caught(pipeline: Any) -> None:
    result = _run("follow-up", gateway="go", worker="jvm")
    _assert_ok(result)
    [started] = [s for s in result.timeline if s.get("step") == "start"]
    task_id = str(started["task_id"])
    assert result.restarted_at is not None
    # the follow-up came after the worker was back: the gateway routed it to the failed task
    [sent] = [s for s in result.timeline if s.get("step") == "follow_up" and "sends" in s["action"]]
    assert float(sent["t"]) > result.restarted_at, _report(result)

    def gateway_findings() -> list[dict[str, Any]]:
        return [f for f in pipeline.findings() if f.get("service") == GATEWAY]

    [found] = poll(gateway_findings, "the detector's finding on the Go gateway")
    assert (found["reason"], found["task_id"]) == ("heartbeat_gap", task_id)
    assert found["services"] == [GATEWAY]
    assert found["operation"] == "SendMessage"
    # judged on what the gateway itself last saw: its stream's working state before the kill
    assert (found["last_state"], found["heartbeat"]) == ("working", HEARTBEAT)
    assert found["age"] > HEARTBEAT
    assert found["at_ns"] / 1e9 >= result.restarted_at
    # the orchestrator runs otel-a2a: its own divergences are on its spans, never re-judged
    assert [f for f in pipeline.findings() if f.get("service") == "orchestrator"] == []
    assert "heartbeat_gap" in result.reasons()
