"""The shared SQLite ledger as a store: its file, what it refuses to open, failures on one
operation, fork, and several real processes writing it at once.

Its semantics (the same answers as the in-memory ledger) are tested with the in-memory
ledger's own tests, ``tests/detect/test_ledger.py``, which run against both stores.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from otel_a2a.detect import Detector
from otel_a2a.detect.verdict import DivergenceReason as R
from otel_a2a.protocol.model import Binding, Operation, TaskReport
from otel_a2a.protocol.states import TaskState, read_state
from otel_a2a.store.sqlite import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    TRIM_BATCH,
    LedgerStoreError,
    SqliteLedger,
    clock_id,
)
from tests.detect.helpers import make_card, make_obs

REPO = Path(__file__).resolve().parents[2]
WRITERS = 4
DEADLINE = 120.0  # whole-run guard for the writer processes (they take a few seconds)


def open_ledger(path: Path, max_tasks: int = 10, **kwargs: float) -> tuple[SqliteLedger, list]:
    errors: list[BaseException] = []
    return SqliteLedger(path, max_tasks, on_error=errors.append, **kwargs), errors


def rows(path: Path) -> list[tuple[str, float, str | None]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT task_id, at, etag FROM tasks").fetchall()


def meta_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'count'").fetchone()[0])


# -- the file ---------------------------------------------------------------------------------


def test_the_file_is_private_marked_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger, errors = open_ledger(path)
    ledger.observe(make_obs("t"))  # the -wal and -shm files exist once something is written
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode & 0o077 == 0, (name, oct(mode))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    again, _ = open_ledger(path)  # reopening keeps what is there
    assert again.get("t") == make_obs("t") and not errors


def _other_schema(path: Path) -> None:
    SqliteLedger(path, 10)
    # Its thread's connection is freed by the cycle collector, not at once; closing, it
    # checkpoints the WAL into the file: collected now, not between the test's two reads.
    gc.collect()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()


def _another_database(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")


def _corrupt(path: Path) -> None:
    path.write_bytes(b"this is not a database, only some bytes\n" * 100)


def _directory(path: Path) -> None:
    path.mkdir()


UNUSABLE: dict[str, tuple[Callable[[Path], None] | None, str]] = {
    "missing directory": (None, "missing/ledger.db"),
    "a directory": (_directory, "ledger.db"),
    "corrupt": (_corrupt, "ledger.db"),
    "another database": (_another_database, "ledger.db"),
    "another schema version": (_other_schema, "ledger.db"),
}


@pytest.mark.parametrize("case", list(UNUSABLE))
def test_a_file_that_cannot_serve_is_refused(tmp_path: Path, case: str) -> None:
    prepare, name = UNUSABLE[case]
    path = tmp_path / name
    if prepare is not None:
        prepare(path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(LedgerStoreError):
        SqliteLedger(path, 10)
    if before is not None:
        assert path.read_bytes() == before  # refused, never rewritten


def test_a_place_nobody_may_write_is_refused() -> None:
    """sysfs takes no new file, whoever asks (root included)."""
    assert Path("/sys").is_dir()
    with pytest.raises(LedgerStoreError):
        SqliteLedger("/sys/otel-a2a-ledger.db", 10)


def test_times_of_another_boot_are_dropped(tmp_path: Path) -> None:
    """``at`` is this boot's monotonic clock: under another boot it means nothing."""
    path = tmp_path / "ledger.db"
    ledger, _ = open_ledger(path)
    ledger.observe(make_obs("t"))
    SqliteLedger(path, 10)  # same boot: kept
    assert rows(path) and meta_count(path) == 1
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = 'another boot' WHERE key = 'clock'")
    reopened, _ = open_ledger(path)
    assert rows(path) == [] and len(reopened) == 0 and reopened.get("t") is None
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'clock'").fetchone()[0] == (
            clock_id()
        )


# -- failures on one operation ----------------------------------------------------------------


def test_a_locked_file_fails_the_write_after_the_busy_timeout_and_answers_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    ledger, errors = open_ledger(path, busy_timeout=0.05)
    ledger.observe(make_obs("t", TaskState.WORKING, at=1.0))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process's long write
    try:
        assert ledger.observe(make_obs("t", TaskState.COMPLETED, at=2.0)) is None
        assert ledger.forget("t") is None
        assert [type(e) for e in errors] == [sqlite3.OperationalError] * 2
        held = ledger.get("t")  # WAL: reads do not wait for the writer
        assert held is not None and held.state is TaskState.WORKING
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    prev = ledger.observe(make_obs("t", TaskState.COMPLETED, at=2.0))  # the next one works
    assert prev is not None and prev.state is TaskState.WORKING and len(errors) == 2


