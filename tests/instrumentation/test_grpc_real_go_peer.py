"""What only a2a-go's gRPC server (``a2agrpc``, v2.3.1) does on the wire, and what otel-a2a
makes of it.

test_grpc_real_peer.py runs the common gRPC scenarios on a2a-go too; here are the habits that
differ from a2a-sdk's ``GrpcHandler``/``CompatGrpcHandler``, driven through the generated
stubs as a sync application would (the a2a-sdk client hides the raw status): on v0.3 its
errors carry a ``google.rpc.ErrorInfo`` (reason ``TASK_NOT_FOUND``, domain
``a2a-protocol.org``) and a message without a2a-sdk's ``TaskNotFoundError:`` prefix; like
a2a-sdk's, neither service checks the ``a2a-version`` metadata. Task states: the same enum
names as a2a-sdk's on both versions (v0.3 ``TASK_STATE_CANCELLED``), checked by the common
tests. No sleeps.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.instrumentation.utils import suppress_instrumentation

from tests.instrumentation.conftest import Harness, divergences
from tests.instrumentation.test_real_peers import attrs, canonical
from tests.support.peers import RunningPeer

pytestmark = pytest.mark.go


def _status_details(error: grpc.RpcError) -> list[Any]:
    """The ``google.rpc.Status`` details of a failed call (none without the binary trailer)."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if raw is None:
        return []
    details = []
    for item in status_pb2.Status.FromString(raw).details:
        info = error_details_pb2.ErrorInfo()
        assert item.Unpack(info), item.type_url
        details.append((info.reason, info.domain))
    return details


def _v03_not_found(target: str) -> grpc.RpcError:
    with grpc.insecure_channel(target) as channel:
        stub = a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetTask(a2a_v0_3_pb2.GetTaskRequest(name="tasks/no-such-task"))
    return caught.value


def test_v03_errors_carry_error_info_without_the_class_prefix(
    otel: Harness, go_grpc_peer: RunningPeer, grpc_peer: RunningPeer
) -> None:
    """a2a-sdk's v0.3 handler writes ``TaskNotFoundError: ...`` and no details (its v0.3
    client reads the prefix); a2a-go writes its own message and an ErrorInfo, as on v1.0.
    otel-a2a's ``error.type`` is ``TASK_NOT_FOUND`` for both."""
    assert go_grpc_peer.grpc_target is not None and grpc_peer.grpc_target is not None
    go = _v03_not_found(go_grpc_peer.grpc_target)
    python = _v03_not_found(grpc_peer.grpc_target)

    assert go.code() == python.code() == grpc.StatusCode.NOT_FOUND
    assert python.details().startswith("TaskNotFoundError:")
    assert not go.details().startswith("TaskNotFoundError")
    assert _status_details(python) == []
    assert _status_details(go) == [("TASK_NOT_FOUND", "a2a-protocol.org")]

    spans = otel.spans("GetTask")
    assert len(spans) == 2
    for span in spans:
        assert attrs(span)["a2a.protocol.version"] == "0.3"
        assert attrs(span)["error.type"] == "NOT_FOUND"  # the convention: the status code
        assert attrs(span)["otel_a2a.error.reason"] == "TASK_NOT_FOUND"
        assert attrs(span)["rpc.response.status_code"] == "NOT_FOUND"
    assert otel.total("otel_a2a.instrumentation.errors") == 0


