"""Wrappers of ``Client.send`` and ``AsyncClient.send`` of the httpx API.

One code path serves each :class:`Library` of that API: httpx, and httpx2 (Pydantic's
continuation of httpx, the same API under its own module name and classes) when it is
installed (``libraries`` says which are wrapped, and when). Wrapping ``send`` (not the
transport) covers every client, ``MockTransport`` included, and puts our span above the HTTP
span of ``opentelemetry-instrumentation-httpx`` whichever was instrumented first. The response
stream is replaced by a tee that shows each chunk to the :class:`Exchange` as the application
reads it; nothing is read on the application's behalf.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from wrapt import wrap_function_wrapper

from otel_a2a.instrumentation import collection, runtime
from otel_a2a.instrumentation.exchange import NO_HEADERS, Exchange
from otel_a2a.instrumentation.providers import attach_processor, configure_from_environment
from otel_a2a.protocol import A2ARequest, classify_request
from otel_a2a.protocol.classify import CALLER_HEADERS

if TYPE_CHECKING:
    import httpx
    import httpx2

    Request = httpx.Request | httpx2.Request
    Response = httpx.Response | httpx2.Response
    Headers = httpx.Headers | httpx2.Headers
    SyncStream = httpx.SyncByteStream | httpx2.SyncByteStream
    AsyncStream = httpx.AsyncByteStream | httpx2.AsyncByteStream

_log = logging.getLogger("otel_a2a")
# of a request, only these are read: the caller's credentials only to tell per-caller cards
# apart (``card_variant`` keeps a keyed digest of them, never the values)
_REQUEST_HEADERS = frozenset(
    {b"a2a-version", b"content-type", *(name.encode() for name in CALLER_HEADERS)}
)
# of a response, only these headers are ever read (and only ETag/Cache-Control recorded)
_RESPONSE_HEADERS = frozenset({b"content-type", b"content-encoding", b"etag", b"cache-control"})


HeaderReader = Callable[[Any, frozenset[bytes]], dict[str, str]]


def _headers_raw(headers: Headers, wanted: frozenset[bytes]) -> dict[str, str]:
    """The few headers otel-a2a reads, in one pass over ``Headers.raw`` (each lookup by
    name would scan them all again); nothing else of the headers is ever kept."""
    found: dict[str, str] = {}
    for key, value in headers.raw:
        name = key.lower()
        if name in wanted:
            found[name.decode("ascii")] = value.decode("latin-1")
    return found


def _header_reader(cls: type[Any]) -> HeaderReader:
    """How to read the headers of the library whose ``Headers`` class is ``cls``: from the list
    it keeps of (raw name, lowercased name, value) where it is found to keep one (``raw``
    builds a new list, then every name is lowercased again: twice the cost, on every request);
    otherwise, and for any other class (a subclass may keep them otherwise), through ``raw``."""
    try:
        lowered = cls({"A2A-Version": "1.0"})._list == [(b"A2A-Version", b"a2a-version", b"1.0")]
    except Exception:  # another layout: the public path
        lowered = False
    if not lowered:
        return _headers_raw

    def listed(headers: Headers, wanted: frozenset[bytes]) -> dict[str, str]:
        if type(headers) is not cls:
            return _headers_raw(headers, wanted)
        found: dict[str, str] = {}
        for _, name, value in headers._list:
            if name in wanted:
                found[name.decode("ascii")] = value.decode("latin-1")
        return found

    return listed


def _request_body(lib: Library, request: Request) -> bytes | None:
    try:
        return request.content
    except lib.request_not_read:  # a streaming upload: never consumed on the caller's behalf
        return None


def _setup_due(rt: runtime.Runtime) -> bool:
    """Whether set-up is left for this A2A operation; while ``attach`` waits for a provider
    to exist, a cheap test on every request, no lock."""
    mode = rt.setup_pending
    return mode is not None and not (
        mode == "attach" and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    )


def _late_setup(rt: runtime.Runtime) -> None:
    """The set-up left for the first A2A operation. Concurrent first operations wait for it:
    one that went ahead would be recorded by the providers that are about to be replaced."""
    with rt.setup_lock:
        mode = rt.setup_pending
        if mode is None:
            return
        try:
            if mode == "configure":
                # until a provider exists (the application may set one later), keep trying
                rt.setup_pending = None if configure_from_environment() else "attach"
            elif attach_processor(trace.get_tracer_provider()):
                rt.setup_pending = None
        except Exception as exc:
            rt.setup_pending = None  # reported once, not retried on every request
            rt.error(exc)
            _log.warning(
                "otel-a2a: could not set up OpenTelemetry (%s: %s); A2A telemetry is not exported",
                type(exc).__name__,
                exc,
            )


def _late_setup_guarded(rt: runtime.Runtime) -> None:
    """:func:`_late_setup` as otel-a2a's work in this thread (see ``collection``)."""
    if collection.enter():
        try:
            _late_setup(rt)
        finally:
            collection.leave()


