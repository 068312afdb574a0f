"""Late SDK set-up for ``OTEL_A2A_ENABLED``: decide at the first A2A operation, not at start-up.

The application may install its own providers after interpreter start (OpenTelemetry refuses a
second one), so otel-a2a only configures providers from the standard ``OTEL_*`` variables when
the first A2A operation finds the API's proxies still in place, as ``opentelemetry-instrument``
would have done. Either way the ``DivergenceSpanProcessor`` is added once to the SDK provider
in use.

The set-up is ``opentelemetry-instrument``'s, through the same public plugin machinery: the
installed distro (entry point ``opentelemetry_distro``, ``opentelemetry-distro`` with the
``auto`` extra) sets its defaults, then the configurator (``opentelemetry_configurator``,
chosen by ``OTEL_PYTHON_CONFIGURATOR`` as there) configures the SDK. Nothing of the SDK is
imported until then, so the library imports without it.

The providers otel-a2a configures this way are its own to shut down: at exit they get
``_EXIT_SECONDS`` in all to export what they hold, then their exporters are shut down, which
ends their retries (an unreachable collector would otherwise hold the exit for the exporters'
whole retry schedule, about 7 s with the OTLP defaults), and the exporters' per-retry warnings
are collapsed to one per endpoint. Providers the application installed are never touched.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry._logs import get_logger_provider

from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.reentry import GUARD
from otel_a2a.locks import fork_safe

_log = logging.getLogger("otel_a2a")
_lock = threading.Lock()
fork_safe(sys.modules[__name__], "_lock")
_MARK = "_otel_a2a_processor"
_NO_SDK = (
    "otel-a2a: OTEL_A2A_ENABLED is set but no OpenTelemetry SDK set-up is installed "
    "(entry point group opentelemetry_configurator): pip install 'otel-a2a[auto]'"
)
_late_shutdowns: list[Callable[[float], object]] = []  # each takes its time, in seconds
_exit_registered = False
# At exit, for all the providers otel-a2a made: time to export what is left before their
# exporters are shut down, so that the exit stays within about 1 s whatever the endpoints do
# (`make bench`: exit rows). Each provider in turn gets an equal share of what is left: one
# that finishes early leaves its time to the next, one whose endpoint is down costs its own.
_EXIT_SECONDS = 0.6
# The batch processors otel-a2a's set-up made, by signal (what the exit shutdown bounds).
_span_processors: list[object] = []
_log_processors: list[object] = []
# Loggers of the OTLP exporters' retry loops (gRPC's shared mixin, HTTP's one per signal): all
# those under this prefix once the exporters are imported, whatever their modules are named.
_EXPORTER_LOGGERS = "opentelemetry.exporter.otlp."
_TRANSIENT = "Transient error "  # "… encountered while exporting …, retrying in …"
_ABORTED = "Shutdown in progress, aborting retry."


def finish_before_exit() -> None:
    """(Re-)register, to run at exit before the shutdown of every provider made so far
    (``atexit`` runs the last registered first): what was deferred (see ``reentry``), the
    spans of dropped responses among it."""
    atexit.unregister(GUARD.drain)
    atexit.register(GUARD.drain)


def attach_processor(provider: object) -> bool:
    """Add one ``DivergenceSpanProcessor`` to an SDK provider; False for a non-SDK one."""
    add = getattr(provider, "add_span_processor", None)
    if add is None:
        return False
    with _lock:
        if getattr(provider, _MARK, None) is None:
            from otel_a2a.instrumentation.processor import DivergenceSpanProcessor

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
    distro's defaults: OTLP for every signal) if the application installed no providers, then
    attach the processor. False while there is no SDK tracer provider yet."""
    with _lock:
        if not _app_set_providers():
            _configure_sdk()
    return attach_processor(trace.get_tracer_provider())


def _configure_sdk() -> None:
    from importlib.metadata import entry_points

    chosen = os.environ.get("OTEL_PYTHON_DISTRO")
    for point in entry_points(group="opentelemetry_distro"):
        if chosen in (None, point.name):
            point.load()().configure()
            break
    chosen = os.environ.get("OTEL_PYTHON_CONFIGURATOR")
    configurators = [
        point
        for point in entry_points(group="opentelemetry_configurator")
        if chosen in (None, point.name)
    ]
    if not configurators:
        _log.warning(_NO_SDK)
        return
    configurator = configurators[0].load()()
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # the configurator's default processors, kept to be shut down in bounded time (recent SDKs
    # take these factories; older ones and a declarative set-up, OTEL_CONFIG_FILE, do not)
    kept: dict[str, Callable[..., object]] = {}
    if not os.environ.get("OTEL_CONFIG_FILE"):
        kept = {
            "export_span_processor": _kept(BatchSpanProcessor, _span_processors),
            "export_log_record_processor": _kept(BatchLogRecordProcessor, _log_processors),
        }
    try:
        configurator.configure(**kept)
    except TypeError:  # an SDK without the factories: its own shutdown at exit
        configurator.configure()
    _one_retry_warning_per_endpoint()
    _shut_down_last()
    _log.debug("otel-a2a configured the OpenTelemetry SDK from OTEL_* variables")


