"""End to end: the seeded incident over real processes (issue 5 §3).

Each test runs one variant through the demo's public entry, ``demo.scenario`` (the runner behind
``python -m demo``): a worker with a durable file store (the Node ``@a2a-js/sdk`` one, or the A2A
Java SDK one), a gateway (the Python one, or the Go one on a2a-go), and a Python a2a-sdk
orchestrator instrumented only by ``OTEL_A2A_ENABLED=true``, on free loopback ports in a
temporary folder. The seed's own runtimes, a Go gateway in front of a JVM worker, play every
variant over both HTTP bindings, and every variant that applies over gRPC (the gateway
translating to JSON-RPC). The assertions read what the orchestrator exported: its console spans
and its Prometheus ``/metrics``. Timings are scaled down (heartbeat 1 s, a decision every 2 s).
"""

from __future__ import annotations

import importlib.util
import io
import os
from pathlib import Path

import pytest

from demo.cli import main
from demo.scenario import ScenarioConfig, ScenarioResult, Timings, problem, render, run_scenario
from otel_a2a.protocol import Operation
from tests.support import in_ci

TIMINGS = Timings.scaled(heartbeat=1.0)
NODE, GO, JVM = pytest.mark.node, pytest.mark.go, pytest.mark.jvm


def _peers(gateway: str, worker: str, binding: str) -> object:
    marks = [m for name, m in (("go", GO), ("jvm", JVM)) if name in (gateway, worker)]
    return pytest.param(gateway, worker, binding, marks=marks, id=f"{gateway}-{worker}-{binding}")


# (gateway, worker, binding): the seed's runtimes (Go gateway, JVM worker) over both bindings
# everywhere; each new runtime also beside the Python gateway / Node worker
SOME = [
    _peers("python", "node", "JSONRPC"),
    _peers("go", "node", "HTTP+JSON"),
    _peers("python", "jvm", "HTTP+JSON"),
    _peers("go", "jvm", "JSONRPC"),
    _peers("go", "jvm", "HTTP+JSON"),
]
# and the fault and the healthy run on every binding through the Python gateway and Node worker
EVERY = [_peers("python", "node", "HTTP+JSON"), _peers("go", "node", "JSONRPC"), *SOME]
# gRPC: the orchestrator to the Go gateway (a2a-go's gRPC server), which talks JSON-RPC to the
# JVM worker; the respelling variants do not apply (TaskState is an enum on gRPC)
GRPC = _peers("go", "jvm", "GRPC")
PEERS = "gateway,worker,binding"


def _run(
    variant: str,
    binding: str = "JSONRPC",
    *,
    streaming: bool = True,
    gateway: str = "python",
    worker: str = "node",
) -> ScenarioResult:
    config = ScenarioConfig(
        variant=variant,
        binding=binding,
        streaming=streaming,
        timings=TIMINGS,
        gateway=gateway,
        worker=worker,
    )
    reason = problem(config)
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the demo cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    result = run_scenario(config)
    _assert_cleaned_up(result)
    _assert_binding(result, binding)
    return result


def _assert_binding(result: ScenarioResult, binding: str) -> None:
    """The orchestrator's A2A calls (the card aside, fetched over HTTP) took ``binding``."""
    used = {
        (s.get("attributes") or {}).get("otel_a2a.binding")
        for s in result.spans
        if (s.get("attributes") or {}).get("a2a.method.name") not in {None, "GetAgentCard"}
    }
    assert used - {None} == {binding}, (used, _report(result))


def _report(result: ScenarioResult) -> str:
    out = io.StringIO()
    render(result, out)
    for name, text in result.logs.items():
        out.write(f"--- {name} stderr ---\n{text}\n")
    return out.getvalue()


def _assert_cleaned_up(result: ScenarioResult) -> None:
    assert not Path(result.workdir).exists(), "the temporary folder was left behind"
    for pid in result.pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _assert_ok(result: ScenarioResult) -> None:
    """Every check of the run passed, except how soon (``timing``): ``make bench`` measures
    that (``bench_incident``); here a loaded machine would fail it by scheduling alone."""
    assert result.checks, _report(result)
    failed = [c for c in result.checks if not c.passed and not c.timing]
    assert not failed, _report(result)


def _first_decision_after_restart(result: ScenarioResult) -> tuple[str, list[str]]:
    assert result.restart_at is not None
    after = result.decisions(after=result.restart_at)
    assert after, "no liveness decision after the restart\n" + _report(result)
    return after[0].name, list(after[0].reasons)


@pytest.mark.parametrize(PEERS, [*EVERY, GRPC])
def test_restart_first_decision_diverges_and_stale_rises(
    gateway: str, worker: str, binding: str
) -> None:
    result = _run("restart", binding, gateway=gateway, worker=worker)
    _assert_ok(result)
    name, reasons = _first_decision_after_restart(result)
    assert reasons[:1] in (["heartbeat_gap"], ["terminal_state"]), (name, reasons)
    # otel_a2a_task_stale rose after the restart (the scenario polls /metrics with a deadline;
    # how soon is a timing goal, measured by `make bench`)
    assert result.stale_at is not None and result.restart_at is not None, _report(result)
    assert result.stale_at > result.restart_at
    # the detector beat the uninstrumented baseline, which waited for its own timeout
    assert result.detected_at is not None
    assert result.baseline_at is None or result.detected_at < result.baseline_at


