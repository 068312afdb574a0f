"""Interpreter-start hook behind ``OTEL_A2A_ENABLED=true`` (no code change in the service).

``otel_a2a.pth`` imports this module only when the variable is set to something other than a
false value (true, or a bad value that deserves its warning), so an unset variable costs one
environment lookup. Under Python >= 3.15 ``otel_a2a.start`` calls :func:`run` instead.
Importing is idempotent (the ``.pth`` runs twice in a venv) and nothing here may break the
interpreter's start: every failure is logged at debug level and swallowed.
"""

from __future__ import annotations

import os
import sys

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


def _left_to_opentelemetry_instrument() -> bool:
    """``opentelemetry-instrument`` runs the program with its ``sitecustomize`` on
    ``PYTHONPATH``, which loads our entry point after its configurator (unless ``-E`` makes
    the interpreter ignore ``PYTHONPATH``). Its launcher, a Python process of its own that
    only starts the program, is left alone too: one instrumented process, one warning."""
    if os.path.basename(sys.argv[0] if sys.argv else "") == "opentelemetry-instrument":
        return True
    return "auto_instrumentation" in os.environ.get("PYTHONPATH", "") and not (
        sys.flags.ignore_environment
    )


def run() -> None:
    global _done
    if _done or _left_to_opentelemetry_instrument() or not _enabled():
        return
    _done = True
    try:
        from otel_a2a.instrumentation import A2AInstrumentor

        A2AInstrumentor().instrument(at_start=True)
    except Exception as exc:
        import logging  # only now: the hook costs one environment lookup when unset

        logging.getLogger("otel_a2a").warning(
            "otel-a2a: OTEL_A2A_ENABLED is set but instrumentation could not start (%s: %s)",
            type(exc).__name__,
            exc,
        )


run()
