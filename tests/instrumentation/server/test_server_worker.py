"""The worker's side on a real a2a-sdk worker (``demo/python_worker.py``: a2a-sdk 1.3 on
Starlette and uvicorn, tasks in SQLite through a2a-sdk's ``DatabaseTaskStore``), instrumented by
``A2AInstrumentor`` in its own process, spoken to over loopback.

The convention's ``a2a.server`` spans on each HTTP binding and version, continuing the caller's
trace; the heartbeat extension on the card with a consistent ``ETag`` and ``304``; the
accepted-never-finished finding for an executor that returns without a final state (once it
ended) and for a task in flight when the worker was killed (at the restart, before any request),
none for healthy, raising or cancelled runs; and the caller's and workers' spans together giving
the analyzer's ``cross_runtime_conflict``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from otel_a2a.cli import main
from otel_a2a.protocol.card import HEARTBEAT_EXTENSION_URI
from tests.instrumentation.conftest import Harness
from tests.support.python_worker import Worker, findings, logs, poll, spans

# real a2a-sdk 1.3 workers: the version matrix's oldest cell leaves it out (tests/conftest.py)
pytestmark = pytest.mark.peer

HEARTBEAT = 0.4  # the worker's card, and its job's working updates every HEARTBEAT / 2
ENV = {"OTEL_A2A_SERVE_CHECK_INTERVAL": "0.2", "OTEL_A2A_SERVE_HEARTBEAT": f"{HEARTBEAT}"}
V1 = {"A2A-Version": "1.0"}
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def run(name: str = "w1", *extra: str, store: str = "store") -> Worker:
        worker = Worker(
            tmp_path / store,
            tmp_path / f"{name}.jsonl",
            "--heartbeat",
            f"{HEARTBEAT}",
            *extra,
            env=ENV,
        )
        started.append(worker)
        return worker

    yield run
    for worker in started:
        worker.stop()


def _message(text: str, v03: bool = False) -> dict[str, Any]:
    if v03:
        return {"messageId": str(uuid.uuid4()), "role": "user", "kind": "message",
                "parts": [{"kind": "text", "text": text}]}  # fmt: skip
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def _rpc(worker: Worker, method: str, params: dict[str, Any], **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    v03 = "/" in method
    reply = httpx.post(worker.rpc, json=body, headers={**({} if v03 else V1), **headers})
    data = reply.json()
    assert "result" in data, data
    result = data["result"]
    return result.get("task", result)


def _server(worker: Worker, name: str) -> list[dict[str, Any]]:
    return [s for s in spans(worker.spans) if s["name"] == name and s["kind"] == "SPAN_KIND_SERVER"]


def _of_task(found: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    return [f for f in found if f["attrs"]["a2a.task.id"] == task_id]


def _sentinel(worker: Worker) -> dict[str, Any]:
    """A task left unfinished on purpose; its finding comes at least one whole check after it
    ended: anything to be found about what ended before it has been found by then."""
    task = _rpc(worker, "SendMessage", {"message": _message("vanish")})
    return poll(lambda: _of_task(findings(worker.spans), task["id"]), "the sentinel's finding")[0]


def test_server_spans_follow_the_convention_on_each_binding(start: Callable[..., Worker]) -> None:
    worker = start()
    traceparent = f"00-{TRACE_ID}-{PARENT}-01"
    v1 = _rpc(worker, "SendMessage", {"message": _message("echo a")}, traceparent=traceparent)
    v03 = _rpc(worker, "message/send", {"message": _message("echo b", v03=True)})
    rest = httpx.post(
        worker.url + "/a2a/rest/message:send", json={"message": _message("echo c")}, headers=V1
    ).json()["task"]
    with httpx.stream(
        "POST",
        worker.rpc,
        json={
            "jsonrpc": "2.0",
            "id": 2,
            "method": "SendStreamingMessage",
            "params": {"message": _message("job 0.5")},
        },
        headers=V1,
    ) as stream:
        frames = [line for line in stream.iter_lines() if line.startswith("data:")]
    streamed = json.loads(frames[0][5:])["result"]["task"]["id"]
    _rpc(worker, "GetTask", {"id": v1["id"]})

    sends = poll(
        lambda: len(_server(worker, "SendMessage")) == 3 and _server(worker, "SendMessage"),
        "3 spans",
    )
    by_task = {s["attrs"]["a2a.task.id"]: s for s in sends}
    first = by_task[v1["id"]]
    assert first["traceId"] and first["parentSpanId"]
    assert first["attrs"]["a2a.method.name"] == "SendMessage"
    assert first["attrs"]["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert first["attrs"]["a2a.protocol.version"] == "1.0"
    assert first["attrs"]["gen_ai.conversation.id"] == v1["contextId"]
    assert first["attrs"]["gen_ai.agent.name"] == "a2a-python-worker"
    assert "otel_a2a.task.state.raw" not in first["attrs"]
    # the caller's trace continues (ids in base64 in protobuf JSON)
    import base64

    assert base64.b64decode(first["traceId"]).hex() == TRACE_ID
    assert base64.b64decode(first["parentSpanId"]).hex() == PARENT
    old = by_task[v03["id"]]["attrs"]
    assert old["a2a.protocol.version"] == "0.3"
    assert (old["a2a.task.state"], old["otel_a2a.task.state.raw"]) == (
        "TASK_STATE_COMPLETED",
        "completed",
    )
    assert by_task[rest["id"]]["attrs"]["a2a.task.state"] == "TASK_STATE_COMPLETED"

    stream_span = poll(lambda: _server(worker, "SendStreamingMessage"), "the stream's span")[0]
    assert stream_span["attrs"]["a2a.task.id"] == streamed
    states = [
        e["attrs"]["a2a.task.state"]
        for e in stream_span["events"]
        if e["name"] == "otel_a2a.task.status"
    ]
    assert states[0] == "TASK_STATE_SUBMITTED" and states[-1] == "TASK_STATE_COMPLETED"
    assert states.count("TASK_STATE_WORKING") >= 2  # start_work, then the job's updates
    assert stream_span["attrs"]["a2a.task.state"] == "TASK_STATE_COMPLETED"
    get = poll(lambda: _server(worker, "GetTask"), "GetTask's span")[0]
    assert get["attrs"]["a2a.task.id"] == v1["id"]
    assert get["attrs"]["a2a.task.state"] == "TASK_STATE_COMPLETED"


def test_the_card_carries_the_heartbeat_with_its_etag_and_304(start: Callable[..., Worker]) -> None:
    worker = start()
    card_url = worker.url + "/.well-known/agent-card.json"
    first = httpx.get(card_url)
    extensions = first.json()["capabilities"]["extensions"]
    assert [
        e["params"]["intervalSeconds"] for e in extensions if e["uri"] == HEARTBEAT_EXTENSION_URI
    ] == [HEARTBEAT]
    etag = first.headers["etag"]
    assert etag.startswith('W/"') and first.headers["cache-control"] == "public, max-age=300"
    again = httpx.get(card_url, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.headers["etag"] == etag
    assert httpx.get(card_url).headers["etag"] == etag  # the same card, the same etag


def test_an_executor_returning_without_a_final_state_is_found_once_it_ended(
    start: Callable[..., Worker],
) -> None:
    worker = start()
    task = _rpc(worker, "SendMessage", {"message": _message("vanish")})
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    found = poll(lambda: _of_task(findings(worker.spans), task["id"]), "the finding")[0]
    send = _server(worker, "SendMessage")[0]
    assert found["attrs"]["a2a.task.state"] == "TASK_STATE_WORKING"
    assert found["attrs"]["otel_a2a.task.unfinished.cause"] == "execution_ended"
    assert int(found["startTimeUnixNano"]) > int(send["endTimeUnixNano"])
    assert [link["spanId"] for link in found.get("links", [])] == [send["spanId"]]
    assert [e["name"] for e in found["events"]] == ["otel_a2a.task.unfinished"]
    records = poll(lambda: logs(worker.spans), "the log record")
    assert records[0]["attributes"]["a2a.task.id"] == task["id"]
    assert records[0]["severity_text"] == "WARN"
    _sentinel(worker)
    assert len(_of_task(findings(worker.spans), task["id"])) == 1  # once, not every check


def test_healthy_raising_and_cancelled_runs_give_no_finding(start: Callable[..., Worker]) -> None:
    worker = start()
    done = _rpc(worker, "SendMessage", {"message": _message("echo fine")})
    job = _rpc(worker, "SendMessage", {"message": _message("job 0.3")})
    raised = httpx.post(
        worker.rpc,
        json={
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendMessage",
            "params": {"message": _message("raise")},
        },
        headers=V1,
    ).json()
    assert "error" in raised  # a2a-sdk fails the task and answers an error
    long_job = _rpc(
        worker,
        "SendMessage",
        {"message": _message("job 30"), "configuration": {"returnImmediately": True}},
    )
    cancelled = _rpc(worker, "CancelTask", {"id": long_job["id"]})
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    assert done["status"]["state"] == job["status"]["state"] == "TASK_STATE_COMPLETED"
    failing = [s for s in _server(worker, "SendMessage") if "error.type" in s["attrs"]]
    assert len(failing) == 1 and failing[0]["status"]["code"] == "STATUS_CODE_ERROR"
    sentinel = _sentinel(worker)
    assert [f["attrs"]["a2a.task.id"] for f in findings(worker.spans)] == [
        sentinel["attrs"]["a2a.task.id"]
    ]


def _stream_until_working(worker: Worker, text: str) -> tuple[Any, str]:
    """A stream of a new task opened and read up to its first working update."""
    stream = httpx.stream(
        "POST",
        worker.rpc,
        json={
            "jsonrpc": "2.0",
            "id": 9,
            "method": "SendStreamingMessage",
            "params": {"message": _message(text)},
        },
        headers=V1,
        timeout=30,
    )
    response = stream.__enter__()
    lines = response.iter_lines()
    task_id = ""
    for line in lines:
        if not line.startswith("data:"):
            continue
        result = json.loads(line[5:])["result"]
        event = result.get("task") or result.get("statusUpdate") or {}
        task_id = task_id or event.get("id") or event.get("taskId", "")
        if event.get("status", {}).get("state") == "TASK_STATE_WORKING":
            return (stream, lines), task_id
    raise AssertionError("the stream ended before working")


def test_a_task_in_flight_when_the_worker_was_killed_is_found_at_restart(
    otel: Harness, start: Callable[..., Worker]
) -> None:
    first = start("w1")
    (stream, lines), task_id = _stream_until_working(first, "job 60")
    first.kill()
    with pytest.raises(httpx.HTTPError):
        for _line in lines:  # the caller's stream breaks
            pass
    stream.__exit__(None, None, None)
    second = start("w2")
    found = poll(lambda: findings(second.spans), "the finding at start-up")
    assert [f["attrs"]["a2a.task.id"] for f in found] == [task_id]
    assert found[0]["attrs"]["otel_a2a.task.unfinished.cause"] == "not_run_here"
    assert found[0]["attrs"]["a2a.task.state"] == "TASK_STATE_WORKING"
    assert not [s for s in spans(second.spans) if s["kind"] == "SPAN_KIND_SERVER"]  # no request yet
    # the caller's side: its stream ended abnormally while the task was working
    caller = otel.spans("SendStreamingMessage")
    assert [e.name for e in caller[0].events if e.name == "otel_a2a.stream.abnormal_end"]
    # asked, the restarted worker still says working: nothing executes it
    assert _rpc(second, "GetTask", {"id": task_id})["status"]["state"] == "TASK_STATE_WORKING"


def test_caller_and_worker_spans_give_the_cross_runtime_conflict(
    otel: Harness, start: Callable[..., Worker], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two replicas on one store (a2a-sdk's single-process mode): the caller streams a job from
    the first and cancels it through the second, which records it canceled in the store and
    says so, while the first goes on streaming working: the worker's spans say working while
    the caller's say canceled, and the other way round."""
    serving, other = start("a"), start("b")
    (stream, lines), task_id = _stream_until_working(serving, "job 30")
    assert _rpc(other, "CancelTask", {"id": task_id})["status"]["state"] == "TASK_STATE_CANCELED"
    updates = 0
    for line in lines:
        if line.startswith("data:") and '"TASK_STATE_WORKING"' in line:
            updates += 1
            if updates == 3:  # the serving replica went on: the split brain, held a while
                break
    stream.__exit__(None, None, None)
    poll(lambda: _server(other, "CancelTask"), "the cancel's span")
    caller = tmp_path / "caller.jsonl"
    request = encode_spans(otel.spans())
    caller.write_text(MessageToJson(request, indent=None).replace("\n", "") + "\n")
    code = main(["analyze", "--json", str(caller), str(serving.spans), str(other.spans)])
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    conflicts = [
        f for f in found if f["reason"] == "cross_runtime_conflict" and f["task_id"] == task_id
    ]
    assert code == 1 and conflicts
    # one finding per service pair: the worker's belief against the caller's
    (conflict,) = conflicts
    sides = {conflict["a"]["service"], conflict["b"]["service"]}
    assert "a2a-python-worker" in sides and len(sides) == 2
    assert {conflict["a"]["state"], conflict["b"]["state"]} == {"working", "canceled"}
