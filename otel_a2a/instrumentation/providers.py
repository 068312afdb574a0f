"""Late SDK set-up for ``OTEL_A2A_ENABLED``: decide at the first A2A operation, not at start-up.

The application may install its own providers after interpreter start (OpenTelemetry refuses a
second one), so otel-a2a only configures providers from the standard ``OTEL_*`` variables when
the first A2A operation finds the API's proxies still in place, as ``opentelemetry-instrument``
would have done. Either way the ``DivergenceSpanProcessor`` is added once to the SDK provider
in use.
"""

from __future__ import annotations

import logging
import threading

from opentelemetry import trace

from otel_a2a.instrumentation.processor import DivergenceSpanProcessor

_log = logging.getLogger("otel_a2a")
_lock = threading.Lock()
_MARK = "_otel_a2a_processor"


def attach_processor(provider: object) -> bool:
    """Add one ``DivergenceSpanProcessor`` to an SDK provider; False for a non-SDK one."""
    add = getattr(provider, "add_span_processor", None)
    if add is None:
        return False
    with _lock:
        if getattr(provider, _MARK, None) is None:
            processor = DivergenceSpanProcessor()
            add(processor)
            setattr(provider, _MARK, processor)
    return True


def configure_from_environment() -> None:
    """Configure the SDK from ``OTEL_*`` if nothing did, then attach the processor."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        with _lock:
            if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
                from opentelemetry.sdk._configuration import _OTelSDKConfigurator

                _OTelSDKConfigurator().configure()  # type: ignore[no-untyped-call]
                _log.debug("otel-a2a configured the OpenTelemetry SDK from OTEL_* variables")
        provider = trace.get_tracer_provider()
    attach_processor(provider)
