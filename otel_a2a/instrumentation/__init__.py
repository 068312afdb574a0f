"""OpenTelemetry instrumentation of A2A clients that detects silent task-state divergence.

Usage
-----
Zero code: ``pip install otel-a2a`` and start the service with ``OTEL_A2A_ENABLED=true`` (plus
the standard ``OTEL_*`` exporter variables). Under ``opentelemetry-instrument`` the entry point
``a2a`` is picked up like any other instrumentation.

In code::

    from otel_a2a import A2AInstrumentor, liveness_decision

    A2AInstrumentor().instrument()   # httpx (and httpx2) clients; grpcio channels made from now

    async def follow_up(client, task_id):
        async with liveness_decision(task_id):   # judged before the block runs
            ...

    A2AInstrumentor().uninstrument()

What it does
------------
Each A2A operation sent through httpx (or httpx2, Pydantic's continuation of httpx, when it is
installed) or a grpcio channel (``instrument_grpc_channel`` for a channel made before
``instrument()``) gets a ``CLIENT`` span named ``{a2a.method.name}`` that lives until the
response body or stream is consumed or closed. Response bytes are observed as the application
reads them (at most ``OTEL_A2A_MAX_BODY_BYTES`` of one body, SSE parsed incrementally); gRPC
replies and stream messages are read by field access. Task states read from ``GetTask``,
``SendMessage``, ``CancelTask``, ``ListTasks`` and streams are authoritative observations;
card fetches set the agent's etag and heartbeat. Liveness decisions (follow-up messages,
cancels, push-config creation, ``liveness_decision`` blocks, spans with
``otel_a2a.liveness.decision=true``) are judged against the invariant and each divergence becomes
an ``otel_a2a.divergence`` span event, log record and metric. Detection does not depend on trace
sampling. Observations stay in the process that made them, unless ``OTEL_A2A_LEDGER_PATH``
names a file the processes of one host share.

``instrument()`` accepts ``tracer_provider``, ``meter_provider`` and ``logger_provider`` (for
the ``otel_a2a.divergence`` log records; the global one otherwise). Configuration comes from
the ``OTEL_A2A_*`` environment variables (docs/configuration.md); invalid values log one
warning and fall back to the default.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from otel_a2a.instrumentation import runtime, server
from otel_a2a.instrumentation.config import load_settings
from otel_a2a.instrumentation.decision import liveness_decision
from otel_a2a.instrumentation.libraries import PATCHES, OnImport
from otel_a2a.instrumentation.providers import (
    attach_processor,
    finish_before_exit,
    shut_down_after_the_application,
)
from otel_a2a.instrumentation.reentry import GUARD
from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.locks import fork_safe
from otel_a2a.package import _instruments

if TYPE_CHECKING:
    from otel_a2a.instrumentation.processor import DivergenceSpanProcessor

__all__ = [
    "A2AInstrumentor",
    "DivergenceSpanProcessor",
    "grpc_aio_interceptors",
    "instrument_grpc_channel",
    "liveness_decision",
]


class A2AInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments ``Client.send`` and ``AsyncClient.send`` of httpx, and of httpx2 when it is
    installed, for A2A traffic, and grpcio's channel factories when grpcio is installed, each
    once imported (``libraries``). None of them is required: ``instrumentation_dependencies``
    is empty, ``instruments-any`` lists them."""

    # the current instrumentation is OTEL_A2A_ENABLED's, made by the start-up hook
    _implicit = False
    # instrument()/uninstrument(), re-entered by instrument()
    _toggle_lock: ClassVar[threading.RLock] = threading.RLock()
    _libraries: ClassVar[OnImport] = OnImport(PATCHES)  # the process's patches

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def instrument(self, **kwargs: Any) -> None:
        """As ``BaseInstrumentor.instrument``; an explicit call naming providers replaces the
        instrumentation ``OTEL_A2A_ENABLED`` made at start-up instead of being ignored.
        Concurrent calls are serialised: the base class checks and sets "instrumented" in two
        steps, and two threads could both wrap ``send``."""
        named = any(
            kwargs.get(k) is not None
            for k in ("tracer_provider", "meter_provider", "logger_provider")
        )
        with A2AInstrumentor._toggle_lock:
            if named and self._implicit and self.is_instrumented_by_opentelemetry:
                self.uninstrument()
            super().instrument(**kwargs)

    def uninstrument(self, **kwargs: Any) -> None:
        with A2AInstrumentor._toggle_lock:
            super().uninstrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        settings = load_settings()
        tracer_provider = kwargs.get("tracer_provider")
        meter_provider = kwargs.get("meter_provider")
        rt = Runtime(settings, tracer_provider, meter_provider, kwargs.get("logger_provider"))
        type(self)._implicit = bool(kwargs.get("at_start"))
        if settings.enabled and tracer_provider is None and meter_provider is None:
            # OTEL_A2A_ENABLED (the start-up hook, opentelemetry-instrument's entry point, or
            # code): providers from OTEL_* at the first A2A operation, unless the application
            # has installed its own by then
            shut_down_after_the_application(registered=bool(kwargs.get("at_start")))
            rt.setup_pending = "configure"
        elif not attach_processor(tracer_provider or trace.get_tracer_provider()):
            rt.setup_pending = "attach"
        runtime.install(rt)
        finish_before_exit()  # and again when the processor is attached to a provider
        A2AInstrumentor._libraries.attach()
        server.attach(rt)  # a2a-sdk's server side, when imported

    def _uninstrument(self, **kwargs: Any) -> None:
        server.detach()
        A2AInstrumentor._libraries.detach()
        GUARD.drain()  # what this runtime deferred, before the next one
        runtime.install(None)


fork_safe(A2AInstrumentor, "_toggle_lock")


def instrument_grpc_channel(channel: Any, target: str) -> Any:
    """Add otel-a2a's interceptor to a sync gRPC channel created before ``instrument()`` (or
    by a ``grpc_channel_factory`` captured before it): the channel comes back wrapped by
    ``grpc.intercept_channel`` (use the channel returned). ``target`` is the address the
    channel was created with (``host:port``), which attributes its calls to the agent whose
    card names it. A ``grpc.aio`` channel cannot get interceptors once made (grpcio has no
    public way): make it with :func:`grpc_aio_interceptors`. Channels created while
    instrumented have them already."""
    from otel_a2a.instrumentation import grpc_client

    return grpc_client.instrument_channel(channel, target)


def grpc_aio_interceptors(target: str) -> list[Any]:
    """otel-a2a's interceptors for a ``grpc.aio`` channel to ``target`` (``host:port``) made
    before ``instrument()``: pass them first, ``grpc.aio.insecure_channel(target,
    interceptors=grpc_aio_interceptors(target))``. They observe nothing until instrumented."""
    from otel_a2a.instrumentation import grpc_client

    return list(grpc_client.aio_interceptors(target))


def __getattr__(name: str) -> Any:
    """``DivergenceSpanProcessor`` subclasses the SDK's ``SpanProcessor``: imported on first
    use, so that the instrumentation imports where the application runs no SDK."""
    if name == "DivergenceSpanProcessor":
        from otel_a2a.instrumentation.processor import DivergenceSpanProcessor

        return DivergenceSpanProcessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
