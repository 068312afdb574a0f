"""The docker-compose stack and its provisioning files, validated structurally.

Docker does not run on our CI machines: these tests check that the stack is consistent with
itself and with the repository (mounted files exist, hostnames/ports/uids agree, images are
pinned) and run `promtool check config` on the Prometheus configuration.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.ops.conftest import DASHBOARD, RULES
from tests.support.pipeline import min_version, validate
from tests.support.prom import run_promtool

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "docker-compose.yaml"
PROM_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
PROVISIONING = DEPLOY / "grafana" / "provisioning"
OTELCOL = REPO / "collector-config" / "otelcol.yaml"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _compose() -> dict[str, Any]:
    doc: dict[str, Any] = _yaml(COMPOSE)
    return doc


def _service(name: str) -> dict[str, Any]:
    svc: dict[str, Any] = _compose()["services"][name]
    return svc


def _mounts(service: str) -> list[tuple[Path, str]]:
    """(host path, container path) of a service's bind mounts, host paths resolved."""
    out = []
    for vol in _service(service).get("volumes", []):
        assert isinstance(vol, str), f"{service}: use short bind syntax: {vol!r}"
        parts = vol.split(":")
        assert len(parts) in (2, 3), vol
        src, dst = parts[0], parts[1]
        assert src.startswith((".", "/")), f"{service}: named volume {src!r} is not a repo file"
        out.append(((DEPLOY / src).resolve(), dst))
    return out


def _host_path(service: str, container_path: str) -> Path:
    """The repository file a container path of ``service`` maps to (longest mount prefix)."""
    best: tuple[int, Path] | None = None
    for host, dst in _mounts(service):
        if container_path == dst or container_path.startswith(dst.rstrip("/") + "/"):
            rest = container_path[len(dst) :].lstrip("/")
            cand = host / rest if rest else host
            if best is None or len(dst) > best[0]:
                best = (len(dst), cand)
    assert best is not None, f"{service}: {container_path} is not mounted"
    return best[1]


def _version(image: str) -> tuple[int, ...]:
    tag = image.rsplit(":", 1)[1]
    return tuple(int(x) for x in re.findall(r"\d+", tag)[:3])


