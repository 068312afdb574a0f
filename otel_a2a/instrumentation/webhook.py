"""Push deliveries the application's own webhook receives, as observations.

When the application registers a webhook for a task (``exchange.Exchange.before_send``
remembers it in ``Runtime.webhooks``), the agent POSTs each update of the task there. A
delivery that reaches this process at a registered path, for a task registered there, with
the registered ``X-A2A-Notification-Token``, is the agent's word on the task: an authoritative
observation at receive time, as a ``GetTask`` reply is. Any other is counted
(``otel_a2a.push.deliveries`` by ``otel_a2a.push.outcome``) and observes nothing.

What every server shares is here: which requests are watched (:func:`watched`), the body
seen as the application reads it, at most ``OTEL_A2A_MAX_BODY_BYTES`` of it held
(:class:`Delivery`), and the judgement of a whole one (:func:`delivered`). The servers hand
the application its own bytes unchanged: ASGI through ``receive`` (``webhook_asgi``), WSGI
through ``wsgi.input`` (``webhook_wsgi``). The token is kept only as a keyed digest; neither
it nor the body is recorded.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace

from otel_a2a import semconv as sc
from otel_a2a.detect.webhooks import Outcome
from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.reentry import GUARD, REENTRANT
from otel_a2a.protocol.push import delivery_facts, token_digest, webhook_path

# the request headers a delivery is read with, beside the token (lower case)
HEADERS = ("a2a-version", "content-type")
_MAX_REPORTS = 16  # of one delivery (a StreamResponse carries one task)
# set while a request is inside an observed application: an application inside another (a
# mounted Starlette, a WSGI application an ASGI one runs) sees the same request and must not
# observe it again
_OBSERVED: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_a2a_push", default=False)


def watched(rt: runtime.Runtime, method: object, path: object) -> str | None:
    """The webhook path of a request to a registered webhook not observed yet, else None
    (the test every request to an instrumented application pays: a comparison and a dict
    lookup)."""
    if method != "POST" or type(path) is not str:
        return None
    path = webhook_path(path)
    return path if rt.webhooks.expects(path) and not _OBSERVED.get() else None


@contextmanager
def observing() -> Iterator[None]:
    """The request is inside the application that observes it."""
    token = _OBSERVED.set(True)
    try:
        yield
    finally:
        _OBSERVED.reset(token)


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


class Delivery:
    """One delivery's body as the application reads it, piece by piece: held (bounded) until
    its last piece, then judged. Never raises."""

    __slots__ = ("_body", "_done", "_headers", "_path", "_rt", "_token", "_truncated")

    def __init__(
        self, rt: runtime.Runtime, path: str, token: bytes | None, headers: dict[str, str]
    ) -> None:
        """``token``: the raw ``X-A2A-Notification-Token`` (only its digest is kept);
        ``headers``: those of :data:`HEADERS` the request has."""
        self._rt = rt
        self._path = path
        self._token = token_digest(token)
        self._headers = headers
        self._body = bytearray()
        self._done = False
        self._truncated = False

    def read(self, chunk: bytes | bytearray | memoryview, last: bool) -> None:
        """The application read ``chunk``; ``last``: the body ends with it."""
        if self._done:
            return
        if not GUARD.enter():
            self._done = True
            GUARD.defer(functools.partial(self._rt.error, REENTRANT))
            return
        try:
            self._take(chunk, last)
        except Exception as exc:
            self._done = True
            self._rt.error(exc)
        finally:
            GUARD.leave()

    def abandon(self) -> None:
        """The body will not be whole (a disconnect): nothing to judge."""
        self._done = True
        self._body.clear()

    def _take(self, chunk: bytes | bytearray | memoryview, last: bool) -> None:
        room = self._rt.settings.max_body_bytes - len(self._body)
        if len(chunk) > room:
            self._truncated = True
            chunk = chunk[: max(room, 0)]
        if chunk:
            self._body += chunk
        if last:
            self._done = True
            body, self._body = bytes(self._body), bytearray()
            delivered(self._rt, self._path, self._token, self._headers, body, self._truncated)
