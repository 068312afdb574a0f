"""grpcio clients: A2A over gRPC observed like A2A over HTTP.

``A2AInstrumentor`` wraps ``grpc.insecure_channel``/``secure_channel`` and their ``grpc.aio``
twins (as opentelemetry-instrumentation-grpc does): every channel made while instrumented is
observed, knowing its target (the agent's ``host:port``, which a card's gRPC interface URL
names). The A2A methods of an aio channel take two grpc.aio interceptors, first in line; a
sync channel is wrapped (:class:`A2AChannel`: grpc's sync interceptor layer costs every call
tens of µs). A channel made before ``instrument()`` is observed through
:func:`instrument_channel`. Only methods of the A2A service are observed; any other method
pays one prefix test when its multi-callable is made, and nothing per call.

The application's call objects are never replaced by ours: a unary call and its outcome go
back as grpc made them (observed through a done callback, or by awaiting the same call), a
sync stream is the call behind a transparent proxy, a stream's messages pass through
unchanged as the application reads them, and every exception it gets is the one grpc raised.
grpc is optional: without it nothing here is imported.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import grpc.aio
from opentelemetry import context, trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from wrapt import ObjectProxy, register_post_import_hook, wrap_function_wrapper

from otel_a2a.instrumentation import collection, runtime
from otel_a2a.instrumentation.grpc_exchange import GrpcExchange
from otel_a2a.instrumentation.httpx_client import (
    _late_setup_guarded,
    _late_setup_off_the_loop,
    _setup_due,
)
from otel_a2a.protocol import grpc as wire

_PREFIXES_STR = wire.PREFIXES
_PREFIXES_BYTES = tuple(p.encode("ascii") for p in wire.PREFIXES)
_OK = grpc.StatusCode.OK
_CANCELLED = grpc.StatusCode.CANCELLED


def _a2a_method(method: object) -> bool:
    if type(method) is bytes:  # grpc.aio hands the method over encoded
        return method.startswith(_PREFIXES_BYTES)
    return isinstance(method, str) and method.startswith(_PREFIXES_STR)


def _current() -> runtime.Runtime | None:
    rt = runtime.current()
    return rt if rt is not None and is_instrumentation_enabled() else None


def _open(
    rt: runtime.Runtime,
    origin: str,
    method: str | bytes,
    metadata: Any,
    request: object,
    streaming: bool,
) -> GrpcExchange | None:
    """The exchange of an A2A call, its implicit decisions judged; None for a call that is
    not A2A after all or one made inside otel-a2a's own work (counted). Never raises."""
    if not collection.enter():
        collection.defer(functools.partial(rt.error, collection.REENTRANT))
        return None
    try:
        if isinstance(method, bytes):
            method = method.decode("ascii", "replace")
        a2a = wire.classify_call(method, metadata)
        if a2a is None:
            return None
        task_id, context_id = wire.request_ids(a2a.operation, request)
        a2a = a2a._replace(task_id=task_id, context_id=context_id)
        exchange = GrpcExchange(rt, a2a, origin, method, streaming)
    except Exception as exc:
        rt.error(exc)
        return None
    finally:
        collection.leave()
    _guarded(exchange, exchange.before_send)
    return exchange


def _guarded(exchange: GrpcExchange, work: Callable[..., None], *args: Any, **kw: Any) -> None:
    """``work`` as otel-a2a's work in this thread; met inside that work (a finaliser), it
    runs at the next drain."""
    if not collection.enter():
        collection.defer(functools.partial(work, *args, **kw))
        return
    try:
        work(*args, **kw)
    except Exception as exc:
        exchange.rt.error(exc)
    finally:
        collection.leave()


def _end_with(exchange: GrpcExchange, failure: BaseException) -> None:
    """The call failed: its status from the ``grpc.RpcError`` (a ``grpc.Call`` too), else
    ``CANCELLED`` for a cancellation, else no status (the failure's type)."""
    code = details = trailing = None
    if isinstance(failure, grpc.RpcError) and hasattr(failure, "code"):
        try:
            code, details = failure.code(), failure.details()
            trailing = failure.trailing_metadata()
        except Exception as exc:
            exchange.rt.error(exc)
    elif _is_cancellation(failure):
        code = _CANCELLED
    _guarded(exchange, exchange.finish, code, details, trailing, failure)


