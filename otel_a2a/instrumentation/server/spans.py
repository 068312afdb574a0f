"""The convention's ``a2a.server`` span around each method of an a2a-sdk request handler.

Every binding a2a-sdk serves (JSON-RPC and HTTP+JSON routes, FastAPI, ``GrpcHandler``, and the
v0.3 compat layer of each, which converts to v1.0 first) calls the same request handler, so one
span there covers them all. The span is a child of the current span (an ASGI or gRPC server
instrumentation's, or a2a-sdk's); with none, of the caller's trace context read from the
request's headers or metadata. It holds the task id, context and state the worker answered or
streamed, with one status event per streamed state: the worker's beliefs, which the analyzer
compares with the caller's. A failure of otel-a2a is counted and the request goes on unobserved.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from otel_a2a import semconv as sc
from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.instrumentation.server import attributes as at
from otel_a2a.instrumentation.server.card import with_heartbeat
from otel_a2a.instrumentation.server.setup import set_up
from otel_a2a.instrumentation.server.unfinished import Watch

# set while a server span of ours is current: a subclass calling ``super()`` makes one span
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_a2a_server", default=False)


class Request:
    """One handler call under observation: its span and what is known of its task."""

    __slots__ = ("ctx", "name", "rt", "span", "state", "task_id", "v03", "watch")

    def __init__(self, rt: Runtime, watch: Watch | None, span: Span, v03: bool) -> None:
        self.rt = rt
        self.watch = watch
        self.span = span
        self.ctx = trace.set_span_in_context(span)
        self.v03 = v03
        self.task_id = ""
        self.state: str | None = None
        self.name = ""

    def task(self, task_id: str, context_id: str) -> None:
        if task_id and not self.task_id:
            self.task_id = task_id
            self.span.set_attribute(sc.TASK_ID, task_id)
        if context_id:
            self.span.set_attribute(sc.CONTEXT_ID, context_id)

    def reply(self, reply: Any, event: bool) -> None:
        """A reply or a stream event: its task and context, and its state (an event per
        streamed state)."""
        found = at.task_state(reply)
        if found is None:
            self.task(*at.reply_ids(reply))
            return
        task_id, context_id, number = found
        self.task(task_id, context_id)
        name = at.state_name(number)
        raw = at.wire_spelling(name, self.v03)
        if event:
            attrs: dict[str, AttributeValue] = {sc.TASK_ID: task_id, sc.TASK_STATE: name}
            if raw is not None:
                attrs[sc.TASK_STATE_RAW] = raw
            self.span.add_event(sc.EVENT_TASK_STATUS, attrs)
        if task_id == self.task_id:
            self.state = name
            self.span.set_attribute(sc.TASK_STATE, name)
            if raw is not None:
                self.span.set_attribute(sc.TASK_STATE_RAW, raw)

    def fail(self, exc: BaseException) -> None:
        kind = type(exc).__name__
        self.span.set_attribute(sc.ERROR_TYPE, kind)
        self.span.set_status(Status(StatusCode.ERROR, kind))

    def end(self, call_context: Any) -> None:
        if self.watch is not None:
            self.watch.served(call_context, self.task_id, self.span.get_span_context())
        self.span.end()


def _open(
    rt: Runtime, watch: Watch | None, card: Any, method: str, params: Any, call_context: Any
) -> Request:
    state = getattr(call_context, "state", None)
    state = state if isinstance(state, dict) else {}
    headers = at.carrier(state)
    parent = None
    if not trace.get_current_span().get_span_context().is_valid:
        parent = propagate.extract(headers)
    name = at.METHODS[method][0]
    attrs: dict[str, AttributeValue] = {sc.OPERATION: name}
    version = at.protocol_version(state, headers)
    if version is not None:
        attrs[sc.PROTOCOL_VERSION] = version
    attrs.update(at.request_attributes(method, params))
    if card is not None:
        attrs.update(at.card_attributes(card))
    span = rt.tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attrs)
    request = Request(rt, watch, span, at.v03_jsonrpc(state))
    request.name = name
    task_id = attrs.get(sc.TASK_ID)
    request.task_id = task_id if isinstance(task_id, str) else ""
    return request


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    params = args[0] if args else kwargs.get("params")
    call_context = args[1] if len(args) > 1 else kwargs.get("context")
    return params, call_context


Lookup = Callable[[Any], tuple[Runtime, Watch | None, Any, float | None] | None]


def wrapper(method: str, lookup: Lookup) -> Callable[..., Any]:
    """The wrapt wrapper of one request handler method; ``lookup`` gives, for a handler, the
    runtime, its watch, its card and the heartbeat to serve (None: not instrumented now)."""
    streaming = method in at.STREAMING

    def begin(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request | None:
        if _inside.get():
            return None
        found = lookup(instance)
        if found is None:
            return None
        rt, watch, card, _seconds = found
        try:
            params, call_context = _arguments(args, kwargs)
            return _open(rt, watch, card, method, params, call_context)
        except Exception as exc:
            rt.error(exc)
            return None

    async def unary(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        await _set_up(instance, lookup)
        request = begin(instance, args, kwargs)
        if request is None:
            return await wrapped(*args, **kwargs)
        token = context.attach(request.ctx)
        inside = _inside.set(True)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _safely(request, request.fail, exc)
            raise
        else:
            result = _safely_reply(request, instance, lookup, result)
            return result
        finally:
            _inside.reset(inside)
            context.detach(token)
            _safely(request, request.end, _arguments(args, kwargs)[1])

    async def stream(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> AsyncIterator[Any]:
        await _set_up(instance, lookup)
        request = begin(instance, args, kwargs)
        if request is None:
            async for event in wrapped(*args, **kwargs):
                yield event
            return
        events = wrapped(*args, **kwargs)
        try:
            while True:
                try:
                    event = await _next(request, events)
                except StopAsyncIteration:
                    break
                _safely(request, request.reply, event, True)
                yield event
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                _safely(request, request.fail, exc)
            raise
        finally:
            try:
                await events.aclose()
            finally:
                _safely(request, request.end, _arguments(args, kwargs)[1])

    def wrap(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return (stream if streaming else unary)(wrapped, instance, args, kwargs)

    return wrap


async def _set_up(instance: Any, lookup: Lookup) -> None:
    found = lookup(instance)
    if found is not None:
        await set_up(found[0])


async def _next(request: Request, events: AsyncIterator[Any]) -> Any:
    """One step of the handler's stream with the span current: attached and detached within
    the step, since a context attached across a ``yield`` would be detached in another one."""
    token = context.attach(request.ctx)
    inside = _inside.set(True)
    try:
        return await anext(events)
    finally:
        _inside.reset(inside)
        context.detach(token)


def _safely(request: Request, action: Callable[..., None], *args: Any) -> None:
    try:
        action(*args)
    except Exception as exc:
        request.rt.error(exc)


def _safely_reply(request: Request, instance: Any, lookup: Lookup, result: Any) -> Any:
    """Observe the reply; an extended card gets the heartbeat extension the public one has."""
    try:
        request.reply(result, False)
        if request.name == "GetExtendedAgentCard":
            found = lookup(instance)
            seconds = found[3] if found is not None else None
            if seconds is not None and result is not None:
                return with_heartbeat(result, seconds)
    except Exception as exc:
        request.rt.error(exc)
    return result
