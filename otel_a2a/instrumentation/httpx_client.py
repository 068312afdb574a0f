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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from opentelemetry import context
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from wrapt import wrap_function_wrapper

from otel_a2a.instrumentation import late_setup, runtime
from otel_a2a.instrumentation.http_exchange import NO_HEADERS, HttpExchange
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT
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

# of a request, only these are read: the caller's credentials only to tell per-caller cards
# apart (``card_variant`` keeps a keyed digest of them, never the values)
REQUEST_HEADERS = frozenset(
    {b"a2a-version", b"content-type", *(name.encode() for name in CALLER_HEADERS)}
)
# of a response, only these headers are ever read (and only ETag/Cache-Control recorded)
_RESPONSE_HEADERS = frozenset({b"content-type", b"content-encoding", b"etag", b"cache-control"})


def read_headers(headers: Headers, wanted: frozenset[bytes]) -> dict[str, str]:
    """The few headers otel-a2a reads, in one pass over the public ``Headers.raw`` (each
    lookup by name would scan them all again); nothing else of the headers is ever kept."""
    found: dict[str, str] = {}
    for key, value in headers.raw:
        name = key.lower()
        if name in wanted:
            found[name.decode("ascii")] = value.decode("latin-1")
    return found


def _request_body(lib: Library, request: Request) -> bytes | None:
    try:
        return request.content
    except lib.request_not_read:  # a streaming upload: never consumed on the caller's behalf
        return None


def _begin(rt: runtime.Runtime, lib: Library, request: Request) -> HttpExchange | A2ARequest | None:
    """Recognise the request and open its exchange, in one stretch of otel-a2a's work. The
    exchange; the A2A request alone when set-up is due first (:func:`_open` follows it);
    ``None`` for anything else, and for a request sent inside otel-a2a's own work in this
    thread (a finaliser's, run by a collection there: see ``reentry``), which goes
    through as if uninstrumented, counted. Never raises."""
    if not GUARD.enter():
        _reentrant(rt, lib, request)
        return None
    try:
        try:
            url = request.url
            path = url.path
            headers = read_headers(request.headers, REQUEST_HEADERS)
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
        if a2a is None or late_setup.due(rt):  # only A2A traffic decides about providers
            return a2a
        return _start(rt, url, path, a2a)
    finally:
        GUARD.leave()


def _reentrant(rt: runtime.Runtime, lib: Library, request: Request) -> None:
    """An A2A request sent inside otel-a2a's own work is counted, later: no metric may be
    recorded here."""
    try:
        url = request.url
        headers = read_headers(request.headers, REQUEST_HEADERS)
        if classify_request(request.method, url.path, headers, _request_body(lib, request)):
            GUARD.defer(functools.partial(rt.error, REENTRANT))
    except Exception as exc:
        GUARD.defer(functools.partial(rt.error, type(exc).__name__))


def _open(rt: runtime.Runtime, request: Request, a2a: A2ARequest) -> HttpExchange | None:
    """The exchange of an A2A request recognised before the set-up. Never raises."""
    if not GUARD.enter():  # a finaliser run by the set-up sends it: see _begin
        GUARD.defer(functools.partial(rt.error, REENTRANT))
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
        GUARD.leave()


def _start(rt: runtime.Runtime, url: Any, path: str, a2a: A2ARequest) -> HttpExchange | None:
    """The exchange, its implicit decisions judged. Never raises."""
    try:
        # netloc carries no credentials; query and fragment are dropped (never recorded)
        origin = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"
        exchange = HttpExchange(rt, a2a, origin + path, origin + a2a.base_url_path)
    except Exception as exc:
        rt.error(exc)
        return None
    try:
        exchange.before_send()
    except Exception as exc:
        rt.error(exc)
    return exchange


def _guarded(exchange: HttpExchange, work: Callable[..., None], *args: Any) -> None:
    """The exchange's ``work`` as the application drives it (reading, closing), as
    otel-a2a's work in this thread; reached inside that work, the exchange gives up."""
    if not GUARD.enter():
        exchange.give_up()
        return
    try:
        work(*args)
    finally:
        GUARD.leave()


def _abandon(exchange: HttpExchange) -> None:
    """A tee is collected: if its exchange is still open, the application dropped the response
    unread and unclosed. A finaliser must not raise (Python would print it)."""
    try:  # noqa: SIM105 - no contextlib lookup in a finaliser that may run at teardown
        exchange.abandon()
    except Exception:
        pass


class TeeStream:
    """The tee of a synchronous response stream; :func:`library` subclasses it with the
    library's own ``SyncByteStream``, which its responses demand."""

    def __init__(self, inner: SyncStream, exchange: HttpExchange) -> None:
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

    def __init__(self, inner: AsyncStream, exchange: HttpExchange) -> None:
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

    def wrap(self) -> None:
        wrap_function_wrapper(self.module.Client, "send", functools.partial(send, self))
        wrap_function_wrapper(self.module.AsyncClient, "send", functools.partial(async_send, self))

    def unwrap(self) -> None:
        unwrap(self.module.Client, "send")
        unwrap(self.module.AsyncClient, "send")


def _after(lib: Library, exchange: HttpExchange, response: Response, stream: bool) -> None:
    """Hand the response to the exchange; a failure here is counted, never raised."""
    if not GUARD.enter():  # the request began outside otel-a2a's work: only a host
        exchange.give_up()  # that resumes it from inside (a finaliser) gets here
        return
    try:
        # A response built from bytes (MockTransport ``content=``/``json=``) is read at
        # creation: streaming it never touches the stream again, so take the body it holds.
        raw = stream and not response.is_stream_consumed
        headers: Mapping[str, str]
        if exchange.reads_headers(raw):
            headers = read_headers(response.headers, _RESPONSE_HEADERS)
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
        GUARD.leave()


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
    if exchange is not None and not isinstance(exchange, HttpExchange):
        late_setup.run(rt)
        exchange = _open(rt, request, exchange)
    if exchange is None:
        return wrapped(*args, **kwargs)
    token = context.attach(exchange.context)
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
    if exchange is not None and not isinstance(exchange, HttpExchange):
        await late_setup.run_async(rt)
        exchange = _open(rt, request, exchange)
    if exchange is None:
        return await wrapped(*args, **kwargs)
    token = context.attach(exchange.context)
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

    return Library(module, Tee, AsyncTee, module.Request, module.RequestNotRead)
