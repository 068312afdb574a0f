"""The observation ledger: the last authoritative observation of every tracked task.

The invariant needs, per task, only the *last* authoritative observation (state, spelling,
time, card etag, source). The ledger keeps it for up to ``max_tasks`` tasks, so it must be
small, O(1) per operation and safe to call from any thread the application uses.

Layout, chosen for memory (see ``bench/bench_ledger.py``):

* one ``dict`` task id -> node, and two intrusive doubly linked lists threaded through the
  nodes themselves (terminal, and non-terminal = active + interrupted + unknown), oldest
  first. A plain insertion-ordered dict cannot serve as the LRU: ``next(iter(d))`` after many
  deletions from its front scans the deleted slots, which makes eviction at capacity quadratic
  (measured: 5 s for 100k evictions at 200k tasks). ``OrderedDict`` is O(1) but costs ~50 bytes
  more per task; two link slots cost 16.
* the node *is* the :class:`Observation`. State, spelling, exactness, source and state class
  are folded into one shared, interned :class:`Kind`, so a node is 7 pointers plus one float
  (~150 bytes per task with the dict, task id strings not counted: `make bench`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from otel_a2a.locks import fork_safe
from otel_a2a.protocol.states import StateClass, TaskState
from otel_a2a.protocol.timestamps import parse_timestamp

_MAX_KINDS = 4096  # distinct (state, raw, exact, source) combinations interned


@dataclass(frozen=True, slots=True)
class Kind:
    """What an observation says, apart from the task, agent, time and etag: shared by every
    observation saying the same, so that a node holds one pointer instead of five fields."""

    state: TaskState
    raw: str
    exact: bool
    source: str
    state_class: StateClass


# A ``TaskState`` member hashes and compares as its value (``str``'s hash, in C).
_KINDS: dict[tuple[str, str, bool, str], Kind] = {}
_KINDS_LOCK = threading.Lock()
fork_safe(sys.modules[__name__], "_KINDS_LOCK")

# Observations are recorded from a monotonic clock under one lock, so list order is time
# order up to the delay between reading the clock and taking the lock. The stale scan stops
# early only past this margin.
_ORDER_SLACK = 1.0


def _kind(state: TaskState, raw: str, exact: bool, source: str) -> Kind:
    """The shared kind of this combination.

    Bounded so that a peer inventing spellings cannot grow it; past the bound a node simply
    holds its own kind.
    """
    key = (state, raw, exact, source)
    shared = _KINDS.get(key)
    if shared is not None:
        return shared
    kind = Kind(state, raw, exact, source, state.state_class)
    with _KINDS_LOCK:
        if len(_KINDS) < _MAX_KINDS:
            return _KINDS.setdefault(key, kind)
    return kind


class Observation:
    """One authoritative observation of a task (a state read from a task response or stream).

    ``at`` is monotonic seconds; ``etag`` the agent's card etag in force when observed (None
    when no card is known); ``source`` the operation that carried it (``error-reply`` for the
    state an error reply stated, ``raw`` then being what it said). ``stamp`` is the
    agent's own status timestamp as sent (parsed only when a frame looks late), kept for terminal
    and interrupted observations only: it is what tells a late frame or reply from a real
    change of state where the order matters (neither owes a heartbeat, an active state does).

    The instance doubles as the ledger's list node (two private link slots), which is what
    keeps a tracked task small. Treat it as immutable once given to ``TaskLedger.observe``;
    the one change the ledger makes is advancing ``at`` while the task is tracked, when an open
    stream delivers frames (``touch``) or the same observation is made again (``reobserve``).
    An observation returned as *previous* never changes.
    """

    __slots__ = ("_kind", "_next", "_prev", "agent", "at", "etag", "stamp", "task_id")

    task_id: str
    agent: str
    at: float
    etag: str | None
    stamp: str | None
    _kind: Kind
    # Detached nodes point at ``_DETACHED``: typed non-optional, so list walks need no checks.
    _prev: Observation
    _next: Observation

    def __init__(
        self,
        task_id: str,
        agent: str,
        state: TaskState,
        raw: str,
        exact: bool,
        at: float,
        etag: str | None,
        source: str,
        stamp: str | None = None,
    ) -> None:
        self.task_id = task_id
        self.agent = agent
        self.at = at
        self.etag = etag
        self.stamp = stamp
        self._kind = _kind(state, raw, exact, source)
        self._prev = self._next = _DETACHED

    @property
    def state(self) -> TaskState:
        return self._kind.state

    @property
    def raw(self) -> str:
        return self._kind.raw

    @property
    def exact(self) -> bool:
        return self._kind.exact

    @property
    def source(self) -> str:
        return self._kind.source

    def _copy(self, at: float) -> Observation:
        """A detached copy at another time (no constructor work: the kind is already shared)."""
        new = Observation.__new__(Observation)
        new.task_id = self.task_id
        new.agent = self.agent
        new.at = at
        new.etag = self.etag
        new.stamp = self.stamp
        new._kind = self._kind
        new._prev = new._next = _DETACHED
        return new

    def __repr__(self) -> str:
        return (
            f"Observation(task_id={self.task_id!r}, agent={self.agent!r}, "
            f"state={self.state.value!r}, raw={self.raw!r}, exact={self.exact}, at={self.at}, "
            f"etag={self.etag!r}, source={self.source!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Observation):
            return NotImplemented
        return (
            self.task_id == other.task_id
            and self.agent == other.agent
            and self.at == other.at
            and self.etag == other.etag
            and self._kind == other._kind
        )


def _sentinel() -> Observation:
    """An empty circular list: the sentinel's ``_next`` is the oldest node, ``_prev`` newest."""
    s = Observation.__new__(Observation)
    s.task_id, s.agent, s.at, s.etag = "", "", 0.0, None
    s._kind = _kind(TaskState.UNKNOWN, "", False, "")
    s._prev = s._next = s
    return s


