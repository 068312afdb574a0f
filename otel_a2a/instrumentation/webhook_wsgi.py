"""Push deliveries to Flask applications, whichever WSGI server runs them, through Flask's
documented place for WSGI middleware: ``Flask.wsgi_app(environ, start_response)``, wrapped on
the class (an application made before ``instrument()`` is covered, and a middleware the
application stacks on ``app.wsgi_app`` still calls it).

A POST to a registered webhook path gets, as ``environ["wsgi.input"]``, a proxy of the
server's stream: every read is the stream's own, returned unchanged, and each piece read is
seen by ``webhook.Delivery``. Nothing is read that the application does not read; the body is
whole when ``Content-Length`` bytes were read, or, without one (a chunked body the server
terminates), at the end of the stream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from types import ModuleType
from typing import Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from wrapt import ObjectProxy, wrap_function_wrapper

from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.webhook import HEADERS, Delivery, observing, watched
from otel_a2a.protocol.push import TOKEN_HEADER

Environ = MutableMapping[str, Any]


def _cgi(header: str) -> str:
    """A request header's key in a WSGI environ."""
    key = header.upper().replace("-", "_")
    return key if key == "CONTENT_TYPE" else f"HTTP_{key}"


_TOKEN = _cgi(TOKEN_HEADER)
_READ = {_cgi(name): name for name in HEADERS}


class Input(ObjectProxy):  # type: ignore[type-arg]  # wrapt 1 has no ObjectProxy[...]
    """``wsgi.input`` as the application reads it: the stream's own reads (``read``,
    ``readline``, ``readlines``, iteration, and ``readinto`` when the stream has it), each
    piece seen by the delivery; everything else is the stream's."""

    def __init__(self, stream: Any, delivery: Delivery, length: int | None) -> None:
        super().__init__(stream)
        self._self_delivery = delivery
        self._self_left = length  # bytes still to come, when the body's length is known

    def read(self, *args: Any, **kwargs: Any) -> Any:
        data = self.__wrapped__.read(*args, **kwargs)
        self._self_got(data, args[0] if args else kwargs.get("size", -1), True)
        return data

    def readline(self, *args: Any, **kwargs: Any) -> Any:
        line = self.__wrapped__.readline(*args, **kwargs)
        self._self_got(line, args[0] if args else kwargs.get("size", -1), False)
        return line

    def readlines(self, *args: Any, **kwargs: Any) -> Any:
        lines = self.__wrapped__.readlines(*args, **kwargs)
        for line in lines:
            self._self_got(line, -1, False)
        hint = args[0] if args else kwargs.get("hint", -1)
        if hint is None or hint <= 0:  # every line: the stream is at its end
            self._self_got(b"", -1, True)
        return lines

    def __iter__(self) -> Iterator[Any]:
        return self._self_lines(iter(self.__wrapped__))

    def _self_lines(self, lines: Iterable[Any]) -> Iterator[Any]:
        for line in lines:
            self._self_got(line, -1, False)
            yield line
        self._self_got(b"", -1, True)

    @property
    def readinto(self) -> Callable[[Any], Any]:
        """The stream's ``readinto``, seen, when it has one (``hasattr`` answers as for the
        stream: werkzeug reads with it only then)."""
        return functools.partial(self._self_readinto, self.__wrapped__.readinto)

    def _self_readinto(self, readinto: Callable[[Any], Any], buffer: Any) -> Any:
        n = readinto(buffer)
        if n is not None:  # None: a non-blocking stream with nothing yet
            try:
                with memoryview(buffer) as view, view[:n] as piece:
                    self._self_got(piece, len(view), False)
            except Exception as exc:
                self._self_failed(exc)
        return n

    def _self_got(self, data: Any, size: Any, to_end: bool) -> None:
        """The application asked for ``size`` bytes and got ``data``; ``to_end``: a size
        below 0 (or None) asks for the rest of the stream."""
        try:
            if data is None:
                return
            eof = (to_end and (size is None or size < 0)) or (not data and size != 0)
            left = self._self_left
            if left is not None:
                left = self._self_left = left - len(data)
                whole = left <= 0
            else:
                whole = eof
            if eof and not whole:
                self._self_delivery.abandon()  # the client went before the body's end
            else:
                self._self_delivery.read(data, whole)
        except Exception as exc:
            self._self_failed(exc)

    def _self_failed(self, exc: Exception) -> None:
        self._self_delivery.abandon()
        rt = runtime.current()
        if rt is not None:
            rt.error(exc)


def _length(environ: Environ) -> int | None:
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
    return length if length >= 0 else None


def tee(rt: runtime.Runtime, environ: Any) -> bool:
    """Whether the request of ``environ`` is a delivery to a registered webhook not observed
    yet; if so its ``wsgi.input`` is now an :class:`Input` (the test every request to an
    instrumented application pays: a comparison, a path and a dict lookup)."""
    if type(environ) is not dict or environ.get("REQUEST_METHOD") != "POST":
        return False
    stream = environ.get("wsgi.input")
    # the path as the client sent it: a WSGI string is latin-1 of the UTF-8 bytes
    raw = f"{environ.get('SCRIPT_NAME', '')}{environ.get('PATH_INFO', '')}"
    path = watched(rt, "POST", raw.encode("latin-1", "replace").decode("utf-8", "replace"))
    if path is None or stream is None:
        return False
    token = environ.get(_TOKEN)
    headers = {name: str(environ[key]) for key, name in _READ.items() if key in environ}
    delivery = Delivery(
        rt, path, token.encode("latin-1", "replace") if type(token) is str else None, headers
    )
    environ["wsgi.input"] = Input(stream, delivery, _length(environ))
    return True


def _wsgi_app(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Flask.wsgi_app(environ, start_response)``: a POST to a registered webhook path is
    observed, anything else goes straight through."""
    rt = runtime.current()
    if rt is None or len(args) != 2 or kwargs:
        return wrapped(*args, **kwargs)
    try:
        observed = tee(rt, args[0]) if is_instrumentation_enabled() else False
    except Exception as exc:
        rt.error(exc)
        observed = False
    if not observed:
        return wrapped(*args, **kwargs)
    with observing():
        return wrapped(*args)


def patch(module: ModuleType) -> Callable[[], None]:
    """Observe push deliveries to Flask applications (``flask.app``)."""
    wrap_function_wrapper(module, "Flask.wsgi_app", _wsgi_app)
    return functools.partial(unwrap, module.Flask, "wsgi_app")
