"""`make stack`: the otel-a2a pipeline on 127.0.0.1 without Docker.

Starts the collector built by `make tools` (``.tools/bin/otelcol-a2a``) on the shipped
``collector-config/otelcol.yaml``, Jaeger v2 (``.tools/bin/jaeger``, in-memory storage, on
``deploy/jaeger/config.yaml``), Prometheus on ``deploy/prometheus/prometheus.yml`` with the
alert rules of ``dashboards/alerts/`` and Alertmanager on ``deploy/alertmanager/alertmanager.yml``
(both from Debian's packages), waits until each answers, prints their URLs and runs until
Ctrl-C (SIGINT) or SIGTERM, then stops them all, newest first, and exits 0.

The shipped files are used as they are; only their listen and target addresses are moved to
127.0.0.1 (collector overrides on the command line, a copy of the Prometheus file with the
targets rewritten), so the same files keep serving the docker-compose stack.

``--free-ports`` picks free ephemeral ports instead of the usual ones (the tests run the
stack that way beside anything else on the machine); ``--ready-file`` writes the URLs as
JSON once everything answers. Standard library and PyYAML only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools" / "bin"
OTELCOL = TOOLS / "otelcol-a2a"
JAEGER = TOOLS / "jaeger"
COLLECTOR_CONFIG = REPO / "collector-config" / "otelcol.yaml"
JAEGER_CONFIG = REPO / "deploy" / "jaeger" / "config.yaml"
PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
ALERTMANAGER_CONFIG = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
RULES = REPO / "dashboards" / "alerts" / "otel-a2a.rules.yaml"
PROMETHEUS = "prometheus"
ALERTMANAGER = "prometheus-alertmanager"  # Debian's name for the alertmanager binary
HOST = "127.0.0.1"
START_TIMEOUT = 60.0


@dataclass
class Ports:
    """Every port the stack listens on; the defaults are each project's usual ones, moved
    where two would clash (Jaeger's OTLP, health and metrics ports)."""

    otlp_grpc: int = 4317
    otlp_http: int = 4318
    collector_metrics: int = 8888  # the collector's own telemetry
    prometheus_exporter: int = 8889
    collector_health: int = 13133
    zpages: int = 55679
    jaeger_otlp_grpc: int = 14317
    jaeger_otlp_http: int = 14318
    jaeger_query: int = 16686
    jaeger_query_grpc: int = 16685
    jaeger_health: int = 14133
    jaeger_metrics: int = 14269
    prometheus: int = 9090
    alertmanager: int = 9093

    @classmethod
    def free(cls) -> Ports:
        return cls(*free_ports(len(fields(cls))))


def free_ports(count: int) -> list[int]:
    """Free ephemeral ports on 127.0.0.1, all bound at once so that no two are the same."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def addr(port: int) -> str:
    return f"{HOST}:{port}"


def collector_command(
    config: Path, overrides: Mapping[str, object], binary: Path = OTELCOL
) -> list[str]:
    """``otelcol-a2a`` on ``config`` with ``overrides`` (``"a::b::c": value``) merged over it
    by the collector's own ``yaml:`` config provider."""
    argv = [str(binary), f"--config=file:{config}"]
    for key, value in overrides.items():
        argv.append("--config=yaml:" + key + ": " + json.dumps(value))
    return argv


def telemetry_on(port: int | None) -> dict[str, object]:
    """The collector's own metrics on ``127.0.0.1:port``, or off (``None``): its default
    port 8888 would clash between several collectors on one host."""
    if port is None:
        return {"service::telemetry::metrics::level": "none"}
    reader = {"pull": {"exporter": {"prometheus": {"host": HOST, "port": port}}}}
    return {"service::telemetry::metrics::readers": [reader]}


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= int(resp.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclass
class Service:
    """One child process, its output in ``log``, ready when ``ready_url`` answers 2xx."""

    name: str
    argv: list[str]
    log: Path
    ready_url: str
    env: Mapping[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Service:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=None if self.env is None else {**os.environ, **self.env},
                start_new_session=True,  # Ctrl-C reaches the launcher only; it stops us
            )
        return self

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not http_ok(self.ready_url):
            code = self.exited()
            if code is not None:
                raise RuntimeError(f"{self.name} exited with {code}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} not ready at {self.ready_url} after {timeout:.0f} s:\n"
                    + self.log_tail()
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)


def require(binary: Path | str, hint: str) -> str:
    found = shutil.which(str(binary))
    if not found:
        raise SystemExit(f"stack: {binary} not found: {hint}")
    return found


def prometheus_config(ports: Ports, interval: str | None) -> dict[str, Any]:
    """The shipped Prometheus file with the compose addresses moved to this host."""
    cfg: dict[str, Any] = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    if interval:
        cfg.setdefault("global", {}).update(scrape_interval=interval, evaluation_interval=interval)
    cfg["rule_files"] = [str(RULES)]
    for job in cfg["scrape_configs"]:
        if job["job_name"] == "otelcol":
            job["static_configs"] = [{"targets": [addr(ports.prometheus_exporter)]}]
    cfg["alerting"] = {
        "alertmanagers": [{"static_configs": [{"targets": [addr(ports.alertmanager)]}]}]
    }
    return cfg


def services(ports: Ports, state: Path, interval: str | None) -> list[Service]:
    """The four processes, in start order (Alertmanager and Jaeger before their senders)."""
    prom_file = state / "prometheus.yml"
    prom_file.write_text(yaml.safe_dump(prometheus_config(ports, interval), sort_keys=False))
    collector = collector_command(
        COLLECTOR_CONFIG,
        {
            "receivers::otlp::protocols::grpc::endpoint": addr(ports.otlp_grpc),
            "receivers::otlp::protocols::http::endpoint": addr(ports.otlp_http),
            "exporters::otlp/jaeger::endpoint": addr(ports.jaeger_otlp_grpc),
            "exporters::prometheus::endpoint": addr(ports.prometheus_exporter),
            "extensions::health_check::endpoint": addr(ports.collector_health),
            "extensions::zpages::endpoint": addr(ports.zpages),
            **telemetry_on(ports.collector_metrics),
        },
    )
    jaeger_env = {
        "JAEGER_OTLP_GRPC_ENDPOINT": addr(ports.jaeger_otlp_grpc),
        "JAEGER_OTLP_HTTP_ENDPOINT": addr(ports.jaeger_otlp_http),
        "JAEGER_QUERY_HTTP_ENDPOINT": addr(ports.jaeger_query),
        "JAEGER_QUERY_GRPC_ENDPOINT": addr(ports.jaeger_query_grpc),
        "JAEGER_HEALTH_ENDPOINT": addr(ports.jaeger_health),
        "JAEGER_METRICS_PORT": str(ports.jaeger_metrics),
    }
    return [
        Service(
            "alertmanager",
            [
                require(ALERTMANAGER, "apt-get install prometheus-alertmanager (make setup)"),
                f"--config.file={ALERTMANAGER_CONFIG}",
                f"--storage.path={state / 'alertmanager'}",
                f"--web.listen-address={addr(ports.alertmanager)}",
                "--cluster.listen-address=",  # no gossip port on 0.0.0.0:9094
            ],
            state / "alertmanager.log",
            f"http://{addr(ports.alertmanager)}/-/ready",
        ),
        Service(
            "jaeger",
            [require(JAEGER, "run `make tools`"), f"--config=file:{JAEGER_CONFIG}"],
            state / "jaeger.log",
            f"http://{addr(ports.jaeger_health)}/status",
            env=jaeger_env,
        ),
        Service(
            "prometheus",
            [
                require(PROMETHEUS, "apt-get install prometheus (make setup)"),
                f"--config.file={prom_file}",
                f"--storage.tsdb.path={state / 'prometheus'}",
                f"--web.listen-address={addr(ports.prometheus)}",
                "--web.enable-lifecycle",
            ],
            state / "prometheus.log",
            f"http://{addr(ports.prometheus)}/-/ready",
        ),
        Service(
            "otelcol",
            [require(OTELCOL, "run `make tools`"), *collector[1:]],
            state / "otelcol.log",
            f"http://{addr(ports.collector_health)}/",
        ),
    ]


def urls(ports: Ports) -> dict[str, str]:
    return {
        "otlp_grpc": f"http://{addr(ports.otlp_grpc)}",
        "otlp_http": f"http://{addr(ports.otlp_http)}",
        "collector_metrics": f"http://{addr(ports.prometheus_exporter)}/metrics",
        "jaeger": f"http://{addr(ports.jaeger_query)}",
        "prometheus": f"http://{addr(ports.prometheus)}",
        "alertmanager": f"http://{addr(ports.alertmanager)}",
    }


def banner(found: Mapping[str, str], state: Path) -> str:
    return "\n".join(
        [
            "otel-a2a stack ready (Ctrl-C stops it):",
            f"  OTLP in        {found['otlp_grpc']} (gRPC)   {found['otlp_http']} (HTTP)",
            f"  Jaeger         {found['jaeger']}  (query API: {found['jaeger']}/api/traces;"
            " this Jaeger build serves a placeholder page, not the UI)",
            f"  Prometheus     {found['prometheus']}  (alerts: {found['prometheus']}/alerts)",
            f"  Alertmanager   {found['alertmanager']}",
            f"  collector      {found['collector_metrics']} (what Prometheus scrapes)",
            f"  logs           {state}/*.log",
            "Send telemetry, e.g. the demo:",
            f"  OTEL_SERVICE_NAME=orchestrator OTEL_EXPORTER_OTLP_ENDPOINT={found['otlp_http']} \\",
            "  OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf .venv/bin/python -m demo",
        ]
    )


class _Stop(Exception):
    pass


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def run(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stack", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--state",
        type=Path,
        default=REPO / ".tools" / "stack",
        help="folder for logs and data, emptied at start (default .tools/stack)",
    )
    parser.add_argument(
        "--free-ports", action="store_true", help="free ephemeral ports instead of the usual ones"
    )
    parser.add_argument(
        "--interval",
        default=None,
        help="Prometheus scrape and rule interval (default: the shipped 5s)",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=None,
        help="write the URLs (and process ids) here as JSON once ready",
    )
    args = parser.parse_args(argv)
    ports = Ports.free() if args.free_ports else Ports()
    shutil.rmtree(args.state, ignore_errors=True)
    args.state.mkdir(parents=True)
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    started: list[Service] = []
    try:
        for service in services(ports, args.state, args.interval):
            started.append(service.start())
            service.wait_ready()
        found = urls(ports)
        print(banner(found, args.state), flush=True)
        if args.ready_file is not None:
            pids = {s.name: s.proc.pid for s in started if s.proc is not None}
            args.ready_file.write_text(json.dumps({**found, "pids": pids}))
        while True:
            for service in started:
                code = service.exited()
                if code is not None:
                    print(
                        f"stack: {service.name} exited with {code}:\n{service.log_tail()}",
                        file=sys.stderr,
                    )
                    return 1
            time.sleep(0.5)
    except _Stop:
        print("stack: stopping", flush=True)
        return 0
    except RuntimeError as err:
        print(f"stack: {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C cannot orphan children
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for service in reversed(started):
            service.stop()


if __name__ == "__main__":
    sys.exit(run())
