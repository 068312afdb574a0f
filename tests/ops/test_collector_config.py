"""The collector configs pass the structural checker, and seeded broken copies fail it.

No otelcol binary exists on our CI machines, so
collector-config/checker.py stands in for `otelcol validate`; these tests prove it passes the
shipped files and catches each class of mistake with a message that names it.
"""

from __future__ import annotations

import copy
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "collector-config"
SINGLE = CONFIG_DIR / "otelcol.yaml"
SHARDED = CONFIG_DIR / "otelcol-sharded.yaml"
SHARD = CONFIG_DIR / "otelcol-shard.yaml"
CONFIGS = [SINGLE, SHARDED, SHARD]


def _load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otelcol_checker", CONFIG_DIR / "checker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


def _parsed(path: Path) -> tuple[dict[str, Any], Any]:
    text = path.read_text()
    return yaml.safe_load(text), checker.parse_min_version(text)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_passes(path: Path) -> None:
    assert checker.check_file(path) == []


def test_cli_reports_ok_and_failure(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, str(CONFIG_DIR / "checker.py"), *map(str, CONFIGS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count(": OK") == len(CONFIGS)
    broken = tmp_path / "broken.yaml"
    broken.write_text(SINGLE.read_text().replace("send_batch_size", "send_batch_sz"))
    bad = subprocess.run(
        [sys.executable, str(CONFIG_DIR / "checker.py"), str(broken)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1
    assert "unknown key 'send_batch_sz'" in bad.stdout


def test_single_node_shape() -> None:
    """What issue 6 asks of the single-node file, beyond structural validity."""
    cfg, version = _parsed(SINGLE)
    assert version is not None
    protocols = cfg["receivers"]["otlp"]["protocols"]
    assert {"grpc", "http"} <= set(protocols)
    pipes = cfg["service"]["pipelines"]
    for pipe in pipes.values():
        assert pipe["processors"][:2] == ["memory_limiter", "batch"]
    jaeger = [e for e in pipes["traces"]["exporters"] if e.startswith("otlp")]
    assert jaeger and "jaeger" in cfg["exporters"][jaeger[0]]["endpoint"]
    assert pipes["metrics"]["exporters"] == ["prometheus"]
    # no namespace: the exported names must stay the contract's names the dashboard queries
    assert "namespace" not in cfg["exporters"]["prometheus"]


def test_sharded_routes_on_task_id() -> None:
    cfg, version = _parsed(SHARDED)
    lb = cfg["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "attributes"
    assert lb["routing_attributes"] == ["a2a.task.id"]
    assert "loadbalancing" in cfg["service"]["pipelines"]["traces"]["exporters"]
    assert version is not None and version >= (0, 125, 0)


def test_every_block_is_commented() -> None:
    """Every component (receiver, processor, exporter, extension) has a comment on the line
    right above its definition, found under its own section."""
    for path in CONFIGS:
        lines = path.read_text().splitlines()
        assert "minimum otelcol-contrib version" in "\n".join(lines[:5]), path.name
        cfg = yaml.safe_load("\n".join(lines))
        for section in ("receivers", "processors", "exporters", "extensions"):
            head = lines.index(f"{section}:")
            for cid in cfg.get(section) or {}:
                idx = next(i for i in range(head, len(lines)) if lines[i] == f"  {cid}:")
                assert lines[idx - 1].strip().startswith("#"), f"{path.name}: {section}.{cid}"


Mutation = Callable[[dict[str, Any]], None]


def _add_unknown_component(c: dict[str, Any]) -> None:
    c["receivers"]["kafkaa"] = {"brokers": ["k:9092"]}
    c["service"]["pipelines"]["traces"]["receivers"].append("kafkaa")


def _unknown_key(c: dict[str, Any]) -> None:
    c["processors"]["batch"]["send_batch_sz"] = 100


def _unknown_nested_key(c: dict[str, Any]) -> None:
    c["receivers"]["otlp"]["protocols"]["grpc"]["tls"] = {"insecure_skip_verifyy": True}


def _dangling_exporter(c: dict[str, Any]) -> None:
    c["service"]["pipelines"]["traces"]["exporters"].append("otlp/missing")


def _dangling_processor(c: dict[str, Any]) -> None:
    c["service"]["pipelines"]["metrics"]["processors"].append("attributes/strip")


def _connector_one_sided(c: dict[str, Any]) -> None:
    c["connectors"] = {"spanmetrics": {"dimensions": [{"name": "a2a.operation"}]}}
    c["service"]["pipelines"]["traces"]["exporters"].append("spanmetrics")


def _connector_wrong_signals(c: dict[str, Any]) -> None:
    c["connectors"] = {"spanmetrics": {}}
    c["service"]["pipelines"]["traces"]["exporters"].append("spanmetrics")
    c["service"]["pipelines"]["logs"]["receivers"].append("spanmetrics")


def _bad_pipeline_id(c: dict[str, Any]) -> None:
    c["service"]["pipelines"]["trace"] = c["service"]["pipelines"].pop("traces")


def _prometheus_in_traces(c: dict[str, Any]) -> None:
    c["service"]["pipelines"]["traces"]["exporters"].append("prometheus")


def _limiter_not_first(c: dict[str, Any]) -> None:
    c["service"]["pipelines"]["traces"]["processors"] = ["batch", "memory_limiter"]


def _unused_exporter(c: dict[str, Any]) -> None:
    c["exporters"]["otlp/unused"] = {"endpoint": "x:4317"}


def _undefined_extension(c: dict[str, Any]) -> None:
    c["service"]["extensions"].append("pprof")


SINGLE_MUTATIONS: list[tuple[str, Mutation, str]] = [
    ("unknown component", _add_unknown_component, "unknown receiver type 'kafkaa'"),
    ("unknown key", _unknown_key, "processors.batch: unknown key 'send_batch_sz'"),
    (
        "unknown nested key",
        _unknown_nested_key,
        "receivers.otlp.protocols.grpc.tls: unknown key 'insecure_skip_verifyy'",
    ),
    ("dangling exporter", _dangling_exporter, "references exporter 'otlp/missing'"),
    ("dangling processor", _dangling_processor, "references processor 'attributes/strip'"),
    (
        "connector one-sided",
        _connector_one_sided,
        "connectors.spanmetrics: used as an exporter but never as a receiver",
    ),
    ("connector wrong signals", _connector_wrong_signals, "supports only traces -> metrics"),
    ("bad pipeline id", _bad_pipeline_id, "service.pipelines.trace: invalid pipeline id"),
    ("signal mismatch", _prometheus_in_traces, "exporter 'prometheus' does not support traces"),
    ("memory_limiter order", _limiter_not_first, "memory_limiter must be the first processor"),
    ("unused exporter", _unused_exporter, "exporters.otlp/unused: defined but not used"),
    ("undefined extension", _undefined_extension, "'pprof' is not defined under extensions"),
]


def _lb(c: dict[str, Any]) -> dict[str, Any]:
    lb: dict[str, Any] = c["exporters"]["loadbalancing"]
    return lb


def _metric_key(c: dict[str, Any]) -> None:
    _lb(c).update(routing_key="metric")
    _lb(c).pop("routing_attributes")


SHARDED_MUTATIONS: list[tuple[str, Mutation, str]] = [
    (
        "routing_key misspelt",
        lambda c: _lb(c).update(routing_key="attribute"),
        "routing_key 'attribute' is not a loadbalancing routing key",
    ),
    (
        "routing_attributes without routing_key attributes",
        lambda c: _lb(c).update(routing_key="traceID"),
        "routing_attributes is only used with routing_key 'attributes'",
    ),
    (
        "routing_attributes without routing_key at all",
        lambda c: _lb(c).pop("routing_key"),
        "routing_attributes is only used with routing_key 'attributes'",
    ),
    (
        "attributes without routing_attributes",
        lambda c: _lb(c).pop("routing_attributes"),
        "routing_key 'attributes' needs a non-empty routing_attributes list",
    ),
    (
        "endpoint in the otlp template",
        lambda c: _lb(c)["protocol"]["otlp"].update(endpoint="shard:4317"),
        "protocol.otlp.endpoint must not be set",
    ),
    (
        "two resolvers",
        lambda c: _lb(c)["resolver"].update(dns={"hostname": "shards"}),
        "resolver must configure exactly one of",
    ),
    (
        "routing key not valid for the signal",
        _metric_key,
        "routing_key 'metric' cannot route traces",
    ),
    (
        "unknown loadbalancing key",
        lambda c: _lb(c).update(routing_attribute=["a2a.task.id"]),
        "exporters.loadbalancing: unknown key 'routing_attribute'",
    ),
]


@pytest.mark.parametrize(
    ("path", "mutate", "expected"),
    [
        pytest.param(path, mutate, expected, id=f"{path.stem}: {name}")
        for path, mutations in ((SINGLE, SINGLE_MUTATIONS), (SHARDED, SHARDED_MUTATIONS))
        for name, mutate, expected in mutations
    ],
)
def test_broken_copy_fails(path: Path, mutate: Mutation, expected: str) -> None:
    broken, version = _parsed(path)  # a fresh parse: the mutation touches nothing shared
    mutate(broken)
    problems = checker.check(broken, min_version=version)
    assert any(expected in p for p in problems), problems


def test_version_gates() -> None:
    cfg, _ = _parsed(SHARDED)
    problems = checker.check(cfg, min_version=(0, 110, 0))
    assert any(
        "routing_key 'attributes' for traces needs otelcol-contrib >= v0.125.0" in p
        for p in problems
    ), problems
    renamed = copy.deepcopy(cfg)
    renamed["exporters"]["load_balancing"] = renamed["exporters"].pop("loadbalancing")
    pipe = renamed["service"]["pipelines"]["traces"]["exporters"]
    pipe[pipe.index("loadbalancing")] = "load_balancing"
    assert any(
        "'load_balancing' needs otelcol-contrib >= v0.153.0" in p
        for p in checker.check(renamed, min_version=(0, 125, 0))
    )
    assert checker.check(renamed, min_version=(0, 153, 0)) == []
    missing = checker.check_text(SINGLE.read_text().replace("minimum otelcol-contrib", "min"))
    assert any("does not state its minimum collector version" in p for p in missing), missing


def test_broken_yaml_is_reported() -> None:
    assert any("YAML does not parse" in p for p in checker.check_text("receivers: [\n"))
