"""Interpreter-start hook behind ``OTEL_A2A_ENABLED=true`` (no code change in the service).

``otel_a2a.pth`` imports this module only when the variable is set to something other than a
false value (true, or a bad value that deserves its warning), so an unset variable costs one
environment lookup. Under Python >= 3.15 ``otel_a2a.start`` calls :func:`run` instead.
Importing is idempotent (the ``.pth`` runs twice in a venv) and nothing here may break the
interpreter's start: every failure is logged at debug level and swallowed.
"""

from __future__ import annotations

import os

from otel_a2a._env import FALSE, TRUE, warn_invalid

_done = False


def _enabled() -> bool:
    raw = os.environ.get("OTEL_A2A_ENABLED", "")
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value not in FALSE:
        warn_invalid("OTEL_A2A_ENABLED", raw, False)
    return False


def _under_opentelemetry_instrument() -> bool:
    """``opentelemetry-instrument`` loads our entry point itself, after its configurator."""
    return "auto_instrumentation" in os.environ.get("PYTHONPATH", "")


def run() -> None:
    global _done
    if _done or not _enabled():
        return
    _done = True
    if _under_opentelemetry_instrument():
        return
    try:
        from otel_a2a.instrumentation import A2AInstrumentor

        A2AInstrumentor().instrument(configure_sdk=True)
    except Exception:
        import logging  # only now: the hook costs one environment lookup when unset

        logging.getLogger("otel_a2a").debug("otel-a2a autoload failed", exc_info=True)


run()
