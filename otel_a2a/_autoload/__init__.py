"""Interpreter-start hook behind ``OTEL_A2A_ENABLED=true`` (no code change in the service).

``otel_a2a.pth`` imports this module only when the variable is set to something other than
empty or ``false`` (``true``, or a value that deserves its warning), so an unset variable costs one
environment lookup. Under Python >= 3.15 ``otel_a2a.start`` calls :func:`run` instead.
Importing is idempotent (the ``.pth`` runs twice in a venv) and nothing here may break the
interpreter's start: a failure is one warning, never an exception.
"""

from __future__ import annotations

import os
import sys

from otel_a2a._env import parse_bool

_done = False


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
    if (
        _done
        or _left_to_opentelemetry_instrument()
        or not parse_bool(os.environ, "OTEL_A2A_ENABLED")
    ):
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
