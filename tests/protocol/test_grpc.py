"""protocol.grpc: the A2A gRPC call and its protobuf messages, v1.0 and v0.3 (a2a-sdk's pb2)."""

from __future__ import annotations

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.types import a2a_pb2 as v1
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given
from hypothesis import strategies as st

from otel_a2a.protocol import A2ARequest, Binding, Operation, TaskState
from otel_a2a.protocol import grpc as wire

V1_GET = "/lf.a2a.v1.A2AService/GetTask"


def test_describe_call_version_from_metadata_absent_means_0_3() -> None:
    req = wire.describe_call(V1_GET, [("a2a-version", "1.0.2")], None)
    assert req is not None and (req.operation, req.binding.value, req.version) == (
        Operation.GET_TASK,
        "GRPC",
        "1.0",
    )
    absent = wire.describe_call(V1_GET, None, None)
    assert absent is not None and absent.version == "0.3"
    old = wire.describe_call("/a2a.v1.A2AService/TaskSubscription", (), None)
    assert old is not None and old.operation is Operation.SUBSCRIBE_TO_TASK
    assert wire.describe_call("/grpc.health.v1.Health/Check", (), None) is None
    assert wire.describe_call("/lf.a2a.v1.A2AService/NoSuchMethod", (), None) is None


def test_request_ids_v1_and_v03() -> None:
    msg = v1.Message(task_id="t1", context_id="c1")
    assert wire.request_ids(Operation.SEND_MESSAGE, v1.SendMessageRequest(message=msg)) == (
        "t1",
        "c1",
    )
    assert wire.request_ids(Operation.GET_TASK, v1.GetTaskRequest(id="t2")) == ("t2", None)
    push = v1.TaskPushNotificationConfig(id="cfg", task_id="t3")
    assert wire.request_ids(Operation.CREATE_PUSH_CONFIG, push) == ("t3", None)
    old_msg = v03.Message(task_id="t4", context_id="c4")
    assert wire.request_ids(Operation.SEND_MESSAGE, v03.SendMessageRequest(request=old_msg)) == (
        "t4",
        "c4",
    )
    assert wire.request_ids(Operation.CANCEL_TASK, v03.CancelTaskRequest(name="tasks/t5")) == (
        "t5",
        None,
    )
    create = v03.CreateTaskPushNotificationConfigRequest(parent="tasks/t6", config_id="x")
    assert wire.request_ids(Operation.CREATE_PUSH_CONFIG, create) == ("t6", None)
    # a new message (no task) and an id longer than any bound: nothing addressed
    assert wire.request_ids(Operation.SEND_MESSAGE, v1.SendMessageRequest()) == (None, None)
    assert wire.request_ids(Operation.GET_TASK, v1.GetTaskRequest(id="x" * 5000)) == (None, None)


def test_response_facts_read_states_by_the_grpc_rule() -> None:
    task = v1.Task(id="t", context_id="c", status={"state": v1.TaskState.TASK_STATE_CANCELED})
    facts = wire.response_facts(Operation.GET_TASK, task, "1.0")
    [report] = facts.reports
    assert report.state is not None
    assert (report.state.raw, report.state.state, report.state.exact) == (
        "TASK_STATE_CANCELED",
        TaskState.CANCELED,
        True,
    )
    old = v03.Task(id="t", status={"state": v03.TaskState.TASK_STATE_CANCELLED})
    [old_report] = wire.response_facts(Operation.GET_TASK, old, "0.3").reports
    assert old_report.state is not None and old_report.state.raw == "TASK_STATE_CANCELLED"
    assert old_report.state.exact and old_report.state.state is TaskState.CANCELED
    # v1.0 spoken with the v1.0 proto but no a2a-version metadata (0.3): CANCELED is off-rule
    [mixed] = wire.response_facts(Operation.GET_TASK, task, "0.3").reports
    assert mixed.state is not None and not mixed.state.exact
    # a number the peer's proto does not name: mapped to nothing, raw kept as the number
    unknown = v1.Task(id="t", status={"state": 42})
    [odd] = wire.response_facts(Operation.GET_TASK, unknown, "1.0").reports
    assert odd.state is not None and (odd.state.raw, odd.state.mapped) == ("42", False)


