"""End to end with the a2a-sdk worker (``otel-a2a demo --worker python``): both sides on record.

The demo's topology with ``demo/python_worker.py`` behind the gateway: a2a-sdk with a SQLite
``DatabaseTaskStore``, instrumented by ``OTEL_A2A_ENABLED=true`` alone like the orchestrator.
Killed mid-task and restarted on the same store, it brings the task back ``working`` with
nothing running it (where the Node and JVM workers fail it): the orchestrator's first decision
after the restart raises ``heartbeat_gap``, and the restarted worker reports the task at its
start-up, ``otel_a2a.task.unfinished``, both naming the same task. The assertions read what the
real processes exported: their console spans, the orchestrator's ``/metrics``, and in the last
test the spans of both that went through the collector ``make tools`` builds.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from demo.model import Timings, Unfinished
from demo.processes import PythonWorker, child_env
from demo.scenario import ScenarioResult
from otel_a2a import semconv as sc
from tests.e2e.test_incident import _assert_ok, _report, _run
from tests.support import in_ci
from tests.support.pipeline import attribute, collector_to_detector, spans
from tests.support.python_worker import REPO, poll

GO = pytest.mark.go
CONTRACT = Timings.scaled(heartbeat=1.0)
WORKER = "python"
SERVICE = "a2a-python-worker"
PEERS = "gateway,binding"
RESTART = [
    pytest.param("python", "JSONRPC", id="python-JSONRPC"),
    pytest.param("go", "HTTP+JSON", marks=GO, id="go-HTTP+JSON"),
    pytest.param("go", "GRPC", marks=GO, id="go-GRPC"),
]


def _task_id(result: ScenarioResult) -> str:
    [started] = [s for s in result.timeline if s.get("step") == "start"]
    task_id = str(started["task_id"])
    assert task_id, _report(result)
    return task_id


def _finding(result: ScenarioResult, task_id: str) -> Unfinished:
    """The restarted worker's one finding, about the orchestrator's task."""
    assert result.restart_at is not None
    assert [u.task_id for u in result.unfinished] == [task_id], _report(result)
    (found,) = result.unfinished
    assert found.worker != "worker-1"  # a start after the restart (worker-2, or a retry)
    assert (found.cause, found.state) == ("not_run_here", "TASK_STATE_WORKING")
    assert found.t >= result.restart_at
    return found


@pytest.mark.parametrize(PEERS, RESTART)
def test_restart_gives_the_callers_divergence_and_the_workers_finding(
    gateway: str, binding: str
) -> None:
    result = _run("restart", binding, gateway=gateway, worker=WORKER)
    _assert_ok(result)
    task_id = _task_id(result)
    assert result.restart_at is not None
    # the caller's side: its first decision after the restart diverges, on this task
    [first, *_] = [
        d
        for d in result.divergences
        if d.t >= result.restart_at and d.span == "orchestrator wait_on_task"
    ]
    assert first.reason == "heartbeat_gap", _report(result)
    assert first.span_attributes["a2a.task.id"] == task_id
    assert "terminal_state" not in result.reasons()  # the worker never says the task ended
    assert result.stale_at is not None and result.stale_at > result.restart_at
    # the worker's side: the restarted worker found the same task at its start-up
    _finding(result, task_id)
    # and it was right: asked after the orchestrator's timeout, the worker still said working
    polls = [s for s in result.timeline if s.get("step") == "poll"]
    assert [(p["action"], p["belief"]) for p in polls] == [
        ("GetTask (after the timeout)", "working")
    ], _report(result)


def test_a_polling_orchestrator_hears_working_and_only_the_worker_can_tell() -> None:
    """Polled faster than the heartbeat, the restarted worker answers working: every decision
    rests on a fresh answer and none diverges; the worker's own finding is the news."""
    result = _run("restart", streaming=False, worker=WORKER)
    _assert_ok(result)
    task_id = _task_id(result)
    assert result.divergences == [], _report(result)
    assert (
        result.metric("otel_a2a_liveness_decisions_total", otel_a2a_decision_outcome="divergent")
        == 0
    )
    assert result.decisions(after=result.restart_at)
    _finding(result, task_id)


def test_a_forgetting_worker_gives_task_lost_and_no_finding() -> None:
    result = _run("forget", worker=WORKER)
    _assert_ok(result)
    assert "task_lost" in result.reasons(), _report(result)
    assert result.unfinished == [], _report(result)


def test_a_redeployed_worker_gives_etag_changed_and_the_finding() -> None:
    result = _run("redeploy", worker=WORKER)
    _assert_ok(result)
    assert result.restart_at is not None
    [first, *_] = result.decisions(after=result.restart_at)
    assert first.reasons[:1] == ("etag_changed",), _report(result)
    _finding(result, _task_id(result))


def test_a_healthy_run_gives_no_divergence_and_no_finding() -> None:
    """A follow-up to the running job and a cancel: nothing on either side."""
    result = _run("healthy", worker=WORKER)
    _assert_ok(result)
    assert result.divergences == [] and result.unfinished == [], _report(result)
    follow_up = [s for s in result.timeline if s.get("step") == "follow_up"]
    assert [s["action"] for s in follow_up][-1] == "follow-up accepted", _report(result)
    assert result.timeline[-1]["belief"] == "canceled", _report(result)


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The shipped collector config on the built collector, its traces going to an
    ``otel-a2a detector`` that dumps what it receives; the demo's processes export to it."""
    with collector_to_detector(tmp_path) as (det, grpc, _):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", grpc)
        yield det