_DETACHED = _sentinel()
_TERMINAL = StateClass.TERMINAL  # a global read is cheaper than an enum attribute


# What ``observe`` returns for a late frame it did not record (never a task's observation).
LATE = Observation("", "", TaskState.UNKNOWN, "", False, 0.0, None, "late frame")


_INTERRUPTED = StateClass.INTERRUPTED
_SUBMITTED = TaskState.SUBMITTED


def _late(held: Observation, state: TaskState, sent_at: str | None) -> bool:
    """Whether a report of ``state``, which the agent stamped ``sent_at`` (None: unstamped;
    always None for a terminal report), was sent before ``held``, the task's observation:
    a frame or reply overtaken on its way. Either the agent's stamps say so, against a
    terminal state held (stamped no later than it: the end is the last word) or another held
    with its stamp, which the detector keeps for interrupted states only (stamped before it:
    a poll reading it again at its very time is taken), or it says ``submitted``, a task's
    first state, after another (a ``returnImmediately`` reply read after the push saying the
    task waits for input), unless the stamps say it came after."""
    if sent_at is not None and held.stamp is not None:
        stamp, held_stamp = parse_timestamp(sent_at), parse_timestamp(held.stamp)
        if stamp is not None and held_stamp is not None:
            if held._kind.state_class is _TERMINAL:
                return stamp <= held_stamp
            return stamp < held_stamp
    return state is _SUBMITTED and held._kind.state is not _SUBMITTED


def _add(counts: dict[str, int], key: str, delta: int) -> None:
    """Move a per-agent count; an agent whose count reaches 0 leaves the dict."""
    left = counts.get(key, 0) + delta
    if left:
        counts[key] = left
    else:
        del counts[key]