def test_an_id_sqlite_cannot_store_is_a_counted_failure(tmp_path: Path) -> None:
    """A lone surrogate (JSON allows ``"\\ud800"``) is no UTF-8: the operation fails, counted;
    nothing raises, and the ledger goes on."""
    ledger, errors = open_ledger(tmp_path / "ledger.db")
    weird = "task-\ud800"
    assert ledger.observe(make_obs(weird)) is None
    assert ledger.get(weird) is None and ledger.touch(weird, 1.0) is False
    assert ledger.forget(weird) is None and weird not in ledger
    assert len(errors) == 5 and all(isinstance(e, UnicodeEncodeError) for e in errors)
    ledger.observe(make_obs("fine"))
    assert len(ledger) == 1 and len(errors) == 5


def test_a_forked_child_uses_its_own_connection(tmp_path: Path) -> None:
    """SQLite forbids using (or closing) a connection in a child of the process that opened
    it: the child opens its own, and the parent's still works afterwards."""
    ledger, errors = open_ledger(tmp_path / "ledger.db")
    ledger.observe(make_obs("parent", at=1.0))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 3
        try:
            seen = ledger.get("parent") is not None
            ledger.observe(make_obs("child", at=2.0))
            code = 0 if seen and not errors else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child = ledger.get("child")
    assert child is not None and child.at == 2.0 and len(ledger) == 2 and not errors


# -- several processes at once -----------------------------------------------------------------


