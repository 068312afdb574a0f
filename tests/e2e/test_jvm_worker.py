"""The JVM worker keeps the demo's worker contract (``demo/processes.py``'s docstring).

Started as the demo starts it (``JvmWorker.argv``): ``READY <base_url>`` on port 0, the
card (streaming, the card version and the heartbeat it was given), tasks durable in the store
folder with an in-flight one rehydrated as failed, ``--forget`` starting empty, and "address
already in use" for a taken port.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from demo.model import Timings
from demo.processes import JvmWorker, jvm_problem
from tests.support import in_ci

pytestmark = pytest.mark.jvm

TIMINGS = Timings.scaled(heartbeat=1.0)
RPC = {"A2A-Version": "1.0"}


@pytest.fixture
def worker() -> JvmWorker:
    reason = jvm_problem()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the JVM worker cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return JvmWorker()


class _Started:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str]) -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until READY or exit (EOF)
        if not line.startswith("READY "):
            proc.wait(timeout=30)
            assert proc.stderr is not None
            raise AssertionError(f"no READY (exit {proc.returncode}): {proc.stderr.read()}")
        return proc, line.split(" ", 1)[1].strip()


@pytest.fixture
def started() -> Iterator[_Started]:
    out = _Started()
    yield out
    for proc in out.procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def _call(base: str, method: str, params: dict[str, object]) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply: dict[str, object] = httpx.post(
        base + "/a2a/jsonrpc", json=body, headers=RPC, timeout=30
    ).json()
    return reply


def test_card_store_rehydration_and_forget(
    worker: JvmWorker, started: _Started, tmp_path: Path
) -> None:
    store = tmp_path / "tasks"
    argv = worker.argv(0, store, TIMINGS, forget=False, card_version="7.0.0")
    proc, base = started.start(argv)
    assert base.startswith("http://127.0.0.1:") and not base.endswith(":0")
    card = httpx.get(base + "/.well-known/agent-card.json", timeout=30).json()
    assert card["version"] == "7.0.0" and card["capabilities"]["streaming"] is True
    [beat] = card["capabilities"]["extensions"]
    assert beat == {
        "uri": "urn:otel-a2a:heartbeat:v1",
        "description": beat["description"],
        "required": False,
        "params": {"intervalSeconds": 1},
    }
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "job 300"}]}
    sent = _call(
        base, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
    )
    task = sent["result"]["task"]  # type: ignore[index]
    [stored] = store.glob("*.json")
    assert json.loads(stored.read_text())["id"] == task["id"]

    proc.kill()  # a crash, as the demo's restart
    proc.wait(timeout=30)
    port = int(base.rsplit(":", 1)[1])
    _, again = started.start(worker.argv(port, store, TIMINGS, forget=False, card_version="7.0.0"))
    got = _call(again, "GetTask", {"id": task["id"]})["result"]
    assert got["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]
    assert json.loads(stored.read_text())["status"]["state"] == "TASK_STATE_FAILED"

    # the port is taken now: the next start says so and exits
    taken = subprocess.run(
        worker.argv(port, tmp_path / "other", TIMINGS, forget=False, card_version="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert taken.returncode != 0 and "address already in use" in taken.stderr.lower()

    for proc in started.procs:
        proc.terminate()
        proc.wait(timeout=30)
    _, forgot = started.start(worker.argv(0, store, TIMINGS, forget=True, card_version="1"))
    lost = _call(forgot, "GetTask", {"id": task["id"]})
    assert lost["error"]["code"] == -32001  # type: ignore[index]
    assert list(store.glob("*.json")) == []


def test_a_free_port_check_sees_the_worker_listening(
    worker: JvmWorker, started: _Started, tmp_path: Path
) -> None:
    """READY means it accepts connections: a connect right after it succeeds."""
    _, base = started.start(worker.argv(0, tmp_path, TIMINGS, forget=True, card_version="1"))
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5):
        pass
