"""A misbehaving A2A v1.0 gRPC agent on loopback, for what the SDK servers never do on demand.

A real grpcio server (thread pool) serving ``lf.a2a.v1.A2AService`` ``GetTask`` and
``SendStreamingMessage`` with the a2a-sdk's generated messages; the case is the task id asked
for (``GetTask``) or the first word of the message text (``SendStreamingMessage``, whose task id is
``s-`` and the text):

- ``ok``: a working Task; the stream: the task, ``working``, then ``completed``;
- ``not_found``: ``NOT_FOUND`` with a ``google.rpc.ErrorInfo`` (reason ``TASK_NOT_FOUND``,
  domain ``a2a-protocol.org``) in ``grpc-status-details-bin``, as a2a-sdk's handler sends;
- ``lost``: a working Task the first time, ``not_found`` afterwards (the agent forgot it);
- ``hang``: waits until the agent stops (the client's deadline passes first);
- ``abort``: the stream sends the task and ``working``, then aborts with ``INTERNAL``;
- ``hold``: the stream sends the task, then waits until the client cancels or the agent stops;
- ``flood``: the stream sends the task, then 2,000 ``working`` updates, each of another task;
- ``echo``: a working Task (the stream: that task, then ``completed``) whose context id is
  the ``authorization`` metadata the agent received (``none`` without one).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from a2a.types import a2a_pb2
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from tests.support import free_port

SERVICE = "lf.a2a.v1.A2AService"
STATE = a2a_pb2.TaskState


def _task(task_id: str, state: int) -> a2a_pb2.Task:
    return a2a_pb2.Task(id=task_id, context_id="ctx-" + task_id, status={"state": state})


def _update(task_id: str, state: int) -> a2a_pb2.StreamResponse:
    event = a2a_pb2.TaskStatusUpdateEvent(
        task_id=task_id, context_id="ctx-" + task_id, status={"state": state}
    )
    return a2a_pb2.StreamResponse(status_update=event)


def _not_found(context: grpc.ServicerContext, task_id: str) -> None:
    info = error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="a2a-protocol.org")
    detail = any_pb2.Any()
    detail.Pack(info)
    message = f"Task {task_id} not found"
    status = status_pb2.Status(code=grpc.StatusCode.NOT_FOUND.value[0], message=message)
    status.details.append(detail)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(grpc.StatusCode.NOT_FOUND, message)


def _echo(task_id: str, context: grpc.ServicerContext) -> a2a_pb2.Task:
    received = dict(context.invocation_metadata())
    task = _task(task_id, STATE.TASK_STATE_WORKING)
    task.context_id = str(received.get("authorization", "none"))
    return task


class FakeAgent:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self._asked: set[str] = set()

    def get_task(self, request: a2a_pb2.GetTaskRequest, context: grpc.ServicerContext) -> Any:
        case = request.id.split("-", 1)[0]
        if case == "not_found" or (case == "lost" and request.id in self._asked):
            _not_found(context, request.id)
        self._asked.add(request.id)
        if case == "hang":
            self.stop.wait(30)
        if case == "echo":
            return _echo(request.id, context)
        return _task(request.id, STATE.TASK_STATE_WORKING)

    def stream(
        self, request: a2a_pb2.SendMessageRequest, context: grpc.ServicerContext
    ) -> Iterator[a2a_pb2.StreamResponse]:
        text = request.message.parts[0].text if request.message.parts else ""
        case = text.split(" ", 1)[0]
        task_id = "s-" + text.replace(" ", "-")
        if case == "echo":
            yield a2a_pb2.StreamResponse(task=_echo(task_id, context))
            yield _update(task_id, STATE.TASK_STATE_COMPLETED)
            return
        yield a2a_pb2.StreamResponse(task=_task(task_id, STATE.TASK_STATE_SUBMITTED))
        if case == "hold":
            cancelled = threading.Event()
            context.add_callback(cancelled.set)  # the RPC ended: cancelled, or the server stops
            cancelled.wait(30)
            return
        if case == "flood":
            for i in range(2000):
                yield _update(f"{task_id}-{i}", STATE.TASK_STATE_WORKING)
            return
        yield _update(task_id, STATE.TASK_STATE_WORKING)
        if case == "abort":
            context.abort(grpc.StatusCode.INTERNAL, "agent crashed mid-stream")
        yield _update(task_id, STATE.TASK_STATE_COMPLETED)


@contextlib.contextmanager
def serve() -> Iterator[str]:
    """The agent on ``127.0.0.1:<free port>``; yields that target."""
    agent = FakeAgent()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handlers = {
        "GetTask": grpc.unary_unary_rpc_method_handler(
            agent.get_task,
            request_deserializer=a2a_pb2.GetTaskRequest.FromString,
            response_serializer=a2a_pb2.Task.SerializeToString,
        ),
        "SendStreamingMessage": grpc.unary_stream_rpc_method_handler(
            agent.stream,
            request_deserializer=a2a_pb2.SendMessageRequest.FromString,
            response_serializer=a2a_pb2.StreamResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        yield target
    finally:
        agent.stop.set()
        server.stop(0.5).wait(5)


def closed_target() -> str:
    """A loopback address nothing listens on (``UNAVAILABLE``)."""
    return f"127.0.0.1:{free_port()}"
