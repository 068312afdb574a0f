"""The ledger's semantics, for every store: reference-model equivalence, eviction order, stale
scan, threads, late observations; and the in-memory ledger's memory bound.

Each semantic test runs against the in-memory :class:`TaskLedger` and the shared
:class:`SqliteLedger` (``new_ledger``): the same calls must give the same answers.
"""

from __future__ import annotations

import itertools
import math
import random
import shutil
import tempfile
import threading
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from otel_a2a.detect.ledger import LATE, Ledger, Observation, TaskLedger
from otel_a2a.protocol.states import StateClass, TaskState
from otel_a2a.store.sqlite import SqliteLedger

from .helpers import make_obs

NewLedger = Callable[[int], Ledger]


class SqliteFiles:
    """New SQLite ledgers in one directory; every operation error they report is kept (a
    semantic test must see none)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.errors: list[BaseException] = []
        self._n = itertools.count()

    def __call__(self, max_tasks: int) -> Ledger:
        path = self.directory / f"ledger-{next(self._n)}.db"
        return SqliteLedger(path, max_tasks, on_error=self.errors.append, busy_timeout=5.0)


@pytest.fixture(params=["memory", "sqlite"])
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NewLedger]:
    if request.param == "memory":
        yield TaskLedger
        return
    files = SqliteFiles(tmp_path)
    yield files
    assert not files.errors


TASKS = [f"task-{i}" for i in range(8)]
AGENTS = ["http://a", "http://b", "http://c"]
HEARTBEATS = {"http://a": 5.0, "http://b": 20.0, "http://c": 60.0}


def test_observe_returns_previous_and_get_returns_last(new_ledger: NewLedger) -> None:
    ledger = new_ledger(10)
    first = make_obs("t", TaskState.WORKING, at=1.0)
    assert ledger.observe(first) is None
    second = make_obs("t", TaskState.COMPLETED, at=2.0)
    assert ledger.observe(second) == first
    got = ledger.get("t")
    assert got is not None and got.state is TaskState.COMPLETED and got.at == 2.0
    assert len(ledger) == 1 and "t" in ledger
    assert ledger.counts_by_class() == {
        StateClass.ACTIVE: 0,
        StateClass.INTERRUPTED: 0,
        StateClass.TERMINAL: 1,
    }


def test_observation_fields_round_trip() -> None:
    obs = Observation(
        "t", "http://a", TaskState.INPUT_REQUIRED, "input-required", True, 3.5, "e", "GetTask"
    )
    assert (
        obs.task_id,
        obs.agent,
        obs.state,
        obs.raw,
        obs.exact,
        obs.at,
        obs.etag,
        obs.source,
    ) == ("t", "http://a", TaskState.INPUT_REQUIRED, "input-required", True, 3.5, "e", "GetTask")
    assert "input-required" in repr(obs)
    assert obs == Observation(
        "t", "http://a", TaskState.INPUT_REQUIRED, "input-required", True, 3.5, "e", "GetTask"
    )


def test_eviction_prefers_oldest_terminal_then_oldest_live(new_ledger: NewLedger) -> None:
    ledger = new_ledger(3)
    ledger.observe(make_obs("live-old", TaskState.WORKING, at=1.0))
    ledger.observe(make_obs("done-old", TaskState.COMPLETED, at=2.0))
    ledger.observe(make_obs("done-new", TaskState.FAILED, at=3.0))
    ledger.observe(make_obs("new-1", TaskState.WORKING, at=4.0))
    assert "done-old" not in ledger and ledger.evicted_total == 1
    ledger.observe(make_obs("new-2", TaskState.WORKING, at=5.0))
    assert "done-new" not in ledger and ledger.evicted_total == 2
    ledger.touch("live-old", 6.0)  # refreshed: now the most recently observed
    ledger.observe(make_obs("new-3", TaskState.WORKING, at=7.0))
    assert "new-1" not in ledger and "live-old" in ledger and ledger.evicted_total == 3
    assert len(ledger) == 3


def test_touch_refreshes_time_only_and_never_backwards(new_ledger: NewLedger) -> None:
    ledger = new_ledger(10)
    assert ledger.touch("missing", 5.0) is False
    ledger.observe(make_obs("t", TaskState.WORKING, at=10.0, etag="e1"))
    assert ledger.touch("t", 12.0) is True
    got = ledger.get("t")
    assert (
        got is not None and got.at == 12.0 and got.etag == "e1" and got.state is TaskState.WORKING
    )
    ledger.touch("t", 11.0)
    again = ledger.get("t")
    assert again is not None and again.at == 12.0


def test_reobserve_refreshes_only_the_very_observation_held(new_ledger: NewLedger) -> None:
    ledger = new_ledger(10)
    held = make_obs("t", TaskState.WORKING, at=10.0, etag="e1")
    ledger.observe(held)
    ledger.observe(make_obs("u", TaskState.WORKING, at=11.0, etag="e1"))
    same = ("t", held.agent, TaskState.WORKING, held.raw, True, "GetTask")
    assert ledger.reobserve(*same, "e1", 12.0) is True
    got = ledger.get("t")
    assert got is not None and got.at == 12.0 and got == held._copy(12.0)
    if isinstance(ledger, TaskLedger):
        assert got is held  # in place: no new node
    assert [o.task_id for o in ledger.snapshot()] == ["u", "t"]  # now the most recent
    for other in (
        ("t", held.agent, TaskState.WORKING, held.raw, True, "GetTask", "e2", 13.0),  # etag
        ("t", "http://other", TaskState.WORKING, held.raw, True, "GetTask", "e1", 13.0),
        ("t", held.agent, TaskState.WORKING, "working", True, "GetTask", "e1", 13.0),  # raw
        ("t", held.agent, TaskState.WORKING, held.raw, True, "SendMessage", "e1", 13.0),
        ("t", held.agent, TaskState.SUBMITTED, held.raw, True, "GetTask", "e1", 13.0),
        ("t", *same[1:], "e1", 11.5),  # older than held
        ("missing", *same[1:], "e1", 13.0),
    ):
        assert ledger.reobserve(*other) is False
    again = ledger.get("t")
    assert again is not None and again.at == 12.0
    done = make_obs("d", TaskState.COMPLETED, at=1.0, etag="e1")
    ledger.observe(done)
    args = ("d", done.agent, TaskState.COMPLETED, done.raw, True, "GetTask", "e1", 2.0)
    assert ledger.reobserve(*args) is False  # terminal: observe() judges and keeps stamps
    kept = ledger.get("d")
    assert kept is not None and kept.at == 1.0


def test_forget_returns_last_and_updates_counts(new_ledger: NewLedger) -> None:
    ledger = new_ledger(10)
    ledger.observe(make_obs("t", TaskState.AUTH_REQUIRED))
    forgotten = ledger.forget("t")
    assert forgotten is not None and forgotten.state is TaskState.AUTH_REQUIRED
    assert ledger.forget("t") is None
    assert len(ledger) == 0 and ledger.counts_by_class()[StateClass.INTERRUPTED] == 0
    assert ledger.stale_by_agent(1e9, lambda a: 1.0) == {}


def test_observe_of_a_linked_observation_copies() -> None:
    a, b = TaskLedger(5), TaskLedger(5)
    obs = make_obs("t")
    a.observe(obs)
    b.observe(obs)  # already linked in a: b gets its own copy, a's list stays intact
    b.observe(make_obs("u"))
    assert a.snapshot() == [obs] and len(b.snapshot()) == 2


def test_stale_by_agent_reports_zero_for_fresh_agents(new_ledger: NewLedger) -> None:
    ledger = new_ledger(100)
    ledger.observe(make_obs("a1", agent="http://a", at=0.0))
    ledger.observe(make_obs("a2", agent="http://a", at=50.0))
    ledger.observe(make_obs("b1", agent="http://b", at=50.0))
    ledger.observe(make_obs("done", TaskState.COMPLETED, agent="http://c", at=0.0))
    stale = ledger.stale_by_agent(60.0, lambda agent: 30.0)
    assert stale == {"http://a": 1, "http://b": 0}  # terminal tasks never go stale


@pytest.mark.parametrize("state", [TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED])
def test_interrupted_tasks_are_never_stale(new_ledger: NewLedger, state: TaskState) -> None:
    """They wait for the caller; their agent still appears (0), from either walk direction,
    and a task that resumes working ages again."""
    ledger = new_ledger(100)
    ledger.observe(make_obs("w", agent="http://a", at=0.0))
    ledger.observe(make_obs("i", state, agent="http://a", at=0.0))
    ledger.observe(make_obs("only", state, agent="http://b", at=0.0))
    for _ in range(3):  # the first scan finds most nodes old: the next walk from the other end
        assert ledger.stale_by_agent(60.0, lambda agent: 30.0) == {"http://a": 1, "http://b": 0}
        assert ledger.stale_by_agent(60.0, {"http://a": 30.0, "http://b": 5.0}.__getitem__) == {
            "http://a": 1,
            "http://b": 0,
        }
    ledger.observe(make_obs("only", TaskState.WORKING, agent="http://b", at=1.0))
    assert ledger.stale_by_agent(60.0, lambda agent: 30.0) == {"http://a": 1, "http://b": 1}
    ledger.forget("w")
    assert ledger.stale_by_agent(60.0, lambda agent: 30.0) == {"http://a": 0, "http://b": 1}


def test_stale_scan_at_100k_counts_exactly_from_either_end() -> None:
    """In memory (the walk's two directions); its speed is a ``make bench`` row (``stale
    gauge``), not a wall-clock assert here."""
    ledger = TaskLedger(100_000)
    for i in range(100_000):  # one in 7 waits for the caller: never stale
        state = TaskState.INPUT_REQUIRED if i % 7 == 0 else TaskState.WORKING
        ledger.observe(make_obs(f"t{i}", state, agent=AGENTS[i % 3], at=i / 1000.0))
    for now in (1e6, 1e6, 60.0, 60.0):  # all stale (both walk directions), then partly
        stale = ledger.stale_by_agent(now, HEARTBEATS.__getitem__)
        assert sum(stale.values()) == sum(
            1
            for o in ledger.snapshot()
            if now - o.at > HEARTBEATS[o.agent] and o.state is TaskState.WORKING
        )


def test_memory_per_task_is_bounded() -> None:
    n = 50_000
    ids = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(n)]
    ledger = TaskLedger(n)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, task_id in enumerate(ids):
            ledger.observe(
                Observation(
                    task_id,
                    "http://a",
                    TaskState.WORKING,
                    "TASK_STATE_WORKING",
                    True,
                    float(i),
                    "e",
                    "GetTask",
                )
            )
        per_task = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_task < 250, per_task  # task id strings not counted (allocated before)


@pytest.mark.parametrize(
    "weird",
    ["", "x" * 10_000, "\u0000\ud800", "🦄"],
)
def test_weird_ids_and_times_do_not_raise(weird: str) -> None:
    """In memory (SQLite cannot store a lone surrogate: ``tests/store`` counts that error)."""
    ledger = TaskLedger(2)
    ledger.observe(make_obs(weird, at=math.nan, agent=weird, etag=None, raw=weird))
    ledger.observe(make_obs(weird + "2", TaskState.UNKNOWN, at=math.inf))
    ledger.observe(make_obs(weird + "3", at=-math.inf))
    ledger.touch(weird, math.nan)
    ledger.stale_by_agent(math.nan, lambda a: 1.0)
    ledger.stale_by_agent(0.0, lambda a: math.nan)
    ledger.counts_by_class()
    ledger.forget(weird)
    assert len(ledger) <= 2


def test_max_tasks_must_be_positive(new_ledger: NewLedger) -> None:
    with pytest.raises(ValueError):
        new_ledger(0)


# -- reference model ------------------------------------------------------------------------


class _Model:
    """The obvious implementation: two OrderedDicts (oldest first) of plain tuples."""

    def __init__(self, max_tasks: int) -> None:
        self.max_tasks = max_tasks
        self.lists: dict[bool, OrderedDict[str, tuple[TaskState, str, float]]] = {
            True: OrderedDict(),
            False: OrderedDict(),
        }
        self.evicted = 0

    def find(self, task_id: str) -> tuple[TaskState, str, float] | None:
        for lst in self.lists.values():
            if task_id in lst:
                return lst[task_id]
        return None

    def observe(self, task_id: str, state: TaskState, agent: str, at: float) -> None:
        if self.find(task_id) is not None:
            self.forget(task_id)
        elif sum(map(len, self.lists.values())) >= self.max_tasks:
            victims = self.lists[True] or self.lists[False]
            victims.popitem(last=False)
            self.evicted += 1
        self.lists[state.is_terminal][task_id] = (state, agent, at)

    def touch(self, task_id: str, at: float) -> bool:
        for lst in self.lists.values():
            if task_id in lst:
                state, agent, old = lst.pop(task_id)
                lst[task_id] = (state, agent, max(old, at))
                return True
        return False

    def forget(self, task_id: str) -> None:
        for lst in self.lists.values():
            lst.pop(task_id, None)

    def counts(self) -> dict[StateClass, int]:
        out = dict.fromkeys(StateClass, 0)
        for lst in self.lists.values():
            for state, _agent, _at in lst.values():
                out[state.state_class] += 1
        return out

    def stale(self, now: float) -> dict[str, int]:
        out: dict[str, int] = {}
        for state, agent, at in self.lists[False].values():
            stale = now - at > HEARTBEATS[agent] and state.state_class is StateClass.ACTIVE
            out[agent] = out.get(agent, 0) + stale
        return out


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ledger = self.new(3)  # small: eviction is exercised constantly
        self.model = _Model(3)
        self.now = 0.0

    def new(self, max_tasks: int) -> Ledger:
        return TaskLedger(max_tasks)

    @rule(size=st.sampled_from([1, 2, 3, 5, 100]))
    @precondition(lambda self: len(self.ledger) == 0)
    def resize_when_empty(self, size: int) -> None:
        self.ledger = self.new(size)
        self.model = _Model(size)

    @rule(
        task_id=st.sampled_from(TASKS),
        state=st.sampled_from(list(TaskState)),
        agent=st.sampled_from(AGENTS),
        dt=st.sampled_from([0.0, 0.5, 3.0, 10.0, 40.0]),
    )
    def observe(self, task_id: str, state: TaskState, agent: str, dt: float) -> None:
        self.now += dt
        expected_prev = self.model.find(task_id)
        prev = self.ledger.observe(make_obs(task_id, state, agent=agent, at=self.now))
        if (
            state is TaskState.SUBMITTED
            and expected_prev is not None
            and expected_prev[0] is not state
        ):  # a task's first state, after another: a late reply, not recorded
            assert prev is LATE
            got = self.ledger.get(task_id)
            assert got is not None and (got.state, got.agent, got.at) == expected_prev
            return
        self.model.observe(task_id, state, agent, self.now)
        if expected_prev is None:
            assert prev is None
        else:
            assert prev is not None and (prev.state, prev.agent, prev.at) == expected_prev
        got = self.ledger.get(task_id)
        assert got is not None and (got.state, got.agent, got.at) == (state, agent, self.now)

    @rule(
        task_id=st.sampled_from(TASKS),
        state=st.sampled_from(list(TaskState)),
        agent=st.sampled_from(AGENTS),
        dt=st.sampled_from([-1.0, 0.0, 3.0]),
    )
    def reobserve(self, task_id: str, state: TaskState, agent: str, dt: float) -> None:
        at = self.now + dt  # -1: older than what may be held
        self.now = max(self.now, at)
        held = self.model.find(task_id)
        expected = (
            held is not None
            and held[0] is state
            and held[1] == agent
            and not state.is_terminal
            and at >= held[2]
        )
        spelled = "TASK_STATE_" + state.name
        got = self.ledger.reobserve(task_id, agent, state, spelled, True, "GetTask", '"v1"', at)
        assert got == expected
        if expected:  # the same as observing it again
            self.model.observe(task_id, state, agent, at)

    @rule(task_id=st.sampled_from(TASKS), dt=st.sampled_from([0.0, 1.0, 30.0]))
    def touch(self, task_id: str, dt: float) -> None:
        self.now += dt
        assert self.ledger.touch(task_id, self.now) == self.model.touch(task_id, self.now)

    @rule(task_id=st.sampled_from(TASKS))
    def forget(self, task_id: str) -> None:
        expected = self.model.find(task_id)
        got = self.ledger.forget(task_id)
        self.model.forget(task_id)
        assert (got is None) == (expected is None)

    @rule(dt=st.sampled_from([0.0, 4.0, 6.0, 21.0, 61.0]))
    def stale(self, dt: float) -> None:
        now = self.now + dt
        expected = self.model.stale(now)
        for _ in range(2):  # the second call may walk from the other end
            assert self.ledger.stale_by_agent(now, HEARTBEATS.__getitem__) == expected
        single = self.ledger.stale_by_agent(now, lambda agent: 5.0)
        assert sum(single.values()) == sum(
            1
            for state, _a, at in self.model.lists[False].values()
            if now - at > 5.0 and state.state_class is StateClass.ACTIVE
        )

    @invariant()
    def same_contents_and_order(self) -> None:
        snapshot = self.ledger.snapshot()
        expected = [
            (task_id, *value)
            for terminal in (True, False)
            for task_id, value in self.model.lists[terminal].items()
        ]
        assert [(o.task_id, o.state, o.agent, o.at) for o in snapshot] == expected
        assert len(self.ledger) == len(expected)
        assert self.ledger.counts_by_class() == self.model.counts()
        assert self.ledger.evicted_total == self.model.evicted
        for terminal in (True, False):
            oldest = self.ledger.oldest(terminal)
            first = next(iter(self.model.lists[terminal]), None)
            assert (oldest.task_id if oldest else None) == first


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


class SqliteLedgerMachine(LedgerMachine):
    """The same rules against the shared store (a new file for every ledger)."""

    def __init__(self) -> None:
        self.files = SqliteFiles(Path(tempfile.mkdtemp(prefix="otel-a2a-ledger-")))
        super().__init__()

    def new(self, max_tasks: int) -> Ledger:
        return self.files(max_tasks)

    @invariant()
    def no_store_error(self) -> None:
        assert not self.files.errors

    def teardown(self) -> None:
        shutil.rmtree(self.files.directory, ignore_errors=True)


TestSqliteLedgerMachine = SqliteLedgerMachine.TestCase
TestSqliteLedgerMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_threads_keep_the_ledger_consistent(new_ledger: NewLedger) -> None:
    ledger = new_ledger(50)
    rounds = 5_000 if isinstance(ledger, TaskLedger) else 300
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            barrier.wait()
            for i in range(rounds):
                task_id = f"t{rng.randrange(120)}"
                op = rng.random()
                if op < 0.6:
                    state = rng.choice(list(TaskState))
                    ledger.observe(make_obs(task_id, state, agent=rng.choice(AGENTS), at=float(i)))
                elif op < 0.8:
                    ledger.touch(task_id, float(i))
                elif op < 0.9:
                    ledger.forget(task_id)
                else:
                    ledger.stale_by_agent(float(i), HEARTBEATS.__getitem__)
                    ledger.counts_by_class()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    snapshot = ledger.snapshot()
    assert len(snapshot) == len(ledger) <= 50
    assert len({o.task_id for o in snapshot}) == len(snapshot)
    assert all(ledger.get(o.task_id) == o for o in snapshot)
    counts = ledger.counts_by_class()
    assert sum(counts.values()) == len(ledger)
    assert counts[StateClass.TERMINAL] == sum(o.state.is_terminal for o in snapshot)
    stale = ledger.stale_by_agent(1e9, lambda a: 1.0)
    assert sum(stale.values()) == sum(o.state.state_class is StateClass.ACTIVE for o in snapshot)


def test_a_late_frame_is_refused_under_the_lock(new_ledger: NewLedger) -> None:
    """A non-terminal report stamped no later than the terminal state held is not recorded,
    whatever was checked before the call: the check and the update are one step."""
    ledger = new_ledger(10)

    def done(at: float) -> Observation:
        raw, stamp = "TASK_STATE_COMPLETED", "2026-12-02T15:00:10Z"
        return Observation("t", "a", TaskState.COMPLETED, raw, True, at, None, "GetTask", stamp)

    def frame(at: float = 6.0) -> Observation:
        raw = "TASK_STATE_WORKING"
        return Observation("t", "a", TaskState.WORKING, raw, True, at, None, "SubscribeToTask")

    ledger.observe(done(5.0))
    assert ledger.observe(frame(), "2026-12-02T15:00:09Z") is LATE
    assert ledger.observe(frame(), "2026-12-02T15:00:10Z") is LATE  # the same instant: late
    held = ledger.get("t")
    assert held is not None and held.state is TaskState.COMPLETED and held.at == 5.0
    assert ledger.observe(frame(), "not a timestamp") is not LATE  # unreadable: by arrival
    ledger.observe(done(7.0))
    prev = ledger.observe(frame(8.0), "2026-12-02T15:00:11Z")  # stamped later: a regression
    assert prev is not None and prev is not LATE and prev.state is TaskState.COMPLETED
    held = ledger.get("t")
    assert held is not None and held.state is TaskState.WORKING


def test_a_frame_sent_before_an_interrupted_state_is_refused(new_ledger: NewLedger) -> None:
    """A push saying ``input-required`` read before a ``working`` frame sent before it: the
    frame, stamped earlier, is late; a report stamped with the interrupted state's very time
    (a poll reading it again) or later is taken."""
    ledger = new_ledger(10)
    waits = "2026-12-02T15:00:10Z"

    def waiting(at: float) -> Observation:
        raw = "TASK_STATE_INPUT_REQUIRED"
        return Observation("t", "a", TaskState.INPUT_REQUIRED, raw, True, at, None, "push", waits)

    def seen(state: TaskState, at: float) -> Observation:
        return Observation("t", "a", state, state.value, True, at, None, "SendMessage")

    ledger.observe(waiting(5.0))
    assert ledger.observe(seen(TaskState.WORKING, 6.0), "2026-12-02T15:00:09.5Z") is LATE
    held = ledger.get("t")
    assert held is not None and held.state is TaskState.INPUT_REQUIRED and held.at == 5.0
    assert ledger.counts_by_class()[StateClass.INTERRUPTED] == 1
    prev = ledger.observe(seen(TaskState.WORKING, 7.0), waits)  # the same instant: taken
    assert prev is not None and prev is not LATE and prev.state is TaskState.INPUT_REQUIRED
    ledger.observe(waiting(8.0))
    prev = ledger.observe(seen(TaskState.WORKING, 9.0), "2026-12-02T15:00:11Z")  # later
    assert prev is not None and prev is not LATE
    held = ledger.get("t")
    assert held is not None and held.state is TaskState.WORKING


@pytest.mark.parametrize("held", [TaskState.INPUT_REQUIRED, TaskState.WORKING, TaskState.COMPLETED])
def test_submitted_after_another_state_is_a_late_reply(
    new_ledger: NewLedger, held: TaskState
) -> None:
    """``submitted`` is a task's first state: reported after another (a ``returnImmediately``
    reply, unstamped, read after the push that said more), it is late, whatever the state
    held; stamped after a terminal state held, it is a real regression, recorded."""
    ledger = new_ledger(10)
    stamp = "2026-12-02T15:00:10Z" if held.state_class is not StateClass.ACTIVE else None
    ledger.observe(Observation("t", "a", held, held.value, True, 5.0, None, "push", stamp))

    def submitted(at: float) -> Observation:
        state = TaskState.SUBMITTED
        return Observation("t", "a", state, state.value, True, at, None, "SendMessage")

    assert ledger.observe(submitted(6.0)) is LATE
    assert ledger.observe(submitted(6.0), "2026-12-02T15:00:09Z") is LATE
    observed = ledger.get("t")
    assert observed is not None and observed.state is held and observed.at == 5.0
    if stamp is not None:
        prev = ledger.observe(submitted(7.0), "2026-12-02T15:00:11Z")
        assert prev is not None and prev is not LATE and prev.state is held
    first = Observation("u", "a", TaskState.SUBMITTED, "submitted", True, 8.0, None, "SendMessage")
    assert ledger.observe(first) is None  # a task's first observation is no late reply


def test_an_observation_older_than_the_one_held_is_not_recorded(new_ledger: NewLedger) -> None:
    """Taken first, recorded last (another thread was faster): it must not replace newer
    state or a newer card etag; an observation of the same instant is recorded."""
    ledger = new_ledger(10)

    def seen(state: TaskState, at: float, etag: str) -> Observation:
        return Observation("t", "a", state, state.value, True, at, etag, "GetTask")

    ledger.observe(seen(TaskState.FAILED, 2.0, "e2"))
    assert ledger.observe(seen(TaskState.WORKING, 1.0, "e1")) is LATE
    held = ledger.get("t")
    assert held is not None and (held.state, held.at, held.etag) == (TaskState.FAILED, 2.0, "e2")
    prev = ledger.observe(seen(TaskState.WORKING, 2.0, "e2"))
    assert prev is not None and prev is not LATE and prev.state is TaskState.FAILED


def test_every_field_survives_the_store(new_ledger: NewLedger) -> None:
    """What the detector reads back: state, spelling, exactness, source, time, etag, agent and
    the terminal stamp; times that are not numbers come back as NaN (SQLite stores NULL)."""
    ledger = new_ledger(10)
    done = Observation(
        "t", "http://a", TaskState.FAILED, "failed", False, 7.25, '"e"', "error-reply", "2026Z"
    )
    ledger.observe(done)
    got = ledger.get("t")
    assert got == done and got is not None and got.stamp == "2026Z"
    assert (got.raw, got.exact, got.source, got.state) == (
        "failed",
        False,
        "error-reply",
        TaskState.FAILED,
    )
    ledger.observe(make_obs("nan", at=math.nan, etag=None))
    odd = ledger.get("nan")
    assert odd is not None and math.isnan(odd.at) and odd.etag is None
    assert ledger.get("missing") is None and "missing" not in ledger and "t" in ledger
