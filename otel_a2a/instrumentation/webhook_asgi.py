"""Push deliveries to Starlette applications (FastAPI's and a2a-sdk's too), whichever ASGI
server runs them, through the ASGI interface they expose (``Starlette.__call__``).

A POST to a registered webhook path is read as the application reads it: its ``receive``
hands over every message unchanged while ``webhook.Delivery`` sees each body chunk.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from types import ModuleType
from typing import Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from wrapt import wrap_function_wrapper

from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.webhook import HEADERS, Delivery, observing, watched
from otel_a2a.protocol.push import TOKEN_HEADER

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
_TOKEN = TOKEN_HEADER.encode()
_READ = frozenset(name.encode() for name in HEADERS)


class _Tee:
    """The application's ``receive``: each message handed over unchanged, its body seen by
    the delivery."""

    __slots__ = ("_delivery", "_receive")

    def __init__(self, rt: runtime.Runtime, receive: Receive, path: str, scope: Scope) -> None:
        self._receive = receive
        token: bytes | None = None
        headers: dict[str, str] = {}
        for name, value in scope.get("headers") or ():
            name = bytes(name).lower()
            if name == _TOKEN:
                token = bytes(value)
            elif name in _READ:
                headers[name.decode("ascii")] = bytes(value).decode("latin-1")
        self._delivery = Delivery(rt, path, token, headers)

    async def __call__(self) -> Message:
        message = await self._receive()
        if message.get("type") == "http.request":
            self._delivery.read(message.get("body") or b"", not message.get("more_body", False))
        else:
            self._delivery.abandon()  # a disconnect: no whole delivery to judge
        return message


def _watched(rt: runtime.Runtime, scope: Any) -> str | None:
    if type(scope) is not dict or scope.get("type") != "http":
        return None
    return watched(rt, scope.get("method"), scope.get("path"))


async def _observed(
    wrapped: Callable[..., Awaitable[None]],
    rt: runtime.Runtime,
    path: str,
    scope: Scope,
    receive: Receive,
    send: Any,
) -> None:
    with observing():
        try:
            tee: Receive = _Tee(rt, receive, path, scope)
        except Exception as exc:
            rt.error(exc)
            tee = receive
        await wrapped(scope, tee, send)


def _asgi_call(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Starlette.__call__(scope, receive, send)``: a POST to a registered webhook path is
    observed, anything else goes straight through."""
    rt = runtime.current()
    if rt is None or len(args) != 3 or kwargs:
        return wrapped(*args, **kwargs)
    try:
        path = _watched(rt, args[0]) if is_instrumentation_enabled() else None
    except Exception as exc:
        rt.error(exc)
        path = None
    if path is None:
        return wrapped(*args, **kwargs)
    scope, receive, send = args
    return _observed(wrapped, rt, path, scope, receive, send)


def patch(module: ModuleType) -> Callable[[], None]:
    """Observe push deliveries to Starlette applications (``starlette.applications``)."""
    wrap_function_wrapper(module, "Starlette.__call__", _asgi_call)
    return functools.partial(unwrap, module.Starlette, "__call__")
