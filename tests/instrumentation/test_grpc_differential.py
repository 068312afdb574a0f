"""The host comes first over gRPC: with and without otel-a2a, the application sees the same.

One matrix of calls over real loopback gRPC (``tests/support/grpc_fake_agent.py``), on a sync
and an aio channel, run once uninstrumented and once instrumented: results, exception types,
status codes and details must be identical for OK, NOT_FOUND, UNAVAILABLE, DEADLINE_EXCEEDED,
a server abort mid-stream and a stream the client cancels. The instrumented run also shows it
saw them (spans, each with its status code) and failed at nothing of its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.types import a2a_pb2

from tests.instrumentation.conftest import Harness, divergences, make_harness
from tests.support import grpc_fake_agent

V1 = (("a2a-version", "1.0"),)
GET = "/lf.a2a.v1.A2AService/GetTask"
STREAM = "/lf.a2a.v1.A2AService/SendStreamingMessage"


def _failure(exc: BaseException) -> dict[str, Any]:
    seen: dict[str, Any] = {"exception": type(exc).__name__}
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        seen.update(code=exc.code().name, details=exc.details())
    return seen


def _request(text: str) -> a2a_pb2.SendMessageRequest:
    msg = a2a_pb2.Message(message_id="m-" + text, role=a2a_pb2.Role.ROLE_USER)
    msg.parts.add(text=text)
    return a2a_pb2.SendMessageRequest(message=msg)


def _callables(channel: Any, dead: Any) -> tuple[Any, Any, Any]:
    """GetTask and SendStreamingMessage on ``channel``, GetTask on ``dead`` (nobody listens);
    sync and aio channels make them alike."""
    get = channel.unary_unary(
        GET,
        request_serializer=a2a_pb2.GetTaskRequest.SerializeToString,
        response_deserializer=a2a_pb2.Task.FromString,
    )
    stream = channel.unary_stream(
        STREAM,
        request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
        response_deserializer=a2a_pb2.StreamResponse.FromString,
    )
    dead_get = dead.unary_unary(
        GET,
        request_serializer=a2a_pb2.GetTaskRequest.SerializeToString,
        response_deserializer=a2a_pb2.Task.FromString,
    )
    return get, stream, dead_get


def _sync_matrix(target: str, closed: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with grpc.insecure_channel(target) as channel, grpc.insecure_channel(closed) as dead:
        get, stream, dead_get = _callables(channel, dead)
        unary = {"ok": get, "not_found": get, "hang": get, "unavailable": dead_get}
        for case, method in unary.items():
            timeout = 0.3 if case == "hang" else 5.0
            try:
                reply = method(a2a_pb2.GetTaskRequest(id=case), metadata=V1, timeout=timeout)
                seen[f"unary/{case}"] = {"reply": reply.SerializeToString().hex()}
            except Exception as exc:
                seen[f"unary/{case}"] = _failure(exc)
        future = get.future(a2a_pb2.GetTaskRequest(id="not_found"), metadata=V1)
        seen["future/not_found"] = _failure(future.exception())
        for case in ("ok", "abort"):
            call = stream(_request(case + " sync"), metadata=V1, timeout=5.0)
            got: list[str] = []
            try:
                got.extend(m.SerializeToString().hex() for m in call)
                seen[f"stream/{case}"] = {"messages": got, "code": call.code().name}
            except Exception as exc:
                seen[f"stream/{case}"] = {"messages": got, **_failure(exc)}
        call = stream(_request("hold sync"), metadata=V1, timeout=5.0)
        first = next(call).SerializeToString().hex()
        call.cancel()
        try:
            next(call)
            seen["stream/cancel"] = {"first": first, "after": "a message"}
        except Exception as exc:
            seen["stream/cancel"] = {"first": first, "code": call.code().name, **_failure(exc)}
    return seen


async def _aio_matrix(target: str, closed: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        grpc.aio.insecure_channel(target) as channel,
        grpc.aio.insecure_channel(closed) as dead,
    ):
        get, stream, dead_get = _callables(channel, dead)
        unary = {"ok": get, "not_found": get, "hang": get, "unavailable": dead_get}
        for case, method in unary.items():
            timeout = 0.3 if case == "hang" else 5.0
            call = method(a2a_pb2.GetTaskRequest(id=case), metadata=V1, timeout=timeout)
            try:
                reply = await call
                seen[f"unary/{case}"] = {"reply": reply.SerializeToString().hex()}
            except Exception as exc:
                seen[f"unary/{case}"] = _failure(exc)
            seen[f"unary/{case}/code"] = (await call.code()).name
        for case in ("ok", "abort"):
            streamed = stream(_request(case + " aio"), metadata=V1, timeout=5.0)
            got: list[str] = []
            try:
                async for message in streamed:
                    got.append(message.SerializeToString().hex())
                seen[f"stream/{case}"] = {"messages": got}
            except Exception as exc:
                seen[f"stream/{case}"] = {"messages": got, **_failure(exc)}
            seen[f"stream/{case}/code"] = (await streamed.code()).name
        reader = stream(_request("hold aio"), metadata=V1, timeout=5.0)
        first = await reader.read()
        reader.cancel()
        try:
            await reader.read()
            seen["stream/cancel"] = {"after": "a message"}
        except BaseException as exc:  # asyncio.CancelledError
            seen["stream/cancel"] = {"first": first.SerializeToString().hex(), **_failure(exc)}
        seen["stream/cancel/code"] = (await reader.code()).name
        seen["stream/cancel/cancelled"] = reader.cancelled()
    return seen


def _attr(span: Any, key: str) -> Any:
    return (span.attributes or {}).get(key)


def _matrix(target: str, closed: str) -> dict[str, Any]:
    return {
        "sync": _sync_matrix(target, closed),
        "aio": asyncio.run(_aio_matrix(target, closed)),
    }


def test_instrumented_application_sees_exactly_the_same() -> None:
    with grpc_fake_agent.serve() as target:
        closed = grpc_fake_agent.closed_target()  # the same address in both runs (details)
        plain = _matrix(target, closed)
        otel, instrumentor = make_harness()
        try:
            instrumented = _matrix(target, closed)
        finally:
            instrumentor.uninstrument()
    # the matrix really fails in every way it claims to
    for style in ("sync", "aio"):
        seen = plain[style]
        assert seen["unary/not_found"]["code"] == "NOT_FOUND"
        assert seen["unary/unavailable"]["code"] == "UNAVAILABLE"
        assert seen["unary/hang"]["code"] == "DEADLINE_EXCEEDED"
        assert seen["stream/abort"]["code"] == "INTERNAL"
        assert len(seen["stream/abort"]["messages"]) == 2
        assert len(seen["stream/ok"]["messages"]) == 3
    assert plain["sync"]["stream/cancel"]["code"] == "CANCELLED"
    assert plain["aio"]["stream/cancel"]["exception"] == "CancelledError"
    assert plain == instrumented

    assert otel.total("otel_a2a.instrumentation.errors") == 0
    codes = sorted(
        (
            (s.name, _attr(s, "rpc.response.status_code"), _attr(s, "error.type"))
            for s in otel.spans()
        ),
        key=str,
    )
    # rpc.response.status_code and error.type: the status code's name, as the A2A convention
    # says (the A2A reason goes to otel_a2a.error.reason)
    per_style = [
        ("GetTask", "OK", None),
        ("GetTask", "NOT_FOUND", "NOT_FOUND"),
        ("GetTask", "DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED"),
        ("GetTask", "UNAVAILABLE", "UNAVAILABLE"),
        ("SendStreamingMessage", "OK", None),
        ("SendStreamingMessage", "INTERNAL", "INTERNAL"),
        ("SendStreamingMessage", "CANCELLED", "CANCELLED"),
    ]
    sync_future = [("GetTask", "NOT_FOUND", "NOT_FOUND")]
    assert codes == sorted(per_style * 2 + sync_future, key=str)
    # the streams that ended before a terminal state ended abnormally; none diverged
    abnormal = [
        s for s in otel.spans() if any(e.name == "otel_a2a.stream.abnormal_end" for e in s.events)
    ]
    assert sorted((s.attributes or {})["rpc.response.status_code"] for s in abnormal) == [
        "CANCELLED",
        "CANCELLED",
        "INTERNAL",
        "INTERNAL",
    ]
    assert [divergences(s) for s in otel.spans() if divergences(s)] == []


def test_task_lost_from_the_status_details(otel: Harness) -> None:
    """A live task observed, then ``NOT_FOUND`` with ErrorInfo ``TASK_NOT_FOUND``."""
    with grpc_fake_agent.serve() as target, grpc.insecure_channel(target) as channel:
        get, _, _ = _callables(channel, channel)
        get(a2a_pb2.GetTaskRequest(id="lost-1"), metadata=V1)
        try:
            get(a2a_pb2.GetTaskRequest(id="lost-1"), metadata=V1)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
        else:
            raise AssertionError("the agent remembered the task")
    first, second = otel.spans("GetTask")
    assert (first.attributes or {})["a2a.task.state"] == "TASK_STATE_WORKING"
    assert divergences(second) == ["task_lost"]
    assert (second.attributes or {})["error.type"] == "NOT_FOUND"
    assert (second.attributes or {})["otel_a2a.error.reason"] == "TASK_NOT_FOUND"
    assert otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="task_lost") == 1
    assert otel.total("otel_a2a.instrumentation.errors") == 0


def _span_ends(otel: Harness, name: str, deadline: float = 10.0) -> list[Any]:
    """Poll (with a deadline) until a span named ``name`` has ended."""
    import time

    from otel_a2a.instrumentation.reentry import GUARD

    end = time.monotonic() + deadline
    while time.monotonic() < end:
        GUARD.drain()  # what finalisers deferred
        spans = otel.spans(name)
        if spans:
            return spans
        time.sleep(0.01)
    return []


def test_a_dropped_stream_ends_its_span(otel: Harness) -> None:
    """The application reads one message of a stream and drops the call (sync, then aio)."""
    import gc

    with grpc_fake_agent.serve() as target:
        with grpc.insecure_channel(target) as channel:
            stream = channel.unary_stream(
                STREAM,
                request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
                response_deserializer=a2a_pb2.StreamResponse.FromString,
            )
            call = stream(_request("hold dropped-sync"), metadata=V1, timeout=10.0)
            next(call)
            del call
            gc.collect()
            [sync_span] = _span_ends(otel, "SendStreamingMessage")

        async def aio() -> None:
            async with grpc.aio.insecure_channel(target) as channel:
                stream = channel.unary_stream(
                    STREAM,
                    request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
                    response_deserializer=a2a_pb2.StreamResponse.FromString,
                )
                call = stream(_request("hold dropped-aio"), metadata=V1, timeout=10.0)
                await call.read()
                del call
                gc.collect()
                for _ in range(100):  # let the loop run the cancellation's callbacks
                    if len(otel.spans("SendStreamingMessage")) == 2:
                        break
                    await asyncio.sleep(0.01)

        asyncio.run(aio())
    spans = _span_ends(otel, "SendStreamingMessage")
    assert len(spans) == 2
    for span in spans:  # submitted only: the stream ended before any terminal state
        assert [e.name for e in span.events] == ["otel_a2a.stream.abnormal_end"]
    # ended by the cancellation grpc makes of a dropped call (CANCELLED), or by the drop
    # itself when that comes first (no status: the application never got one)
    assert {_attr(s, "rpc.response.status_code") for s in spans} <= {None, "CANCELLED"}
    assert sync_span in spans
    assert otel.total("otel_a2a.instrumentation.errors") == 0


class _Boom(RuntimeError):
    """An internal failure planted in otel-a2a."""


def test_internal_failures_are_counted_never_raised(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Observation, then recognition, fail inside otel-a2a: the host's calls (sync and aio,
    unary and stream) get their replies all the same, and each failure is counted."""
    from otel_a2a.instrumentation import grpc_exchange
    from otel_a2a.protocol import grpc as wire_module

    def boom(*args: object, **kwargs: object) -> Any:
        raise _Boom("planted")

    async def aio(target: str) -> tuple[Any, list[Any]]:
        async with grpc.aio.insecure_channel(target) as channel:
            get, stream, _ = _callables(channel, channel)
            reply = await get(a2a_pb2.GetTaskRequest(id="ok"), metadata=V1)
            messages = [m async for m in stream(_request("ok boom-aio"), metadata=V1)]
            return reply, messages

    with grpc_fake_agent.serve() as target:
        monkeypatch.setattr(grpc_exchange.wire, "response_facts", boom)
        sync = _sync_matrix(target, grpc_fake_agent.closed_target())
        reply, messages = asyncio.run(aio(target))
        assert reply.id == "ok" and len(messages) == 3
        assert len(sync["stream/ok"]["messages"]) == 3 and "reply" in sync["unary/ok"]
        observed = otel.total("otel_a2a.instrumentation.errors", error__type="_Boom")
        assert observed > 0
        assert all(s.end_time is not None for s in otel.spans())  # every span ended

        monkeypatch.setattr(wire_module, "describe_call", boom)
        otel.exporter.clear()
        reply, messages = asyncio.run(aio(target))
        assert reply.id == "ok" and len(messages) == 3
        assert otel.spans() == []  # not recognised: unobserved, counted
        assert otel.total("otel_a2a.instrumentation.errors", error__type="_Boom") == observed + 2


def test_a_peer_streaming_endless_task_ids_costs_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2,000 tasks on one stream: the ledger keeps its bound, the span its event limit."""
    monkeypatch.setenv("OTEL_A2A_MAX_TRACKED_TASKS", "100")
    otel, instrumentor = make_harness()
    try:
        with grpc_fake_agent.serve() as target, grpc.insecure_channel(target) as channel:
            stream = channel.unary_stream(
                STREAM,
                request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
                response_deserializer=a2a_pb2.StreamResponse.FromString,
            )
            assert len(list(stream(_request("flood"), metadata=V1, timeout=30.0))) == 2001
        [span] = otel.spans("SendStreamingMessage")
        assert len(span.events) <= 128  # the SDK's span event limit
        assert sum(v for _, v in otel.points("otel_a2a.task.tracked")) == 100
        assert otel.total("otel_a2a.task.evicted") == 1901
        assert otel.total("otel_a2a.instrumentation.errors") == 0
    finally:
        instrumentor.uninstrument()
