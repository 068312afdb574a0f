"""What became of each divergence a decision raised: confirmed, refuted, or still open.

The seed's rule reports a divergence the moment a decision is taken without a fresh
observation; it cannot know yet whether the caller's belief was wrong. The first
authoritative observation of the task after the decision tells: the divergence is
*confirmed* when it contradicts what the decision assumed (a decision assuming the task
live finds it terminal or lost; one assuming it over finds it live), *refuted* when it
agrees (a redeploy that kept the task: the follow-up was fine). The agent's successful reply
to an action on the task (a follow-up, a cancel) shows it took the action, so the task was
live then, whatever state the action left it in: a follow-up that completes the task refutes
a divergence assuming it live; it does not confirm it. A page on confirmed splits,
and on divergences nothing resolved for long, means a real split; the divergence itself
stays the signal of a rule broken.

Bounded: at most ``max_tasks`` tasks with open divergences (the oldest dropped first,
counted in ``dropped``), :data:`PER_TASK` open divergences each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from enum import Enum
from typing import NamedTuple

from otel_a2a.detect.verdict import DivergenceReason
from otel_a2a.locks import fork_safe
from otel_a2a.protocol.states import TaskState

PER_TASK = 8  # open divergences kept per task: a caller retrying keeps the latest ones


class Outcome(str, Enum):
    """Value of the resolution's outcome attribute (docs/semantic-conventions.md)."""

    CONFIRMED = "confirmed"
    REFUTED = "refuted"


class Resolution(NamedTuple):
    """One divergence resolved: its reason, the outcome, and what resolved it (``state``
    None: the agent answered TaskNotFound) ``age`` seconds after the decision."""

    task_id: str
    reason: DivergenceReason
    outcome: Outcome
    state: TaskState | None
    age: float


class _Open(NamedTuple):
    reason: DivergenceReason
    assumes_live: bool
    at: float


def _over(entry: _Open, over: bool, accepted: bool) -> bool:
    """Whether the observation shows the task over at ``entry``'s decision. A reply the agent
    gave to an action shows it live then, unless the decision was taken on a terminal
    observation (``terminal_state``): a task never leaves a terminal state, so an agent
    answering that action with the task still terminal did not take it."""
    if accepted and entry.reason is not DivergenceReason.TERMINAL_STATE:
        return False
    return over


class Resolutions:
    """Open divergences by task. Thread-safe."""

    def __init__(self, max_tasks: int) -> None:
        self.max_tasks = max(1, max_tasks)
        self.dropped = 0  # open divergences forgotten unresolved (bound)
        self.reasons: set[DivergenceReason] = set()  # every reason opened here, ever
        self._open: OrderedDict[str, list[_Open]] = OrderedDict()
        self._lock = threading.Lock()
        fork_safe(self, "_lock")

    def open(self, task_id: str, reason: DivergenceReason, assumes_live: bool, now: float) -> None:
        """A decision on ``task_id`` diverged for ``reason`` at ``now``."""
        with self._lock:
            held = self._open.get(task_id)
            if held is None:
                held = self._open[task_id] = []
                while len(self._open) > self.max_tasks:
                    self.dropped += len(self._open.popitem(last=False)[1])
            else:
                self._open.move_to_end(task_id)
            if len(held) >= PER_TASK:
                del held[0]
                self.dropped += 1
            held.append(_Open(reason, assumes_live, now))
            self.reasons.add(reason)

    def resolve(
        self, task_id: str, state: TaskState | None, now: float, accepted: bool = False
    ) -> list[Resolution]:
        """The divergences of ``task_id`` an authoritative observation of ``state`` (None:
        TaskNotFound) at ``now`` resolves: every one opened before it. ``accepted``: the
        observation is the agent's successful reply to an action on the task, which it took:
        the task was live when each of these decisions was taken (a task never comes back
        from a terminal state), whatever ``state`` the action left it in (see ``_over``).
        Otherwise an ``unknown`` state resolves nothing (it authorises nothing, and contradicts
        nothing)."""
        if not self._open or (state is TaskState.UNKNOWN and not accepted):
            return []
        with self._lock:
            held = self._open.get(task_id)
            if held is None:
                return []
            due = [entry for entry in held if entry.at <= now]
            if len(due) == len(held):
                del self._open[task_id]
            else:
                held[:] = [entry for entry in held if entry.at > now]
        over = state is None or state.is_terminal
        resolved = []
        for entry in due:
            # confirmed: the observation contradicts what the decision assumed
            contradicts = _over(entry, over, accepted) == entry.assumes_live
            outcome = Outcome.CONFIRMED if contradicts else Outcome.REFUTED
            resolved.append(Resolution(task_id, entry.reason, outcome, state, now - entry.at))
        return resolved

    def unresolved(self, now: float, older_than: float) -> dict[DivergenceReason, int]:
        """Open divergences opened more than ``older_than`` seconds before ``now``, by
        reason: what no observation has come to resolve. Every reason ever opened here has
        its count, 0 included: a gauge series left out would keep its last value downstream
        until the exporter expires it."""
        with self._lock:
            entries = [entry for held in self._open.values() for entry in held]
            counts = dict.fromkeys(self.reasons, 0)
        for entry in entries:
            if now - entry.at > older_than:
                counts[entry.reason] += 1
        return counts

    def __bool__(self) -> bool:
        """Whether any divergence is open: the one check on every observation's path."""
        return bool(self._open)

    def __len__(self) -> int:
        return sum(len(held) for held in list(self._open.values()))