def test_compose_services_and_pinned_images() -> None:
    services = _compose()["services"]
    assert {"otelcol", "jaeger", "prometheus", "grafana"} <= set(services)
    for name, svc in services.items():
        image = svc["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"
    assert "opentelemetry-collector-contrib" in services["otelcol"]["image"]
    assert "all-in-one" in services["jaeger"]["image"]


def test_collector_image_meets_the_configs_minimum_version() -> None:
    need = min_version(OTELCOL)
    assert _version(_service("otelcol")["image"]) >= need


@pytest.mark.parametrize("service", ["otelcol", "prometheus", "grafana"])
def test_every_bind_mount_exists_in_the_repo(service: str) -> None:
    mounts = _mounts(service)
    assert mounts
    for host, _ in mounts:
        assert host.exists(), f"{service}: {host} does not exist"
        assert REPO in host.parents or host == REPO, f"{service}: {host} is outside the repo"


def test_ports_are_published_on_loopback() -> None:
    for name, svc in _compose()["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port}"


def test_collector_runs_the_repo_config() -> None:
    svc = _service("otelcol")
    config_arg = next(a for a in svc["command"] if a.startswith("--config="))
    host = _host_path("otelcol", config_arg.split("=", 1)[1])
    assert host == OTELCOL
    res = validate(host)
    assert res.returncode == 0, res.stderr


def test_collector_reaches_jaeger_over_otlp() -> None:
    cfg = _yaml(OTELCOL)
    trace_exporters = cfg["service"]["pipelines"]["traces"]["exporters"]
    endpoints = [cfg["exporters"][e]["endpoint"] for e in trace_exporters if e.startswith("otlp")]
    assert "jaeger:4317" in endpoints
    assert _service("jaeger")["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"


def test_collector_publishes_otlp_ports() -> None:
    cfg = _yaml(OTELCOL)
    protocols = cfg["receivers"]["otlp"]["protocols"]
    published = {str(p).rsplit(":", 1)[1] for p in _service("otelcol")["ports"]}
    for proto in ("grpc", "http"):
        port = protocols[proto]["endpoint"].rsplit(":", 1)[1]
        assert port in published, proto
        # inside a container, loopback would be unreachable from the published port
        assert protocols[proto]["endpoint"].startswith("0.0.0.0:")


def test_prometheus_scrapes_the_collector_exporter() -> None:
    prom = _yaml(PROM_CONFIG)
    port = _yaml(OTELCOL)["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    targets = [t for j in jobs.values() for sc in j["static_configs"] for t in sc["targets"]]
    assert f"otelcol:{port}" in targets
    collector_job = next(j for j in jobs.values() if f"otelcol:{port}" in str(j))
    assert collector_job["honor_labels"] is True


def test_prometheus_loads_the_repo_rules() -> None:
    svc = _service("prometheus")
    config_arg = next(a for a in svc["command"] if a.startswith("--config.file="))
    assert _host_path("prometheus", config_arg.split("=", 1)[1]) == PROM_CONFIG
    rule_files = _yaml(PROM_CONFIG)["rule_files"]
    hosts = [_host_path("prometheus", f) for f in rule_files]
    assert hosts == [RULES]


@pytest.mark.prometheus
def test_promtool_check_config(tmp_path: Path) -> None:
    """promtool on the real file, with container paths rewritten to the repository's."""
    prom = _yaml(PROM_CONFIG)
    prom["rule_files"] = [str(_host_path("prometheus", f)) for f in prom["rule_files"]]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(prom, sort_keys=False))
    res = run_promtool("check", "config", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    # 8 alerts, the recorded divergence count and the recorded resolution count
    assert "SUCCESS: 10 rules found" in res.stdout


def _datasources() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in sorted((PROVISIONING / "datasources").glob("*.yaml")):
        doc = _yaml(f)
        assert doc["apiVersion"] == 1
        for ds in doc["datasources"]:
            out[ds["uid"]] = ds
    return out


def _dashboard_uids(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = set()
        ds = node.get("datasource")
        if isinstance(ds, dict) and "uid" in ds and ds.get("type") != "grafana":
            found.add(ds["uid"])
        for v in node.values():
            found |= _dashboard_uids(v)
        return found
    if isinstance(node, list):
        return set().union(*(_dashboard_uids(v) for v in node)) if node else set()
    return set()


def test_grafana_datasources_match_the_dashboard_and_services() -> None:
    sources = _datasources()
    used = _dashboard_uids(json.loads(DASHBOARD.read_text()))
    assert used, "the dashboard references no datasource uid"
    assert used <= set(sources), f"dashboard uids {used} not provisioned: {set(sources)}"
    by_type = {ds["type"]: ds for ds in sources.values()}
    assert {"prometheus", "jaeger"} <= set(by_type)
    services = _compose()["services"]
    for kind, port in (("prometheus", 9090), ("jaeger", 16686)):
        url = urlsplit(by_type[kind]["url"])
        assert url.hostname in services, url
        assert url.port == port
    assert sum(1 for ds in sources.values() if ds.get("isDefault")) == 1


def test_grafana_provisions_the_dashboard() -> None:
    assert _host_path("grafana", "/etc/grafana/provisioning") == PROVISIONING
    providers = [
        p for f in (PROVISIONING / "dashboards").glob("*.yaml") for p in _yaml(f)["providers"]
    ]
    assert providers
    for provider in providers:
        assert provider["type"] == "file"
        folder = _host_path("grafana", provider["options"]["path"])
        assert (folder / DASHBOARD.name).exists(), folder
    home = _service("grafana")["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert _host_path("grafana", home) == DASHBOARD


def test_dashboard_jaeger_link_default_is_the_published_ui() -> None:
    dash = json.loads(DASHBOARD.read_text())
    jaeger_url = next(v for v in dash["templating"]["list"] if v["name"] == "jaeger_url")
    published = {str(p).rsplit(":", 1)[1] for p in _service("jaeger")["ports"]}
    assert urlsplit(jaeger_url["query"]).port == 16686 and "16686" in published


def test_operations_doc_section() -> None:
    doc = (REPO / "docs" / "operations.md").read_text()
    start = doc.index("## See it in Grafana and Jaeger")
    end = doc.find("\n## ", start + 1)
    text = doc[start : end if end != -1 else len(doc)]
    assert "docker compose up" in text
    assert "Docker does not run on our CI machines" in text
    for path in re.findall(r"`((?:deploy|dashboards|collector-config|tests)/[^`\s]+)`", text):
        assert (REPO / path.rstrip("/")).exists(), path
