"""The real pipeline for tests: the collector and Jaeger that `make tools` builds, the stack
launcher of `make stack`, and `otel-a2a detector` processes, all on 127.0.0.1.

The launcher (deploy/local/stack.py, a script, not a package) is loaded from its file so the
tests run exactly what `make stack` runs. Under ``CI=true`` a missing tool fails the test
(`make test` builds them first); elsewhere it skips with the command that builds it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import in_ci

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "collector-config"
SINGLE = CONFIG_DIR / "otelcol.yaml"
SHARDED = CONFIG_DIR / "otelcol-sharded.yaml"
SHARD = CONFIG_DIR / "otelcol-shard.yaml"
CONFIGS = (SINGLE, SHARDED, SHARD)


def _load_stack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otel_a2a_stack", REPO / "deploy/local/stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


stack = _load_stack()
OTELCOL: Path = stack.OTELCOL
JAEGER: Path = stack.JAEGER
Service = stack.Service
addr = stack.addr


def require_tool(path: Path) -> Path:
    """``path`` if `make tools` built it; a failure under CI=true, a skip elsewhere."""
    if path.is_file():
        return path
    msg = f"{path.relative_to(REPO)} is missing: run `make tools` (Go >= 1.26 and its module proxy)"
    if in_ci():
        pytest.fail(f"{msg}; CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(msg)


def validate(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``otelcol-a2a validate`` on ``config`` (plus ``--config=…`` overrides)."""
    argv = [str(require_tool(OTELCOL)), "validate", f"--config=file:{config}", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


free_ports = stack.free_ports


def min_version(path: Path) -> tuple[int, ...]:
    """The ``minimum otelcol-contrib version: vX.Y.Z`` a collector config states."""
    m = re.search(r"minimum otelcol-contrib version: v(\d+)\.(\d+)\.(\d+)", path.read_text())
    assert m, f"{path.name} does not state its minimum collector version"
    return tuple(int(x) for x in m.groups())


def collector(
    name: str, config: Path, overrides: Mapping[str, object], health: int, log_dir: Path
) -> Any:
    """A collector on ``config`` (own telemetry off, health check on ``health``), started."""
    argv = stack.collector_command(
        config,
        {
            **overrides,
            "extensions::health_check::endpoint": addr(health),
            **stack.telemetry_on(None),
        },
        binary=require_tool(OTELCOL),
    )
    return Service(name, argv, log_dir / f"{name}.log", f"http://{addr(health)}/").start()


@dataclass
class Detector:
    """An ``otel-a2a detector --json`` process: OTLP/HTTP in on ``port``, what it received in
    ``dump``, findings (one JSON object a line) in its log."""

    service: Any
    port: int
    dump: Path

    @property
    def endpoint(self) -> str:
        return f"http://{addr(self.port)}"

    def findings(self) -> list[dict[str, Any]]:
        lines = self.service.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def requests(self) -> Iterator[dict[str, Any]]:
        """The OTLP JSON requests it accepted, as dumped (one a line)."""
        if not self.dump.exists():
            return
        for line in self.dump.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def detector(name: str, port: int, metrics_port: int, log_dir: Path, *flags: str) -> Detector:
    """An ``otel-a2a detector`` started with ``flags`` too (``--default-heartbeat 1``, ...)."""
    dump = log_dir / f"{name}.jsonl"
    argv = [
        sys.executable,
        "-m",
        "otel_a2a.cli",
        "detector",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        "--json",
        "--dump",
        str(dump),
        *flags,
    ]
    service = Service(
        name, argv, log_dir / f"{name}.log", f"http://{addr(metrics_port)}/metrics"
    ).start()
    return Detector(service, port, dump)


@contextlib.contextmanager
def collector_to_detector(tmp_path: Path, *flags: str) -> Iterator[tuple[Detector, str, str]]:
    """The shipped collector config on the built collector, its traces going to an
    ``otel-a2a detector`` (started with ``flags``); yields the detector and the collector's
    OTLP/gRPC and OTLP/HTTP endpoints (``http://host:port``)."""
    require_tool(OTELCOL)
    grpc, http, prom, health, det_port, det_metrics = free_ports(6)
    det = detector("detector", det_port, det_metrics, tmp_path, *flags)
    started = [det.service]
    try:
        overrides = {
            "receivers::otlp::protocols::grpc::endpoint": addr(grpc),
            "receivers::otlp::protocols::http::endpoint": addr(http),
            "exporters::prometheus::endpoint": addr(prom),
            "exporters::otlphttp/detector::endpoint": det.endpoint,
            "service::pipelines::traces::exporters": ["otlphttp/detector"],
        }
        started.append(collector("collector", SINGLE, overrides, health, tmp_path))
        for service in started:
            service.wait_ready()
        yield det, f"http://{addr(grpc)}", f"http://{addr(http)}"
    finally:
        for service in reversed(started):
            service.stop()


def spans(request: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(resource attributes, span) of each span of an OTLP JSON traces request."""
    for rs in request.get("resourceSpans", []):
        resource = {
            a["key"]: next(iter(a["value"].values()), None)
            for a in rs.get("resource", {}).get("attributes", [])
        }
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                yield resource, span


def attribute(span: Mapping[str, Any], key: str) -> Any:
    for item in span.get("attributes", []):
        if item["key"] == key:
            return next(iter(item["value"].values()), None)
    return None
