"""The webhook a request registers, and what a push delivery says (``protocol.push``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.types import a2a_pb2 as v1

from otel_a2a.protocol import classify_request
from otel_a2a.protocol import grpc as wire
from otel_a2a.protocol.model import Operation, PushTarget
from otel_a2a.protocol.push import (
    delivery_facts,
    push_target,
    same_token,
    target,
    token_digest,
)
from otel_a2a.protocol.states import TaskState

HOOK = "https://caller.example/hooks/a2a/?x=1"
JSON = {"content-type": "application/json"}


def _target(token: str | None = None) -> PushTarget:
    return PushTarget("/hooks/a2a", token_digest(token))


def _rpc(method: str, params: dict[str, Any], version: str = "1.0") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


CASES = [
    # v1.0 JSON-RPC: the config in SendMessage's configuration, and CreateTask...Config's params
    (
        "POST",
        "/a2a",
        _rpc(
            "SendMessage",
            {
                "message": {"messageId": "m"},
                "configuration": {"taskPushNotificationConfig": {"url": HOOK, "token": "tk"}},
            },
        ),
        Operation.SEND_MESSAGE,
        None,
    ),
    (
        "POST",
        "/a2a",
        _rpc("CreateTaskPushNotificationConfig", {"taskId": "T", "url": HOOK, "token": "tk"}),
        Operation.CREATE_PUSH_CONFIG,
        "T",
    ),
    # v0.3 JSON-RPC
    (
        "POST",
        "/a2a",
        _rpc(
            "tasks/pushNotificationConfig/set",
            {"taskId": "T", "pushNotificationConfig": {"url": HOOK, "token": "tk"}},
        ),
        Operation.CREATE_PUSH_CONFIG,
        "T",
    ),
    (
        "POST",
        "/a2a",
        _rpc(
            "message/stream",
            {
                "message": {"messageId": "m", "taskId": "T"},
                "configuration": {"pushNotificationConfig": {"url": HOOK, "token": "tk"}},
            },
        ),
        Operation.SEND_STREAMING_MESSAGE,
        "T",
    ),
    # v1.0 HTTP+JSON
    (
        "POST",
        "/a2a/tasks/T/pushNotificationConfigs",
        json.dumps({"taskId": "T", "url": HOOK, "token": "tk"}).encode(),
        Operation.CREATE_PUSH_CONFIG,
        "T",
    ),
    (
        "POST",
        "/a2a/message:send",
        json.dumps(
            {
                "message": {"messageId": "m"},
                "configuration": {"taskPushNotificationConfig": {"url": HOOK, "token": "tk"}},
            }
        ).encode(),
        Operation.SEND_MESSAGE,
        None,
    ),
    # v0.3 HTTP+JSON as a2a-sdk writes it (proto JSON of the v0.3 requests)
    (
        "POST",
        "/a2a/v1/tasks/T/pushNotificationConfigs",
        json.dumps(
            {
                "parent": "tasks/T",
                "configId": "c",
                "config": {"pushNotificationConfig": {"url": HOOK, "token": "tk"}},
            }
        ).encode(),
        Operation.CREATE_PUSH_CONFIG,
        "T",
    ),
    (
        "POST",
        "/a2a/v1/message:send",
        json.dumps(
            {
                "request": {"messageId": "m"},
                "configuration": {"pushNotification": {"url": HOOK, "token": "tk"}},
            }
        ).encode(),
        Operation.SEND_MESSAGE,
        None,
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "op", "task_id"), CASES)
def test_every_binding_and_version_names_the_webhook(
    method: str, path: str, body: bytes, op: Operation, task_id: str | None
) -> None:
    request = classify_request(method, path, JSON, body)
    assert request is not None
    assert (request.operation, request.task_id) == (op, task_id)
    assert request.push == _target("tk")


def test_requests_without_a_webhook_name_none() -> None:
    plain = _rpc("SendMessage", {"message": {"messageId": "m"}, "configuration": {}})
    request = classify_request("POST", "/a2a", JSON, plain)
    assert request is not None and request.push is None
    get = classify_request("POST", "/a2a", JSON, _rpc("GetTask", {"id": "T", "url": HOOK}))
    assert get is not None and get.push is None  # only sends and creates register
    assert push_target(Operation.SEND_MESSAGE, {"configuration": "none"}) is None
    assert push_target(Operation.GET_TASK, {"url": HOOK}) is None
    assert push_target(Operation.CREATE_PUSH_CONFIG, [HOOK]) is None
    deep = {"config": {"config": {"config": {"config": {"url": HOOK}}}}}
    assert push_target(Operation.CREATE_PUSH_CONFIG, deep) is None  # bounded depth
    no_url = _rpc("CreateTaskPushNotificationConfig", {"taskId": "T", "url": 7})
    request = classify_request("POST", "/a2a", JSON, no_url)
    assert request is not None and request.push is None


def test_grpc_messages_name_the_webhook() -> None:
    config = v1.TaskPushNotificationConfig(task_id="T", url=HOOK, token="tk")
    send = v1.SendMessageRequest(
        configuration=v1.SendMessageConfiguration(task_push_notification_config=config)
    )
    assert wire.push_target(Operation.SEND_MESSAGE, send) == _target("tk")
    assert wire.push_target(Operation.CREATE_PUSH_CONFIG, config) == _target("tk")
    assert wire.push_target(Operation.SEND_MESSAGE, v1.SendMessageRequest()) is None
    v03_config = v03.PushNotificationConfig(url=HOOK, token="tk")
    create = v03.CreateTaskPushNotificationConfigRequest(
        parent="tasks/T",
        config=v03.TaskPushNotificationConfig(push_notification_config=v03_config),
    )
    assert wire.push_target(Operation.CREATE_PUSH_CONFIG, create) == _target("tk")
    v03_send = v03.SendMessageRequest(
        configuration=v03.SendMessageConfiguration(push_notification=v03_config)
    )
    assert wire.push_target(Operation.SEND_STREAMING_MESSAGE, v03_send) == _target("tk")
    assert wire.push_target(Operation.GET_TASK, config) is None


def test_the_token_is_kept_as_a_keyed_digest_only() -> None:
    digest = token_digest("secret-token")
    assert digest is not None and b"secret-token" not in digest
    assert digest == token_digest(b"secret-token")
    assert token_digest("") is None and token_digest(None) is None
    assert same_token(digest, token_digest("secret-token"))
    assert not same_token(digest, token_digest("secret-tokeN"))
    assert not same_token(digest, None)  # a token registered, none delivered
    assert same_token(None, None) and same_token(None, digest)  # none registered: any


def test_the_path_is_what_a_server_sees() -> None:
    assert target("http://h:1/a/b/", None) == PushTarget("/a/b", None)
    assert target("http://h:1", None) == PushTarget("/", None)
    assert target("", "t") is None and target(None, "t") is None
    assert target("http://h/" + "x" * 5000, None) is None


def _state(body: dict[str, Any], headers: dict[str, str] | None = None) -> list[Any]:
    facts = delivery_facts(headers or {}, json.dumps(body).encode(), 1 << 20)
    return [
        (r.task_id, r.state.state if r.state else None, r.state.exact if r.state else None)
        for r in facts.reports
    ]


def test_deliveries_of_each_shape() -> None:
    status = {"taskId": "T", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
    assert _state({"statusUpdate": status}) == [("T", TaskState.COMPLETED, True)]
    task = {"id": "T", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}
    assert _state({"task": task}) == [("T", TaskState.INPUT_REQUIRED, True)]
    assert _state({"artifactUpdate": {"taskId": "T", "artifact": {}}}) == [("T", None, None)]
    # v0.3: the Task itself, in the v0.3 spelling
    v03_task = {"kind": "task", "id": "T", "contextId": "c", "status": {"state": "working"}}
    assert _state(v03_task) == [("T", TaskState.WORKING, True)]
    # the A2A-Version header says how the states are spelt
    assert _state({"task": task}, {"A2A-Version": "0.3"}) == [
        ("T", TaskState.INPUT_REQUIRED, True)  # v0.3 HTTP+JSON accepts either spelling
    ]
    assert _state({"message": {"messageId": "m"}}) == []
    assert delivery_facts({}, b"not json", 100).reports == ()


def test_a_delivery_beyond_the_limit_is_read_from_its_prefix() -> None:
    task = {
        "id": "T",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "history": [{"text": "x" * 1000}] * 200,
    }
    body = json.dumps({"task": task}).encode()
    facts = delivery_facts({}, body[:4096], 4096, truncated=True)
    assert [(r.task_id, r.state.state if r.state else None) for r in facts.reports] == [
        ("T", TaskState.COMPLETED)
    ]
    assert delivery_facts({}, body, 4096).reports == facts.reports
