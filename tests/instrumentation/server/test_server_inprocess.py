"""The worker's side in this process, under the in-memory SDK: a real a2a-sdk handler served by
a real grpc.aio server on loopback (``GrpcHandler`` and the v0.3 ``CompatGrpcHandler`` side by
side), the metric of the finding, a failure of otel-a2a that the worker never sees, and
``uninstrument()`` restoring a2a-sdk."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc.aio
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import agent_card_routes
from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2_grpc
from opentelemetry.trace import SpanKind

from otel_a2a.instrumentation import A2AInstrumentor
from otel_a2a.instrumentation.server import unfinished
from otel_a2a.instrumentation.server.unfinished import TrackedExecutor
from tests.instrumentation.conftest import Harness
from tests.peers.python_peer import build_card, build_handler

# a real a2a-sdk 1.3 handler and card routes in this process: the version matrix's oldest
# cell leaves it out (tests/conftest.py)
pytestmark = pytest.mark.peer

TRACE_ID, PARENT = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
TRACEPARENT = f"00-{TRACE_ID:032x}-{PARENT:016x}-01"


def _serve_and_call(calls: Any) -> Any:
    async def run() -> Any:
        server = grpc.aio.server()
        target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        handler = build_handler(build_card("http://127.0.0.1:9", target), 5.0)
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(CompatGrpcHandler(handler), server)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                return handler, await calls(channel)
        finally:
            await server.stop(0.5)
            await handler.aclose()

    return asyncio.run(run())


def test_grpc_v1_and_v03_requests_get_server_spans(otel: Harness) -> None:
    async def calls(channel: Any) -> tuple[Any, Any]:
        v1 = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            SendMessageRequest(
                message=Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="echo a")])
            ),
            metadata=[("a2a-version", "1.0"), ("traceparent", TRACEPARENT)],
        )
        v03 = await a2a_v0_3_pb2_grpc.A2AServiceStub(channel).SendMessage(
            a2a_v0_3_pb2.SendMessageRequest(
                request=a2a_v0_3_pb2.Message(
                    message_id="m2",
                    role=a2a_v0_3_pb2.ROLE_USER,
                    content=[a2a_v0_3_pb2.Part(text="echo b")],
                )
            )
        )
        return v1, v03

    _handler, (v1, v03) = _serve_and_call(calls)
    served = [s for s in otel.spans("SendMessage") if s.kind is SpanKind.SERVER]
    by_message = {s.attributes["a2a.message.id"]: s for s in served if s.attributes}
    assert set(by_message) == {"m1", "m2"}
    first, second = by_message["m1"].attributes, by_message["m2"].attributes
    assert first is not None and second is not None
    assert first["a2a.task.id"] == v1.task.id and second["a2a.task.id"] == v03.task.id
    assert first["a2a.task.state"] == second["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert first["a2a.protocol.version"] == "1.0"
    assert first["gen_ai.agent.name"] == "otel-a2a Python test peer"
    # the caller's trace continues through the call metadata
    parent = by_message["m1"].parent
    assert parent is not None and (parent.trace_id, parent.span_id) == (TRACE_ID, PARENT)
    assert by_message["m2"].parent is None or by_message["m2"].parent.trace_id != TRACE_ID


def test_a_finding_is_counted(otel: Harness) -> None:
    async def calls(channel: Any) -> str:
        reply = await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            SendMessageRequest(
                message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="echo")])
            ),
            metadata=[("a2a-version", "1.0")],
        )
        return str(reply.task.id)

    handler, _task = _serve_and_call(calls)
    watch = handler.agent_executor._self_watch
    watch.report("t-1", "c-1", "TASK_STATE_WORKING", "not_run_here")
    assert (
        otel.total("otel_a2a.task.unfinished", otel_a2a__task__unfinished__cause="not_run_here")
        == 1
    )
    (span,) = otel.spans("otel_a2a.task.unfinished")
    assert span.attributes is not None and span.attributes["a2a.task.id"] == "t-1"
    assert [r.log_record.event_name for r in otel.logs.get_finished_logs()] == [
        "otel_a2a.task.unfinished"
    ]


def test_a_failure_of_otel_a2a_is_counted_and_the_request_served(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_a2a.instrumentation.server import spans

    def broken(*_args: Any) -> Any:
        raise RuntimeError("otel-a2a broke")

    monkeypatch.setattr(spans, "_open", broken)

    async def calls(channel: Any) -> Any:
        return await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
            SendMessageRequest(
                message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="echo")])
            ),
            metadata=[("a2a-version", "1.0")],
        )

    _handler, reply = _serve_and_call(calls)
    assert reply.task.status.state == 3  # COMPLETED: served as if not instrumented
    assert otel.total("otel_a2a.instrumentation.errors", error__type="RuntimeError") >= 1
    assert not [s for s in otel.spans() if s.kind is SpanKind.SERVER]


def test_uninstrument_restores_a2a_sdk() -> None:
    cls = DefaultRequestHandler
    before = {name: vars(cls)[name] for name in ("on_message_send", "__init__")}
    card_routes = agent_card_routes.create_agent_card_routes
    instrumentor = A2AInstrumentor()
    instrumentor.instrument()
    try:
        assert vars(cls)["on_message_send"] is not before["on_message_send"]
        handler = build_handler(build_card("http://127.0.0.1:9"), 1.0)
        assert isinstance(handler.agent_executor, TrackedExecutor)
    finally:
        instrumentor.uninstrument()
    assert {name: vars(cls)[name] for name in before} == before
    assert agent_card_routes.create_agent_card_routes is card_routes
    plain = build_handler(build_card("http://127.0.0.1:9"), 1.0)
    assert not isinstance(plain.agent_executor, unfinished.TrackedExecutor)
