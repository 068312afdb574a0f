"""One deferral mechanism: otel-a2a never re-enters its own work in a thread.

A garbage collection runs finalisers in whichever thread allocated, in the middle of what that
thread was doing: inside otel-a2a's work it may hold the ledger's or the registry's lock, or
be recording a metric under an SDK lock. A finaliser that reached otel-a2a's work there (it
ends a span, takes a decision, sends or reads an A2A request) would wait for ever on its own
thread. So every entry point (the httpx wrappers and the response tee, ``liveness_decision``,
the span-processor hooks, the metric callbacks) works between :func:`enter` and
:func:`leave`, and one reached in between in the same thread only appends to one bounded
queue (:func:`defer`; ``SimpleQueue.put`` is reentrant, which makes it safe in a finaliser),
or lets the host's call through unobserved, counted. A dropped response's finaliser only
appends. The queue is drained by the next :func:`enter` (an A2A request, a decision, a
span-processor hook), at ``uninstrument()`` and at exit (:func:`drain`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from queue import Empty, SimpleQueue
from threading import get_ident

MAX_DEFERRED = 4096  # items awaiting a drain; beyond, an item is dropped and counted
OVERFLOW = "deferred_overflow"  # error.type of what the bound dropped
REENTRANT = "reentrant_call"  # error.type of a call met inside otel-a2a's own work


# The threads inside otel-a2a's work, by ident: every A2A request enters twice, and a set
# lookup costs a fraction of a thread-local attribute. An ident leaves with its thread's
# work (``leave`` runs in a ``finally``); a forked child starts with none (the threads that
# were inside are not there).
_busy: set[int] = set()
_queue: SimpleQueue[Callable[[], object]] = SimpleQueue()
# items the bound dropped, counted at the next drain (increments from several threads at
# once may lose one: the count is a lower bound)
_dropped = 0


def _forked() -> None:
    """A forked child starts with no work deferred: what the parent deferred ends the
    parent's spans (the child would export them a second time), and the queue's own lock may
    have been copied held."""
    global _queue, _dropped
    _busy.clear()
    _queue = SimpleQueue()
    _dropped = 0


os.register_at_fork(after_in_child=_forked)


def defer(work: Callable[[], object]) -> None:
    """Run ``work`` at the next drain. Takes no lock: for finalisers, in any thread."""
    global _dropped
    if _queue.qsize() < MAX_DEFERRED:
        _queue.put(work)
    else:
        _dropped += 1


def enter(drain: bool = True) -> bool:
    """Begin otel-a2a's work in this thread, after what was deferred (unless ``drain`` is
    false); False, and nothing begun, when this thread is inside that work already."""
    ident = get_ident()
    if ident in _busy:
        return False
    _busy.add(ident)
    if drain and (_dropped or _queue.qsize()):
        _run_deferred()
    return True


def leave() -> None:
    _busy.discard(get_ident())


def drain() -> None:
    """Run what was deferred now (``uninstrument()``, exit), unless inside otel-a2a's work."""
    if enter():
        leave()


def _run_deferred() -> None:
    global _dropped
    while True:
        try:
            work = _queue.get_nowait()
        except Empty:
            break
        try:
            work()
        except Exception as exc:
            _count(exc)
    if _dropped:
        dropped, _dropped = _dropped, 0
        _count(OVERFLOW, dropped)


def _count(error: BaseException | str, n: int = 1) -> None:
    from otel_a2a.instrumentation import runtime  # imports this module's users

    rt = runtime.current()
    if rt is not None:
        rt.error(error, n)