def _kept(kind: Callable[..., object], made: list[object]) -> Callable[..., object]:
    """A processor factory for the configurator that also remembers what it made."""

    def make(exporter: object, *args: Any, **kwargs: Any) -> object:
        processor = kind(exporter, *args, **kwargs)
        made.append(processor)
        return processor

    return make


def _shut_down_last() -> None:
    """The providers just made registered their ``atexit`` shutdown now, after the
    application's own exit handlers, which would therefore run after the shutdown and lose
    their telemetry (an exit-time ``CancelTask``): see :func:`shut_down_after_the_application`.
    Metrics go last, so that their final export counts what the others' shutdown held back."""
    made = (
        (get_logger_provider(), _log_processors),
        (trace.get_tracer_provider(), _span_processors),
        (metrics.get_meter_provider(), None),
    )
    for provider, processors in made:
        shutdown = getattr(provider, "shutdown", None)
        if callable(shutdown):
            atexit.unregister(shutdown)
            _late_shutdowns.append(functools.partial(_shut_down_within, shutdown, processors))


def _shut_down_within(
    shutdown: Callable[..., object], processors: list[object] | None, seconds: float
) -> None:
    """One provider's shutdown in about ``seconds``, whatever its endpoints do.

    The SDK's own waits up to 30 s per batch processor, and its providers pass no timeout
    down: each batch processor is shut down first, with what is left of the time (it waits for
    its final export that long, then shuts its exporter down, which ends the retries; the
    provider's shutdown then finds it done). ``processors`` None: a meter provider, which takes
    the timeout itself.
    """
    deadline = time.monotonic() + seconds

    def left_ms() -> float:
        return max(0.0, deadline - time.monotonic()) * 1e3

    if processors is None:
        shutdown(timeout_millis=left_ms())
        return
    for processor in processors:
        # the SDK's BatchSpanProcessor and BatchLogRecordProcessor share this worker, whose
        # shutdown takes the timeout their own shutdown() does not
        batch = getattr(processor, "_batch_processor", None)
        bounded = getattr(batch, "shutdown", None)
        if callable(bounded):
            bounded(timeout_millis=left_ms())
    shutdown()


class _OneRetryWarning(logging.Filter):
    """On the OTLP exporters' loggers: the first "Transient error … retrying in …" warning of
    each endpoint goes through; the later ones, and the "aborting retry" a shutdown makes of a
    retry in progress, are counted as ``export_unavailable`` in ``otel_a2a.instrumentation.errors``
    instead of written (an unreachable collector made one such line per retry of every
    export). Anything else these loggers say goes through untouched."""

    def __init__(self) -> None:
        super().__init__()
        self._warned: set[tuple[str, str]] = set()  # (logger, endpoint): a few exporters'
        self._lock = threading.Lock()
        fork_safe(self, "_lock")

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if not isinstance(msg, str):
            return True
        if msg.startswith(_TRANSIENT):
            key = (record.name, _endpoint(record))
            with self._lock:
                first = key not in self._warned
                self._warned.add(key)
            if first:
                return True
        elif msg != _ABORTED:
            return True
        rt = runtime.current()
        if rt is not None:
            rt.error("export_unavailable")
        return False


def _endpoint(record: logging.LogRecord) -> str:
    """The endpoint a gRPC retry warning names ("… exporting %s to %s, retrying …"); an HTTP
    exporter's warning names none, but its logger serves one signal, hence one endpoint."""
    args = record.args
    if " to %s," in str(record.msg) and isinstance(args, tuple) and len(args) > 2:
        return str(args[2])
    return ""


_retry_filter = _OneRetryWarning()


def _exporter_loggers() -> list[str]:
    """The OTLP exporters' loggers made by now (the configurator imported the exporters)."""
    return [n for n in list(logging.root.manager.loggerDict) if n.startswith(_EXPORTER_LOGGERS)]


def _one_retry_warning_per_endpoint() -> None:
    """Collapse the retry warnings of the exporters otel-a2a's set-up made (the application
    installed no providers, so it has no exporters of its own on these loggers)."""
    for name in _exporter_loggers():
        logging.getLogger(name).addFilter(_retry_filter)  # a second add is a no-op


def shut_down_after_the_application(registered: bool = False) -> None:
    """Register, now, the shutdown of the providers configured later: ``atexit`` runs what was
    registered first last, after the application's own exit handlers. ``registered``: the
    start-up hook did at interpreter start (``otel_a2a._autoload``), earlier still."""
    global _exit_registered
    if not _exit_registered:
        _exit_registered = True
        if not registered:
            atexit.register(shut_down_late)


def shut_down_late() -> None:
    deadline = time.monotonic() + _EXIT_SECONDS
    while _late_shutdowns:
        share = max(0.0, deadline - time.monotonic()) / len(_late_shutdowns)
        try:
            _late_shutdowns.pop(0)(share)
        except Exception:  # at exit, like the SDK's own handlers: never a traceback
            _log.debug("otel-a2a: provider shutdown failed", exc_info=True)
