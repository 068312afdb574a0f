"""Patching each instrumented library as soon as it is imported, and only then.

httpx, httpx2 (Pydantic's continuation of httpx), grpcio, Starlette and Flask (the webhooks
that receive push notifications, ``webhook_asgi`` and ``webhook_wsgi``), none of them
required, are each patched at ``instrument()`` if they are imported already, otherwise by an
import hook when the application imports them. Nothing here imports any of them, so an
application that makes ``import httpx`` give httpx2 (``httpx2.alias_httpx()``, which httpx2
refuses once anything imported httpx) may still do so after ``OTEL_A2A_ENABLED`` instrumented
it at start-up, and a library that is not installed costs one ``find_spec``. One module under
two names is patched once; httpx and httpx2 only within their ranges (``otel_a2a.package``).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from types import ModuleType

from opentelemetry.instrumentation.dependencies import get_dependency_conflicts
from wrapt import register_post_import_hook

from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.httpx_client import library
from otel_a2a.locks import fork_safe
from otel_a2a.package import _instruments_httpx, _instruments_httpx2

_log = logging.getLogger("otel_a2a")

Undo = Callable[[], None]
Patch = Callable[[ModuleType], Undo | None]  # patches a module: its undo, or None (skipped)


def _in_range(name: str, required: tuple[str, ...]) -> bool:
    """Whether the installed ``name`` is within ``required`` (``otel_a2a.package``); said
    once when it is not: its requests get no span."""
    conflict = get_dependency_conflicts(required)
    if conflict is None:
        return True
    _log.warning(
        "otel-a2a: %s is installed, %s is supported: requests sent with %s get no span",
        conflict.found or name,
        conflict.required,
        name,
    )
    return False


def _httpx(module: ModuleType) -> Undo | None:
    if module.__name__ == "httpx2":
        if not _in_range("httpx2", _instruments_httpx2):
            return None
    elif not _in_range("httpx", _instruments_httpx):
        return None
    found = library(module)
    found.wrap()
    return found.unwrap


def _grpc(module: ModuleType) -> Undo:
    from otel_a2a.instrumentation import grpc_client  # imports grpc: only once it is

    return grpc_client.patch()


def _starlette(module: ModuleType) -> Undo:
    from otel_a2a.instrumentation import webhook_asgi

    return webhook_asgi.patch(module)


def _flask(module: ModuleType) -> Undo:
    from otel_a2a.instrumentation import webhook_wsgi

    return webhook_wsgi.patch(module)


# module name: its patch; ``starlette.applications`` and ``flask.app`` for the webhooks that
# receive pushes
PATCHES: Mapping[str, Patch] = {
    "httpx": _httpx,
    "httpx2": _httpx,
    "grpc": _grpc,
    "starlette.applications": _starlette,
    "flask.app": _flask,
}


def installed(name: str) -> bool:
    """Importable, without importing it (a ``None`` in ``sys.modules`` blocks an import)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class OnImport:
    """The libraries of ``patches`` (module name: how to patch it), each patched once
    imported while attached; detached, unpatched (a hook still waiting for its import will
    patch nothing: wrapt runs a hook once, so it stays registered)."""

    def __init__(self, patches: Mapping[str, Patch]) -> None:
        self._patches = patches
        # never held while importing: an import hook takes it in the importing thread
        self._lock = threading.RLock()
        fork_safe(self, "_lock")
        self._undo: list[tuple[ModuleType, Undo]] = []
        self._hooked: set[str] = set()
        self._active = False

    def attach(self) -> None:
        """Patch each library imported by now, and each other installed one when it is."""
        with self._lock:
            self._active = True
            for name in self._patches:
                module = sys.modules.get(name)
                if module is not None:
                    self._patch(name, module)
                # a submodule's package, not the submodule: ``find_spec`` of a submodule
                # imports its package
                elif name not in self._hooked and installed(name.partition(".")[0]):
                    self._hooked.add(name)
                    register_post_import_hook(functools.partial(self._imported, name), name)

    def detach(self) -> None:
        with self._lock:
            self._active = False
            while self._undo:
                undo = self._undo.pop()[1]
                try:
                    undo()
                except Exception as exc:
                    _count(exc)

    def _imported(self, name: str, module: ModuleType) -> None:
        """The import hook, inside the application's ``import`` (``_patch`` never raises)."""
        with self._lock:
            self._hooked.discard(name)
            if self._active:
                self._patch(name, module)

    def _patch(self, name: str, module: ModuleType) -> None:
        if any(patched is module for patched, _ in self._undo):
            return
        try:
            undo = self._patches[name](module)
        except Exception as exc:  # an unsupported release: its traffic goes unobserved, said once
            _count(exc)
            _log.warning(
                "otel-a2a: %s could not be instrumented (%s: %s): A2A calls made with it get "
                "no span",
                name,
                type(exc).__name__,
                exc,
            )
            return
        if undo is not None:
            self._undo.append((module, undo))


def _count(exc: BaseException) -> None:
    rt = runtime.current()
    if rt is not None:
        rt.error(exc)
