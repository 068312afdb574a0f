"""The application's call metadata reaches the agent whatever form grpcio accepted it in.

otel-a2a reads the metadata (its ``a2a-version``) to classify a call. A one-shot iterator (a
generator) read there would leave grpc nothing to send: the agent would see no
``authorization``. Each form grpcio takes (tuple, list, generator, iterator, ``grpc.aio.
Metadata``, ``None``, and a generator that fails part-way) goes through every way of calling
(sync unary, ``with_call``, ``future``, sync stream; aio unary and stream) against a real
loopback agent that echoes the ``authorization`` it received, once plain and once
instrumented: the agent and the application must see exactly the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import grpc.aio
from a2a.types import a2a_pb2

from tests.instrumentation.conftest import make_harness
from tests.instrumentation.test_grpc_differential import GET, STREAM, _failure, _request
from tests.support import grpc_fake_agent

PAIRS = (("a2a-version", "1.0"), ("authorization", "Bearer s3cret"))


class _Broken(Exception):
    """The application's own metadata generator failed."""


def _failing() -> Iterator[tuple[str, str]]:
    yield PAIRS[0]
    raise _Broken("metadata source failed")


# each a factory: a one-shot form must be made afresh for every call
FORMS: dict[str, Callable[[], Any]] = {
    "tuple": lambda: PAIRS,
    "list": lambda: list(PAIRS),
    "generator": lambda: (pair for pair in PAIRS),
    "iterator": lambda: iter(list(PAIRS)),
    "aio.Metadata": lambda: grpc.aio.Metadata(*PAIRS),
    "none": lambda: None,
    "failing": _failing,
}


def _outcome(work: Callable[[], Any]) -> Any:
    try:
        return work()
    except Exception as exc:
        return _failure(exc)


def _sync_calls(get: Any, stream: Any, form: str, make: Callable[[], Any]) -> dict[str, Any]:
    request = a2a_pb2.GetTaskRequest(id="echo-" + form)
    return {
        f"unary/{form}": _outcome(lambda: get(request, metadata=make()).context_id),
        f"positional/{form}": _outcome(lambda: get(request, 5.0, make()).context_id),
        f"with_call/{form}": _outcome(
            lambda: get.with_call(request, metadata=make())[0].context_id
        ),
        f"future/{form}": _outcome(
            lambda: get.future(request, metadata=make()).result().context_id
        ),
        f"stream/{form}": _outcome(
            lambda: [m.task.context_id for m in stream(_request("echo " + form), metadata=make())]
        ),
    }


def _sync(target: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with grpc.insecure_channel(target) as channel:
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
        for form, make in FORMS.items():
            seen.update(_sync_calls(get, stream, form, make))
    return seen


async def _aio(target: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with grpc.aio.insecure_channel(target) as channel:
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
        for form, make in FORMS.items():
            try:
                reply = await get(a2a_pb2.GetTaskRequest(id="echo-" + form), metadata=make())
                seen[f"unary/{form}"] = reply.context_id
            except Exception as exc:
                seen[f"unary/{form}"] = _failure(exc)
            try:
                call = stream(_request("echo " + form), metadata=make())
                seen[f"stream/{form}"] = [m.task.context_id async for m in call]
            except Exception as exc:
                seen[f"stream/{form}"] = _failure(exc)
    return seen


def _both(target: str) -> dict[str, Any]:
    return {"sync": _sync(target), "aio": asyncio.run(_aio(target))}


def test_every_metadata_form_reaches_the_agent_unchanged() -> None:
    with grpc_fake_agent.serve() as target:
        plain = _both(target)
        otel, instrumentor = make_harness()
        try:
            instrumented = _both(target)
        finally:
            instrumentor.uninstrument()
    # the agent really received the credential where grpcio sends it, and nothing without it
    for style in ("sync", "aio"):
        assert plain[style]["unary/generator"] == "Bearer s3cret"
        assert plain[style]["stream/generator"] == ["Bearer s3cret", ""]
        assert plain[style]["unary/none"] == "none"
    assert plain == instrumented
    # and otel-a2a still read the version from every form that carried it
    versions = {
        (s.attributes or {}).get("a2a.protocol.version") for s in otel.spans() if s.attributes
    }
    assert versions == {"1.0", "0.3"}  # 0.3: no a2a-version metadata, as the spec says
    assert otel.total("otel_a2a.instrumentation.errors") == 0