async def _late_setup_off_the_loop(rt: runtime.Runtime) -> None:
    """Configuring the SDK takes 50-350 ms (imports, resource detection, exporters): it runs
    in a worker thread so that the event loop goes on (asyncio or trio, through httpx's own
    anyio); this request waits for it, as a synchronous one does. Attaching the processor is
    cheap and stays inline. The hop has a limiter of its own: the default one may be held
    whole by the application's threads waiting on this very request."""
    if rt.setup_pending != "configure":
        _late_setup_guarded(rt)
        return
    from anyio import CapacityLimiter, to_thread

    await to_thread.run_sync(_late_setup_guarded, rt, limiter=CapacityLimiter(1))


def _begin(rt: runtime.Runtime, lib: Library, request: Request) -> Exchange | A2ARequest | None:
    """Recognise the request and open its exchange, in one stretch of otel-a2a's work. The
    exchange; the A2A request alone when set-up is due first (:func:`_open` follows it);
    ``None`` for anything else, and for a request sent inside otel-a2a's own work in this
    thread (a finaliser's, run by a collection there: see ``collection``), which goes
    through as if uninstrumented, counted. Never raises."""
    if not collection.enter():
        _reentrant(rt, lib, request)
        return None
    try:
        try:
            url = request.url
            path = url.path
            headers = lib.headers(request.headers, _REQUEST_HEADERS)
            a2a = classify_request(
                request.method,
                path,
                headers,
                _request_body(lib, request),
                # only read for an ``A2A-Version`` parameter when the header is absent (so
                # not taken from the URL otherwise), never recorded
                b"" if "a2a-version" in headers else url.query,
            )
        except Exception as exc:
            rt.error(exc)
            return None
        if a2a is None or _setup_due(rt):  # only A2A traffic decides about providers
            return a2a
        return _start(rt, url, path, a2a)
    finally:
        collection.leave()


def _reentrant(rt: runtime.Runtime, lib: Library, request: Request) -> None:
    """An A2A request sent inside otel-a2a's own work is counted, later: no metric may be
    recorded here."""
    try:
        url = request.url
        headers = lib.headers(request.headers, _REQUEST_HEADERS)
        if classify_request(request.method, url.path, headers, _request_body(lib, request)):
            collection.defer(functools.partial(rt.error, collection.REENTRANT))
    except Exception as exc:
        collection.defer(functools.partial(rt.error, type(exc).__name__))


def _open(rt: runtime.Runtime, request: Request, a2a: A2ARequest) -> Exchange | None:
    """The exchange of an A2A request recognised before the set-up. Never raises."""
    if not collection.enter():  # a finaliser run by the set-up sends it: see _begin
        collection.defer(functools.partial(rt.error, collection.REENTRANT))
        return None
    try:
        try:
            url = request.url
            path = url.path
        except Exception as exc:
            rt.error(exc)
            return None
        return _start(rt, url, path, a2a)
    finally:
        collection.leave()


def _start(rt: runtime.Runtime, url: Any, path: str, a2a: A2ARequest) -> Exchange | None:
    """The exchange, its implicit decisions judged. Never raises."""
    try:
        # netloc carries no credentials; query and fragment are dropped (never recorded)
        origin = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"
        exchange = Exchange(rt, a2a, origin + path, origin + a2a.base_url_path)
    except Exception as exc:
        rt.error(exc)
        return None
    try:
        exchange.before_send()
    except Exception as exc:
        rt.error(exc)
    return exchange


def _guarded(exchange: Exchange, work: Callable[..., None], *args: Any) -> None:
    """The exchange's ``work`` as the application drives it (reading, closing), as
    otel-a2a's work in this thread; reached inside that work, the exchange gives up."""
    if not collection.enter():
        exchange.give_up()
        return
    try:
        work(*args)
    finally:
        collection.leave()


def _abandon(exchange: Exchange) -> None:
    """A tee is collected: if its exchange is still open, the application dropped the response
    unread and unclosed. A finaliser must not raise (Python would print it)."""
    try:  # noqa: SIM105 - no contextlib lookup in a finaliser that may run at teardown
        exchange.abandon()
    except Exception:
        pass


