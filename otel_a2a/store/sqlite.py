"""The ledger in a SQLite file shared by the processes of one host (``OTEL_A2A_LEDGER_PATH``).

A CLI that runs one process per command, or a server with several worker processes, takes
decisions in one process on tasks another one observed. With the in-memory ledger each of
those decisions is ``no_observation``; with this one every process reads and writes the same
observations. Same semantics and bounds as :class:`~otel_a2a.detect.ledger.TaskLedger` (the
semantic tests run against both): newest observation wins by ``at``, late frames refused,
``max_tasks`` rows at most, terminal tasks evicted first, least recently observed first.

Why it is built this way:

* standard library only (``sqlite3``): WAL journal, so readers never wait for the writer; a
  write takes the lock up front (``BEGIN IMMEDIATE``) and waits at most ``busy_timeout``
  (:data:`BUSY_TIMEOUT`) for another process's write, then fails. It never syncs to disk
  (``synchronous = OFF``: the fsyncs of checkpoints took up to 130 ms inside the host's call),
  which a process crash survives; what an OS crash may lose belonged to a boot that is over
  (see ``at`` below). A failed operation is
  reported to ``on_error`` (the runtime counts it in ``otel_a2a.instrumentation.errors``) and
  answers as if the task were unknown: nothing reaches the host, and no call waits longer.
* one connection per thread and per process, as ``sqlite3`` requires (``check_same_thread``);
  a connection inherited across ``fork`` is left alone, never used or closed in the child
  (SQLite forbids both), and the child opens its own. A thread's connection closes with it.
* LRU order is the row id: every observation or stream frame gives its row ``max + 1``, so the
  oldest rows of each class (``terminal`` column, indexed) are the eviction order. The row
  count lives in ``meta`` (``count(*)`` is a scan); it changes only when a task enters or
  leaves, like the in-memory ledger's counters.
* ``at`` is this host's monotonic clock (``time.monotonic``: the same clock in every process
  of a host, since boot), which is why the store is for one host. After a reboot the clock
  restarts, so a file written under another boot (``meta.clock``) starts empty.
* the file is created ``0600`` (SQLite gives its ``-wal`` and ``-shm`` files the same mode);
  ``application_id`` marks it as an otel-a2a ledger and ``user_version`` is the schema
  version: another database, another version or a corrupt file is refused
  (:class:`LedgerStoreError`), and the runtime falls back to the in-memory ledger.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable

from otel_a2a.detect.ledger import LATE, Observation, _late
from otel_a2a.protocol.states import StateClass, TaskState

SCHEMA_VERSION = 1
APPLICATION_ID = 0x6F613261  # "oa2a"
BUSY_TIMEOUT = 0.2  # seconds one operation may wait for another process's write
# rows one write may evict beyond the one its new task needs: a file over a lowered
# OTEL_A2A_MAX_TRACKED_TASKS is trimmed by the writes that follow, a bounded step each
TRIM_BATCH = 64
# what makes the file useless for the rest of the process's life: corrupt, not a database,
# full (every write would fail, and reads would serve an ever older shared view)
_FATAL = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_FULL})

_log = logging.getLogger("otel_a2a")
_STATES = {state.value: state for state in TaskState}
_TERMINAL = StateClass.TERMINAL
_INTERRUPTED = StateClass.INTERRUPTED
_NAN = math.nan  # SQLite stores NaN as NULL: read back as NaN

# Connections inherited across fork: SQLite forbids using or closing them in the child, and
# closing is what dropping the last reference does. One per thread per fork, so bounded.
_INHERITED: list[sqlite3.Connection] = []

_COLS = "task_id, agent, state, raw, exact, source, at, etag, stamp"
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    # seq: observation order (a new maximum on every observe and touch), the LRU order
    """CREATE TABLE tasks (
        seq INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL UNIQUE,
        agent TEXT NOT NULL,
        state TEXT NOT NULL,
        raw TEXT NOT NULL,
        exact INTEGER NOT NULL,
        source TEXT NOT NULL,
        at REAL,
        etag TEXT,
        stamp TEXT,
        terminal INTEGER NOT NULL,
        interrupted INTEGER NOT NULL
    )""",
    "CREATE INDEX tasks_order ON tasks (terminal)",  # (terminal, seq): eviction order
    "INSERT INTO meta VALUES ('count', 0), ('clock', NULL)",
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
_GET = f"SELECT {_COLS} FROM tasks WHERE task_id = ?"
_PUT = (
    f"INSERT OR REPLACE INTO tasks ({_COLS}, terminal, interrupted) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_COUNT = "SELECT value FROM meta WHERE key = 'count'"
_SET_COUNT = "UPDATE meta SET value = ? WHERE key = 'count'"
_OLDEST = "SELECT seq FROM tasks WHERE terminal = ? ORDER BY seq LIMIT 1"
_TOUCH = (
    "UPDATE tasks SET seq = (SELECT max(seq) FROM tasks) + 1, "
    "at = CASE WHEN ?1 > at THEN ?1 ELSE at END WHERE task_id = ?2"
)
_REOBSERVE = (
    "UPDATE tasks SET seq = (SELECT max(seq) FROM tasks) + 1, at = ?1 WHERE task_id = ?2 "
    "AND agent = ?3 AND state = ?4 AND raw = ?5 AND exact = ?6 AND source = ?7 AND etag IS ?8 "
    "AND terminal = 0 AND (at IS NULL OR at <= ?1)"
)
_STALE = (
    "SELECT t.agent, count(CASE WHEN t.interrupted = 0 AND ?1 - t.at > h.h THEN 1 END) "
    "FROM tasks t JOIN temp.heartbeats h ON h.agent = t.agent WHERE t.terminal = 0 "
    "GROUP BY t.agent"
)


class LedgerStoreError(Exception):
    """The store cannot be opened (bad path, no write access, not an otel-a2a ledger of this
    schema version, corrupt): the caller falls back to the in-memory ledger."""


def clock_id() -> str:
    """Which run of this host's monotonic clock ``at`` values belong to: the kernel's boot id,
    else the wall-clock time of the monotonic clock's zero, to the second (a wall-clock step
    then reads as a new boot: the ledger starts empty, which authorises nothing)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return f"epoch {time.time() - time.monotonic():.0f}"


