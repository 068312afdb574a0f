"""``OTEL_A2A_LEDGER_PATH``: processes that share tasks share observations.

A CLI that runs one process per command (poll in one, follow up in the next) against the real
a2a-sdk peer: with the shared ledger the follow-up is judged on the poll another process made;
without it, every follow-up is ``no_observation``. Plus the runtime's side of the store: a
file that cannot be opened falls back to the in-memory ledger with one warning and one count,
and an operation that fails is counted.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_a2a.detect.ledger import TaskLedger
from otel_a2a.instrumentation import runtime as runtime_module
from otel_a2a.store.sqlite import SqliteLedger
from tests.detect.helpers import make_obs
from tests.instrumentation.conftest import make_harness

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # one command: start Python, fetch a card, one or two requests


def run_command(ledger: Path | None, *args: str) -> dict[str, Any]:
    """One command in a process of its own, as a one-process-per-command CLI runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if ledger is not None:
        env["OTEL_A2A_LEDGER_PATH"] = str(ledger)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.ledger_client", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("shared", [True, False], ids=["shared-ledger", "per-process"])
def test_a_follow_up_in_the_next_process_is_judged_on_the_poll(
    python_peer: str, tmp_path: Path, shared: bool
) -> None:
    ledger = tmp_path / "ledger.db" if shared else None

    polled = run_command(ledger, "get", python_peer)
    assert polled["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert polled["spans"] == [["GetAgentCard", []], ["GetTask", []]]
    task = [polled["task_id"], polled["context_id"]]

    followed = run_command(ledger, "follow", python_peer, *task)
    assert followed["state"] == "TASK_STATE_COMPLETED" and followed["errors"] == {}
    send = dict(followed["spans"])["SendMessage"]
    if shared:  # the poll of the other process authorises it: the task waits for input
        assert send == [] and followed["decisions"] == {"authoritative": 1}
    else:
        assert send == ["no_observation"] and followed["decisions"] == {"divergent": 1}

    # and the other way: the completion the second process read reaches a third one
    again = run_command(ledger, "follow", python_peer, *task)
    assert again["error"] is not None  # the peer refuses a message to a finished task
    send = dict(again["spans"])["SendMessage"]
    assert send == (["terminal_state"] if shared else ["no_observation"])
    if shared:
        assert len(SqliteLedger(ledger, 10)) == 1  # type: ignore[arg-type]


def test_a_ledger_that_cannot_be_opened_falls_back_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_A2A_LEDGER_PATH", str(tmp_path / "missing" / "ledger.db"))
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        harness, instrumentor = make_harness()
    try:
        rt = runtime_module.current()
        assert rt is not None and isinstance(rt.detector.ledger, TaskLedger)
        warnings = [r for r in caplog.records if "OTEL_A2A_LEDGER_PATH" in r.getMessage()]
        assert len(warnings) == 1
        assert harness.points("otel_a2a.instrumentation.errors") == [
            ({"error.type": "ledger_unavailable"}, 1)
        ]
        rt.detector.ledger.observe(make_obs("t"))  # the in-memory ledger serves
        assert rt.detector.ledger.get("t") is not None
    finally:
        instrumentor.uninstrument()


def test_a_failed_operation_is_counted_never_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_A2A_LEDGER_PATH", str(tmp_path / "ledger.db"))
    harness, instrumentor = make_harness()
    try:
        rt = runtime_module.current()
        assert rt is not None and isinstance(rt.detector.ledger, SqliteLedger)
        assert rt.detector.ledger.observe(make_obs("task-\ud800")) is None  # not UTF-8
        assert harness.points("otel_a2a.instrumentation.errors") == [
            ({"error.type": "ledger_operation_failed"}, 1)
        ]
    finally:
        instrumentor.uninstrument()