def _is_cancellation(failure: BaseException) -> bool:
    return isinstance(failure, asyncio.CancelledError | futures.CancelledError)


# -- grpc.aio --------------------------------------------------------------------------------


async def _aio_call(
    origin: str, continuation: Any, details: Any, request: Any, streaming: bool
) -> tuple[GrpcExchange | None, Any]:
    """(exchange, call): the call made under the exchange's span, or (None, call) for a call
    that is not observed (not an A2A method, not instrumented, or not recognised)."""
    rt = _current() if _a2a_method(details.method) else None
    if rt is not None and _setup_due(rt):
        await _late_setup_off_the_loop(rt)
    exchange = None
    if rt is not None:
        metadata = details.metadata
        if isinstance(metadata, Iterator):  # grpc.aio passes a generator on as given
            metadata, theirs = _shared(metadata)
            details = details._replace(metadata=theirs)  # grpc.aio's details: a namedtuple
        exchange = _open(rt, origin, details.method, metadata, request, streaming)
    if exchange is None:
        return None, await continuation(details, request)
    token = context.attach(trace.set_span_in_context(exchange.span))
    try:
        call = await continuation(details, request)
    except BaseException as exc:
        _end_with(exchange, exc)
        raise
    finally:
        context.detach(token)
    return exchange, call


class AioUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, origin: str) -> None:
        self.origin = origin

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        exchange, call = await _aio_call(
            self.origin, continuation, client_call_details, request, False
        )
        if exchange is None:
            return call
        try:
            response = await call  # the same call the application awaits: done once
        except grpc.aio.AioRpcError as exc:
            _end_with(exchange, exc)
            return call  # the application's await raises this very error
        except BaseException as exc:
            _end_with(exchange, exc)
            raise
        _guarded(exchange, exchange.reply, response, _OK)
        return call


class AioUnaryStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, origin: str) -> None:
        self.origin = origin

    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        exchange, call = await _aio_call(
            self.origin, continuation, client_call_details, request, True
        )
        if exchange is None:
            return call
        try:
            call.add_done_callback(functools.partial(_aio_stream_done, exchange))
        except Exception as exc:
            exchange.rt.error(exc)
        return _aio_messages(exchange, call)


def _aio_stream_done(exchange: GrpcExchange, call: Any) -> None:
    """A cancelled stream ends its span now: its reader may never come back."""
    try:
        if call.cancelled():
            _guarded(exchange, exchange.finish, _CANCELLED)
    except Exception as exc:
        exchange.rt.error(exc)


async def _aio_messages(exchange: GrpcExchange, call: Any) -> AsyncIterator[Any]:
    """The stream's messages as the application reads them, each observed on its way."""
    try:
        async for message in call:
            _guarded(exchange, exchange.on_message, message)
            yield message
    except GeneratorExit:  # the reader stopped (closed or collected): no status to read
        _guarded(exchange, exchange.finish)
        raise
    except BaseException as exc:
        _end_with(exchange, exc)
        raise
    _guarded(exchange, exchange.finish, _OK)


# -- grpc (sync) ------------------------------------------------------------------------------


def _shared(metadata: Any) -> tuple[Any, Any]:
    """(what otel-a2a reads, what grpc gets) of the application's call metadata. Both are the
    application's own object, unless that is a one-shot iterator (a generator): reading it
    would leave grpc nothing to send, so it is read once into a tuple, as grpc itself does,
    and both get the tuple. An iterator that fails part-way gives grpc the items it yielded,
    then the same failure, and otel-a2a nothing."""
    if not isinstance(metadata, Iterator):
        return metadata, metadata
    items: list[Any] = []
    try:
        for item in metadata:
            items.append(item)
    except Exception as exc:
        return None, _replay(items, exc)
    read = tuple(items)
    return read, read


