"""A real instrumented A2A client run for the operations tests (issues 4 and 6).

Two halves in one module:

- the **client script** (``python -m tests.support.instrumented_run ...``): a plain A2A client
  on ``httpx`` that never imports ``otel_a2a``. It is started with ``OTEL_A2A_ENABLED=true`` and
  the standard ``OTEL_*`` variables, so the ``.pth`` hook instruments it and, at its first A2A
  operation, configures the OpenTelemetry SDK with the Prometheus reader: the process serves
  the metric contract's instruments (docs/semantic-conventions.md) on ``/metrics`` for as
  long as it runs;
- the **harness** (:func:`start_instrumented_run`): starts the real test peers (a2a-sdk and
  @a2a-js/sdk, ``tests/support/peers.py``) and the script, and drives it over stdin/stdout.

The client talks to three agents:

- the Python and the Node test peers (real servers, JSON-RPC v1.0), heartbeat overridden to
  ``heartbeat`` seconds with ``OTEL_A2A_HEARTBEAT_OVERRIDES`` (their cards advertise 30 s);
- the fake agent (``tests/support/fake_agent.py``) behind an ``httpx.MockTransport`` inside the
  script, scripted per task id: the wire shapes real peers cannot be made to send on demand
  (non-canonical and unknown state spellings, a terminal state that becomes live again,
  TaskNotFound for a live task, a card whose etag changes, a brotli-encoded response). The
  instrumented code path is the same: ``httpx.Client.send``.

Phases:

- **baseline** (before ``READY``): every card fetched; on each agent one authoritative liveness
  decision (a follow-up to a fresh ``input-required`` task on the peers, a cancel of a freshly
  polled working task on the mock). No divergence, no stale task, no redundant poll, no error;
- **incident round** (each ``bump`` on stdin, answered ``OK bump <n>``): exactly
  :data:`DIVERGENCES_PER_ROUND` plus the other movements listed in the ``*_PER_ROUND``
  constants. Every series moves by the same amount in every round, so a series born in
  round 1 shows an ``increase()`` after round 2.

Protocol: stdout ``READY <metrics port>`` once the baseline is done and ``/metrics`` answers;
stdin ``bump`` runs one round; ``exit`` or EOF ends the script. Failures print ``ERROR ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from tests.support.fake_agent import NOT_FOUND, Encoded, FakeAgent

REPO = Path(__file__).resolve().parents[2]

PYTHON_AGENT = "otel-a2a Python test peer"  # tests/peers/python_peer.py card name
NODE_AGENT = "otel-a2a Node test peer"  # demo/node/echo_peer.mjs card name
MOCK_AGENT = "otel-a2a misbehaving mock agent"  # the fake agent's name here
MOCK_BASE = "http://misbehaving-agent.test"
AGENTS = (PYTHON_AGENT, NODE_AGENT, MOCK_AGENT)
PEER_AGENTS = (PYTHON_AGENT, NODE_AGENT)

# (otel_a2a.divergence.reason, a2a.method.name, otel_a2a.agent.name)
#   -> divergences per incident round
DIVERGENCES_PER_ROUND: dict[tuple[str, str, str], int] = {
    **{("heartbeat_gap", "SendMessage", agent): 1 for agent in PEER_AGENTS},
    **{("no_observation", "SendMessage", agent): 1 for agent in PEER_AGENTS},
    ("task_lost", "GetTask", MOCK_AGENT): 1,
    ("terminal_regression", "GetTask", MOCK_AGENT): 1,
    ("non_canonical_state", "GetTask", MOCK_AGENT): 1,
    ("unknown_state", "GetTask", MOCK_AGENT): 1,
    ("etag_changed", "CancelTask", MOCK_AGENT): 1,
}
# (otel_a2a.decision.outcome, otel_a2a.agent.name) -> liveness decisions
DECISIONS_BASELINE: dict[tuple[str, str], int] = {("authoritative", a): 1 for a in AGENTS}
DECISIONS_PER_ROUND: dict[tuple[str, str], int] = {
    **{("divergent", agent): 2 for agent in PEER_AGENTS},
    ("authoritative", MOCK_AGENT): 2,
    ("divergent", MOCK_AGENT): 1,
}
REDUNDANT_GETS_PER_ROUND = {PYTHON_AGENT: 1, NODE_AGENT: 1, MOCK_AGENT: 2}
ETAG_CHANGES_PER_ROUND = {MOCK_AGENT: 1}
ERRORS_PER_ROUND = {"unsupported_content_encoding": 1}
STALE_PER_ROUND = {PYTHON_AGENT: 1, NODE_AGENT: 1}  # slow tasks left unpolled, per peer
# Small enough that the run evicts (terminal) tasks, large enough that no task in use is
# evicted: at most 7 tasks are live at once (4 stale, 2 awaiting a follow-up, 1 on the mock).
MAX_TRACKED_TASKS = 8
PORT_ATTEMPTS = 3  # the Prometheus exporter port is picked free, then bound by the script

A2A_HEADERS = {"content-type": "application/json", "a2a-version": "1.0"}


# --- the client ------------------------------------------------------------------------------


class Client:
    """A plain JSON-RPC v1.0 A2A client on httpx (what otel-a2a instruments)."""

    def __init__(self, peers: dict[str, str], heartbeat: float) -> None:
        self.peers = peers  # agent name -> base URL
        self.heartbeat = heartbeat
        self.http = httpx.Client(timeout=20.0)
        # no heartbeat on its card, no caching headers; version and ETag change per round
        self.mock = FakeAgent(
            base=MOCK_BASE,
            name=MOCK_AGENT,
            version="1.0",
            etag='W/"mock-card-0"',
            heartbeat=None,
            streaming=False,
            cache_control=None,
            rpc_path="/a2a/jsonrpc",
        )
        self.mock_http = self.mock.client(timeout=5.0)
        self._ids = 0
        self.round = 0

    def close(self) -> None:
        self.http.close()
        self.mock_http.close()

    def _rpc(self, client: httpx.Client, url: str, method: str, params: dict[str, Any]) -> Any:
        self._ids += 1
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        response = client.post(url, json=body, headers=A2A_HEADERS)
        response.raise_for_status()
        return response.json()

    # peers ----------------------------------------------------------------------------------

    def card(self, agent: str) -> None:
        base = self.peers[agent]
        response = self.http.get(base + "/.well-known/agent-card.json")
        response.raise_for_status()
        name = response.json()["name"]
        if name != agent:
            raise AssertionError(f"card at {base} is named {name!r}, expected {agent!r}")

    def send(
        self,
        agent: str,
        text: str,
        *,
        task: dict[str, Any] | None = None,
        task_id: str | None = None,
        return_immediately: bool = False,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if task is not None:
            message["taskId"] = task["id"]
            message["contextId"] = task["contextId"]
        elif task_id is not None:
            message["taskId"] = task_id
        params: dict[str, Any] = {"message": message}
        if return_immediately:
            params["configuration"] = {"returnImmediately": True}
        url = self.peers[agent] + "/a2a/jsonrpc"
        return dict(self._rpc(self.http, url, "SendMessage", params))

    def get(self, agent: str, task: dict[str, Any]) -> dict[str, Any]:
        url = self.peers[agent] + "/a2a/jsonrpc"
        return dict(self._rpc(self.http, url, "GetTask", {"id": task["id"]}))

    @staticmethod
    def task_of(reply: dict[str, Any], state: str | None = None) -> dict[str, Any]:
        if "result" not in reply:
            raise AssertionError(f"expected a task, got {reply!r}")
        task = dict(reply["result"].get("task", reply["result"]))
        if state is not None and task["status"]["state"] != state:
            raise AssertionError(f"expected {state}, got {task['status']!r}")
        return task

    # mock ---------------------------------------------------------------------------------

    def mock_card(self) -> None:
        self.mock_http.get("/.well-known/agent-card.json").raise_for_status()

    def mock_get(self, task_id: str) -> Any:
        return self._rpc(self.mock_http, "/a2a/jsonrpc", "GetTask", {"id": task_id})

    def mock_cancel(self, task_id: str) -> Any:
        return self._rpc(self.mock_http, "/a2a/jsonrpc", "CancelTask", {"id": task_id})

    def mock_get_streamed(self, task_id: str) -> bytes:
        """GetTask read as a stream (how a proxy relays it): otel-a2a sees only raw bytes."""
        self._ids += 1
        body = {"jsonrpc": "2.0", "id": self._ids, "method": "GetTask", "params": {"id": task_id}}
        request = self.mock_http.build_request(
            "POST", "/a2a/jsonrpc", json=body, headers=A2A_HEADERS
        )
        response = self.mock_http.send(request, stream=True)
        try:
            return response.read()
        finally:
            response.close()

    # phases -------------------------------------------------------------------------------

    def baseline(self) -> None:
        """Quiet: cards, then one authoritative decision per agent; nothing diverges."""
        for agent in self.peers:
            self.card(agent)
        self.mock_card()
        for agent in self.peers:
            # input-required (interrupted, fresh) -> follow-up: an authoritative decision
            task = self.task_of(self.send(agent, "input baseline"), "TASK_STATE_INPUT_REQUIRED")
            self.task_of(self.send(agent, "echo baseline", task=task), "TASK_STATE_COMPLETED")
        self.mock.script("base", "TASK_STATE_WORKING", "TASK_STATE_CANCELED")
        self.mock_get("base")
        self.mock_cancel("base")

    def incident_round(self) -> None:
        """One round of the incident; see DIVERGENCES_PER_ROUND and the other constants."""
        self.round += 1
        k = self.round
        gap_tasks = {}
        for agent in self.peers:
            # a slow task observed once and never polled again: stale after the heartbeat
            self.task_of(self.send(agent, f"slow stale {k}", return_immediately=True))
            # a slow task polled at once (a redundant GetTask: the observation is fresh)...
            task = self.task_of(self.send(agent, f"slow gap {k}", return_immediately=True))
            gap_tasks[agent] = polled = self.task_of(self.get(agent, task))
            if polled["status"]["state"] not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
                raise AssertionError(f"{agent}: slow task is {polled['status']!r}")
            # ...a follow-up to a task id the client never observed: no_observation
            reply = self.send(agent, f"echo unknown {k}", task_id=str(uuid.uuid4()))
            if "error" not in reply:
                raise AssertionError(f"{agent} accepted a follow-up to an unknown task: {reply}")

        m = f"r{k}"
        # TaskNotFound for a task last seen working: task_lost (the second poll is redundant)
        self.mock.script(f"lost-{m}", "TASK_STATE_WORKING", NOT_FOUND)
        self.mock_get(f"lost-{m}")
        self.mock_get(f"lost-{m}")
        # completed, then working again: terminal_regression (redundant poll of a terminal
        # task); the cancel that follows is an authoritative decision
        self.mock.script(
            f"regress-{m}", "TASK_STATE_COMPLETED", "TASK_STATE_WORKING", "TASK_STATE_CANCELED"
        )
        self.mock_get(f"regress-{m}")
        self.mock_get(f"regress-{m}")
        self.mock_cancel(f"regress-{m}")
        # "Working" under v1.0 JSON-RPC: non_canonical_state; then an authoritative cancel
        self.mock.script(f"spelling-{m}", "Working", "TASK_STATE_CANCELED")
        self.mock_get(f"spelling-{m}")
        self.mock_cancel(f"spelling-{m}")
        # "paused" maps to nothing: unknown_state; the next poll reads it completed
        self.mock.script(f"paused-{m}", "paused", "TASK_STATE_COMPLETED")
        self.mock_get(f"paused-{m}")
        self.mock_get(f"paused-{m}")
        # the card changes (redeploy) between the poll and the cancel: etag_changed
        self.mock.script(f"etag-{m}", "TASK_STATE_WORKING", "TASK_STATE_CANCELED")
        self.mock_get(f"etag-{m}")
        self.mock.version, self.mock.etag = f"1.{k}", f'W/"mock-card-{k}"'
        self.mock_card()
        self.mock_cancel(f"etag-{m}")
        # a brotli-encoded response read as a stream: an instrumentation error, no observation
        self.mock.script(f"br-{m}", Encoded("TASK_STATE_COMPLETED", "br"))
        self.mock_get_streamed(f"br-{m}")

        # The heartbeat passes (this is the incident's clock, not synchronisation): the
        # follow-ups to the polled slow tasks are then heartbeat_gap decisions.
        time.sleep(self.heartbeat + 0.3)
        for agent, task in gap_tasks.items():
            self.task_of(self.send(agent, f"echo gap {k}", task=task), "TASK_STATE_COMPLETED")


def _wait_metrics(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{port}/metrics"
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{url} not served within {timeout}s: is OTEL_A2A_ENABLED set?")
        time.sleep(0.05)


def script_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python-peer", required=True, help="base URL")
    parser.add_argument("--node-peer", required=True, help="base URL")
    parser.add_argument("--heartbeat", type=float, required=True)
    args = parser.parse_args(argv)
    port = int(os.environ["OTEL_EXPORTER_PROMETHEUS_PORT"])
    client = Client({PYTHON_AGENT: args.python_peer, NODE_AGENT: args.node_peer}, args.heartbeat)
    try:
        client.baseline()
        _wait_metrics(port, 15.0)
        print(f"READY {port}", flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "bump":
                client.incident_round()
                print(f"OK bump {client.round}", flush=True)
            elif command == "exit":
                break
    except Exception as exc:
        print(f"ERROR {type(exc).__name__}: {exc}", flush=True)
        raise
    finally:
        client.close()
    return 0


# --- the harness (test process) --------------------------------------------------------------


class RunError(AssertionError):
    pass


@dataclass
class InstrumentedRun:
    """The running script: ``target`` for Prometheus, ``bump()`` for one incident round."""

    proc: subprocess.Popen[str]
    port: int
    peers: list[Any]
    heartbeat: float
    rounds: int = 0
    _stderr: deque[str] = field(default_factory=lambda: deque(maxlen=300))
    _threads: list[threading.Thread] = field(default_factory=list)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stderr_text(self) -> str:
        return "\n".join(self._stderr)

    def _line(self, timeout: float, what: str) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            status = self.proc.poll()
            why = "no line" if not ready else "end of output"
            raise RunError(
                f"{why} from the instrumented run within {timeout}s waiting for {what} "
                f"(exit status {status});\nstderr:\n{self.stderr_text()}"
            )
        return line.strip()

    def bump(self, timeout: float = 30.0) -> None:
        """Run one incident round and wait until the script finished it."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("bump\n")
        self.proc.stdin.flush()
        line = self._line(timeout, "OK bump")
        if line != f"OK bump {self.rounds + 1}":
            raise RunError(f"instrumented run answered {line!r};\nstderr:\n{self.stderr_text()}")
        self.rounds += 1

    def stop(self) -> None:
        self.end_script()
        for peer in self.peers:
            peer.stop()

    def end_script(self) -> None:
        """Stop the script (EOF, then SIGKILL), close its pipes, join its stderr reader."""
        proc = self.proc
        if proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.close()  # EOF ends the script
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()
        for thread in self._threads:
            thread.join(timeout=2.0)