class Ledger(Protocol):
    """The store seam: what the detector asks of a ledger, wherever its observations live.

    :class:`TaskLedger` keeps them in this process (the default, and the fast path);
    ``otel_a2a.store.sqlite.SqliteLedger`` in a file shared by the processes of one host
    (``OTEL_A2A_LEDGER_PATH``). Each gives the same answers to the same calls (one suite of
    semantic tests runs against both): the last observation per task, newest wins by ``at``
    (monotonic seconds), late frames refused, at most ``max_tasks`` tasks with terminal ones
    evicted first, oldest first. ``evicted_total`` counts this process's evictions. A store
    that fails on an operation answers as if the task were unknown, never raises.
    """

    max_tasks: int
    evicted_total: int

    def observe(self, obs: Observation, sent_at: str | None = None) -> Observation | None: ...

    def reobserve(
        self,
        task_id: str,
        agent: str,
        state: TaskState,
        raw: str,
        exact: bool,
        source: str,
        etag: str | None,
        at: float,
    ) -> bool: ...

    def touch(self, task_id: str, at: float) -> bool: ...

    def get(self, task_id: str) -> Observation | None: ...

    def forget(self, task_id: str) -> Observation | None: ...

    def counts_by_class(self) -> dict[StateClass, int]: ...

    def stale_by_agent(
        self, now: float, heartbeat_of: Callable[[str], float]
    ) -> dict[str, int]: ...

    def oldest(self, terminal: bool) -> Observation | None: ...

    def snapshot(self) -> list[Observation]: ...

    def __len__(self) -> int: ...

    def __contains__(self, task_id: object) -> bool: ...