def test_response_facts_of_stream_messages() -> None:
    update = v1.TaskStatusUpdateEvent(task_id="t", status={"state": 2})
    update.status.timestamp.FromSeconds(1_700_000_000)
    [r] = wire.response_facts(
        Operation.SUBSCRIBE_TO_TASK, v1.StreamResponse(status_update=update), "1.0"
    ).reports
    assert (r.kind, r.timestamp) == ("status-update", "2023-11-14T22:13:20Z")
    artifact = v1.StreamResponse(artifact_update=v1.TaskArtifactUpdateEvent(task_id="t"))
    [a] = wire.response_facts(Operation.SEND_STREAMING_MESSAGE, artifact, "1.0").reports
    assert (a.kind, a.state) == ("artifact-update", None)
    only = wire.response_facts(Operation.SEND_MESSAGE, v03.SendMessageResponse(msg={}), "0.3")
    assert only.message_only and only.reports == ()
    listed = v1.ListTasksResponse(tasks=[v1.Task(id=str(i)) for i in range(3)])
    assert len(wire.response_facts(Operation.LIST_TASKS, listed, "1.0").reports) == 3
    assert not wire.response_facts(Operation.GET_TASK, object(), "1.0").recognized


def _details(reason: str) -> tuple[tuple[str, bytes], ...]:
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="a2a-protocol.org"))
    status = status_pb2.Status(code=5, message="m", details=[detail])
    return (("grpc-status-details-bin", status.SerializeToString()),)


def _request(method: str = "GetTask", task_id: str | None = "t1") -> A2ARequest:
    req = wire.describe_call(f"/lf.a2a.v1.A2AService/{method}", [("a2a-version", "1.0")], None)
    assert req is not None
    return req._replace(task_id=task_id)


GET = _request()


def test_status_error_reads_the_error_info_reason() -> None:
    error = wire.status_error(GET, "NOT_FOUND", _details("TASK_NOT_FOUND"))
    assert (error.reason, error.task_not_found) == ("TASK_NOT_FOUND", True)
    other = wire.status_error(GET, "FAILED_PRECONDITION", _details("TASK_NOT_CANCELABLE"))
    assert (other.reason, other.task_not_found) == ("TASK_NOT_CANCELABLE", False)
    assert wire.status_error(GET, "UNAVAILABLE", None).reason == "UNAVAILABLE"
    # a2a-sdk's v0.3 handler: no details, the error class in the message
    v03_details = f"{TaskNotFoundError.__name__}: Task not found"
    assert wire.status_error(GET, "NOT_FOUND", (), v03_details).task_not_found
    assert not wire.status_error(GET, "NOT_FOUND", (), "route not found").task_not_found


def test_status_error_reads_its_message_as_http_does() -> None:
    """a2a-go's SubscribeToTask on a task it has but no longer runs: TASK_NOT_FOUND "task not
    found: no active execution", no lost task (over JSON-RPC and HTTP+JSON neither); a refusal
    that spells the task's state states it, as an error reply."""
    subscribe = _request("SubscribeToTask")
    idle = wire.status_error(
        subscribe, "NOT_FOUND", _details("TASK_NOT_FOUND"), "task not found: no active execution"
    )
    assert (idle.reason, idle.task_not_found) == ("TASK_NOT_FOUND", False)
    lost = wire.status_error(subscribe, "NOT_FOUND", _details("TASK_NOT_FOUND"), "not found")
    assert lost.task_not_found
    cancel = _request("CancelTask")
    refused = wire.status_error(
        cancel,
        "FAILED_PRECONDITION",
        _details("TASK_NOT_CANCELABLE"),
        "task in non-cancelable state TASK_STATE_COMPLETED",
    )
    assert refused.report is not None and refused.report.kind == "error-reply"
    assert refused.report.task_id == "t1"
    assert refused.report.state is not None
    assert refused.report.state.state is TaskState.COMPLETED
    assert (
        wire.status_error(
            _request("CancelTask", None),
            "FAILED_PRECONDITION",
            _details("TASK_NOT_CANCELABLE"),
            "x",
        ).report
        is None
    )


