"""The SDK set-up left for the first A2A operation, for every transport.

``OTEL_A2A_ENABLED`` leaves the choice of providers to the first A2A operation (the
application may install its own after start-up: see ``providers``); ``instrument()`` with no
SDK provider yet leaves the span processor to attach once one exists. Each transport adapter
asks :func:`due` (a cheap test, no lock) and runs :func:`run` (sync) or :func:`run_async`.
"""

from __future__ import annotations

import logging

from opentelemetry import trace

from otel_a2a.instrumentation.providers import attach_processor, configure_from_environment
from otel_a2a.instrumentation.reentry import GUARD
from otel_a2a.instrumentation.runtime import Runtime

_log = logging.getLogger("otel_a2a")


def due(rt: Runtime) -> bool:
    """Whether set-up is left for this A2A operation; while ``attach`` waits for a provider
    to exist, a cheap test on every request, no lock."""
    mode = rt.setup_pending
    return mode is not None and not (
        mode == "attach" and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    )


def _set_up(rt: Runtime) -> None:
    """Concurrent first operations wait for it: one that went ahead would be recorded by the
    providers that are about to be replaced."""
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


def run(rt: Runtime) -> None:
    """The set-up, as otel-a2a's work in this thread (see ``reentry``)."""
    if GUARD.enter():
        try:
            _set_up(rt)
        finally:
            GUARD.leave()


async def run_async(rt: Runtime) -> None:
    """Configuring the SDK takes 50-350 ms (imports, resource detection, exporters): it runs
    in a worker thread so that the event loop goes on (asyncio or trio, through anyio); this
    request waits for it, as a synchronous one does. Attaching the processor is cheap and
    stays inline. The hop has a limiter of its own: the default one may be held whole by the
    application's threads waiting on this very request."""
    if rt.setup_pending != "configure":
        run(rt)
        return
    from anyio import CapacityLimiter, to_thread

    await to_thread.run_sync(run, rt, limiter=CapacityLimiter(1))
