"""Wrappers of ``httpx.Client.send`` and ``httpx.AsyncClient.send``.

Wrapping ``send`` (not the transport) covers every client, ``MockTransport`` included, and puts
our span above the HTTP span of ``opentelemetry-instrumentation-httpx`` whichever was
instrumented first. The response stream is replaced by a tee that shows each chunk to the
:class:`Exchange` as the application reads it; nothing is read on the application's behalf.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.exchange import Exchange
from otel_a2a.instrumentation.providers import attach_processor, configure_from_environment
from otel_a2a.protocol import classify_request


def _request_body(request: httpx.Request) -> bytes | None:
    try:
        return request.content
    except httpx.RequestNotRead:  # a streaming upload: never consumed on the caller's behalf
        return None


def _late_setup(rt: runtime.Runtime) -> None:
    mode, rt.setup_pending = rt.setup_pending, None
    try:
        if mode == "configure":
            configure_from_environment()
        elif not attach_processor(trace.get_tracer_provider()):
            rt.setup_pending = "attach"
    except Exception as exc:
        rt.error(exc)


def begin(request: httpx.Request) -> Exchange | None:
    """Start an exchange for an A2A request; ``None`` for anything else. Never raises."""
    rt = runtime.current()
    if rt is None or not is_instrumentation_enabled():
        return None
    if rt.setup_pending is not None:
        _late_setup(rt)
    try:
        url = request.url
        a2a = classify_request(request.method, url.path, request.headers, _request_body(request))
        if a2a is None:
            return None
        # netloc carries no credentials; query and fragment are dropped (never recorded)
        clean = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{url.path}"
        exchange = Exchange(rt, a2a, clean)
    except Exception as exc:
        rt.error(exc)
        return None
    try:
        exchange.before_send()
    except Exception as exc:
        rt.error(exc)
    return exchange


def _guard(exchange: Exchange, step: Callable[[], None]) -> None:
    try:
        step()
    except Exception as exc:
        exchange.rt.error(exc)
        exchange.close()


class _TeeStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    def __iter__(self) -> Iterator[bytes]:
        exchange = self._exchange
        try:
            for chunk in self._inner:
                exchange.feed(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            exchange.fail(exc)
            raise
        exchange.complete()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._exchange.close()


class _AsyncTeeStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        try:
            async for chunk in self._inner:
                exchange.feed(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            exchange.fail(exc)
            raise
        exchange.complete()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._exchange.close()


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[httpx.Request | None, bool]:
    request = args[0] if args else kwargs.get("request")
    return (request if isinstance(request, httpx.Request) else None), bool(kwargs.get("stream"))


def _after(exchange: Exchange, response: httpx.Response, stream: bool) -> None:
    # A response built from bytes (MockTransport ``content=``/``json=``) is read at creation:
    # streaming it never touches the stream again, so observe the body it already holds.
    preread = stream and response.is_stream_consumed
    exchange.on_response(response.status_code, response.headers, raw=stream and not preread)
    if preread:
        exchange.complete(response.content)
    elif stream:
        inner = response.stream
        if isinstance(inner, httpx.AsyncByteStream):
            response.stream = _AsyncTeeStream(inner, exchange)
        elif isinstance(inner, httpx.SyncByteStream):
            response.stream = _TeeStream(inner, exchange)
        else:
            exchange.rt.error("unknown_stream_type")
            exchange.close()
    else:
        exchange.complete(response.content)


def send(
    wrapped: Callable[..., httpx.Response],
    instance: httpx.Client,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> httpx.Response:
    request, stream = _split(args, kwargs)
    exchange = begin(request) if request is not None else None
    if exchange is None:
        return wrapped(*args, **kwargs)
    try:
        with trace.use_span(exchange.span, record_exception=False, set_status_on_exception=False):
            response = wrapped(*args, **kwargs)
    except BaseException as exc:
        exchange.fail(exc)
        raise
    _guard(exchange, lambda: _after(exchange, response, stream))
    return response


async def async_send(
    wrapped: Callable[..., Awaitable[httpx.Response]],
    instance: httpx.AsyncClient,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> httpx.Response:
    request, stream = _split(args, kwargs)
    exchange = begin(request) if request is not None else None
    if exchange is None:
        return await wrapped(*args, **kwargs)
    try:
        with trace.use_span(exchange.span, record_exception=False, set_status_on_exception=False):
            response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        exchange.fail(exc)
        raise
    _guard(exchange, lambda: _after(exchange, response, stream))
    return response