def run_writers(path: Path, max_tasks: int, rounds: int, mode: str) -> list[dict]:
    """``WRITERS`` real processes, released together once all have opened the file."""
    command = [sys.executable, "-m", "tests.support.ledger_writer", str(path), str(max_tasks)]
    procs = [
        subprocess.Popen(
            [*command, str(i), str(rounds), mode],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WRITERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == "READY", (line, proc.stderr.read() if proc.stderr else "")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=DEADLINE)
            assert proc.returncode == 0, err
            results.append(json.loads(out))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_concurrent_processes_newest_observation_wins(tmp_path: Path) -> None:
    """Writers race on the same few tasks, each observation timed before its write: the file
    ends holding, for each task, the newest observation any process recorded, and an older
    one arriving after a newer one was refused, never recorded."""
    path = tmp_path / "ledger.db"
    SqliteLedger(path, 100)
    results = run_writers(path, 100, 1000, "newest")
    assert all(r["errors"] == [] for r in results)
    made = [m for r in results for m in r["made"]]
    assert len(made) == WRITERS * 1000
    newest: dict[str, tuple[float, str]] = {}
    for task_id, at, etag, outcome in made:
        if outcome == "recorded" and (task_id not in newest or at >= newest[task_id][0]):
            newest[task_id] = (at, etag)
    held = {task_id: (at, etag) for task_id, at, etag in rows(path)}
    assert held == newest
    # every refusal was right: something newer had been recorded by then
    for task_id, at, _etag, outcome in made:
        if outcome == "late":
            assert newest[task_id][0] > at


def test_concurrent_processes_keep_the_bound_and_the_count(tmp_path: Path) -> None:
    """Writers adding distinct tasks past the bound: never more rows than ``max_tasks``, the
    row count the file keeps is the real one, and every task that entered is either still
    there or was evicted by exactly one process."""
    path = tmp_path / "ledger.db"
    SqliteLedger(path, 50)
    results = run_writers(path, 50, 500, "bound")
    assert all(r["errors"] == [] for r in results)
    left = rows(path)
    assert len(left) == meta_count(path) == 50
    entered = sum(r["entered"] for r in results)
    evicted = sum(r["evicted"] for r in results)
    assert entered == WRITERS * 500 and entered - evicted == len(left)
    ledger = SqliteLedger(path, 50)
    assert sum(ledger.counts_by_class().values()) == 50 == len(ledger.snapshot())


# -- detectors of several processes on one file -------------------------------------------------

CARD_URL = "http://worker:9001/.well-known/agent-card.json"
AGENT = "http://worker:9001"


def detector_on(path: Path, etag: str) -> Detector:
    det = Detector(max_tasks=10, default_heartbeat=30.0, ledger=SqliteLedger(path, 10))
    det.on_card(CARD_URL, make_card(etag))
    return det


def test_each_process_judges_the_shared_observation_against_its_own_card(tmp_path: Path) -> None:
    """Observations are shared, cards are not: the etag an observation was made under travels
    with it, and each detector compares it with the card it fetched itself."""
    path = tmp_path / "ledger.db"
    poller, same, redeployed = (detector_on(path, e) for e in ('"v1"', '"v1"', '"v2"'))
    reading = TaskReport(
        "t", "ctx", read_state("TASK_STATE_WORKING", "1.0", Binding.JSONRPC), "task"
    )
    assert poller.on_reports(poller.agent(AGENT), [reading], Operation.GET_TASK, 10.0) == []
    assert same.decide("t", same.agent(AGENT), 20.0).ok
    assert same.decide("t", same.agent(AGENT), 45.0).reason is R.HEARTBEAT_GAP
    assert redeployed.decide("t", redeployed.agent(AGENT), 20.0).reason is R.ETAG_CHANGED
    done = TaskReport(
        "t", "ctx", read_state("TASK_STATE_COMPLETED", "1.0", Binding.JSONRPC), "task"
    )
    same.on_reports(same.agent(AGENT), [done], Operation.GET_TASK, 21.0)
    assert poller.decide("t", poller.agent(AGENT), 22.0).reason is R.TERMINAL_STATE
    # working again after the end (no timestamp: judged by arrival), whoever reads it
    late = redeployed.on_reports(redeployed.agent(AGENT), [reading], Operation.GET_TASK, 23.0)
    assert [v.reason for v in late] == [R.TERMINAL_REGRESSION]


# -- a file that breaks, a bound that shrinks --------------------------------------------------


def _filled(path: Path, n: int) -> None:
    """A ledger file of ``n`` live rows, written in one statement."""
    SqliteLedger(path, n + 1)
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO tasks (seq, task_id, agent, state, raw, exact, source, at, etag, "
            "stamp, terminal, interrupted) VALUES (?, ?, 'a', 'working', 'TASK_STATE_WORKING', "
            "1, 'GetTask', 1.0, NULL, NULL, 0, 0)",
            ((i, f"old-{i}") for i in range(n)),
        )
        conn.execute("UPDATE meta SET value = ? WHERE key = 'count'", (n,))
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file


def _corrupt_pages(path: Path) -> None:
    """Garbage over every page but the first: the header stays valid."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for offset in range(page, len(data), page):
        data[offset : offset + 64] = b"\xde\xad\xbe\xef" * 16
    path.write_bytes(bytes(data))


def test_a_valid_header_over_corrupt_pages_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _filled(path, 2_000)
    _corrupt_pages(path)
    with sqlite3.connect(path) as conn:  # the header still reads as ours, current
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    with pytest.raises(LedgerStoreError, match="corrupt"):
        SqliteLedger(path, 10)


def test_a_file_found_corrupt_by_an_operation_is_given_up_once(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "ledger.db"
    _filled(path, 2_000)
    lost: list[BaseException] = []
    ledger = SqliteLedger(path, 10_000, on_error=lambda exc: None, on_fatal=lost.append)
    _corrupt_pages(path)  # after the open's check: another process's crash, a bad disk
    ledger._local = threading.local()  # a thread that opens its connection now
    for i in range(5):
        ledger.observe(make_obs(f"new-{i}"))
        ledger.get(f"old-{i}")
    assert len(lost) == 1 and ledger.fatal is lost[0]
    assert isinstance(lost[0], sqlite3.DatabaseError)


def test_a_full_database_is_given_up_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    lost: list[BaseException] = []
    ledger = SqliteLedger(path, 100_000, on_error=lambda exc: None, on_fatal=lost.append)
    conn = ledger._conn()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite answers SQLITE_FULL from now
    for i in range(500):
        ledger.observe(make_obs(f"t-{i}-" + "x" * 200))
    assert len(lost) == 1
    assert lost[0].sqlite_errorcode == sqlite3.SQLITE_FULL  # type: ignore[attr-defined]


def test_the_runtime_falls_back_to_memory_once_the_file_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No stream of no_observation: the decisions after the loss are judged on this
    process's own observations, with one warning."""
    import logging

    from otel_a2a.detect.ledger import TaskLedger
    from otel_a2a.instrumentation.config import Settings
    from otel_a2a.instrumentation.runtime import Runtime

    path = tmp_path / "ledger.db"
    rt = Runtime(Settings(ledger_path=str(path), max_tracked_tasks=100_000))
    shared = rt.detector.ledger
    assert isinstance(shared, SqliteLedger)
    conn = shared._conn()
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    agent = rt.detector.agent("http://worker")
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        for i in range(200):
            obs = make_obs(f"t-{i}-" + "x" * 200, at=time.monotonic())
            rt.detector.ledger.observe(obs)
    assert isinstance(rt.detector.ledger, TaskLedger)
    assert [r.getMessage() for r in caplog.records if "cannot be used any more" in r.getMessage()]
    now = time.monotonic()
    rt.detector.ledger.observe(make_obs("after", at=now))
    assert rt.detector.decide("after", agent, now + 1).ok  # judged on memory, not the file


def test_a_lowered_bound_is_trimmed_a_batch_per_write(tmp_path: Path) -> None:
    """A file of 5,000 rows opened with a bound of 100: no write evicts more than the
    batch, and the writes that follow bring the count down to the bound."""
    path = tmp_path / "ledger.db"
    _filled(path, 5_000)
    ledger, errors = open_ledger(path, max_tasks=100)
    counts = [meta_count(path)]
    for i in range(200):
        ledger.observe(make_obs(f"new-{i}"))
        counts.append(meta_count(path))
    steps = [before - after for before, after in itertools.pairwise(counts)]
    assert max(steps) <= TRIM_BATCH  # evicted at most the batch, one row in
    assert counts[-1] == 100 == len(rows(path)) and not errors
    assert ledger.get("new-199") is not None  # the newest stay
