"""Interpreter-start hook behind ``OTEL_A2A_ENABLED=true`` (no code change in the service).

``otel_a2a.pth`` imports this module only when the variable is set to something other than
empty or ``false`` (``true``, or a value that deserves its warning), so an unset variable costs one
environment lookup. Under Python >= 3.15 ``otel_a2a.start`` calls :func:`run` instead.
Importing is idempotent (the ``.pth`` runs twice in a venv) and nothing here may break the
interpreter's start: a failure is one warning, never an exception.

The instrumentation itself (OpenTelemetry, wrapt, pydantic-core: about 0.1 s) is imported at
the first import of a library it serves (:data:`TRIGGERS`), not at start: a process that never
imports one (a one-process-per-command CLI, a helper script) pays only this module.
"""

from __future__ import annotations

import _thread
import atexit
import os
import sys

from otel_a2a._env import parse_bool

TYPE_CHECKING = False  # not typing's: importing typing here would cost milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

# Importing one of these means the process may make or serve A2A calls: httpx, httpx2 and grpc
# (the libraries the instrumentation patches), a2a-sdk (its server side), and otel-a2a's own
# API (``liveness_decision`` needs the instrumentation running).
TRIGGERS = frozenset({"httpx", "httpx2", "grpc", "a2a", "otel_a2a.instrumentation"})

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


class _FirstImport:
    """A ``sys.meta_path`` finder that calls ``start`` once, right after the first of
    ``names`` has been imported. (wrapt's post-import hooks, which the instrumentation uses,
    would do, but importing wrapt takes longer than the interpreter's whole start.)"""

    def __init__(self, names: frozenset[str], start: Callable[[], None]) -> None:
        self._names = names
        self._start = start
        self._lock = _thread.allocate_lock()  # held for a test-and-set, never across imports
        self._started = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        """The spec the other finders give, its loader wrapped; None for any other name."""
        if fullname not in self._names:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(fullname, path, target)
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenStart(spec.loader, self)
                return spec
        return None

    def imported(self) -> None:
        with self._lock:
            started, self._started = self._started, True
        if started:
            return
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self._start()


class _ThenStart:
    """A loader that is ``loader``, then calls the finder's ``imported`` once the module has
    run. The module keeps ``loader`` as its own (``__loader__``, ``__spec__.loader``)."""

    def __init__(self, loader: Any, finder: _FirstImport) -> None:
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def exec_module(self, module: ModuleType) -> None:
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        self._loader.exec_module(module)
        self._finder.imported()


def _instrument() -> None:
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


def _shut_down_late() -> None:
    """Registered at interpreter start, so that it runs after every exit handler of the
    application: the shutdown of the providers otel-a2a configured, if it configured any."""
    providers = sys.modules.get("otel_a2a.instrumentation.providers")
    if providers is not None:
        providers.shut_down_late()


def run() -> None:
    global _done
    if (
        _done
        or _left_to_opentelemetry_instrument()
        or not parse_bool(os.environ, "OTEL_A2A_ENABLED")
    ):
        return
    _done = True
    atexit.register(_shut_down_late)
    if any(name in sys.modules for name in TRIGGERS):
        _instrument()
    else:
        sys.meta_path.insert(0, _FirstImport(TRIGGERS, _instrument))


run()