def test_both_sides_reach_the_detector_through_the_collector(pipeline: Any) -> None:
    """The same restart, every span exported over OTLP through the built collector: the
    orchestrator's divergence and the worker's finding arrive with the same task id."""
    result = _run("restart", worker=WORKER)
    _assert_ok(result)
    task_id = _task_id(result)

    def received() -> tuple[list[Any], list[Any]]:
        got = [(r, s) for request in pipeline.requests() for r, s in spans(request)]
        gaps = [
            (r, s)
            for r, s in got
            if attribute(s, sc.TASK_ID) == task_id
            and any(
                attribute(e, "otel_a2a.divergence.reason") == "heartbeat_gap"
                for e in s.get("events", [])
            )
        ]
        findings = [
            (r, s)
            for r, s in got
            if s["name"] == sc.EVENT_TASK_UNFINISHED and attribute(s, sc.TASK_ID) == task_id
        ]
        return gaps, findings

    gaps, findings = poll(lambda: all(received()) and received(), "both sides at the detector")
    assert {r["service.name"] for r, _ in gaps} == {"orchestrator"}
    [(resource, finding)] = findings
    assert resource["service.name"] == SERVICE
    assert attribute(finding, sc.UNFINISHED_CAUSE) == "not_run_here"


# -- the worker contract (demo/processes.py's docstring), as the demo starts the worker --------


class _Started:
    """Python workers started as ``PythonWorker`` says, stopped at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, port: int, store: Path, *, forget: bool = False) -> tuple[Any, str]:
        kind = PythonWorker()
        argv = kind.argv(port, store, CONTRACT, forget=forget, card_version="7.0.0")
        env = {**child_env(kind.env(CONTRACT, otlp=False)), "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # READY, or EOF if it exited
        if not line.startswith("READY "):
            proc.wait(timeout=30)
            assert proc.stderr is not None
            raise AssertionError(f"no READY (exit {proc.returncode}): {proc.stderr.read()}")
        return proc, line.split(" ", 1)[1].strip()


@pytest.fixture
def started(tmp_path: Path) -> Iterator[_Started]:
    reason = PythonWorker().problem()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the Python worker cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    out = _Started(tmp_path)
    yield out
    for proc in out.procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _call(base: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply: dict[str, Any] = httpx.post(
        base + "/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    ).json()
    return reply


def _state(base: str, task_id: str) -> str:
    return str(_call(base, "GetTask", {"id": task_id})["result"]["status"]["state"])


def _message(text: str, task: dict[str, Any] | None = None) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task is not None:
        message.update(taskId=task["id"], contextId=task["contextId"])
    return message


def test_card_store_restart_and_forget(started: _Started, tmp_path: Path) -> None:
    store = tmp_path / "tasks"
    proc, base = started.start(0, store)
    assert base.startswith("http://127.0.0.1:") and not base.endswith(":0")
    card = httpx.get(base + "/.well-known/agent-card.json", timeout=30).json()
    assert card["version"] == "7.0.0" and card["capabilities"]["streaming"] is True
    # the heartbeat extension comes from otel-a2a (OTEL_A2A_SERVE_HEARTBEAT), not the worker
    [beat] = card["capabilities"]["extensions"]
    assert beat["uri"] == "urn:otel-a2a:heartbeat:v1"
    assert beat["params"] == {"intervalSeconds": CONTRACT.heartbeat}
    sent = _call(
        base,
        "SendMessage",
        {"message": _message("job 300"), "configuration": {"returnImmediately": True}},
    )
    task = sent["result"]["task"]
    assert (store / "tasks.db").is_file()
    poll(lambda: _state(base, task["id"]) == "TASK_STATE_WORKING", "the job working")

    proc.kill()  # a crash, as the demo's restart
    proc.wait(timeout=30)
    port = int(base.rsplit(":", 1)[1])
    _, again = started.start(port, store)
    assert _state(again, task["id"]) == "TASK_STATE_WORKING"  # back as it was, nothing runs it

    taken = subprocess.run(
        PythonWorker().argv(port, tmp_path / "other", CONTRACT, forget=False, card_version="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert taken.returncode != 0 and "address already in use" in taken.stderr.lower()

    for running in started.procs:
        running.terminate()
        running.wait(timeout=30)
    _, forgot = started.start(0, store, forget=True)
    lost = _call(forgot, "GetTask", {"id": task["id"]})
    assert lost["error"]["code"] == -32001


def test_a_follow_up_takes_the_running_job_over(started: _Started, tmp_path: Path) -> None:
    """a2a-sdk runs a task's requests one after the other: the follow-up releases the job's
    execution (its stream ends, the task working) and goes on with the job until it is done."""
    _, base = started.start(0, tmp_path / "tasks")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": _message("job 1")},
    }
    with httpx.stream(
        "POST", base + "/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    ) as stream:
        lines = stream.iter_lines()
        task: dict[str, Any] = {}
        for line in lines:
            if line.startswith("data:"):
                task = json.loads(line[5:])["result"]["task"]
                break
        # answered once the job is done, by the follow-up's execution that took it over
        done = _call(base, "SendMessage", {"message": _message("any progress?", task)})
        rest = [json.loads(line[5:])["result"] for line in lines if line.startswith("data:")]
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    [artifact] = done["result"]["task"]["artifacts"]
    assert artifact["parts"] == [{"text": "job done"}]
    noted = [
        part["text"]
        for entry in done["result"]["task"].get("history", [])
        for part in entry.get("parts", [])
        if part.get("text", "").startswith("noted: ")
    ]
    assert noted == ["noted: any progress?"], done
    # the job's own stream ended with the task still working, no terminal state on it
    states = [r["statusUpdate"]["status"]["state"] for r in rest if "statusUpdate" in r]
    assert states and set(states) == {"TASK_STATE_WORKING"}, rest
