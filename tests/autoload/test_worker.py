"""``OTEL_A2A_ENABLED=true`` on the worker's side: an a2a-sdk server that imports nothing of
otel-a2a (``demo/python_worker.py`` without ``--spans``: a2a-sdk on Starlette and uvicorn, a
SQLite task store) gets its server spans, its card's heartbeat and its unfinished-task check
from the interpreter-start hook (the ``.pth``) alone, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from otel_a2a.protocol.card import HEARTBEAT_EXTENSION_URI
from tests.autoload.test_autoload import _documents, _env
from tests.support.python_worker import REPO, WORKER, poll

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
CARD = "/.well-known/agent-card.json"


class Plain:
    """The worker process, its stdout (the console exporter's) in a file."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.out, self.err = tmp / "worker.out", tmp / "worker.err"
        argv = [sys.executable, str(WORKER), "--store", str(tmp / "store"), "--port", "0"]
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=err)
        ready = poll(lambda: self._ready(), "READY")
        self.url: str = ready
        self.rpc = self.url + "/a2a/jsonrpc"

    def _ready(self) -> str | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"exit {self.proc.returncode}: {self.err.read_text()}")
        for line in self.out.read_text().splitlines():
            if line.startswith("READY "):
                return line.split(" ", 1)[1].strip()
        return None

    def spans(self) -> list[dict[str, Any]]:
        return [d for d in _documents(self.out.read_text()) if "name" in d and "context" in d]

    def stop(self) -> str:
        """SIGTERM (spans flush at exit); its stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        return self.err.read_text()


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Callable[..., Plain]]:
    started: list[Plain] = []

    def start(**extra: str) -> Plain:
        env = _env(PYTHONPATH=str(REPO), **extra)
        env.update(
            OTEL_SERVICE_NAME="plain-worker",
            OTEL_BSP_SCHEDULE_DELAY="100",
            OTEL_METRICS_EXPORTER="none",
        )
        plain = Plain(tmp_path, env)
        started.append(plain)
        return plain

    yield start
    for plain in started:
        plain.stop()


def _send(plain: Plain, text: str, **headers: str) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = httpx.post(plain.rpc, json=body, headers={"A2A-Version": "1.0", **headers}, timeout=30)
    task: dict[str, Any] = reply.json()["result"]["task"]
    return task


def _servers(plain: Plain, name: str) -> list[dict[str, Any]]:
    return [s for s in plain.spans() if s["name"] == name and s["kind"] == "SpanKind.SERVER"]


def test_enabled_variable_alone_instruments_an_a2a_sdk_worker(
    worker: Callable[..., Plain],
) -> None:
    plain = worker(
        OTEL_A2A_ENABLED="true",
        OTEL_A2A_SERVE_HEARTBEAT="7",
        OTEL_A2A_SERVE_CHECK_INTERVAL="0.2",
    )
    # the card carries the heartbeat extension, under a2a-sdk's ETag that covers it
    first = httpx.get(plain.url + CARD, timeout=30)
    beats = [
        e["params"]["intervalSeconds"]
        for e in first.json()["capabilities"].get("extensions", [])
        if e["uri"] == HEARTBEAT_EXTENSION_URI
    ]
    assert beats == [7]
    etag = first.headers["etag"]
    again = httpx.get(plain.url + CARD, headers={"If-None-Match": etag}, timeout=30)
    assert (again.status_code, again.headers["etag"]) == (304, etag)

    # a request continuing the caller's trace gets the convention's server span
    done = _send(plain, "echo hello", traceparent=f"00-{TRACE_ID}-{PARENT}-01")
    [span] = poll(lambda: _servers(plain, "SendMessage"), "the server span")
    assert span["context"]["trace_id"] == f"0x{TRACE_ID}" and span["parent_id"] == f"0x{PARENT}"
    attrs = span["attributes"]
    assert attrs["a2a.task.id"] == done["id"]
    assert attrs["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert attrs["gen_ai.conversation.id"] == done["contextId"]
    assert span["resource"]["attributes"]["service.name"] == "plain-worker"

    # an executor that returns without a final state: the task is reported unfinished
    left = _send(plain, "vanish")
    found = poll(
        lambda: [s for s in plain.spans() if s["name"] == "otel_a2a.task.unfinished"],
        "the finding",
    )
    assert [(f["attributes"]["a2a.task.id"], f["attributes"]["otel_a2a.task.unfinished.cause"])
            for f in found] == [(left["id"], "execution_ended")]  # fmt: skip
    assert "Traceback" not in plain.stop()


def test_without_serve_heartbeat_the_card_is_left_as_it_is(
    worker: Callable[..., Plain],
) -> None:
    plain = worker(OTEL_A2A_ENABLED="true")
    card = httpx.get(plain.url + CARD, timeout=30).json()
    assert card["capabilities"].get("extensions", []) == []
    _send(plain, "echo hello")
    poll(lambda: _servers(plain, "SendMessage"), "the server span")


def test_unset_variable_leaves_the_worker_alone(worker: Callable[..., Plain]) -> None:
    plain = worker(OTEL_A2A_SERVE_HEARTBEAT="7")
    card = httpx.get(plain.url + CARD, timeout=30).json()
    assert card["capabilities"].get("extensions", []) == []
    _send(plain, "echo hello")
    plain.stop()
    assert plain.spans() == []
