"""The webhooks this process registered for push notifications, and whom a delivery is from.

A registration ties a webhook path to the agent it was registered with, the task it is for
and the keyed digest of its token. A config given with a message that creates a task has no
task yet: it is *pending* until the reply names the task (:meth:`Webhooks.bind`), or until a
delivery with its token names one first (the agent may push before the reply is read).

A delivery is accepted as the agent's word on a task only when a registration at its path is
for that task (or pending) and its token is the registered one: the spec asks a webhook to
check both. Pure and thread-safe; bounded to ``max_entries`` registrations, oldest dropped.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from enum import Enum
from typing import NamedTuple

from otel_a2a.locks import fork_safe
from otel_a2a.protocol.model import PushTarget
from otel_a2a.protocol.push import same_token


class Outcome(str, Enum):
    """What became of one delivery (``otel_a2a.push.outcome``)."""

    OBSERVED = "observed"  # an observation of its task
    TOKEN_MISMATCH = "token_mismatch"  # a registration for its task, another token
    UNEXPECTED_TASK = "unexpected_task"  # no registration at that path for its task
    UNRECOGNIZED = "unrecognized"  # no task in it (a message, or not A2A)


class Registration:
    """One webhook registered with ``agent``, for ``task_id`` (None while pending)."""

    __slots__ = ("agent", "path", "task_id", "token")

    def __init__(self, target: PushTarget, agent: str, task_id: str | None) -> None:
        self.path = target.path
        self.token = target.token
        self.agent = agent
        self.task_id = task_id


class Verdict(NamedTuple):
    outcome: Outcome
    agent: str | None = None  # the agent the delivery speaks for, when observed


class Webhooks:
    def __init__(self, max_entries: int = 100_000, max_pending: int = 1024) -> None:
        self._max = max(1, max_entries)
        self._max_pending = max(1, max_pending)
        # (path, task id) -> registration, least recently used first
        self._bound: OrderedDict[tuple[str, str], Registration] = OrderedDict()
        # pending registrations (a message not answered yet), oldest first, few: each
        # delivery for a task not registered looks through them
        self._pending: OrderedDict[int, Registration] = OrderedDict()
        self._paths: dict[str, int] = {}  # path -> registrations there
        self._lock = threading.Lock()
        fork_safe(self, "_lock")

    def __len__(self) -> int:
        return len(self._bound) + len(self._pending)

    def expects(self, path: str) -> bool:
        """Whether a registration is at ``path`` (the one test other requests pay)."""
        return path in self._paths

    def register(self, target: PushTarget, agent: str, task_id: str | None) -> Registration:
        """A config created (``task_id`` given) or sent with a message (None: pending)."""
        reg = Registration(target, agent, task_id)
        with self._lock:
            if task_id is None:
                self._add_path(reg.path)
                self._pending[id(reg)] = reg
                if len(self._pending) > self._max_pending:
                    self._forget_path(self._pending.popitem(last=False)[1].path)
            else:
                self._bind(reg, task_id)
        return reg

    def bind(self, reg: Registration, task_id: str) -> None:
        """The reply to the message that sent ``reg`` names its task."""
        with self._lock:
            if self._pending.pop(id(reg), None) is reg:
                self._forget_path(reg.path)
                self._bind(reg, task_id)

    def deliver(self, path: str, task_id: str, token: bytes | None) -> Verdict:
        """Judge a delivery at ``path`` about ``task_id`` carrying the token digest ``token``
        (None: no token header)."""
        with self._lock:
            key = (path, task_id)
            reg = self._bound.get(key)
            if reg is not None:
                if not same_token(reg.token, token):
                    return Verdict(Outcome.TOKEN_MISMATCH)
                self._bound.move_to_end(key)
                return Verdict(Outcome.OBSERVED, reg.agent)
            mismatch = False
            for pending in self._pending.values():
                if pending.path != path:
                    continue
                if same_token(pending.token, token):
                    del self._pending[id(pending)]
                    self._forget_path(path)
                    self._bind(pending, task_id)
                    return Verdict(Outcome.OBSERVED, pending.agent)
                mismatch = True
        return Verdict(Outcome.TOKEN_MISMATCH if mismatch else Outcome.UNEXPECTED_TASK)

    def _bind(self, reg: Registration, task_id: str) -> None:
        reg.task_id = task_id
        key = (reg.path, task_id)
        bound = self._bound
        if bound.pop(key, None) is None:
            self._add_path(reg.path)
        bound[key] = reg  # a config registered again for the task replaces the first
        if len(bound) > self._max:
            self._forget_path(bound.popitem(last=False)[0][0])

    def _add_path(self, path: str) -> None:
        self._paths[path] = self._paths.get(path, 0) + 1

    def _forget_path(self, path: str) -> None:
        left = self._paths.get(path, 0) - 1
        if left > 0:
            self._paths[path] = left
        else:
            self._paths.pop(path, None)