class TaskLedger:
    """Bounded, thread-safe map task id -> last :class:`Observation`, O(1) per operation.

    When full, a new task evicts the least recently observed terminal task (a terminal task
    never changes, so it is the cheapest to forget), else the least recently observed
    non-terminal one; ``evicted_total`` counts them (metric ``otel_a2a.task.evicted``).
    """

    def __init__(self, max_tasks: int) -> None:
        if max_tasks < 1:
            raise ValueError(f"max_tasks must be >= 1, got {max_tasks!r}")
        self.max_tasks = max_tasks
        self.evicted_total = 0
        self._lock = threading.Lock()
        fork_safe(self, "_lock")
        self._index: dict[str, Observation] = {}
        self._terminal = _sentinel()
        self._live = _sentinel()
        self._n_terminal = 0
        self._n_interrupted = 0
        # Non-terminal tasks per agent: the stale scan needs every agent's heartbeat up front
        # to know when it may stop, and reports 0 for agents that have tasks but none stale.
        self._live_by_agent: dict[str, int] = {}
        # Interrupted tasks per agent, of those: never stale (they wait for the caller).
        self._interrupted_by_agent: dict[str, int] = {}
        # Of the last scan, the share of non-terminal tasks past the heartbeat (stale or
        # interrupted): what a walk from the oldest end visits; picks the cheaper end.
        self._old_fraction = 0.0

    # -- plumbing (caller holds the lock) -------------------------------------------------------
    # Moving a node is pure pointer work; the counters change only when a task enters or
    # leaves, changes state class or agent, which keeps the common re-observation cheap.

    def _count(self, node: Observation, delta: int) -> None:
        cls = node._kind.state_class
        if cls is _TERMINAL:
            self._n_terminal += delta
            return
        agent = node.agent
        if cls is _INTERRUPTED:
            self._n_interrupted += delta
            _add(self._interrupted_by_agent, agent, delta)
        _add(self._live_by_agent, agent, delta)

    @staticmethod
    def _detach(node: Observation) -> None:
        prev, nxt = node._prev, node._next
        prev._next = nxt
        nxt._prev = prev
        node._prev = node._next = _DETACHED

    # -- operations ------------------------------------------------------------------------------

    def observe(self, obs: Observation, sent_at: str | None = None) -> Observation | None:
        """Record ``obs`` as the task's last observation; return the previous one (or None).

        The ledger links ``obs`` itself in (no copy) unless it is already linked somewhere,
        in which case it links a copy; either way the caller should not modify it afterwards.
        The returned previous observation is detached and never changes again.

        Nothing is recorded and :data:`LATE` is returned for an observation older than the
        one held: taken before it (``at``) and recorded after it by another thread, it must not
        replace newer state or a newer card etag. Likewise for a late frame or reply (sent
        before the state held, read after it; see ``_late``): ``sent_at``, the agent's
        timestamp of a non-terminal report, no later than that of the terminal state held or
        earlier than that of the interrupted state held, or ``submitted`` after another
        state. Judged under the lock, so no
        observation can land between the check and the update. (A stream's frames move the
        held ``at`` forward: a state read a moment before such a frame is left to the stream,
        which carries the task's status updates.)
        """
        kind = obs._kind
        # Hot path: list moves are inlined (a method call costs as much as the move itself).
        with self._lock:
            node = obs if obs._prev is _DETACHED else obs._copy(obs.at)
            index = self._index
            prev = index.get(node.task_id)
            if prev is not None and (
                node.at < prev.at
                or (
                    (kind.state is _SUBMITTED or (sent_at is not None and prev.stamp is not None))
                    and _late(prev, kind.state, sent_at)
                )
            ):
                return LATE
            if prev is not None:
                p, n = prev._prev, prev._next
                p._next = n
                n._prev = p
                prev._prev = prev._next = _DETACHED
                if prev._kind.state_class is not kind.state_class or prev.agent != node.agent:
                    self._count(prev, -1)
                    self._count(node, 1)
            elif len(index) >= self.max_tasks:  # evict, inlined for the same reason
                head = self._terminal if self._n_terminal else self._live
                victim = head._next
                n = victim._next
                head._next = n
                n._prev = head
                victim._prev = victim._next = _DETACHED
                del index[victim.task_id]
                self.evicted_total += 1
                if victim._kind.state_class is not kind.state_class or victim.agent != node.agent:
                    self._count(victim, -1)
                    self._count(node, 1)
            else:
                self._count(node, 1)
            head = self._terminal if kind.state_class is _TERMINAL else self._live
            tail = head._prev
            tail._next = node
            node._prev = tail
            node._next = head
            head._prev = node
            index[node.task_id] = node
        return prev

    def reobserve(
        self,
        task_id: str,
        agent: str,
        state: TaskState,
        raw: str,
        exact: bool,
        source: str,
        etag: str | None,
        at: float,
    ) -> bool:
        """The task observed again exactly as held, only later (the common poll of a live
        task): the held observation's ``at`` moves to ``at`` in place, no new node. False, and
        nothing changed, unless the task is tracked with that very kind, agent and etag, held
        non-terminal, observed no later than ``at``: the caller then records an
        :class:`Observation` (``observe``). The node replaced by ``observe`` would have been
        returned detached; nothing is returned here, and an observation returned as previous
        still never changes."""
        kind = _kind(state, raw, exact, source)
        with self._lock:
            node = self._index.get(task_id)
            if (
                node is None
                or node._kind is not kind
                or kind.state_class is _TERMINAL
                or at < node.at
                or node.agent != agent
                or node.etag != etag
            ):
                return False
            node.at = at
            head = self._live
            if head._prev is not node:
                p, n = node._prev, node._next
                p._next = n
                n._prev = p
                tail = head._prev
                tail._next = node
                node._prev = tail
                node._next = head
                head._prev = node
            return True

    def touch(self, task_id: str, at: float) -> bool:
        """An open stream's frame: the task was seen at ``at`` (never moved backwards).

        Refreshes the tracked observation's ``at`` in place (no allocation: streams are the
        hot path) and makes it the most recently observed. False when the task is not tracked.
        """
        with self._lock:
            node = self._index.get(task_id)
            if node is None:
                return False
            if at > node.at:
                node.at = at
            head = self._terminal if node._kind.state_class is _TERMINAL else self._live
            if head._prev is not node:
                p, n = node._prev, node._next
                p._next = n
                n._prev = p
                tail = head._prev
                tail._next = node
                node._prev = tail
                node._next = head
                head._prev = node
            return True

    def get(self, task_id: str) -> Observation | None:
        return self._index.get(task_id)  # a single dict read is atomic under the GIL

    def forget(self, task_id: str) -> Observation | None:
        """Stop tracking the task; return its last observation."""
        with self._lock:
            node = self._index.pop(task_id, None)
            if node is not None:
                self._detach(node)
                self._count(node, -1)
            return node

    def counts_by_class(self) -> dict[StateClass, int]:
        """Tracked tasks per ``otel_a2a.task.state.class`` (``unknown`` counts as active)."""
        with self._lock:
            live = len(self._index) - self._n_terminal
            return {
                StateClass.ACTIVE: live - self._n_interrupted,
                StateClass.INTERRUPTED: self._n_interrupted,
                StateClass.TERMINAL: self._n_terminal,
            }

    def stale_by_agent(self, now: float, heartbeat_of: Callable[[str], float]) -> dict[str, int]:
        """Active tasks whose last observation is older than their agent's heartbeat.

        Interrupted tasks (``input-required``, ``auth-required``) are never stale: they wait
        for the caller, not for the worker. Every agent with a non-terminal task appears, with
        0 when none is stale (so the gauge goes to 0 instead of disappearing). The non-terminal
        list is in observation order, which is time order up to ``_ORDER_SLACK``, so the walk
        never needs every node: from the oldest end it counts stale nodes and stops past the
        point where every node is fresh for the *smallest* heartbeat; from the newest end it
        counts fresh nodes and stops past the point where every node is past the *largest*
        one (stale = active tasks minus fresh ones). It walks from the end that was cheaper
        last time (the share of nodes past the heartbeat changes slowly), so the cost is about
        min(past, fresh) nodes; at worst one pass. Heartbeats are looked up before the lock is
        taken: with many agents that is the longer part, and requests wait for this lock.
        """
        with self._lock:
            agents = list(self._live_by_agent)
        if not agents:
            return {}
        known = {agent: float(heartbeat_of(agent)) for agent in agents}
        with self._lock:
            live = self._live_by_agent
            if not live:
                return {}
            # agents that got their first live task meanwhile (few) are looked up now
            hb = {agent: known.get(agent) or float(heartbeat_of(agent)) for agent in live}
            total = len(self._index) - self._n_terminal
            if len(hb) == 1:  # one agent (the common case): no per-node dict work
                ((agent, h),) = hb.items()
                stale, past = self._walk_one(now, h)
                self._old_fraction = past / total
                return {agent: stale}
            head = self._live
            seen = dict.fromkeys(hb, 0)
            past = 0
            if self._old_fraction <= 0.5:
                stop = now - min(hb.values()) + _ORDER_SLACK
                node = head._next
                while node is not head:
                    at = node.at
                    if at >= stop:
                        break
                    agent = node.agent
                    if now - at > hb[agent]:
                        past += 1
                        if node._kind.state_class is not _INTERRUPTED:
                            seen[agent] += 1
                    node = node._next
                out = seen
            else:
                stop = now - max(hb.values()) - _ORDER_SLACK
                node = head._prev
                fresh = 0
                while node is not head:
                    at = node.at
                    if at < stop:
                        break
                    agent = node.agent
                    if not now - at > hb[agent]:  # fresh; NaN counts as stale
                        fresh += 1
                        if node._kind.state_class is not _INTERRUPTED:
                            seen[agent] += 1
                    node = node._prev
                waiting = self._interrupted_by_agent
                out = {a: live[a] - waiting.get(a, 0) - n for a, n in seen.items()}
                past = total - fresh
            self._old_fraction = past / total
            return out

    def _walk_one(self, now: float, h: float) -> tuple[int, int]:
        """``(stale, past)`` when every non-terminal task has the same heartbeat ``h``:
        active tasks past it, and all the tasks past it (interrupted ones included)."""
        head = self._live
        if self._old_fraction <= 0.5:
            stop = now - h + _ORDER_SLACK
            node = head._next
            stale = past = 0
            while node is not head:
                at = node.at
                if at >= stop:
                    break
                if now - at > h:
                    past += 1
                    if node._kind.state_class is not _INTERRUPTED:
                        stale += 1
                node = node._next
            return stale, past
        stop = now - h - _ORDER_SLACK
        node = head._prev
        fresh = fresh_active = 0
        while node is not head:
            at = node.at
            if at < stop:
                break
            if not now - at > h:
                fresh += 1
                if node._kind.state_class is not _INTERRUPTED:
                    fresh_active += 1
            node = node._prev
        live = len(self._index) - self._n_terminal
        return live - self._n_interrupted - fresh_active, live - fresh

    def oldest(self, terminal: bool) -> Observation | None:
        """The least recently observed task of one list (eviction order); for tests/diagnostics."""
        with self._lock:
            head = self._terminal if terminal else self._live
            node = head._next
            return None if node is head else node

    def snapshot(self) -> list[Observation]:
        """All observations, terminal list then non-terminal list, oldest first. O(n)."""
        with self._lock:
            out: list[Observation] = []
            for head in (self._terminal, self._live):
                node = head._next
                while node is not head:
                    out.append(node)
                    node = node._next
            return out

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._index
