"""A2A 1.1's task ``generation``: updates missed on a stream, and a worker that went back.

A2A 1.1 (the spec's ``dev-1.1`` branch, "Task Generation Semantics") numbers a task's
changes: ``generation`` starts at 1 and rises by exactly 1 per state change or artifact,
each change one event, and every task, status update and artifact update carries the value
after its change. So a caller that sees two update events of a task ``N`` then ``N + 2`` on
its stream missed one, and one that sees a generation lower than one it saw before talks to
a worker that lost the task's state and rebuilt it (rehydrated after a restart). A peer that
sends ``0``, or the same value on two consecutive events, keeps no generations (the spec:
"MUST NOT use generation ... for the remainder"): its task is left alone from then on. A
peer that never sends one is never seen here.

Only update events judge a gap, and only after an update event: a task snapshot (a
``GetTask`` answer, the first frame of a subscription) may rightly jump past changes the
caller was not listening for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from otel_a2a.locks import fork_safe

GAP = "gap"
REGRESSION = "regression"
_UPDATES = frozenset({"status-update", "artifact-update"})
_UNSUPPORTED = -1


class Generations:
    """The last generation seen of up to ``max_tasks`` tasks (least recently seen forgotten
    first), and what each new one says. Thread-safe."""

    def __init__(self, max_tasks: int) -> None:
        self.max_tasks = max(1, max_tasks)
        self._last: OrderedDict[str, tuple[int, bool]] = OrderedDict()  # (generation, update)
        self._lock = threading.Lock()
        fork_safe(self, "_lock")

    def see(self, task_id: str, generation: int, kind: str) -> str | None:
        """Record ``generation`` read from a report of ``kind``; :data:`GAP`,
        :data:`REGRESSION` or None (nothing to say)."""
        update = kind in _UPDATES
        with self._lock:
            last = self._last.get(task_id)
            if last is not None:
                self._last.move_to_end(task_id)
            if last is not None and last[0] == _UNSUPPORTED:
                return None
            if generation == 0 or (last is not None and update and last == (generation, True)):
                self._last[task_id] = (_UNSUPPORTED, False)
                self._bound()
                return None
            self._last[task_id] = (generation, update)
            self._bound()
        if last is None:
            return None
        if generation < last[0]:
            return REGRESSION
        if update and last[1] and generation > last[0] + 1:
            return GAP
        return None

    def _bound(self) -> None:
        while len(self._last) > self.max_tasks:
            self._last.popitem(last=False)

    def last(self, task_id: str) -> int | None:
        """The last generation seen of ``task_id`` (None: none, or its peer keeps none)."""
        seen = self._last.get(task_id)
        return None if seen is None or seen[0] == _UNSUPPORTED else seen[0]

    def __len__(self) -> int:
        return len(self._last)