@pytest.mark.parametrize(
    "garbage", [b"\xff", b"\x1a\x05ab", b"\x1a\x02\x0a\xff", b"\x0b", b"\x1a" + b"\xff" * 20]
)
def test_status_error_never_raises_on_garbage(garbage: bytes) -> None:
    error = wire.status_error(GET, "NOT_FOUND", (("grpc-status-details-bin", garbage),))
    assert (error.reason, error.task_not_found) == ("NOT_FOUND", False)


@pytest.mark.parametrize(
    ("target", "origin"),
    [
        ("localhost:50051", "grpc://localhost:50051"),
        ("dns:///agent.example:443", "grpc://agent.example:443"),
        ("dns://8.8.8.8/agent.example:443", "grpc://agent.example:443"),
        ("grpc://agent.example:8443", "grpc://agent.example:8443"),
        ("http://127.0.0.1:1/ignored/path", "grpc://127.0.0.1:1"),
        ("ipv4:127.0.0.1:9", "grpc://127.0.0.1:9"),
    ],
)
def test_channel_origin(target: str, origin: str) -> None:
    assert wire.channel_origin(target) == origin


@given(st.binary(max_size=256), st.sampled_from(["NOT_FOUND", "INTERNAL"]))
def test_status_error_never_raises(data: bytes, code: str) -> None:
    error = wire.status_error(GET, code, (("grpc-status-details-bin", data),), data.hex())
    assert error.reason is not None and len(error.reason) <= 64


def test_request_message_and_tenant_v1_and_v03() -> None:
    refs = ["t0", "", *(f"r{i}" for i in range(20))]
    msg = v1.Message(message_id="m1", reference_task_ids=refs)
    request = v1.SendMessageRequest(message=msg, tenant="acme")
    assert wire.request_message(Operation.SEND_MESSAGE, request) == (
        "m1",
        ("t0", *(f"r{i}" for i in range(14))),  # of the first 16, the empty one left out
    )
    assert wire.request_tenant(request) == "acme"
    old = v03.SendMessageRequest(request=v03.Message(message_id="m2"))
    assert wire.request_message(Operation.SEND_STREAMING_MESSAGE, old) == ("m2", ())
    assert wire.request_tenant(old) is None
    assert wire.request_message(Operation.GET_TASK, v1.GetTaskRequest(id="t")) == (None, ())


@pytest.mark.parametrize(
    ("method", "metadata", "request_message"),
    [
        (
            "/lf.a2a.v1.A2AService/SendMessage",
            [("a2a-version", "1.0")],
            v1.SendMessageRequest(
                message=v1.Message(
                    message_id="m1", task_id="t1", context_id="c1", reference_task_ids=["r1"]
                ),
                tenant="acme",
            ),
        ),
        ("/lf.a2a.v1.A2AService/GetTask", [("a2a-version", "1.0")], v1.GetTaskRequest(id="t2")),
        (
            "/a2a.v1.A2AService/CreateTaskPushNotificationConfig",
            (),
            v03.CreateTaskPushNotificationConfigRequest(
                parent="tasks/t3",
                config=v03.TaskPushNotificationConfig(
                    push_notification_config=v03.PushNotificationConfig(
                        url="http://hook/", token="s"
                    )
                ),
            ),
        ),
    ],
)
def test_describe_call_is_the_request_its_fields_name(
    method: str, metadata: list[tuple[str, str]], request_message: object
) -> None:
    """``describe_call`` builds the request positionally (a tuple, for speed): it must be the
    request the named fields give, each read by its own function."""
    op = wire.GRPC_METHODS[method.rsplit("/", 1)[1]]
    task_id, context_id = wire.request_ids(op, request_message)
    message_id, refs = wire.request_message(op, request_message)
    expected = A2ARequest(
        operation=op,
        binding=Binding.GRPC,
        version="1.0" if metadata else "0.3",
        task_id=task_id,
        context_id=context_id,
        message_id=message_id,
        reference_task_ids=refs,
        tenant=wire.request_tenant(request_message),
        push=wire.push_target(op, request_message),
    )
    assert wire.describe_call(method, metadata, request_message) == expected
    assert expected.task_id is not None  # each case names its task
    assert wire.describe_call("/grpc.health.v1.Health/Check", (), request_message) is None