@pytest.mark.parametrize(PEERS, [SOME[0], SOME[-1], GRPC])
def test_polling_orchestrator_acts_on_authoritative_state_only(
    gateway: str, worker: str, binding: str
) -> None:
    """``--no-streaming``: an orchestrator that polls GetTask faster than the heartbeat learns
    of the restart from its own poll, so none of its decisions diverges; the polls that told
    nothing new are counted as redundant instead."""
    result = _run("restart", binding, streaming=False, gateway=gateway, worker=worker)
    _assert_ok(result)
    assert result.divergences == [], _report(result)
    assert (
        result.metric("otel_a2a_liveness_decisions_total", otel_a2a_decision_outcome="divergent")
        == 0
    )
    assert (
        result.metric(
            "otel_a2a_liveness_decisions_total", otel_a2a_decision_outcome="authoritative"
        )
        > 0
    )
    assert result.metric("otel_a2a_task_get_redundant_total") > 0
    failed = [s for s in result.timeline if s.get("belief") == "failed"]
    assert failed and "GetTask" in str(failed[0].get("action")), _report(result)


@pytest.mark.parametrize(PEERS, SOME)
def test_restart_and_respelling_together_raise_both_kinds(
    gateway: str, worker: str, binding: str
) -> None:
    result = _run("both", binding, gateway=gateway, worker=worker)
    _assert_ok(result)
    reasons = set(result.reasons())
    assert "non_canonical_state" in reasons, _report(result)
    assert {"heartbeat_gap", "terminal_state"} & reasons, _report(result)


@pytest.mark.parametrize(PEERS, [*SOME, GRPC])
def test_forgetting_worker_raises_task_lost(gateway: str, worker: str, binding: str) -> None:
    result = _run("forget", binding, gateway=gateway, worker=worker)
    _assert_ok(result)
    assert "task_lost" in result.reasons(), _report(result)


@pytest.mark.parametrize(PEERS, SOME)
def test_respelled_state_raises_non_canonical_state_on_its_observation(
    gateway: str, worker: str, binding: str
) -> None:
    result = _run("spelling", binding, gateway=gateway, worker=worker)
    _assert_ok(result)
    carriers = [
        d
        for d in result.divergences
        if d.reason == "non_canonical_state"
        and d.span_attributes.get("otel_a2a.task.state.raw") in {"Working", "Submitted", "Canceled"}
    ]
    assert carriers, _report(result)
    assert all(d.span in {op.value for op in Operation} for d in carriers)  # A2A call spans


@pytest.mark.parametrize(PEERS, [*SOME, GRPC])
def test_redeploy_with_a_new_card_raises_etag_changed(
    gateway: str, worker: str, binding: str
) -> None:
    result = _run("redeploy", binding, gateway=gateway, worker=worker)
    _assert_ok(result)
    _, reasons = _first_decision_after_restart(result)
    assert reasons[:1] == ["etag_changed"], _report(result)


@pytest.mark.parametrize(PEERS, [*EVERY, GRPC])
def test_healthy_run_has_no_divergence_and_counts_redundant_polls(
    gateway: str, worker: str, binding: str
) -> None:
    result = _run("healthy", binding, gateway=gateway, worker=worker)
    _assert_ok(result)
    assert result.divergences == [], _report(result)
    assert result.metric("otel_a2a_divergence_total") == 0
    assert result.metric("otel_a2a_task_get_redundant_total") > 0
    assert (
        result.metric("otel_a2a_liveness_decisions_total", otel_a2a_decision_outcome="divergent")
        == 0
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--binding", "GRPC"],
            "--binding GRPC needs --gateway go (the python gateway serves no gRPC)",
        ),
        (
            ["--binding", "GRPC", "--gateway", "go", "--variant", "spelling"],
            "--variant spelling does not apply over gRPC: TaskState is a protobuf enum there, "
            "so the gateway cannot re-spell it (use JSONRPC or HTTP+JSON)",
        ),
        (
            ["--binding", "GRPC", "--gateway", "go", "--variant", "both"],
            "--variant both does not apply over gRPC: TaskState is a protobuf enum there, "
            "so the gateway cannot re-spell it (use JSONRPC or HTTP+JSON)",
        ),
    ],
)
def test_grpc_combinations_that_do_not_apply_are_refused(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any process starts, whatever is installed."""
    assert main(["--quiet", *argv]) == 2
    assert capsys.readouterr().err == f"python -m demo: error: {error}\n"


@NODE
def test_a_demo_without_its_python_peers_names_the_missing_install_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without uvicorn (the gateway's server) ``python -m demo`` says what is missing and how to
    install it, before starting any process."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a)
    )
    assert main(["--quiet"]) == 2
    assert capsys.readouterr().err == (
        "otel-a2a demo could not run: uvicorn not installed: "
        "run `make setup` (or pip install -e '.[dev]')\n"
    )


def test_a_jvm_demo_without_its_jar_names_the_build_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--worker jvm`` before ``make jvm``: the demo says so before starting any process."""
    import demo.processes

    missing = tmp_path / "a2a-jvm-worker.jar"
    monkeypatch.setattr(demo.processes, "JVM_JAR", missing)
    monkeypatch.setattr(demo.processes.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert main(["--worker", "jvm", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"otel-a2a demo could not run: {missing} is missing: run `make jvm`")
