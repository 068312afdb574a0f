"""The start-up contract of ``OTEL_A2A_ENABLED=true`` in fresh interpreters: who configures the
SDK and when, what the application keeps, and that exit-time telemetry is not lost."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.autoload.test_autoload import BIN, _documents, _env, _run

CASES = Path(__file__).with_name("startup_cases.py")


def _case(case: str, env: dict[str, str], *prefix: str) -> tuple[dict[str, Any], list[str], str]:
    """Run one case: (its report, the names of the spans the console exporter printed, stderr)."""
    done = _run([*prefix, sys.executable, str(CASES), case], env)
    assert done.returncode == 0, done.stderr
    docs = _documents(done.stdout)
    report = next(d for d in docs if "name" not in d and "resource_metrics" not in d)
    spans = [d["name"] for d in docs if "name" in d and "context" in d]
    return report, spans, done.stderr


def test_plain_http_before_any_a2a_leaves_the_choice_to_the_application() -> None:
    report, spans, stderr = _case("plain_first", _env(OTEL_A2A_ENABLED="true"))
    assert report == {"own": True, "spans": ["GetTask"]}
    assert spans == [] and "Overriding" not in stderr


def test_concurrent_first_operations_are_all_recorded() -> None:
    _, spans, _ = _case("concurrent_first", _env(OTEL_A2A_ENABLED="true"))
    assert spans.count("GetTask") == 8


def test_an_application_with_its_own_meter_provider_gets_no_sdk_from_us() -> None:
    report, spans, stderr = _case("meter_only", _env(OTEL_A2A_ENABLED="true"))
    assert report["tracer_provider"] == "ProxyTracerProvider"
    assert "otel_a2a.task.tracked" in report["metrics"]
    assert spans == [] and "Overriding" not in stderr


def test_explicit_providers_replace_the_start_up_instrumentation() -> None:
    report, spans, stderr = _case("explicit_providers", _env(OTEL_A2A_ENABLED="true"))
    assert report["spans"] == ["GetTask"]
    assert "otel_a2a.task.tracked" in report["metrics"]
    assert report["global_tracer_provider"] == "ProxyTracerProvider"
    assert spans == [] and "already instrumented" not in stderr


def test_instrumenting_again_before_the_first_operation_keeps_the_sdk_set_up() -> None:
    report, spans, _ = _case("reinstrumented", _env(OTEL_A2A_ENABLED="true"))
    assert report == {"state": "working"} and spans == ["GetTask"]


def test_telemetry_of_the_applications_exit_handlers_is_exported() -> None:
    _, spans, _ = _case("exit_handler", _env(OTEL_A2A_ENABLED="true"))
    assert spans == ["GetTask", "CancelTask"]


def test_an_exit_handler_registered_before_httpx_is_imported_is_exported_too() -> None:
    """The instrumentation starts at ``import httpx``; the providers' shutdown was registered
    at interpreter start all the same, so it still runs after this handler."""
    code = (
        f"import atexit, sys; sys.path.insert(0, {str(CASES.parent)!r})\n"
        "atexit.register(lambda: c._call(c._client(), 'tasks/cancel'))\n"
        "import startup_cases as c\n"
        "c.basic()"
    )
    done = _run([sys.executable, "-c", code], _env(OTEL_A2A_ENABLED="true"))
    assert done.returncode == 0, done.stderr
    spans = [d["name"] for d in _documents(done.stdout) if "context" in d]
    assert spans == ["GetTask", "CancelTask"]


def test_a_failed_sdk_set_up_says_so_and_the_application_goes_on() -> None:
    env = {**_env(OTEL_A2A_ENABLED="true"), "OTEL_TRACES_EXPORTER": "no-such-exporter"}
    report, _, stderr = _case("basic", env)
    assert report == {"state": "working"}
    assert stderr.count("otel-a2a: could not set up OpenTelemetry") == 1, stderr


def test_under_opentelemetry_instrument_one_warning_and_python_dash_e_still_works() -> None:
    env = _env(OTEL_A2A_ENABLED="true", OTEL_A2A_DEFAULT_HEARTBEAT="nan")
    launcher = str(BIN / "opentelemetry-instrument")
    _, spans, stderr = _case("basic", env, launcher)
    assert spans == ["GetTask"]
    assert stderr.count("OTEL_A2A_DEFAULT_HEARTBEAT") == 1, stderr  # not again in the launcher
    # -E: the interpreter ignores PYTHONPATH, so opentelemetry-instrument's hook never loads
    done = _run([launcher, sys.executable, "-E", str(CASES), "basic"], env)
    assert done.returncode == 0, done.stderr
    assert [d["name"] for d in _documents(done.stdout) if "context" in d] == ["GetTask"]


class _Collector(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Collector.paths.append(self.path)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Collector.paths = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_unset_exporters_default_to_otlp_as_with_the_distro(collector: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_A2A_ENABLED="true",
        OTEL_EXPORTER_OTLP_ENDPOINT=collector,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
    )
    done = _run([sys.executable, str(CASES), "basic"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"state": "working"}
    assert {"/v1/traces", "/v1/metrics"} <= set(_Collector.paths), _Collector.paths
