"""Push deliveries the application's own webhook receives, as observations.

When the application registers a webhook for a task (``exchange.Exchange.before_send``
remembers it in ``Runtime.webhooks``), the agent POSTs each update of the task there. A
delivery that reaches this process at a registered path, for a task registered there, with
the registered ``X-A2A-Notification-Token``, is the agent's word on the task: an authoritative
observation at receive time, as a ``GetTask`` reply is. Any other is counted
(``otel_a2a.push.deliveries`` by ``otel_a2a.push.outcome``) and observes nothing.

Servers: Starlette applications (FastAPI's and a2a-sdk's too), whichever ASGI server runs
them, through the ASGI interface they expose (``Starlette.__call__``): the body is seen as the
application reads it, chunk by chunk, at most ``OTEL_A2A_MAX_BODY_BYTES`` of it held, and the
application gets every message unchanged. The token is kept only as a keyed digest; neither
it nor the body is recorded.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Awaitable, Callable, MutableMapping
from types import ModuleType
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from wrapt import wrap_function_wrapper

from otel_a2a import semconv as sc
from otel_a2a.detect.webhooks import Outcome
from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT
from otel_a2a.protocol.push import TOKEN_HEADER, delivery_facts, token_digest, webhook_path

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
_TOKEN = TOKEN_HEADER.encode()
_READ = frozenset({b"a2a-version", b"content-type"})
_MAX_REPORTS = 16  # of one delivery (a StreamResponse carries one task)
# set while a request is inside an observed application: a mounted sub-application (a
# Starlette inside a Starlette) sees the same request and must not observe it again
_OBSERVED: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_a2a_push", default=False)


def delivered(
    rt: runtime.Runtime,
    path: str,
    token: bytes | None,
    headers: dict[str, str],
    body: bytes,
    truncated: bool = False,
) -> None:
    """One delivery's whole body (or its first ``OTEL_A2A_MAX_BODY_BYTES`` when
    ``truncated``) arrived at webhook ``path`` with the token digest ``token``."""
    now = time.monotonic()
    facts = delivery_facts(headers, body, rt.settings.max_body_bytes, truncated)
    reports = facts.reports[:_MAX_REPORTS]
    if not reports:
        _count(rt, Outcome.UNRECOGNIZED)
        return
    current = trace.get_current_span()  # the server's span, when the application has one
    span = current if current.is_recording() else None
    for report in reports:
        verdict = rt.webhooks.deliver(path, report.task_id, token)
        _count(rt, verdict.outcome)
        if verdict.agent is not None:
            rt.observe(span, rt.peer_of(verdict.agent), (report,), sc.OP_PUSH, now)


def _count(rt: runtime.Runtime, outcome: Outcome) -> None:
    rt.metrics.push_deliveries.add(1, {sc.PUSH_OUTCOME: outcome.value})


class _Tee:
    """The application's ``receive``: each message handed over unchanged, the body's bytes
    held (bounded) until its last chunk, then judged as a delivery."""

    __slots__ = ("_body", "_done", "_headers", "_path", "_receive", "_rt", "_token", "_truncated")

    def __init__(self, rt: runtime.Runtime, receive: Receive, path: str, scope: Scope) -> None:
        self._rt = rt
        self._receive = receive
        self._path = path
        self._body = bytearray()
        self._done = False
        self._truncated = False
        token: bytes | None = None
        headers: dict[str, str] = {}
        for name, value in scope.get("headers") or ():
            name = bytes(name).lower()
            if name == _TOKEN:
                token = token_digest(bytes(value))
            elif name in _READ:
                headers[name.decode("ascii")] = bytes(value).decode("latin-1")
        self._token = token
        self._headers = headers

    async def __call__(self) -> Message:
        message = await self._receive()
        if not self._done:
            if not GUARD.enter():
                self._done = True
                GUARD.defer(functools.partial(self._rt.error, REENTRANT))
                return message
            try:
                self._take(message)
            except Exception as exc:
                self._done = True
                self._rt.error(exc)
            finally:
                GUARD.leave()
        return message

    def _take(self, message: Message) -> None:
        kind = message.get("type")
        if kind != "http.request":
            self._done = True  # a disconnect: no whole delivery to judge
            return
        chunk = message.get("body") or b""
        room = self._rt.settings.max_body_bytes - len(self._body)
        if len(chunk) > room:
            self._truncated = True
            chunk = chunk[: max(room, 0)]
        if chunk:
            self._body += chunk
        if not message.get("more_body", False):
            self._done = True
            body, self._body = bytes(self._body), bytearray()
            delivered(self._rt, self._path, self._token, self._headers, body, self._truncated)


def _watched(rt: runtime.Runtime, scope: Any) -> str | None:
    """The webhook path of a request to a registered webhook, else None (the test every
    request to an instrumented application pays: a type, a method and a dict lookup)."""
    if type(scope) is not dict or scope.get("type") != "http" or scope.get("method") != "POST":
        return None
    path = scope.get("path")
    if type(path) is not str:
        return None
    path = webhook_path(path)
    return path if rt.webhooks.expects(path) and not _OBSERVED.get() else None


async def _observed(
    wrapped: Callable[..., Awaitable[None]],
    rt: runtime.Runtime,
    path: str,
    scope: Scope,
    receive: Receive,
    send: Any,
) -> None:
    token = _OBSERVED.set(True)
    try:
        await wrapped(scope, _Tee(rt, receive, path, scope), send)
    finally:
        _OBSERVED.reset(token)


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