def _pump(stream: IO[str], keep: deque[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for line in iter(stream.readline, ""):
            keep.append(line.rstrip("\n"))


def run_env(port: int, heartbeat: float) -> dict[str, str]:
    """The script's environment: the parent's without OTEL_*, plus the run's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_A2A_ENABLED": "true",
            "OTEL_SERVICE_NAME": "otel-a2a-ops-run",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "prometheus",
            "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
            "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
            "OTEL_A2A_DEFAULT_HEARTBEAT": f"{heartbeat:g}",
            # the peers' cards advertise 30 s; the operator overrides it for the test host
            "OTEL_A2A_HEARTBEAT_OVERRIDES": f"127.0.0.1={heartbeat:g}",
            "OTEL_A2A_MAX_TRACKED_TASKS": str(MAX_TRACKED_TASKS),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def start_instrumented_run(heartbeat: float = 1.0, ready_timeout: float = 60.0) -> InstrumentedRun:
    """Start both test peers and the instrumented client; return once its baseline is served.

    Raises ``tests.support.peers.PeerStartError`` when a peer cannot start (Node missing).
    """
    from tests.support import PORT_TAKEN, free_port
    from tests.support.peers import start_peer

    peers: list[Any] = []
    try:
        for runtime in ("python", "node"):
            peers.append(start_peer(runtime, slow_timeout=30.0))
        for _ in range(PORT_ATTEMPTS - 1):
            try:
                return _start_script(peers, free_port(), heartbeat, ready_timeout)
            except RunError as exc:
                # the exporter's port was free when picked and taken before the script bound it
                if PORT_TAKEN not in str(exc):
                    raise
        return _start_script(peers, free_port(), heartbeat, ready_timeout)
    except BaseException:
        for peer in peers:
            peer.stop()
        raise


def _start_script(
    peers: list[Any], port: int, heartbeat: float, ready_timeout: float
) -> InstrumentedRun:
    """The client script on ``port``, its baseline served; ended if it does not get there."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.instrumented_run",
            "--python-peer",
            peers[0].base_url,
            "--node-peer",
            peers[1].base_url,
            "--heartbeat",
            str(heartbeat),
        ],
        cwd=str(REPO),
        env=run_env(port, heartbeat),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run = InstrumentedRun(proc, port, peers, heartbeat)
    try:
        assert proc.stderr is not None
        thread = threading.Thread(target=_pump, args=(proc.stderr, run._stderr), daemon=True)
        thread.start()
        run._threads.append(thread)
        line = run._line(ready_timeout, "READY")
        if line != f"READY {port}":
            raise RunError(f"instrumented run printed {line!r};\nstderr:\n{run.stderr_text()}")
        return run
    except BaseException:
        if proc.poll() is None:
            proc.kill()
        run.end_script()  # pipes closed, reader joined: nothing left of a failed attempt
        raise


def times(
    per_round: dict[Any, int], rounds: int, base: dict[Any, int] | None = None
) -> dict[Any, int]:
    """Expected totals after ``rounds`` incident rounds (plus the baseline's)."""
    out = dict(base or {})
    for key, n in per_round.items():
        out[key] = out.get(key, 0) + n * rounds
    return out


if __name__ == "__main__":
    raise SystemExit(script_main())
