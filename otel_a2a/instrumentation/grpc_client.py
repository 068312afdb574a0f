"""grpcio clients: A2A over gRPC observed like A2A over HTTP.

``A2AInstrumentor`` wraps ``grpc.insecure_channel``/``secure_channel`` and their ``grpc.aio``
twins, as opentelemetry-instrumentation-grpc does, and gives every channel made while
instrumented otel-a2a's interceptors through grpcio's public API: a sync channel comes back
from ``grpc.intercept_channel``, an aio channel is made with them first in its
``interceptors=``. Each interceptor knows the channel's target (the agent's ``host:port``,
which a card's gRPC interface URL names). A channel made before ``instrument()`` is observed
through :func:`instrument_channel` (sync) or made with :func:`aio_interceptors` (aio). Only
methods of the A2A service are observed; any other method goes straight to the next
interceptor after one prefix test.

The application's call objects are never replaced by ours: a unary call and its outcome go
back as grpc made them (observed through a done callback, or by awaiting the same call), a
sync stream is the call behind a transparent proxy, a stream's messages pass through
unchanged as the application reads them, and every exception it gets is the one grpc raised.
grpc is optional: without it nothing here is imported.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent import futures
from typing import Any, NamedTuple

import grpc
import grpc.aio
from opentelemetry import context
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from wrapt import ObjectProxy, wrap_function_wrapper

from otel_a2a.instrumentation import late_setup, runtime
from otel_a2a.instrumentation.grpc_exchange import GrpcExchange
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT
from otel_a2a.protocol import grpc as wire

_log = logging.getLogger("otel_a2a")
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
    if not GUARD.enter():
        GUARD.defer(functools.partial(rt.error, REENTRANT))
        return None
    try:
        if isinstance(method, bytes):
            method = method.decode("ascii", "replace")
        a2a = wire.describe_call(method, metadata, request)
        if a2a is None:
            return None
        exchange = GrpcExchange(rt, a2a, origin, method, streaming)
    except Exception as exc:
        rt.error(exc)
        return None
    finally:
        GUARD.leave()
    _guarded(exchange, exchange.before_send)
    return exchange


def _guarded(exchange: GrpcExchange, work: Callable[..., None], *args: Any, **kw: Any) -> None:
    """``work`` as otel-a2a's work in this thread; met inside that work (a finaliser), it
    runs at the next drain."""
    if not GUARD.enter():
        GUARD.defer(functools.partial(work, *args, **kw))
        return
    try:
        work(*args, **kw)
    except Exception as exc:
        exchange.rt.error(exc)
    finally:
        GUARD.leave()


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
    _guarded(exchange, exchange.end, code, details, trailing, failure)


def _is_cancellation(failure: BaseException) -> bool:
    return isinstance(failure, asyncio.CancelledError | futures.CancelledError)


# -- grpc.aio --------------------------------------------------------------------------------


async def _aio_call(
    origin: str, continuation: Any, details: Any, request: Any, streaming: bool
) -> tuple[GrpcExchange | None, Any]:
    """(exchange, call): the call made under the exchange's span, or (None, call) for a call
    that is not observed (not an A2A method, not instrumented, or not recognised)."""
    rt = _current() if _a2a_method(details.method) else None
    if rt is not None and late_setup.due(rt):
        await late_setup.run_async(rt)
    exchange = None
    if rt is not None:
        metadata = details.metadata
        if isinstance(metadata, Iterator):  # grpc.aio passes a generator on as given
            metadata, theirs = _shared(metadata)
            details = details._replace(metadata=theirs)  # grpc.aio's details: a namedtuple
        exchange = _open(rt, origin, details.method, metadata, request, streaming)
    if exchange is None:
        return None, await continuation(details, request)
    token = context.attach(exchange.context)
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
            _guarded(exchange, exchange.end, _CANCELLED)
    except Exception as exc:
        exchange.rt.error(exc)


async def _aio_messages(exchange: GrpcExchange, call: Any) -> AsyncIterator[Any]:
    """The stream's messages as the application reads them, each observed on its way."""
    try:
        async for message in call:
            _guarded(exchange, exchange.on_message, message)
            yield message
    except GeneratorExit:  # the reader stopped (closed or collected): no status to read
        _guarded(exchange, exchange.end)
        raise
    except BaseException as exc:
        _end_with(exchange, exc)
        raise
    _guarded(exchange, exchange.end, _OK)


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


class _CallDetails(NamedTuple):
    """A sync call's details with the metadata read once (``_shared``): grpc reads any
    object with these fields (opentelemetry-instrumentation-grpc makes its own alike)."""

    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


grpc.ClientCallDetails.register(_CallDetails)


def _sync_open(
    origin: str, details: Any, request: Any, streaming: bool
) -> tuple[GrpcExchange | None, Any]:
    """(exchange or None, the call details as they must go on to grpc)."""
    rt = _current() if _a2a_method(details.method) else None
    if rt is None:
        return None, details
    if late_setup.due(rt):
        late_setup.run(rt)
    ours, theirs = _shared(details.metadata)
    if theirs is not details.metadata:
        details = _CallDetails(
            details.method,
            details.timeout,
            theirs,
            getattr(details, "credentials", None),
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )
    return _open(rt, origin, details.method, ours, request, streaming), details


def _under_span(exchange: GrpcExchange, call: Callable[[], Any]) -> Any:
    """``call()`` with the exchange's span current (an inner instrumentation's span is its
    child); what it raises ends the exchange, then goes on to the application."""
    token = context.attach(exchange.context)
    try:
        return call()
    except BaseException as exc:
        _end_with(exchange, exc)
        raise
    finally:
        context.detach(token)


class SyncInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """otel-a2a's interceptor of a sync channel (``grpc.intercept_channel``)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        exchange, details = _sync_open(self.origin, client_call_details, request, False)
        if exchange is None:
            return continuation(details, request)
        # a blocking call's outcome is done: the callback runs now, in this thread
        outcome = _under_span(exchange, lambda: continuation(details, request))
        try:
            outcome.add_done_callback(functools.partial(_sync_unary_done, exchange))
        except Exception as exc:
            exchange.rt.error(exc)
            _guarded(exchange, exchange.end)
        return outcome

    def intercept_unary_stream(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        exchange, details = _sync_open(self.origin, client_call_details, request, True)
        if exchange is None:
            return continuation(details, request)
        call = _under_span(exchange, lambda: continuation(details, request))
        if not hasattr(call, "__next__"):  # a failed start: grpc hands its error back
            if isinstance(call, BaseException):
                _end_with(exchange, call)
            else:
                _guarded(exchange, exchange.end)
            return call
        # what an inner instrumentation returns may be a bare iterator (opentelemetry-
        # instrumentation-grpc's generator): then its end is seen by reading only
        add_done_callback = getattr(call, "add_done_callback", None)
        if add_done_callback is not None:
            try:
                add_done_callback(functools.partial(_sync_stream_done, exchange))
            except Exception as exc:
                exchange.rt.error(exc)
        return SyncStream(call, exchange)


def _sync_unary_done(exchange: GrpcExchange, future: Any) -> None:
    """The unary outcome, in the calling thread (blocking call) or grpc's (``future()``)."""
    try:
        if future.cancelled():
            _guarded(exchange, exchange.end, _CANCELLED)
            return
        failure = future.exception()
        if failure is not None:
            _end_with(exchange, failure)
            return
        _guarded(exchange, exchange.reply, future.result(), _OK)
    except Exception as exc:
        exchange.rt.error(exc)
        _guarded(exchange, exchange.end)


def _sync_stream_done(exchange: GrpcExchange, call: Any) -> None:
    try:
        if call.cancelled():
            _guarded(exchange, exchange.end, _CANCELLED)
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
        token = context.attach(exchange.context)
        try:
            message = next(self.__wrapped__)
        except StopIteration:
            _guarded(exchange, exchange.end, _OK)
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
            GUARD.defer(self._self_exchange.end)
        except Exception:
            pass


# -- channels --------------------------------------------------------------------------------


def aio_interceptors(target: str) -> list[grpc.aio.ClientInterceptor]:
    """otel-a2a's interceptors of a ``grpc.aio`` channel to ``target`` (``host:port``), to
    pass first in its ``interceptors=`` (channels made while instrumented have them)."""
    origin = wire.channel_origin(target)
    return [AioUnaryUnary(origin), AioUnaryStream(origin)]


def instrument_channel(channel: Any, target: str) -> Any:
    """A sync channel created before ``instrument()`` (or by a factory captured before it),
    with otel-a2a's interceptor (use the returned one); ``target`` is the address it was
    created with (``host:port``). grpcio has no public way to add interceptors to an aio
    channel once made: one is returned as it is, with one warning (make it with
    :func:`aio_interceptors` instead)."""
    if isinstance(channel, grpc.aio.Channel):
        rt = runtime.current()
        if rt is not None:
            rt.error("aio_channel_not_instrumentable")
            if "aio_channel" not in rt.warned:
                rt.warned.add("aio_channel")
                _log.warning(
                    "otel-a2a: a grpc.aio channel cannot get interceptors once made; create it "
                    "with interceptors=otel_a2a.grpc_aio_interceptors(target)"
                )
        return channel
    return grpc.intercept_channel(channel, SyncInterceptor(wire.channel_origin(target)))


def _target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    target = args[0] if args else kwargs.get("target")
    return target if isinstance(target, str) else ""


def _sync_channel(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    channel = wrapped(*args, **kwargs)
    if runtime.current() is None:  # a wrapper another instrumentation restored after ours
        return channel
    try:
        origin = wire.channel_origin(_target(args, kwargs))
        return grpc.intercept_channel(channel, SyncInterceptor(origin))
    except Exception as exc:
        _count(exc)
        return channel


# where each aio factory takes ``interceptors`` when given by position
_AIO_INTERCEPTORS_AT = {"insecure_channel": 3, "secure_channel": 4}


def _aio_channel(at: int) -> Callable[..., Any]:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            given = args[at] if len(args) > at else kwargs.get("interceptors")
            # not when not instrumented (a wrapper another instrumentation restored after
            # ours), nor twice (ours wrapped twice, through another instrumentation's)
            if runtime.current() is not None and not any(
                isinstance(i, AioUnaryUnary) for i in given or ()
            ):
                # first: the outermost interceptor, so our span is the parent of any other
                # instrumentation's given to this factory
                ours = [*aio_interceptors(_target(args, kwargs)), *(given or ())]
                if len(args) > at:
                    args = (*args[:at], ours, *args[at + 1 :])
                else:
                    kwargs = {**kwargs, "interceptors": ours}
        except Exception as exc:
            _count(exc)
        return wrapped(*args, **kwargs)

    return wrapper


def _count(exc: BaseException) -> None:
    rt = runtime.current()
    if rt is not None:
        rt.error(exc)


def patch() -> Callable[[], None]:
    """Wrap the channel factories; returns what unwraps them."""
    for name, at in _AIO_INTERCEPTORS_AT.items():
        wrap_function_wrapper(grpc, name, _sync_channel)
        wrap_function_wrapper(grpc.aio, name, _aio_channel(at))
    return unpatch


def unpatch() -> None:
    for name in _AIO_INTERCEPTORS_AT:
        unwrap(grpc, name)
        unwrap(grpc.aio, name)