def _obs(
    row: tuple[str, str, str, str, int, str, float | None, str | None, str | None],
) -> Observation:
    task_id, agent, state, raw, exact, source, at, etag, stamp = row
    return Observation(
        task_id,
        agent,
        _STATES.get(state, TaskState.UNKNOWN),
        raw,
        bool(exact),
        _NAN if at is None else at,
        etag,
        source,
        stamp,
    )


def _log_error(exc: BaseException) -> None:
    _log.debug("otel-a2a: shared ledger operation failed", exc_info=exc)


class SqliteLedger:
    """A :class:`~otel_a2a.detect.ledger.Ledger` in the SQLite file ``path``; raises
    :class:`LedgerStoreError` if the file cannot be opened as one, never afterwards.

    ``on_error`` is told of every operation that failed (it then answered as for an unknown
    task); ``on_fatal``, once, of the first failure that leaves the file unusable (corrupt
    pages found by an operation, a full disk): its owner stops using it. ``evicted_total``
    counts the evictions this process made.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_tasks: int,
        *,
        on_error: Callable[[BaseException], None] = _log_error,
        on_fatal: Callable[[BaseException], None] | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        if max_tasks < 1:
            raise ValueError(f"max_tasks must be >= 1, got {max_tasks!r}")
        self.path = os.fspath(path)
        self.max_tasks = max_tasks
        self.evicted_total = 0
        self.busy_timeout = busy_timeout
        self._on_error = on_error
        self._on_fatal = on_fatal
        self.fatal: BaseException | None = None  # the failure that made the file unusable
        self._local = threading.local()
        try:
            self._open()
        except LedgerStoreError:
            raise
        except Exception as exc:  # OSError, sqlite3.Error: whatever stops the file from serving
            raise LedgerStoreError(f"cannot open {self.path!r}: {exc}") from exc

    # -- connections ------------------------------------------------------------------------------

    def _open(self) -> None:
        """Create the file (0600) and its schema, or check that it is ours and current."""
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        os.close(os.open(self.path, flags, 0o600))  # an empty file is a new database
        conn = self._conn()
        self._check(conn)  # before WAL: switching to it rewrites the header of any database
        # a valid header over corrupt pages would fail every operation later, each answered as
        # for an unknown task: a silent stream of no_observation. One pass over the pages
        # (quick_check: no index cross-check), 40-90 ms at 100,000 rows (docs/limits.md).
        verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if verdict != "ok":
            raise LedgerStoreError(f"{self.path!r} is corrupt ({verdict})")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory
            raise LedgerStoreError(f"{self.path!r}: journal mode {mode!r}, WAL needed")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self._check(conn):  # checked again: another process may have made it meanwhile
                for statement in _SCHEMA:
                    conn.execute(statement)
            clock = clock_id()
            held = conn.execute("SELECT value FROM meta WHERE key = 'clock'").fetchone()
            if held is None or held[0] != clock:  # another boot: its times mean nothing now
                conn.execute("DELETE FROM tasks")
                conn.execute(_SET_COUNT, (0,))
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('clock', ?)", (clock,))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _check(self, conn: sqlite3.Connection) -> bool:
        """Whether the file is empty (a new ledger); raise unless it is one of ours, current."""
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        if app == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return True
        if app != APPLICATION_ID:
            raise LedgerStoreError(f"{self.path!r} is another database, not an otel-a2a ledger")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise LedgerStoreError(
                f"{self.path!r} holds ledger schema {version}; this otel-a2a uses "
                f"{SCHEMA_VERSION}: point OTEL_A2A_LEDGER_PATH at another file"
            )
        return False

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (a new one in a forked child)."""
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        pid = os.getpid()
        if conn is None or local.pid != pid:
            if conn is not None:
                _INHERITED.append(conn)
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, cached_statements=64
            )
            # safe across crashes of a process; never an fsync (a checkpoint's took tens of ms
            # in the host's call): what an OS crash could lose was of a boot that is over
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("CREATE TEMP TABLE heartbeats (agent TEXT PRIMARY KEY, h REAL)")
            local.conn, local.pid = conn, pid
        return conn

    def _failed(self, exc: BaseException, conn: sqlite3.Connection | None = None) -> None:
        if conn is not None:
            _rollback(conn)
        with contextlib.suppress(Exception):  # the error path must not raise into the host
            self._on_error(exc)
            code = getattr(exc, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _FATAL and self.fatal is None:
                self.fatal = exc
                if self._on_fatal is not None:
                    self._on_fatal(exc)

    # -- operations -------------------------------------------------------------------------------

    def observe(self, obs: Observation, sent_at: str | None = None) -> Observation | None:
        """As :meth:`TaskLedger.observe`, one transaction: the check and the write are one
        step for every process, not only every thread."""
        cls = obs._kind.state_class
        conn = None
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(_GET, (obs.task_id,)).fetchone()
            prev = None if row is None else _obs(row)
            if prev is not None and (obs.at < prev.at or _late(prev, obs._kind.state, sent_at)):
                conn.execute("ROLLBACK")
                return LATE
            evicted = 0 if prev is not None else self._make_room(conn)
            conn.execute(
                _PUT,
                (
                    obs.task_id,
                    obs.agent,
                    obs._kind.state.value,
                    obs._kind.raw,
                    obs._kind.exact,
                    obs._kind.source,
                    obs.at,
                    obs.etag,
                    obs.stamp,
                    cls is _TERMINAL,
                    cls is _INTERRUPTED,
                ),
            )
            conn.execute("COMMIT")
        except Exception as exc:
            self._failed(exc, conn)
            return None
        self.evicted_total += evicted
        return prev

    def _make_room(self, conn: sqlite3.Connection) -> int:
        """Evict so that a new task fits, at most :data:`TRIM_BATCH` rows beyond the one it
        needs (a file over a lowered bound is trimmed a batch per write, never whole in one
        host call); count it in. Returns the evictions (in the caller's transaction: they
        count once it commits)."""
        count = int(conn.execute(_COUNT).fetchone()[0])
        evicted = 0
        while count >= self.max_tasks and evicted <= TRIM_BATCH:
            victim = (
                conn.execute(_OLDEST, (1,)).fetchone() or conn.execute(_OLDEST, (0,)).fetchone()
            )
            if victim is None:
                break
            conn.execute("DELETE FROM tasks WHERE seq = ?", victim)
            count -= 1
            evicted += 1
        conn.execute(_SET_COUNT, (count + 1,))
        return evicted

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
        """As :meth:`TaskLedger.reobserve`: one conditional update, so the check and the
        refresh are one step for every process."""
        args = (at, task_id, agent, state.value, raw, exact, source, etag)
        try:
            return self._conn().execute(_REOBSERVE, args).rowcount > 0
        except Exception as exc:
            self._failed(exc)
            return False

    def touch(self, task_id: str, at: float) -> bool:
        try:
            return self._conn().execute(_TOUCH, (at, task_id)).rowcount > 0
        except Exception as exc:
            self._failed(exc)
            return False

    def get(self, task_id: str) -> Observation | None:
        try:
            row = self._conn().execute(_GET, (task_id,)).fetchone()
        except Exception as exc:
            self._failed(exc)
            return None
        return None if row is None else _obs(row)

    def forget(self, task_id: str) -> Observation | None:
        conn = None
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(_GET, (task_id,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
                conn.execute(_SET_COUNT, (int(conn.execute(_COUNT).fetchone()[0]) - 1,))
            conn.execute("COMMIT")
        except Exception as exc:
            self._failed(exc, conn)
            return None
        return None if row is None else _obs(row)

    def counts_by_class(self) -> dict[StateClass, int]:
        out = {StateClass.ACTIVE: 0, StateClass.INTERRUPTED: 0, StateClass.TERMINAL: 0}
        try:
            rows = self._conn().execute(
                "SELECT terminal, interrupted, count(*) FROM tasks GROUP BY terminal, interrupted"
            )
            for terminal, interrupted, n in rows:
                cls = _TERMINAL if terminal else _INTERRUPTED if interrupted else StateClass.ACTIVE
                out[cls] += n
        except Exception as exc:
            self._failed(exc)
        return out

    def stale_by_agent(self, now: float, heartbeat_of: Callable[[str], float]) -> dict[str, int]:
        """As :meth:`TaskLedger.stale_by_agent`: one pass over the non-terminal rows, in SQLite
        (every agent's heartbeat is looked up first, none while a statement runs)."""
        conn = None
        try:
            conn = self._conn()
            agents = [
                a for (a,) in conn.execute("SELECT DISTINCT agent FROM tasks WHERE terminal = 0")
            ]
            if not agents:
                return {}
            heartbeats = [(agent, float(heartbeat_of(agent))) for agent in agents]
            conn.execute("BEGIN")
            conn.execute("DELETE FROM temp.heartbeats")
            conn.executemany("INSERT INTO temp.heartbeats VALUES (?, ?)", heartbeats)
            out = {agent: int(n) for agent, n in conn.execute(_STALE, (now,))}
            conn.execute("COMMIT")
        except Exception as exc:
            self._failed(exc, conn)
            return {}
        return out

    def oldest(self, terminal: bool) -> Observation | None:
        rows = self._rows(
            f"SELECT {_COLS} FROM tasks WHERE terminal = ? ORDER BY seq LIMIT 1", (terminal,)
        )
        return _obs(rows[0]) if rows else None

    def snapshot(self) -> list[Observation]:
        """All observations, terminal ones then the others, oldest first. O(n)."""
        return [
            _obs(row)
            for row in self._rows(f"SELECT {_COLS} FROM tasks ORDER BY terminal DESC, seq", ())
        ]

    def _rows(
        self, sql: str, args: Iterable[object]
    ) -> list[tuple[str, str, str, str, int, str, float | None, str | None, str | None]]:
        try:
            return self._conn().execute(sql, tuple(args)).fetchall()
        except Exception as exc:
            self._failed(exc)
            return []

    def __len__(self) -> int:
        try:
            return int(self._conn().execute(_COUNT).fetchone()[0])
        except Exception as exc:
            self._failed(exc)
            return 0

    def __contains__(self, task_id: object) -> bool:
        if not isinstance(task_id, str):
            return False
        try:
            return (
                self._conn().execute("SELECT 1 FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
                is not None
            )
        except Exception as exc:
            self._failed(exc)
            return False


def _rollback(conn: sqlite3.Connection) -> None:
    """End the failed operation's transaction, if one is open (a failed rollback leaves it
    to SQLite, which rolls back when the connection is next used or closed)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
