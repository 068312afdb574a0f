"""Each divergence is resolved by its task's next authoritative observation, against the real
a2a-sdk agent (tests/peers/python_peer.py): confirmed when that observation contradicts what
the decision assumed, refuted when it agrees.

- A restart that lost a working task: the caller's follow-up a heartbeat later diverges
  (``heartbeat_gap``) and the agent answers TaskNotFound: confirmed, on the follow-up's span.
- A redeploy that kept the tasks (a new card version, the same task store): the follow-up
  without a re-read diverges (``etag_changed``) and the agent takes it, completing the task:
  refuted. Judged by the state alone, a completed task would have confirmed it.
- An explicit decision on a task that had failed meanwhile: the later ``GetTask`` confirms it,
  on the ``GetTask`` span; until then it counts as unresolved once 300 s have passed.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from otel_a2a import liveness_decision
from tests.instrumentation.conftest import AheadClock, divergences, make_harness, resolved
from tests.support import free_port
from tests.support.peers import running_peer

# the real a2a-sdk 1.3 peer: the version matrix's oldest cell leaves it out (tests/conftest.py)
pytestmark = pytest.mark.peer

CARD = "/.well-known/agent-card.json"
RPC = "/a2a/jsonrpc"
V1 = {"A2A-Version": "1.0"}
HEARTBEAT = 30.0  # the peer's card extension
RESOLVED = "otel_a2a.divergence.resolved"


def _rpc(client: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC reply's body: ``result`` or ``error``."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = client.post(RPC, json=body, headers=V1)
    reply.raise_for_status()
    answer: dict[str, Any] = reply.json()
    return answer


def _task(answer: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = answer["result"]
    return result.get("task", result)


def _message(text: str, task: dict[str, Any] | None = None, **config: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER"}
    message["parts"] = [{"text": text}]
    if task is not None:
        message.update(taskId=task["id"], contextId=task["contextId"])
    return {"message": message, **({"configuration": config} if config else {})}


def _event(span: Any, name: str) -> dict[str, Any]:
    (event,) = [e for e in span.events if e.name == name]
    return dict(event.attributes or {})


def test_a_restart_that_lost_the_task_confirms_the_split(ahead: AheadClock) -> None:
    port = free_port()
    otel, instrumentor = make_harness()
    try:
        with running_peer("python", port=port) as peer, httpx.Client(base_url=peer.base_url) as c:
            c.get(CARD)  # the heartbeat: 30 s
            task = _task(_rpc(c, "SendMessage", _message("slow", returnImmediately=True)))
            assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        with running_peer("python", port=port), httpx.Client(base_url=peer.base_url) as c:
            ahead.advance(HEARTBEAT + 1)  # the agent restarted unobserved; a heartbeat passes
            answer = _rpc(c, "SendMessage", _message("echo", task))
        assert "error" in answer  # it lost the task
    finally:
        instrumentor.uninstrument()
    send = otel.spans("SendMessage")[-1]
    assert divergences(send) == ["heartbeat_gap", "task_lost"]
    assert resolved(send) == [("heartbeat_gap", "confirmed")]
    event = _event(send, RESOLVED)
    assert event["a2a.task.id"] == task["id"] and "a2a.task.state" not in event  # lost
    assert 0 <= event["otel_a2a.divergence.age"] < HEARTBEAT  # the decision to its reply
    assert otel.points("otel_a2a.divergence.resolutions") == [
        (
            {
                "otel_a2a.divergence.reason": "heartbeat_gap",
                "otel_a2a.divergence.outcome": "confirmed",
            },
            1,
        )
    ]
    [record] = [
        d.log_record for d in otel.logs.get_finished_logs() if d.log_record.event_name == RESOLVED
    ]
    assert (record.severity_text, record.body) == (
        "WARN",
        "A2A divergence confirmed: heartbeat_gap",
    )
    assert send.context is not None and record.span_id == send.context.span_id


def test_a_redeploy_that_kept_the_task_is_refuted_by_the_follow_up(tmp_path: Path) -> None:
    port = free_port()
    store = ["--task-db", str(tmp_path / "tasks.db")]
    otel, instrumentor = make_harness()
    try:
        with (
            running_peer("python", port=port, options=store) as peer,
            httpx.Client(base_url=peer.base_url) as c,
        ):
            etag = c.get(CARD).headers["etag"]
            task = _task(_rpc(c, "SendMessage", _message("input first")))
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        redeployed = [*store, "--card-version", "2.0.0"]
        with (
            running_peer("python", port=port, options=redeployed),
            httpx.Client(base_url=peer.base_url) as c,
        ):
            assert c.get(CARD).headers["etag"] != etag
            followed = _task(_rpc(c, "SendMessage", _message("echo done", task)))
    finally:
        instrumentor.uninstrument()
    # the agent kept the task and took the follow-up, which completed it
    assert (followed["id"], followed["status"]["state"]) == (task["id"], "TASK_STATE_COMPLETED")
    send = otel.spans("SendMessage")[-1]
    assert [e.name for e in send.events] == ["otel_a2a.divergence", RESOLVED]
    assert divergences(send) == ["etag_changed"]
    assert resolved(send) == [("etag_changed", "refuted")]
    assert _event(send, RESOLVED)["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert otel.points("otel_a2a.divergence.resolutions") == [
        (
            {
                "otel_a2a.divergence.reason": "etag_changed",
                "otel_a2a.divergence.outcome": "refuted",
            },
            1,
        )
    ]


def test_a_later_observation_confirms_on_its_own_span(ahead: AheadClock) -> None:
    with running_peer("python") as peer:
        with httpx.Client(base_url=peer.base_url) as plain:
            failed = _task(_rpc(plain, "SendMessage", _message("fail now")))
        assert failed["status"]["state"] == "TASK_STATE_FAILED"
        otel, instrumentor = make_harness()  # from now on: no observation of it
        try:
            with liveness_decision(failed["id"], agent=peer.base_url + RPC):
                pass
            ahead.advance(301)  # nothing observed the task for over 300 s
            unresolved = otel.points("otel_a2a.divergence.unresolved")
            with httpx.Client(base_url=peer.base_url) as client:
                _rpc(client, "GetTask", {"id": failed["id"]})
            after = otel.points("otel_a2a.divergence.unresolved")
        finally:
            instrumentor.uninstrument()
    assert unresolved == [({"otel_a2a.divergence.reason": "no_observation"}, 1)]
    assert after == [({"otel_a2a.divergence.reason": "no_observation"}, 0)]
    decision = otel.span("liveness_decision")
    assert divergences(decision) == ["no_observation"] and resolved(decision) == []
    get = otel.span("GetTask")
    assert resolved(get) == [("no_observation", "confirmed")]
    assert _event(get, RESOLVED)["a2a.task.state"] == "TASK_STATE_FAILED"
