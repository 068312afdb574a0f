"""``OTEL_A2A_ENABLED=true`` instruments an unmodified process (fresh interpreters only)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.peers import RunningPeer, start_peer

SCRIPT = Path(__file__).with_name("plain_client.py")
BIN = Path(sys.executable).parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="console",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="plain-client",
        OTEL_INSTRUMENTATION_A2A_SDK_ENABLED="false",
        **extra,
    )
    return env


def _is_ours(doc: dict[str, Any]) -> bool:
    """A console-exported span with A2A or otel-a2a attributes (the console exporter's JSON
    does not name the span's scope)."""
    attrs = doc.get("attributes") or {}
    return isinstance(attrs, dict) and any(k.startswith(("a2a.", "otel_a2a.")) for k in attrs)


def _documents(text: str) -> list[dict[str, Any]]:
    """The console exporters print concatenated JSON documents between other lines."""
    decoder, docs, i = json.JSONDecoder(), [], 0
    while (i := text.find("{", i)) != -1:
        try:
            doc, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        docs.append(doc)
        i = end
    return docs


def _metric_sum(docs: list[dict[str, Any]], name: str, **attrs: str) -> float:
    total = 0.0
    for doc in docs:
        for rm in doc.get("resource_metrics", []):
            for sm in rm["scope_metrics"]:
                for metric in sm["metrics"]:
                    if metric["name"] != name:
                        continue
                    for point in metric["data"]["data_points"]:
                        if all(point["attributes"].get(k) == v for k, v in attrs.items()):
                            total += point.get("value", point.get("count", 0))
    return total


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_enabled_variable_alone_instruments_a_plain_a2a_client(
    python_peer: str, library: str
) -> None:
    argv = [sys.executable, str(SCRIPT), python_peer, library]
    done = _run(argv, _env(OTEL_A2A_ENABLED="true"))
    assert done.returncode == 0, done.stderr
    assert "TASK" in done.stdout
    docs = _documents(done.stdout)
    spans = {d["name"]: d for d in docs if "name" in d and "context" in d}
    assert {"GetAgentCard", "SendMessage", "GetTask"} <= set(spans)
    get_task = spans["GetTask"]["attributes"]
    assert get_task["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert "otel_a2a.task.state.raw" not in get_task  # spelt exactly as a2a.task.state
    assert spans["GetAgentCard"]["attributes"]["otel_a2a.card.etag"].startswith('W/"')
    assert (
        _metric_sum(docs, "otel_a2a.divergence", **{"otel_a2a.divergence.reason": "no_observation"})
        == 1
    )
    assert (
        _metric_sum(
            docs, "otel_a2a.liveness.decisions", **{"otel_a2a.decision.outcome": "divergent"}
        )
        == 1
    )
    assert "Error" not in done.stderr, done.stderr


def test_enabled_variable_alone_instruments_a_plain_grpc_client(grpc_peer: RunningPeer) -> None:
    """The same plain client on the a2a-sdk gRPC transport: task spans of binding GRPC."""
    done = _run(
        [sys.executable, str(SCRIPT), grpc_peer.base_url, "--grpc"],
        _env(OTEL_A2A_ENABLED="true"),
    )
    assert done.returncode == 0, done.stderr
    assert "TASK" in done.stdout and "FOLLOW-UP" in done.stdout
    docs = _documents(done.stdout)
    spans = {d["name"]: d for d in docs if "name" in d and "context" in d}
    assert {"GetAgentCard", "SendMessage", "GetTask"} <= set(spans)
    get_task = spans["GetTask"]["attributes"]
    assert get_task["otel_a2a.binding"] == "GRPC"
    assert get_task["a2a.protocol.version"] == "1.0"
    assert get_task["a2a.task.state"] == "TASK_STATE_COMPLETED"
    assert "otel_a2a.task.state.raw" not in get_task  # spelt exactly as a2a.task.state
    assert get_task["rpc.response.status_code"] == "OK"
    assert get_task["otel_a2a.agent.url"] == grpc_peer.base_url  # the card's agent, by its gRPC URL
    assert (
        get_task["otel_a2a.card.etag"] == spans["GetAgentCard"]["attributes"]["otel_a2a.card.etag"]
    )
    assert (
        _metric_sum(docs, "otel_a2a.divergence", **{"otel_a2a.divergence.reason": "no_observation"})
        == 1
    )
    assert (
        _metric_sum(
            docs, "otel_a2a.liveness.decisions", **{"otel_a2a.decision.outcome": "divergent"}
        )
        == 1
    )
    assert _metric_sum(docs, "otel_a2a.instrumentation.errors") == 0
    assert "Error" not in done.stderr, done.stderr


def test_unset_variable_leaves_the_process_alone(python_peer: str) -> None:
    done = _run([sys.executable, str(SCRIPT), python_peer], _env())
    assert done.returncode == 0, done.stderr
    assert not any(_is_ours(d) for d in _documents(done.stdout))
    probe = _run([sys.executable, "-c", "import sys; print('otel_a2a' in sys.modules)"], _env())
    assert probe.stdout.strip() == "False"


def test_pth_is_installed_and_idempotent() -> None:
    site = Path(sysconfig.get_paths()["purelib"])
    line = (site / "otel_a2a.pth").read_text().strip()
    assert line.startswith("import os;") and "OTEL_A2A_ENABLED" in line
    assert (site / "otel_a2a.start").read_text().strip() == "otel_a2a._autoload:run"
    code = (
        "import site, sys, httpx; site.addsitedir(sys.argv[1]); site.addsitedir(sys.argv[1]);"
        "import otel_a2a._autoload as a; a.run(); print(hasattr(httpx.Client.send, '__wrapped__'))"
    )
    done = _run([sys.executable, "-c", code, str(site)], _env(OTEL_A2A_ENABLED="true"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    assert "already instrumented" not in done.stderr


@pytest.mark.parametrize("library", ["httpx", "httpx2", "grpc", "a2a", "otel_a2a"])
def test_the_instrumentation_loads_at_the_first_import_of_what_it_serves(library: str) -> None:
    """A process that never imports them pays the hook alone; importing one starts the
    instrumentation, and the module keeps its own loader. ``otel_a2a`` itself imports
    nothing heavy: ``liveness_decision`` reaches ``otel_a2a.instrumentation``."""
    code = (
        "import sys; before = 'otel_a2a.instrumentation' in sys.modules\n"
        f"import {library}\n"
        "from otel_a2a import A2AInstrumentor, liveness_decision\n"
        f"loader = type({library}.__spec__.loader).__name__\n"
        "print(before, A2AInstrumentor().is_instrumented_by_opentelemetry, loader)"
    )
    done = _run([sys.executable, "-c", code], _env(OTEL_A2A_ENABLED="true"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "SourceFileLoader"], done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize("value", ["ture", "1", "yes"])
def test_a_bad_enabled_value_warns_once_and_instruments_nothing(
    python_peer: str, value: str
) -> None:
    done = _run([sys.executable, str(SCRIPT), python_peer], _env(OTEL_A2A_ENABLED=value))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("OTEL_A2A_ENABLED") == 1, done.stderr
    assert f"OTEL_A2A_ENABLED={value!r}" in done.stderr, done.stderr
    assert not any(_is_ours(d) for d in _documents(done.stdout))


def test_a_false_enabled_value_is_silent_and_imports_nothing() -> None:
    code = "import sys; print('otel_a2a' in sys.modules)"
    for value in ("false", "FALSE", ""):
        done = _run([sys.executable, "-c", code], _env(OTEL_A2A_ENABLED=value))
        assert (done.stdout.strip(), done.stderr) == ("False", ""), value


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OTEL_A2A_DEFAULT_HEARTBEAT", "soon"),
        ("OTEL_A2A_MAX_TRACKED_TASKS", "-3"),
        ("OTEL_A2A_MODE", "strict"),
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "host=abc"),
    ],
)
def test_bad_configuration_warns_once_and_never_breaks_start(
    python_peer: str, name: str, value: str
) -> None:
    done = _run(
        [sys.executable, str(SCRIPT), python_peer], _env(OTEL_A2A_ENABLED="true", **{name: value})
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(name) == 1, done.stderr
    assert any(d.get("name") == "GetTask" for d in _documents(done.stdout))


def test_entry_point_under_opentelemetry_instrument(python_peer: str) -> None:
    for enabled in ("false", "true"):  # both: the .pth must leave the work to the entry point
        done = _run(
            [str(BIN / "opentelemetry-instrument"), sys.executable, str(SCRIPT), python_peer],
            _env(OTEL_A2A_ENABLED=enabled),
        )
        assert done.returncode == 0, done.stderr
        names = [d.get("name") for d in _documents(done.stdout)]
        assert names.count("GetTask") == 1, names
        assert "already instrumented" not in done.stderr


def test_no_collector_listening_neither_holds_the_exit_nor_floods_stderr(python_peer: str) -> None:
    """Logs at the OTLP default towards a loopback port nobody listens on; the follow-up to a
    task never seen makes an ``otel_a2a.divergence`` log record for it. The exporter's retry
    schedule is about 7 s, after which it writes ``Failed to export``: its absence shows the
    exit cut the retries short (how soon is a ``make bench`` row, not asserted here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _env(OTEL_A2A_ENABLED="true", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    del env["OTEL_LOGS_EXPORTER"]
    # a hang guard, not a timing assert: the exit used to take 6-8 s, a hang takes forever
    done = subprocess.run(
        [sys.executable, str(SCRIPT), python_peer],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    docs = _documents(done.stdout)
    assert (
        _metric_sum(docs, "otel_a2a.divergence", **{"otel_a2a.divergence.reason": "no_observation"})
        == 1
    )
    lines = done.stderr.splitlines()
    assert sum(line.startswith("Transient error") for line in lines) <= 1, done.stderr
    gave_up = [ln for ln in lines if ln.startswith("Failed to export") and "UNAVAILABLE" in ln]
    assert not gave_up, done.stderr
    assert "Shutdown in progress" not in done.stderr  # held back (and counted) too


@pytest.fixture(scope="module")
def push_peer() -> Iterator[RunningPeer]:
    """The a2a-sdk 1.3 worker, push-capable (``--push deliver``)."""
    peer = start_peer("python", options=["--push", "deliver"])
    try:
        yield peer
    finally:
        peer.stop()


@pytest.mark.parametrize("webhook", ["starlette", "flask"])
def test_enabled_variable_alone_observes_push_deliveries(
    push_peer: RunningPeer, webhook: str
) -> None:
    """A plain push-only client: its webhook's deliveries are observations, zero code,
    whether an ASGI (Starlette) or a WSGI (Flask) application receives them."""
    argv = [sys.executable, str(SCRIPT.with_name("push_client.py")), push_peer.base_url, webhook]
    done = _run(argv, _env(OTEL_A2A_ENABLED="true"))
    assert done.returncode == 0, done.stderr
    assert "ANSWERED" in done.stdout
    docs = _documents(done.stdout)
    observed = {"otel_a2a.push.outcome": "observed"}
    assert _metric_sum(docs, "otel_a2a.push.deliveries", **observed) >= 1
    assert _metric_sum(docs, "otel_a2a.push.deliveries") == _metric_sum(
        docs, "otel_a2a.push.deliveries", **observed
    )
    assert _metric_sum(docs, "otel_a2a.divergence") == 0
    assert (
        _metric_sum(
            docs, "otel_a2a.liveness.decisions", **{"otel_a2a.decision.outcome": "authoritative"}
        )
        == 1
    )
    assert "plain-client-token" not in done.stdout
