"""The re-entry guard: otel-a2a never re-enters its own work in a thread.

A garbage collection runs finalisers in whichever thread allocated, in the middle of what that
thread was doing: inside otel-a2a's work it may hold the ledger's or the registry's lock, or
be recording a metric under an SDK lock. A finaliser that reached otel-a2a's work there (it
ends a span, takes a decision, sends or reads an A2A request) would wait for ever on its own
thread. So every entry point (the transport adapters, ``liveness_decision``, the
span-processor hooks, the metric callbacks) works between :meth:`Guard.enter` and
:meth:`Guard.leave`, and one reached in between in the same thread only appends to a bounded
queue (:meth:`Guard.defer`; ``SimpleQueue.put`` is reentrant, which makes it safe in a
finaliser), or lets the host's call through unobserved, counted. A dropped response's
finaliser only appends.

What waits is run in bounded batches: at most :attr:`Guard.batch` items by the next entry in
any thread (an unrelated request never runs thousands of exports inline), and all of it by
the guard's drain thread :attr:`Guard.interval` seconds after the first item waited (an idle
process still ends the spans of the responses it dropped). That thread blocks on a queue while
nothing waits; a finaliser wakes it with a ``put``, never by starting a thread or taking a
lock. Everything left runs at ``uninstrument()`` and at exit (:meth:`Guard.drain`).

The guard is one per process, not one per runtime: "this thread is inside otel-a2a's work"
holds whichever runtime the work belongs to, and a span of a previous runtime (a response
dropped after ``uninstrument()``) still ends through its queue. Standard library only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from queue import Empty, SimpleQueue
from threading import get_ident

OVERFLOW = "deferred_overflow"  # error.type of what the bound dropped
REENTRANT = "reentrant_call"  # error.type of a call met inside otel-a2a's own work

ErrorCounter = Callable[[BaseException | str, int], None]


class Guard:
    """The threads inside otel-a2a's work and the work deferred until they are out of it."""

    def __init__(self, max_deferred: int = 4096, batch: int = 64, interval: float = 1.0) -> None:
        self.max_deferred = max_deferred  # items waiting; beyond, an item is dropped, counted
        self.batch = batch  # items an entry runs before its own work
        self.interval = interval  # seconds the drain thread lets the first item wait
        # counts a failure of deferred work (the current runtime's ``error``), set at install
        self.on_error: ErrorCounter | None = None
        self._reset()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child starts with nothing deferred (what the parent deferred ends the
        parent's spans; the child would export them a second time), no thread inside (the
        threads that were are not there), and a drain thread of its own if the parent had one
        (threads are not copied)."""
        had_thread = self._thread is not None
        self._reset()
        if had_thread:
            self.start()

    def _reset(self) -> None:
        # idents of the threads inside otel-a2a's work: every A2A request enters twice, and a
        # set lookup costs a fraction of a thread-local attribute
        self._busy: set[int] = set()
        self._queue: SimpleQueue[Callable[[], object]] = SimpleQueue()
        self._bell: SimpleQueue[float] = SimpleQueue()  # wakes the drain thread
        self._rung = False  # the bell is rung and not answered yet (a race rings twice: fine)
        self._thread: threading.Thread | None = None
        # items the bound dropped, counted at the next drain (increments from several threads
        # at once may lose one: the count is a lower bound)
        self._dropped = 0

    # -- the guard ---------------------------------------------------------------------------

    def enter(self, run_deferred: bool = True) -> bool:
        """Begin otel-a2a's work in this thread, after a batch of what was deferred (unless
        ``run_deferred`` is false: a metric callback, while the SDK collects); False, and
        nothing begun, when this thread is inside that work already."""
        ident = get_ident()
        busy = self._busy
        if ident in busy:
            return False
        busy.add(ident)
        if run_deferred and (self._dropped or not self._queue.empty()):
            self._run(self.batch)
        return True

    def leave(self) -> None:
        self._busy.discard(get_ident())

    def inside(self) -> bool:
        """Whether this thread is inside otel-a2a's work."""
        return get_ident() in self._busy

    # -- deferred work -------------------------------------------------------------------

    def defer(self, work: Callable[[], object]) -> None:
        """Run ``work`` at a later drain. Takes no lock: for finalisers, in any thread."""
        if self._queue.qsize() >= self.max_deferred:
            self._dropped += 1
            return
        self._queue.put(work)
        if not self._rung:
            self._rung = True
            self._bell.put(time.monotonic())

    def start(self) -> None:
        """Start the drain thread if this process has none (at ``instrument()``)."""
        if self._thread is None:
            thread = threading.Thread(target=self._drain_loop, name="otel-a2a-drain", daemon=True)
            self._thread = thread
            thread.start()

    def drain(self) -> None:
        """Run everything deferred now (``uninstrument()``, exit), unless this thread is
        inside otel-a2a's work."""
        if self.enter():
            try:
                self._run(None)
            finally:
                self.leave()

    def pending(self) -> int:
        """Items waiting (for tests and diagnostics)."""
        return self._queue.qsize()

    def _drain_loop(self) -> None:
        bell = self._bell
        while True:
            rung_at = bell.get()  # blocks while nothing waits
            while (wait := rung_at + self.interval - time.monotonic()) > 0:
                time.sleep(min(wait, 1.0))  # ``interval`` read again: it may change
            self._rung = False
            self.drain()

    def _run(self, limit: int | None) -> None:
        """Run up to ``limit`` deferred items (all of them: None) in this thread, which is
        inside otel-a2a's work; then count what the bound dropped."""
        queue = self._queue
        done = 0
        while limit is None or done < limit:
            try:
                work = queue.get_nowait()
            except Empty:
                break
            done += 1
            try:
                work()
            except Exception as exc:
                self._count(exc, 1)
        if self._dropped:
            dropped, self._dropped = self._dropped, 0
            self._count(OVERFLOW, dropped)
        if not queue.empty() and not self._rung:  # what is left goes to the drain thread
            self._rung = True
            self._bell.put(time.monotonic())

    def _count(self, error: BaseException | str, n: int) -> None:
        on_error = self.on_error
        if on_error is not None:
            on_error(error, n)


GUARD = Guard()  # the process's guard: see the module's docstring
