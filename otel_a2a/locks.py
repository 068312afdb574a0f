"""Locks a forked child can take.

``fork`` copies a lock as it is: one held by another thread of the parent stays held in the
child for ever, and the child's first A2A call would wait on it (a pre-fork server forks while
its other threads run). Every lock otel-a2a holds across work is registered here
(:func:`fork_safe`). Around each ``fork``, through ``os.register_at_fork``:

- before: the forking thread takes each registered lock, waiting at most :data:`WAIT` in all,
  so the child copies the structures they guard between two operations, not in the middle of
  one (a ledger's linked list half moved);
- in the parent: it releases what it took;
- in the child: every registered lock is a new one, whether it was taken or not (a lock
  another thread held past the wait is the rare case the wait could not cover: its owner's
  structure is what that thread left, and the lock no longer blocks anyone).

The hot path is untouched: the locks are the standard library's own, used directly.
Standard library only, so that the pure ``detect`` layer can use it.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any

WAIT = 0.1  # seconds a fork waits, in all, for locks other threads hold
_RLOCK = type(threading.RLock())


class _ForkGuard:
    """The registered locks: ``owner`` (an object or a module) -> its lock attributes."""

    def __init__(self) -> None:
        self._owners: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()
        self._taken: list[Any] = []

    def register(self, owner: Any, names: tuple[str, ...]) -> None:
        self._owners[owner] = self._owners.get(owner, ()) + names

    def registered(self) -> list[tuple[Any, str]]:
        return [(owner, name) for owner, names in list(self._owners.items()) for name in names]

    def before(self) -> None:
        deadline = time.monotonic() + WAIT
        for owner, name in self.registered():
            lock = getattr(owner, name, None)
            if lock is not None and lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                self._taken.append(lock)

    def after_in_parent(self) -> None:
        taken, self._taken = self._taken, []
        for lock in reversed(taken):
            lock.release()

    def after_in_child(self) -> None:
        self._taken = []
        for owner, name in self.registered():
            old = getattr(owner, name, None)
            setattr(owner, name, threading.RLock() if type(old) is _RLOCK else threading.Lock())


_guard = _ForkGuard()
os.register_at_fork(
    before=_guard.before,
    after_in_parent=_guard.after_in_parent,
    after_in_child=_guard.after_in_child,
)


def fork_safe(owner: Any, *names: str) -> None:
    """Register ``owner``'s lock attributes ``names`` (a ``threading.Lock`` or ``RLock``
    each): replaced in a forked child. ``owner`` is held weakly; code must read the lock
    through the attribute at each use, never keep it in a local across calls."""
    _guard.register(owner, names)


def registered() -> list[tuple[Any, str]]:
    """Every ``(owner, attribute)`` registered and alive (for tests and diagnostics)."""
    return _guard.registered()
