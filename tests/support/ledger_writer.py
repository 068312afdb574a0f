"""One of several processes writing the same shared ledger at once (``tests/store``).

Run: ``python -m tests.support.ledger_writer PATH MAX_TASKS WRITER ROUNDS MODE``, started
together by the test, which waits for every one's ``READY`` line and then writes ``go`` to all
of them, so their writes overlap. Prints one JSON line with what this process saw:

- ``newest``: on a few task ids every writer shares, each observation made (time, etag and
  whether the ledger recorded it, refused it as older than the one held, or failed), so the
  test can check that the newest recorded one is what the file holds;
- ``bound``: distinct task ids of this writer only (some terminal), a stream frame now and
  then; how many entered the ledger and how many this process evicted, so the test can
  check ``entered - evicted`` against the rows left.
"""

from __future__ import annotations

import json
import random
import sys
import time

from otel_a2a.detect.ledger import LATE, Observation
from otel_a2a.protocol.states import TaskState
from otel_a2a.store.sqlite import SqliteLedger

SHARED = [f"shared-{i}" for i in range(5)]
STATES = [TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.COMPLETED, TaskState.FAILED]


def main(path: str, max_tasks: int, writer: int, rounds: int, mode: str) -> None:
    errors: list[str] = []
    ledger = SqliteLedger(
        path, max_tasks, on_error=lambda exc: errors.append(repr(exc)), busy_timeout=10.0
    )
    rng = random.Random(writer)
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    out: dict[str, object] = {"writer": writer}
    if mode == "newest":
        made = []
        for k in range(rounds):
            task_id = rng.choice(SHARED)
            state = rng.choice(STATES)
            at, etag = time.monotonic(), f'"w{writer}-{k}"'
            before = len(errors)
            obs = Observation(task_id, "http://a", state, state.value, True, at, etag, "GetTask")
            prev = ledger.observe(obs)
            outcome = "failed" if len(errors) > before else "late" if prev is LATE else "recorded"
            made.append([task_id, at, etag, outcome])
        out["made"] = made
    else:
        entered = 0
        for k in range(rounds):
            task_id = f"w{writer}-{k}"
            state = rng.choice(STATES)
            before = len(errors)
            obs = Observation(
                task_id, "http://a", state, state.value, True, time.monotonic(), None, "GetTask"
            )
            prev = ledger.observe(obs)
            entered += prev is None and len(errors) == before
            if k % 5 == 0:  # a stream frame on one of this writer's tasks
                ledger.touch(f"w{writer}-{rng.randrange(k + 1)}", time.monotonic())
        out["entered"] = entered
        out["evicted"] = ledger.evicted_total
    out["errors"] = errors
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
