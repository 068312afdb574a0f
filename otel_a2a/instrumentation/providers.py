"""Late SDK set-up for ``OTEL_A2A_ENABLED``: decide at the first A2A operation, not at start-up.

The application may install its own providers after interpreter start (OpenTelemetry refuses a
second one), so otel-a2a only configures providers from the standard ``OTEL_*`` variables when
the first A2A operation finds the API's proxies still in place, as ``opentelemetry-instrument``
would have done. Either way the ``DivergenceSpanProcessor`` is added once to the SDK provider
in use.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable

from opentelemetry import metrics, trace
from opentelemetry._logs import get_logger_provider

from otel_a2a.instrumentation import collection
from otel_a2a.instrumentation.processor import DivergenceSpanProcessor

_log = logging.getLogger("otel_a2a")
_lock = threading.Lock()
_MARK = "_otel_a2a_processor"
# what ``opentelemetry-distro`` sets before ``opentelemetry-instrument`` configures the SDK
_DISTRO_DEFAULTS = {
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_METRICS_EXPORTER": "otlp",
    "OTEL_LOGS_EXPORTER": "otlp",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
}
_late_shutdowns: list[Callable[..., object]] = []
_exit_registered = False


def finish_before_exit() -> None:
    """(Re-)register, to run at exit before the shutdown of every provider made so far
    (``atexit`` runs the last registered first): what was deferred (see ``collection``), the
    spans of dropped responses among it."""
    atexit.unregister(collection.drain)
    atexit.register(collection.drain)


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
            finish_before_exit()  # this provider may have registered its shutdown since
    return True


def _app_set_providers() -> bool:
    """Whether the application installed a tracer or a meter provider of its own (either one:
    an application that chose its metrics set-up did not ask for ours). The API exposes no
    public type for the proxy meter provider, hence the name test."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True
    return type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"


def configure_from_environment() -> bool:
    """Configure the SDK from ``OTEL_*`` as ``opentelemetry-instrument`` would (with the
    ``opentelemetry-distro`` defaults: OTLP for every signal) if the application installed no
    providers, then attach the processor. False while there is no SDK tracer provider yet."""
    with _lock:
        if not _app_set_providers():
            for name, value in _DISTRO_DEFAULTS.items():
                os.environ.setdefault(name, value)
            from opentelemetry.sdk._configuration import _OTelSDKConfigurator

            _OTelSDKConfigurator().configure()  # type: ignore[no-untyped-call]
            _shut_down_last()
            _log.debug("otel-a2a configured the OpenTelemetry SDK from OTEL_* variables")
    return attach_processor(trace.get_tracer_provider())


def _shut_down_last() -> None:
    """The providers just made registered their ``atexit`` shutdown now, after the
    application's own exit handlers, which would therefore run after the shutdown and lose
    their telemetry (an exit-time ``CancelTask``): see :func:`shut_down_after_the_application`."""
    made = (trace.get_tracer_provider(), metrics.get_meter_provider(), get_logger_provider())
    for provider in made:
        shutdown = getattr(provider, "shutdown", None)
        if callable(shutdown):
            atexit.unregister(shutdown)
            _late_shutdowns.append(shutdown)


def shut_down_after_the_application() -> None:
    """Register, now (at start-up), the shutdown of the providers configured later: ``atexit``
    runs what was registered first last, after the application's own exit handlers."""
    global _exit_registered
    if not _exit_registered:
        _exit_registered = True
        atexit.register(_shutdown_late)


def _shutdown_late() -> None:
    while _late_shutdowns:
        try:
            _late_shutdowns.pop(0)()
        except Exception:  # at exit, like the SDK's own handlers: never a traceback
            _log.debug("otel-a2a: provider shutdown failed", exc_info=True)
