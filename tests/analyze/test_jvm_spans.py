"""The JVM worker's own spans, joined with the orchestrator's, find the split brain.

Real processes export over OTLP/HTTP protobuf to a real ``otel-a2a detector``: the A2A Java
SDK worker (``make jvm``; its spans carry the SDK extras' ``gen_ai.agent.a2a.task_id`` and
``gen_ai.agent.a2a.status``, no ``a2a.*`` attribute) and an orchestrator (a plain httpx
streaming client instrumented only by ``OTEL_A2A_ENABLED=true``). The orchestrator streams a
long job from the worker; a second worker process comes up on the same task store (an
overlapping restart, the old process not yet gone) and rehydrates the in-flight task as
``failed``; asked for it, it answers so. While the orchestrator's stream still says
``working``, the second worker's own span says ``failed``: the detector must find the
``cross_runtime_conflict`` between the two services, and ``otel-a2a analyze`` the same in its
dump, and in the recorded dump of such a run (``tests/fixtures/otlp/``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from otel_a2a.cli import main
from tests.analyze.test_real_detector import DEADLINE, _client_env, _Lines, detector
from tests.support import in_ci
from tests.support.peers import JVM_JAR, jvm_problem

__all__ = ["detector"]  # the fixture, shared with test_real_detector

CLIENT = Path(__file__).with_name("stream_client.py")
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "jvm-split-brain.jsonl"
WORKER_SERVICE = "jvm-worker"


def _worker(store: Path, endpoint: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_SERVICE_NAME=WORKER_SERVICE,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint + "/v1/traces",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
    )
    java = shutil.which("java") or "java"
    argv = [java, "-jar", str(JVM_JAR), "--port", "0", "--store", str(store)]
    proc = subprocess.Popen(
        [*argv, "--heartbeat", "1", "--job-seconds", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    ready = _Lines(proc.stdout).wait_for(
        lambda seen: any(s.startswith("READY ") for s in seen), "READY"
    )
    return proc, ready[-1].split(" ", 1)[1]


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    reason = jvm_problem()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the JVM worker cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # its shutdown hook flushes its spans
                try:
                    proc.wait(timeout=DEADLINE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.mark.jvm
def test_a_rehydrating_worker_and_a_streaming_orchestrator_conflict(
    detector: tuple[subprocess.Popen[str], _Lines, _Lines, Path],
    workers: list[subprocess.Popen[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    proc, out, err, dump = detector
    banner = err.wait_for(lambda seen: any("OTLP/HTTP on" in s for s in seen), "the banner")
    match = re.search(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)/v1/traces", banner[0])
    assert match, banner
    endpoint = match.group(1)
    store = tmp_path / "tasks"

    first, first_url = _worker(store, endpoint)
    workers.append(first)
    client = subprocess.Popen(
        [sys.executable, str(CLIENT), first_url, "job 60"],
        env=_client_env("orchestrator", endpoint),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None and client.stdin is not None
        named = _Lines(client.stdout).wait_for(lambda seen: bool(seen), "the task id")
        task_id = named[0].removeprefix("TASK ")

        second, second_url = _worker(store, endpoint)  # same store: rehydrates the task
        workers.append(second)
        with httpx.Client(timeout=10.0) as http:  # the test's own call: not instrumented
            answer = http.post(
                second_url + "/a2a/jsonrpc",
                headers={"A2A-Version": "1.0"},
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
            ).json()
        assert answer["result"]["status"]["state"] == "TASK_STATE_FAILED", answer

        client.stdin.close()  # the orchestrator stops reading: its stream span ends
        assert client.wait(timeout=DEADLINE) == 0, client.stderr.read() if client.stderr else ""
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()

    def found(seen: list[str]) -> bool:
        return any("cross_runtime_conflict" in s for s in seen)

    lines = out.wait_for(found, "the conflict")
    conflict = next(s for s in lines if "cross_runtime_conflict" in s)
    assert conflict.startswith(f"task {task_id}: cross_runtime_conflict: "), conflict
    assert f"{WORKER_SERVICE} failed ('TASK_STATE_FAILED'" in conflict
    assert "orchestrator working ('TASK_STATE_WORKING'" in conflict

    for worker in workers:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=DEADLINE)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=DEADLINE) == 0

    # the worker's own spans: the SDK extras' names, never an a2a.* attribute
    jvm_spans = [
        span
        for line in dump.read_text("utf-8").splitlines()
        for rs in json.loads(line).get("resourceSpans", [])
        if {"key": "service.name", "value": {"stringValue": WORKER_SERVICE}}
        in rs["resource"]["attributes"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    get = [s for s in jvm_spans if s["name"] == "GetTask"]
    assert len(get) == 1 and get[0]["kind"] in (2, "SPAN_KIND_SERVER")
    keys = {a["key"]: a["value"] for a in get[0]["attributes"]}
    assert keys["gen_ai.agent.a2a.task_id"] == {"stringValue": task_id}
    assert keys["gen_ai.agent.a2a.status"] == {"stringValue": "TASK_STATE_FAILED"}
    assert not [
        k for s in jvm_spans for k in (a["key"] for a in s["attributes"]) if k.startswith("a2a.")
    ]

    assert main(["analyze", "--json", str(dump)]) == 1
    offline = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(f["reason"], f["task_id"], sorted(f["services"])) for f in offline] == [
        ("cross_runtime_conflict", task_id, sorted([WORKER_SERVICE, "orchestrator"]))
    ]


def test_the_recorded_dump_of_such_a_run_gives_the_same_finding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The dump of one run of the test above (``tests/fixtures/otlp/README.md``)."""
    assert main(["analyze", "--json", str(RECORDED)]) == 1
    [finding] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert finding["reason"] == "cross_runtime_conflict"
    assert sorted(finding["services"]) == sorted([WORKER_SERVICE, "orchestrator"])