@pytest.mark.parametrize("version", [None, "0.3", "9.9"])
def test_a2a_version_metadata_is_not_checked(
    otel: Harness, go_grpc_peer: RunningPeer, version: str | None
) -> None:
    """The v1.0 service answers whatever ``a2a-version`` says, or without one (as a2a-sdk's
    and as a2a-go over JSON-RPC); the state is read from the v1.0 enum all the same."""
    assert go_grpc_peer.grpc_target is not None
    metadata = [] if version is None else [("a2a-version", version)]
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id=f"m-{version}", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="echo v")]
        )
    )
    with grpc.insecure_channel(go_grpc_peer.grpc_target) as channel:
        reply = a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(request, metadata=metadata)
    assert canonical(reply.task.status.state) == "completed"
    span = otel.span("SendMessage")
    assert attrs(span)["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert "otel_a2a.task.state.raw" not in attrs(span)  # spelt exactly as a2a.task.state
    assert attrs(span)["rpc.response.status_code"] == "OK"


def _v1(channel: grpc.Channel) -> a2a_pb2_grpc.A2AServiceStub:
    return a2a_pb2_grpc.A2AServiceStub(channel)


V1 = [("a2a-version", "1.0")]


def _send(stub: a2a_pb2_grpc.A2AServiceStub, text: str) -> a2a_pb2.Task:
    message = a2a_pb2.Message(message_id=f"m-{text}", role=a2a_pb2.ROLE_USER)
    message.parts.append(a2a_pb2.Part(text=text))
    reply = stub.SendMessage(a2a_pb2.SendMessageRequest(message=message), metadata=V1)
    return reply.task


def test_no_active_execution_is_no_lost_task(otel: Harness, go_grpc_peer: RunningPeer) -> None:
    """SubscribeToTask on a task a2a-go has but no longer runs (waiting for input): NOT_FOUND
    with reason TASK_NOT_FOUND and the message "no active execution", read as over JSON-RPC
    and HTTP+JSON: no ``task_lost`` (it was a false alarm over gRPC)."""
    assert go_grpc_peer.grpc_target is not None
    with grpc.insecure_channel(go_grpc_peer.grpc_target) as channel:
        stub = _v1(channel)
        task = _send(stub, "input please")
        assert canonical(task.status.state) == "input-required"
        stream = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=V1)
        with pytest.raises(grpc.RpcError) as caught:
            list(stream)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no active execution" in (caught.value.details() or "")
    assert _status_details(caught.value) == [("TASK_NOT_FOUND", "a2a-protocol.org")]
    span = otel.span("SubscribeToTask")
    assert attrs(span)["error.type"] == "NOT_FOUND"
    assert attrs(span)["otel_a2a.error.reason"] == "TASK_NOT_FOUND"
    assert divergences(span) == []
    assert otel.total("otel_a2a.divergence") == 0
    assert otel.total("otel_a2a.instrumentation.errors") == 0


def test_a_refused_cancel_states_the_task_s_state(otel: Harness, go_grpc_peer: RunningPeer) -> None:
    """A task seen waiting for input is answered out of this process' sight and completes; a
    cancel is then refused, a2a-go naming the state ("task in non-cancelable state
    TASK_STATE_COMPLETED"). The refusal is recorded as an observation of that state: the next
    decision on the task is judged on it (``terminal_state``; without the reading,
    ``input-required`` was the last word and the decision passed)."""
    from otel_a2a import liveness_decision

    target = go_grpc_peer.grpc_target
    assert target is not None
    with grpc.insecure_channel(target) as channel:
        stub = _v1(channel)
        task = _send(stub, "input needed")
        assert canonical(task.status.state) == "input-required"
        follow_up = a2a_pb2.Message(message_id="m-answer", role=a2a_pb2.ROLE_USER, task_id=task.id)
        follow_up.parts.append(a2a_pb2.Part(text="here it is"))
        with suppress_instrumentation():  # answered out of this process' sight
            done = stub.SendMessage(a2a_pb2.SendMessageRequest(message=follow_up), metadata=V1)
        assert canonical(done.task.status.state) == "completed"
        with pytest.raises(grpc.RpcError) as caught:
            stub.CancelTask(a2a_pb2.CancelTaskRequest(id=task.id), metadata=V1)
    assert "TASK_STATE_COMPLETED" in (caught.value.details() or "")
    cancel = otel.span("CancelTask")
    assert divergences(cancel) == []  # judged before it left, on `input-required`
    assert attrs(cancel)["error.type"] == caught.value.code().name
    assert attrs(cancel)["otel_a2a.error.reason"] == "TASK_NOT_CANCELABLE"
    assert attrs(cancel)["otel_a2a.error.task_state"] == "TASK_STATE_COMPLETED"  # as stated
    with liveness_decision(task.id, agent=f"grpc://{target}"):
        pass
    reason = "otel_a2a__divergence__reason"
    assert otel.total("otel_a2a.divergence", **{reason: "terminal_state"}) == 1
    assert otel.total("otel_a2a.divergence") == 1
    assert otel.total("otel_a2a.instrumentation.errors") == 0
