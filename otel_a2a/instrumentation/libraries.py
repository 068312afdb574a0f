"""Which libraries of the httpx API are wrapped, and when.

httpx and httpx2 (Pydantic's continuation of httpx), neither required, are each
wrapped as soon as they are imported: at ``instrument()`` if they are already, otherwise by an
import hook when the application imports them. Nothing here imports either, so an application
that makes ``import httpx`` give httpx2 (``httpx2.alias_httpx()``, which httpx2 refuses once
anything imported httpx) may still do so after ``OTEL_A2A_ENABLED`` instrumented it at start-up,
and a library that is not installed costs one ``find_spec``. One module under two names is
wrapped once; each only within its range (``otel_a2a.package``).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
import threading
from types import ModuleType

from opentelemetry.instrumentation.dependencies import get_dependency_conflicts
from wrapt import register_post_import_hook

from otel_a2a.instrumentation import runtime
from otel_a2a.instrumentation.httpx_client import Library, library
from otel_a2a.package import _instruments_httpx, _instruments_httpx2

_log = logging.getLogger("otel_a2a")
NAMES = ("httpx", "httpx2")
# never held while importing: an import hook takes it in the importing thread
_lock = threading.RLock()
_wrapped: list[Library] = []
_hooked: set[str] = set()  # names whose import hook is registered (wrapt runs a hook once)
_active = False


def attach() -> None:
    """Wrap each library imported by now, and each other installed one when it is."""
    global _active
    with _lock:
        _active = True
        for name in NAMES:
            module = sys.modules.get(name)
            if module is not None:
                _wrap(module)
            elif name not in _hooked and importlib.util.find_spec(name) is not None:
                _hooked.add(name)
                register_post_import_hook(functools.partial(_imported, name), name)


def detach() -> None:
    """Unwrap every library; a hook still waiting for its import will wrap nothing."""
    global _active
    with _lock:
        _active = False
        while _wrapped:
            _wrapped.pop().unwrap()


def _imported(name: str, module: ModuleType) -> None:
    """The import hook, inside the application's ``import`` (``_wrap`` never raises)."""
    with _lock:
        _hooked.discard(name)
        if _active:
            _wrap(module)


def _wrap(module: ModuleType) -> None:
    if any(wrapped.module is module for wrapped in _wrapped):
        return
    try:
        if not _supported(module.__name__):
            return
        found = library(module)
        found.wrap()
    except Exception as exc:
        rt = runtime.current()
        if rt is not None:
            rt.error(exc)
        _log.warning(
            "otel-a2a: %s could not be instrumented (%s: %s): requests sent with it get no span",
            module.__name__,
            type(exc).__name__,
            exc,
        )
        return
    _wrapped.append(found)


def _supported(name: str) -> bool:
    ranges = {"httpx": _instruments_httpx, "httpx2": _instruments_httpx2}
    conflict = get_dependency_conflicts(ranges[name])
    if conflict is None:
        return True
    _log.warning(
        "otel-a2a: %s is installed, %s is supported: requests sent with %s get no span",
        conflict.found or name,
        conflict.required,
        name,
    )
    return False