def _replay(items: list[Any], failure: Exception) -> Iterator[Any]:
    yield from items
    raise failure


def _with_metadata(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """(metadata to read, args, kwargs) of a multi-callable's ``(request, timeout, metadata,
    ...)`` call, the arguments unchanged unless the metadata had to be read once (``_shared``)."""
    if "metadata" in kwargs:
        ours, theirs = _shared(kwargs["metadata"])
        if theirs is not kwargs["metadata"]:
            kwargs = {**kwargs, "metadata": theirs}
    elif len(args) > 2:
        ours, theirs = _shared(args[2])
        if theirs is not args[2]:
            args = (*args[:2], theirs, *args[3:])
    else:
        ours = None
    return ours, args, kwargs


def _under_span(
    exchange: GrpcExchange, call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``call(*args, **kwargs)`` with the exchange's span current (an inner instrumentation's
    span is its child); what it raises ends the exchange, then goes on to the application."""
    token = context.attach(trace.set_span_in_context(exchange.span))
    try:
        return call(*args, **kwargs)
    except BaseException as exc:
        _end_with(exchange, exc)
        raise
    finally:
        context.detach(token)


class _Callable:
    """A multi-callable of an A2A method on a sync channel: the channel's own one, called as
    the application calls it, its call observed around it."""

    __slots__ = ("_inner", "_method", "_origin")

    def __init__(self, inner: Any, method: str, origin: str) -> None:
        self._inner = inner
        self._method = method
        self._origin = origin

    def _start(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[GrpcExchange | None, tuple[Any, ...], dict[str, Any]]:
        """(exchange or None, the call's arguments as they must go on to grpc)."""
        rt = _current()
        if rt is None:
            return None, args, kwargs
        if _setup_due(rt):
            _late_setup_guarded(rt)
        metadata, args, kwargs = _with_metadata(args, kwargs)
        exchange = _open(
            rt,
            self._origin,
            self._method,
            metadata,
            args[0] if args else kwargs.get("request"),
            type(self) is _StreamCallable,
        )
        return exchange, args, kwargs


class _UnaryCallable(_Callable):
    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        exchange, args, kwargs = self._start(args, kwargs)
        if exchange is None:
            return self._inner(*args, **kwargs)
        response = _under_span(exchange, self._inner, args, kwargs)
        _guarded(exchange, exchange.reply, response, _OK)
        return response

    def with_call(self, *args: Any, **kwargs: Any) -> Any:
        exchange, args, kwargs = self._start(args, kwargs)
        if exchange is None:
            return self._inner.with_call(*args, **kwargs)
        response, call = _under_span(exchange, self._inner.with_call, args, kwargs)
        _guarded(exchange, exchange.reply, response, _OK)
        return response, call

    def future(self, *args: Any, **kwargs: Any) -> Any:
        exchange, args, kwargs = self._start(args, kwargs)
        if exchange is None:
            return self._inner.future(*args, **kwargs)
        future = _under_span(exchange, self._inner.future, args, kwargs)
        try:
            future.add_done_callback(functools.partial(_sync_unary_done, exchange))
        except Exception as exc:
            exchange.rt.error(exc)
        return future

    def __getattr__(self, name: str) -> Any:  # anything else a multi-callable has
        return getattr(self._inner, name)


class _StreamCallable(_Callable):
    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        exchange, args, kwargs = self._start(args, kwargs)
        if exchange is None:
            return self._inner(*args, **kwargs)
        call = _under_span(exchange, self._inner, args, kwargs)
        # what an inner instrumentation returns may be a bare iterator (opentelemetry-
        # instrumentation-grpc's generator): then its end is seen by reading only
        add_done_callback = getattr(call, "add_done_callback", None)
        if add_done_callback is not None:
            try:
                add_done_callback(functools.partial(_sync_stream_done, exchange))
            except Exception as exc:
                exchange.rt.error(exc)
        return SyncStream(call, exchange)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class A2AChannel(grpc.Channel):  # type: ignore[misc]
    """A sync channel whose A2A methods are observed. Not an interceptor: grpc's interceptor
    layer costs every call of the channel tens of µs; here a method that is not A2A gets the
    channel's own multi-callable (one prefix test when the stub is made, nothing per call)
    and an A2A one a thin wrapper of it."""

    def __init__(self, channel: Any, origin: str) -> None:
        self._channel = channel
        self._origin = origin

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        inner = self._channel.unary_unary(method, *args, **kwargs)
        return _UnaryCallable(inner, method, self._origin) if _a2a_method(method) else inner

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        inner = self._channel.unary_stream(method, *args, **kwargs)
        return _StreamCallable(inner, method, self._origin) if _a2a_method(method) else inner

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_stream(method, *args, **kwargs)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect=try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._channel.unsubscribe(callback)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> A2AChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self._channel.close()


def _sync_unary_done(exchange: GrpcExchange, future: Any) -> None:
    """The unary outcome, in the calling thread (blocking call) or grpc's (``future()``)."""
    try:
        if future.cancelled():
            _guarded(exchange, exchange.finish, _CANCELLED)
            return
        failure = future.exception()
        if failure is not None:
            _end_with(exchange, failure)
            return
        _guarded(exchange, exchange.reply, future.result(), _OK)
    except Exception as exc:
        exchange.rt.error(exc)
        _guarded(exchange, exchange.finish)


def _sync_stream_done(exchange: GrpcExchange, call: Any) -> None:
    try:
        if call.cancelled():
            _guarded(exchange, exchange.finish, _CANCELLED)
    except Exception as exc:
        exchange.rt.error(exc)


class SyncStream(ObjectProxy):  # type: ignore[type-arg]
    """The call grpc returned (iterator, ``grpc.Call`` and ``grpc.Future`` in one), each
    message observed as the application takes it; everything else is the call's own."""

    def __init__(self, call: Any, exchange: GrpcExchange) -> None:
        super().__init__(call)
        self._self_exchange = exchange

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        exchange = self._self_exchange
        # our span is current while the call is read: an inner instrumentation that starts its
        # span at the first read (opentelemetry-instrumentation-grpc's stream) starts it under
        # ours, and one that leaves its context attached between reads (the same, a generator
        # inside a ``with``) cannot leave it behind once its stream ends
        token = context.attach(trace.set_span_in_context(exchange.span))
        try:
            message = next(self.__wrapped__)
        except StopIteration:
            _guarded(exchange, exchange.finish, _OK)
            raise
        except BaseException as exc:
            _end_with(exchange, exc)
            raise
        finally:
            context.detach(token)
        _guarded(exchange, exchange.on_message, message)
        return message

    def next(self) -> Any:
        return self.__next__()

    def __del__(self) -> None:  # dropped unread: its span ends at the next drain
        try:  # noqa: SIM105 - a finaliser must not raise
            collection.defer(self._self_exchange.finish)
        except Exception:
            pass


# -- channels --------------------------------------------------------------------------------


def instrument_channel(channel: Any, target: str) -> Any:
    """A channel created before ``instrument()`` (or by a factory captured before it), with
    otel-a2a's observation: a ``grpc.Channel`` comes back wrapped (use the returned one), a
    ``grpc.aio.Channel`` is marked in place and returned. ``target`` is the address it was
    created with (``host:port``)."""
    if isinstance(channel, grpc.aio.Channel):
        _mark(channel, target)
        return channel
    return A2AChannel(channel, wire.channel_origin(target))


# An aio channel is marked with its interceptors (an attribute of its own); the aio
# ``Channel.unary_unary``/``unary_stream`` are wrapped while instrumented to put them first on
# the multi-callables of A2A methods of a marked channel only. Other methods keep the
# channel's own interceptor list: with none, grpc.aio calls them without its interceptor
# machinery, which would otherwise cost every call of the channel.
_MARK = "_otel_a2a_interceptors"


def _mark(channel: Any, target: str) -> None:
    origin = wire.channel_origin(target)
    setattr(channel, _MARK, (AioUnaryUnary(origin), AioUnaryStream(origin)))


def _aio_multicallable(index: int) -> Callable[..., Any]:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        callable_ = wrapped(*args, **kwargs)
        ours = getattr(instance, _MARK, None)
        method = args[0] if args else kwargs.get("method")
        if ours is None or not _a2a_method(method):
            return callable_
        try:
            # first: the outermost interceptor, so our span is the parent of any other
            # instrumentation's (opentelemetry-instrumentation-grpc's) whatever came first
            callable_._interceptors = [ours[index], *(callable_._interceptors or ())]
        except Exception as exc:
            _count(exc)
        return callable_

    return wrapper


def _target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    target = args[0] if args else kwargs.get("target")
    return target if isinstance(target, str) else ""


def _sync_channel(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    channel = wrapped(*args, **kwargs)
    try:
        return A2AChannel(channel, wire.channel_origin(_target(args, kwargs)))
    except Exception as exc:
        _count(exc)
        return channel


def _aio_channel(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    channel = wrapped(*args, **kwargs)
    try:
        _mark(channel, _target(args, kwargs))
    except Exception as exc:
        _count(exc)
    return channel


def _count(exc: BaseException) -> None:
    rt = runtime.current()
    if rt is not None:
        rt.error(exc)


_CHANNEL_FACTORIES = ("insecure_channel", "secure_channel")
_MULTICALLABLES = ("unary_unary", "unary_stream")  # in the order of a mark's interceptors


def _aio_channel_type() -> type:
    """grpc.aio's channel class (``grpc.aio.Channel`` is its abstract base)."""
    from grpc.aio._channel import Channel

    channel_type: type = Channel
    return channel_type


# opentelemetry-instrumentation-grpc: its sync channel factory wraps what the factory it
# patched returned, so when it was instrumented after otel-a2a its interceptor would run
# before ours and our span would be its child. Its module's ``intercept_channel`` (the name
# its wrapper calls) is wrapped to put its interceptor inside ours instead.
_OTEL_GRPC = "opentelemetry.instrumentation.grpc"
_patched = False


def patch() -> None:
    global _patched
    for name in _CHANNEL_FACTORIES:
        wrap_function_wrapper(grpc, name, _sync_channel)
        wrap_function_wrapper(grpc.aio, name, _aio_channel)
    for index, name in enumerate(_MULTICALLABLES):
        wrap_function_wrapper(_aio_channel_type(), name, _aio_multicallable(index))
    _patched = True
    module = sys.modules.get(_OTEL_GRPC)
    if module is not None:
        _order_otel_grpc(module)
    else:
        register_post_import_hook(_order_otel_grpc, _OTEL_GRPC)


def unpatch() -> None:
    global _patched
    from opentelemetry.instrumentation.utils import unwrap

    _patched = False
    for name in _CHANNEL_FACTORIES:
        unwrap(grpc, name)
        unwrap(grpc.aio, name)
    for name in _MULTICALLABLES:
        unwrap(_aio_channel_type(), name)
    module = sys.modules.get(_OTEL_GRPC)
    if module is not None and hasattr(getattr(module, "intercept_channel", None), "__wrapped__"):
        unwrap(module, "intercept_channel")


def _order_otel_grpc(module: Any) -> None:
    """Wrap the other instrumentation's ``intercept_channel`` (once, while instrumented)."""
    try:
        current = getattr(module, "intercept_channel", None)
        if _patched and current is not None and not hasattr(current, "__wrapped__"):
            wrap_function_wrapper(module, "intercept_channel", _inside_ours)
    except Exception as exc:
        _count(exc)


def _inside_ours(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``intercept_channel(channel, *interceptors)`` of opentelemetry-instrumentation-grpc:
    given a channel of ours, its interceptors go on the channel inside ours."""
    channel = args[0] if args else None
    if not isinstance(channel, A2AChannel):
        return wrapped(*args, **kwargs)
    return A2AChannel(wrapped(channel._channel, *args[1:], **kwargs), channel._origin)