class TeeStream:
    """The tee of a synchronous response stream; :func:`library` subclasses it with the
    library's own ``SyncByteStream``, which its responses demand."""

    def __init__(self, inner: SyncStream, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    def __iter__(self) -> Iterator[bytes]:
        exchange = self._exchange
        try:
            for chunk in self._inner:
                _guarded(exchange, exchange.feed, chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            _guarded(exchange, exchange.fail, exc)
            raise
        _guarded(exchange, exchange.complete)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            _guarded(self._exchange, self._exchange.close)

    def __getattr__(self, name: str) -> Any:
        """What the library keeps on its own stream reads through the tee: httpx2's
        ``Response.elapsed`` is the ``elapsed`` of the stream the client attached."""
        if name.startswith("_"):  # ours, read before ``__init__`` set them: not delegated
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __del__(self) -> None:
        _abandon(self._exchange)


class AsyncTeeStream:
    """The tee of an asynchronous response stream (see :class:`TeeStream`)."""

    def __init__(self, inner: AsyncStream, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self._exchange
        try:
            async for chunk in self._inner:
                _guarded(exchange, exchange.feed, chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            _guarded(exchange, exchange.fail, exc)
            raise
        _guarded(exchange, exchange.complete)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            _guarded(self._exchange, self._exchange.close)

    __getattr__ = TeeStream.__getattr__

    def __del__(self) -> None:
        _abandon(self._exchange)


@dataclass(frozen=True, slots=True)
class Library:
    """A library of the httpx API as the wrappers meet it. httpx and httpx2 share the API, not
    the classes: an httpx2 request is no ``httpx.Request``, and an httpx2 response reads only a
    stream of httpx2's stream classes."""

    module: ModuleType
    tee: type[TeeStream]
    async_tee: type[AsyncTeeStream]
    request: type[Any]  # the module's, as fields: read on every request
    request_not_read: type[Exception]
    headers: HeaderReader

    def wrap(self) -> None:
        wrap_function_wrapper(self.module.Client, "send", functools.partial(send, self))
        wrap_function_wrapper(self.module.AsyncClient, "send", functools.partial(async_send, self))

    def unwrap(self) -> None:
        unwrap(self.module.Client, "send")
        unwrap(self.module.AsyncClient, "send")


def _after(lib: Library, exchange: Exchange, response: Response, stream: bool) -> None:
    """Hand the response to the exchange; a failure here is counted, never raised."""
    if not collection.enter():  # the request began outside otel-a2a's work: only a host
        exchange.give_up()  # that resumes it from inside (a finaliser) gets here
        return
    try:
        # A response built from bytes (MockTransport ``content=``/``json=``) is read at
        # creation: streaming it never touches the stream again, so take the body it holds.
        raw = stream and not response.is_stream_consumed
        headers: Mapping[str, str]
        if exchange.reads_headers(raw):
            headers = lib.headers(response.headers, _RESPONSE_HEADERS)
        else:  # none of them is read: not even looked at
            headers = NO_HEADERS
        exchange.on_response(response.status_code, headers, raw)
        if not raw:
            exchange.complete(response.content)
            return
        inner = response.stream
        module = lib.module
        if isinstance(inner, module.AsyncByteStream):
            response.stream = lib.async_tee(inner, exchange)  # type: ignore[assignment]
        elif isinstance(inner, module.SyncByteStream):
            response.stream = lib.tee(inner, exchange)  # type: ignore[assignment]
        else:
            exchange.rt.error("unknown_stream_type")
            exchange.close()
    except Exception as exc:
        exchange.rt.error(exc)
        exchange.close()
    finally:
        collection.leave()


def send(
    lib: Library,
    wrapped: Callable[..., Response],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Response:
    request = args[0] if args else kwargs.get("request")
    rt = runtime.current()
    if rt is None or not isinstance(request, lib.request) or not is_instrumentation_enabled():
        return wrapped(*args, **kwargs)
    exchange = _begin(rt, lib, request)
    if exchange is not None and not isinstance(exchange, Exchange):
        _late_setup_guarded(rt)
        exchange = _open(rt, request, exchange)
    if exchange is None:
        return wrapped(*args, **kwargs)
    token = context.attach(trace.set_span_in_context(exchange.span))
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        _guarded(exchange, exchange.fail, exc)
        raise
    finally:
        context.detach(token)
    _after(lib, exchange, response, bool(kwargs.get("stream")))
    return response


async def async_send(
    lib: Library,
    wrapped: Callable[..., Awaitable[Response]],
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Response:
    request = args[0] if args else kwargs.get("request")
    rt = runtime.current()
    if rt is None or not isinstance(request, lib.request) or not is_instrumentation_enabled():
        return await wrapped(*args, **kwargs)
    exchange = _begin(rt, lib, request)
    if exchange is not None and not isinstance(exchange, Exchange):
        await _late_setup_off_the_loop(rt)
        exchange = _open(rt, request, exchange)
    if exchange is None:
        return await wrapped(*args, **kwargs)
    token = context.attach(trace.set_span_in_context(exchange.span))
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _guarded(exchange, exchange.fail, exc)
        raise
    finally:
        context.detach(token)
    _after(lib, exchange, response, bool(kwargs.get("stream")))
    return response


def library(module: ModuleType) -> Library:
    """``module`` (httpx or httpx2) as the wrappers meet it, with tees of its own stream
    classes. Built when the module is wrapped: nothing here imports either library."""

    class Tee(TeeStream, module.SyncByteStream):  # type: ignore[name-defined,misc]
        pass

    class AsyncTee(AsyncTeeStream, module.AsyncByteStream):  # type: ignore[name-defined,misc]
        pass

    return Library(
        module, Tee, AsyncTee, module.Request, module.RequestNotRead, _header_reader(module.Headers)
    )
