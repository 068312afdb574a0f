"""Which thread the garbage collector runs in, and the errors met there.

A collection runs finalisers (a generator suspended inside a span, an abandoned response) in
whatever thread allocated at that moment, possibly while that thread holds a lock of
otel-a2a's ledger or registry or of the OpenTelemetry SDK. Code reached from a finaliser must
then take no lock and record no metric: it asks :func:`collecting_here` and, instead of
counting an error, calls :func:`count_later`; the counts are recorded by the next call outside
a collection (:func:`take_uncounted`).
"""

from __future__ import annotations

import gc
import threading
from collections import Counter, deque

_collecting_thread: int | None = None
_MAX_UNCOUNTED = 4096  # error types held at most; beyond, an error goes uncounted
# appended by the collecting thread only, taken from the front by any thread: both atomic
_uncounted: deque[str] = deque()


def _gc_phase(phase: str, _info: dict[str, int]) -> None:
    global _collecting_thread
    _collecting_thread = threading.get_ident() if phase == "start" else None


gc.callbacks.append(_gc_phase)


def collecting_here() -> bool:
    """Whether the garbage collector is running in this thread (CPython runs one at a time)."""
    return _collecting_thread is not None and _collecting_thread == threading.get_ident()


def count_later(error_type: str) -> None:
    """An internal failure met during a collection, when no metric may be recorded."""
    if len(_uncounted) < _MAX_UNCOUNTED:
        _uncounted.append(error_type)


def uncounted_pending() -> bool:
    return bool(_uncounted)


def take_uncounted() -> Counter[str]:
    """The errors held since the last call, by type (each taken exactly once)."""
    taken: Counter[str] = Counter()
    while True:
        try:
            taken[_uncounted.popleft()] += 1
        except IndexError:
            return taken


def clear() -> None:
    _uncounted.clear()
