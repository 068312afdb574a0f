"""A process forked while another thread holds one of otel-a2a's locks works in the child.

Deterministic: for every lock registered (``otel_a2a.locks``), a thread takes it and keeps
it until the parent's ``fork`` has returned; the child then makes real A2A calls (a card, a
``SendMessage``, a ``GetTask`` over loopback HTTP, then a ``liveness_decision``) and exits 0.
A child that waits on a lock copied held is killed at the deadline and fails the test.
Pre-fork servers are tested too: a ``multiprocessing`` pool forked from a parent whose
threads are busy with A2A calls, each worker making its own.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from otel_a2a import liveness_decision, locks
from tests.instrumentation.conftest import Harness, make_harness
from tests.support.fake_agent import FakeAgent

CHILD_DEADLINE = 20.0  # seconds: a child still running then is stuck on a lock


@pytest.fixture
def served() -> Iterator[tuple[Harness, FakeAgent]]:
    otel, instrumentor = make_harness()
    agent = FakeAgent()
    try:
        with agent.serve():
            yield otel, agent
    finally:
        instrumentor.uninstrument()


def _a2a_calls(agent: FakeAgent, task_id: str, client: httpx.Client | None = None) -> None:
    """A card fetch, a new task, a poll and a decision on it: every lock's users."""
    if client is None:
        with httpx.Client(base_url=agent.base, timeout=5.0) as own:
            _a2a_calls(agent, task_id, own)
        return
    client.get("/.well-known/agent-card.json").raise_for_status()
    message = {"messageId": "m-" + task_id, "role": "ROLE_USER", "parts": [], "taskId": task_id}
    agent.rpc(client, "SendMessage", {"message": message}).raise_for_status()
    agent.rpc(client, "GetTask", {"id": task_id}).raise_for_status()
    with liveness_decision(task_id):
        pass


def _child(agent: FakeAgent, task_id: str) -> None:  # pragma: no cover - runs in the child
    code = 1
    try:
        _a2a_calls(agent, task_id)
        code = 0
    finally:
        os._exit(code)


def _wait(pid: int) -> int | None:
    """The child's exit code, or None if it was still running at the deadline (killed)."""
    deadline = time.monotonic() + CHILD_DEADLINE
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)  # polling a child's exit, not synchronising with it
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _fork_while_held(owner: Any, name: str, agent: FakeAgent, task_id: str) -> int | None:
    taken, forked = threading.Event(), threading.Event()

    def hold() -> None:
        lock = getattr(owner, name)
        with lock:
            taken.set()
            forked.wait(CHILD_DEADLINE)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(CHILD_DEADLINE)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        _child(agent, task_id)
    forked.set()
    holder.join(CHILD_DEADLINE)
    return _wait(pid)


def test_a_child_forked_while_each_lock_is_held_makes_its_a2a_calls(
    served: tuple[Harness, FakeAgent],
) -> None:
    otel, agent = served
    _a2a_calls(agent, "warm-up")  # every lazily made structure exists before the forks
    # one of each kind of lock, the newest (this test's runtime's): earlier tests' objects
    # still alive hold locks of the same kinds, which the child's calls never take
    newest: dict[tuple[str, str], tuple[Any, str]] = {}
    for owner, name in locks.registered():
        kind = getattr(owner, "__name__", None) or type(owner).__qualname__
        newest[(kind, name)] = (owner, name)
    held = list(newest.values())
    names = {f"{type(owner).__name__}.{name}" for owner, name in held}
    # the ledger, the registry, metrics, labels, SDK set-up, the span processor, toggles
    for expected in (
        "TaskLedger._lock",
        "CardRegistry._lock",
        "Tally._lock",
        "AgentLabels._lock",
        "Runtime.setup_lock",
        "Runtime.judged_lock",
        "module._KINDS_LOCK",
        "ABCMeta._toggle_lock",  # A2AInstrumentor's
        "OnImport._lock",
    ):
        assert expected in names, sorted(names)
    failed = {
        f"{getattr(owner, '__name__', type(owner).__name__)}.{name}": code
        for i, (owner, name) in enumerate(held)
        if (code := _fork_while_held(owner, name, agent, f"fork-{i}")) != 0
    }
    assert failed == {}
    # the parent goes on with the locks it had: its own calls still work and are observed
    _a2a_calls(agent, "after")
    assert otel.spans("GetTask")


def _worker(task_id: str) -> bool:  # runs in a forked pool worker
    from tests.support import fake_agent

    agent = fake_agent.FakeAgent()
    agent.base = os.environ["FORK_TEST_AGENT"]
    _a2a_calls(agent, task_id)
    return True


def test_a_prefork_pool_forked_under_busy_threads_serves(
    served: tuple[Harness, FakeAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """multiprocessing's fork pool, the pre-fork server's shape, forked while two threads
    of the parent make A2A calls in a loop: every worker makes its own calls."""
    _, agent = served
    monkeypatch.setenv("FORK_TEST_AGENT", agent.base)
    stop = threading.Event()

    def busy(prefix: str) -> None:
        # one client each, made before the forks: a thread making an SSL context when the
        # parent forks leaves OpenSSL's lock held in the child (not otel-a2a's to guard)
        with httpx.Client(base_url=agent.base, timeout=5.0) as client:
            ready.release()
            i = 0
            while not stop.is_set():
                _a2a_calls(agent, f"{prefix}-{i}", client)
                i += 1

    threads = [threading.Thread(target=busy, args=(p,)) for p in ("busy-a", "busy-b")]
    ready = threading.Semaphore(0)
    for thread in threads:
        thread.start()
    for _ in threads:
        ready.acquire(timeout=CHILD_DEADLINE)
    try:
        for round_ in range(5):
            context = multiprocessing.get_context("fork")
            with context.Pool(2, maxtasksperchild=1) as pool:
                result = pool.map_async(_worker, [f"pool-{round_}-{i}" for i in range(4)])
                assert result.get(timeout=CHILD_DEADLINE) == [True] * 4
    finally:
        stop.set()
        for thread in threads:
            thread.join(CHILD_DEADLINE)
