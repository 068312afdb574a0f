"""The worker's side: a2a-sdk servers (docs/worker.md).

Three things, each through a2a-sdk's public surface, patched once a2a-sdk is imported (at
``instrument()`` when it already is, else by an import hook), and restored by ``uninstrument()``:

- the request handlers a2a-sdk ships (``DefaultRequestHandler``, ``LegacyRequestHandler``) get
  the convention's ``a2a.server`` span around each method (``spans``);
- ``create_agent_card_routes`` serves the heartbeat extension when
  ``OTEL_A2A_SERVE_HEARTBEAT`` is set (``card``);
- a handler built while instrumented gets its executor wrapped in a transparent proxy and its
  task store checked for tasks accepted and never finished (``unfinished``).

Nothing here imports a2a-sdk before the application does.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
import threading
import weakref
from types import ModuleType
from typing import Any

from wrapt import FunctionWrapper, register_post_import_hook

from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.locks import fork_safe

_log = logging.getLogger("otel_a2a")
HANDLERS = {
    "a2a.server.request_handlers.default_request_handler_v2": "DefaultRequestHandlerV2",
    "a2a.server.request_handlers.default_request_handler": "LegacyRequestHandler",
}
CARD_ROUTES = ("a2a.server.routes.agent_card_routes", "a2a.server.routes")
CARD_FUNCTION = "create_agent_card_routes"


class Server:
    """The worker-side state of one runtime: each handler's watch and card."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.handlers: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = (
            weakref.WeakKeyDictionary()
        )  # handler: (its watch or None, its card)

    def lookup(self, handler: Any) -> tuple[Runtime, Any, Any, float | None] | None:
        try:
            watch, card = self.handlers.get(handler, (None, None))
        except TypeError:  # an unhashable handler subclass: spans without a watch
            watch, card = None, None
        return self.rt, watch, card, self.rt.settings.serve_heartbeat

    def watch(self, handler: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The watch of a handler about to be built with these arguments (a2a-sdk's handlers
        take ``agent_executor``, ``task_store``, ``agent_card`` first, ``event_stream`` by
        name)."""
        from otel_a2a.instrumentation.server.unfinished import Watch

        card = kwargs.get("agent_card", args[2] if len(args) > 2 else None)
        cluster = kwargs.get("event_stream") is not None
        interval = self.rt.settings.serve_check_interval
        return Watch(self.rt, handler, card, interval, cluster)

    def stop(self) -> None:
        for watch, _card in list(self.handlers.values()):
            if watch is not None:
                watch.stop()


class Patches:
    """What is patched in a2a-sdk, to be restored: (owner, attribute, original)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # never held while importing: the hook takes it
        fork_safe(self, "lock")
        self.server: Server | None = None
        self.done: list[tuple[Any, str, Any]] = []
        self.hooked: set[str] = set()

    def attach(self, rt: Runtime) -> None:
        with self.lock:
            self.server = Server(rt)
            for name in (*HANDLERS, *CARD_ROUTES):
                module = sys.modules.get(name)
                if module is not None:
                    self._patch(name, module)
                elif name not in self.hooked and _installed("a2a"):
                    self.hooked.add(name)
                    register_post_import_hook(functools.partial(self._imported, name), name)

    def detach(self) -> None:
        with self.lock:
            server, self.server = self.server, None
            while self.done:
                owner, attribute, original = self.done.pop()
                setattr(owner, attribute, original)
        if server is not None:
            server.stop()

    def _imported(self, name: str, module: ModuleType) -> None:
        with self.lock:
            self.hooked.discard(name)
            if self.server is not None:
                self._patch(name, module)

    def _patch(self, name: str, module: ModuleType) -> None:
        try:
            if name in HANDLERS:
                self._patch_handler(getattr(module, HANDLERS[name]))
            else:
                self._patch_card(module)
        except Exception as exc:  # an a2a-sdk this cannot patch: said once, counted
            if self.server is not None:
                self.server.rt.error(exc)
            _log.warning(
                "otel-a2a: %s could not be instrumented (%s: %s)", name, type(exc).__name__, exc
            )

    def _set(self, owner: Any, attribute: str, wrapped: Any) -> None:
        self.done.append((owner, attribute, vars(owner)[attribute]))
        setattr(owner, attribute, wrapped)

    def _patch_handler(self, cls: type) -> None:
        from otel_a2a.instrumentation.server.attributes import METHODS
        from otel_a2a.instrumentation.server.spans import wrapper

        if any(owner is cls for owner, _a, _o in self.done):
            return
        for method in METHODS:
            if method in vars(cls):
                self._set(
                    cls, method, FunctionWrapper(vars(cls)[method], wrapper(method, self._lookup))
                )
        self._set(cls, "__init__", FunctionWrapper(vars(cls)["__init__"], self._init))

    def _patch_card(self, module: ModuleType) -> None:
        current = vars(module).get(CARD_FUNCTION)
        if current is None or isinstance(current, FunctionWrapper):
            return  # the package re-exports the submodule's function: wrapped already
        self._set(module, CARD_FUNCTION, FunctionWrapper(current, self._card_routes))

    def _lookup(self, handler: Any) -> tuple[Runtime, Any, Any, float | None] | None:
        server = self.server
        return server.lookup(handler) if server is not None else None

    def _init(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> None:
        """A handler's ``__init__``: its executor (``agent_executor``, the first argument)
        wrapped to tell its watch which tasks run; the watch started if the event loop runs."""
        server = self.server
        watch = None
        if server is not None:
            try:
                from otel_a2a.instrumentation.server.unfinished import TrackedExecutor

                watch = server.watch(instance, args, kwargs)
                if args:
                    args = (TrackedExecutor(args[0], watch), *args[1:])
                elif "agent_executor" in kwargs:
                    executor = TrackedExecutor(kwargs["agent_executor"], watch)
                    kwargs = {**kwargs, "agent_executor": executor}
                else:
                    watch = None
            except Exception as exc:
                server.rt.error(exc)
                watch = None
        wrapped(*args, **kwargs)
        if server is None or watch is None:
            return
        try:
            server.handlers[instance] = (watch, watch.card)
            watch.start()
        except Exception as exc:
            server.rt.error(exc)

    def _card_routes(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        server = self.server
        seconds = server.rt.settings.serve_heartbeat if server is not None else None
        if server is None or seconds is None:
            return wrapped(*args, **kwargs)
        from otel_a2a.instrumentation.server.card import routes_arguments

        try:
            args, kwargs = routes_arguments(wrapped, args, kwargs, seconds, server.rt.error)
        except Exception as exc:  # arguments a2a-sdk itself will refuse: its error, not ours
            server.rt.error(exc)
        return wrapped(*args, **kwargs)


def _installed(name: str) -> bool:
    """A top-level package importable, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_patches = Patches()


def attach(rt: Runtime) -> None:
    """Instrument a2a-sdk's server side for ``rt`` (now, or when it is imported)."""
    _patches.attach(rt)


def detach() -> None:
    """Restore a2a-sdk; stop every check. Handlers built meanwhile keep a proxy executor that
    only delegates."""
    _patches.detach()
