"""The shipped collector configs, checked by the collector itself and by what it cannot check.

``otelcol-a2a validate`` (the distribution `make tools` builds from
collector-config/builder-config.yaml) loads each file with every component's own config
decoding and validation: unknown components and keys, dangling pipeline references, a bad
``routing_key``, an OTTL statement that does not parse. Seeded broken copies prove it runs.
What it accepts but the project needs is checked here: the memory limiter first in every
pipeline, the task routing of the sharded tier, one collector release in the manifest, and a
comment on every component.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.pipeline import (
    CONFIG_DIR,
    CONFIGS,
    SHARD,
    SHARDED,
    SINGLE,
    min_version,
    validate,
)

MANIFEST = CONFIG_DIR / "builder-config.yaml"
TASK_TRACE = "transform/task_trace"
RESTORE = "transform/restore_trace"
STASH = "otel_a2a.shard.trace_id"


def _load(path: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = yaml.safe_load(path.read_text())
    return cfg


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_the_collector_validates_the_shipped_config(path: Path) -> None:
    res = validate(path)
    assert res.returncode == 0, res.stdout + res.stderr


BROKEN: list[tuple[Path, str, str, str]] = [
    (SINGLE, "send_batch_size", "send_batch_sz", "has invalid keys: send_batch_sz"),
    (SINGLE, "exporters: [otlp/jaeger]", "exporters: [otlp/missing]", "otlp/missing"),
    (SINGLE, "  debug:\n", "  debugg:\n", "debugg"),
    (SHARDED, "routing_key: traceID", "routing_key: attribute", "unsupported routing_key"),
    (SHARDED, 'MD5(span.attributes["a2a.task.id"])', "MD5(span.attributes[)", "invalid syntax"),
    (SHARD, "otlphttp/detector]", "otlphttp/nowhere]", "otlphttp/nowhere"),
]


@pytest.mark.parametrize(
    ("path", "old", "new", "expected"),
    BROKEN,
    ids=[f"{p.stem}: {new}" for p, _, new, _ in BROKEN],
)
def test_the_collector_refuses_a_broken_copy(
    tmp_path: Path, path: Path, old: str, new: str, expected: str
) -> None:
    text = path.read_text()
    assert old in text
    broken = tmp_path / path.name
    broken.write_text(text.replace(old, new, 1))
    res = validate(broken)
    assert res.returncode != 0
    assert expected in res.stdout + res.stderr


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_memory_limiter_is_first_in_every_pipeline(path: Path) -> None:
    for name, pipe in _load(path)["service"]["pipelines"].items():
        assert pipe["processors"][0] == "memory_limiter", f"{path.name}: {name}"


def test_single_node_shape() -> None:
    cfg = _load(SINGLE)
    assert {"grpc", "http"} <= set(cfg["receivers"]["otlp"]["protocols"])
    pipes = cfg["service"]["pipelines"]
    for pipe in pipes.values():
        assert pipe["processors"] == ["memory_limiter", "batch"]
    assert pipes["traces"]["exporters"] == ["otlp/jaeger"]
    assert pipes["metrics"]["exporters"] == ["prometheus"]
    # no namespace: the exported names must stay the metric contract's, as the dashboard queries
    assert "namespace" not in cfg["exporters"]["prometheus"]


def _statements(cfg: dict[str, Any], processor: str) -> tuple[list[str], list[str]]:
    (block,) = cfg["processors"][processor]["trace_statements"]
    assert block["context"] == "span"
    return block["conditions"], block["statements"]


def test_sharded_tier_routes_each_task_as_a_trace_of_its_own() -> None:
    """Tier 1 routes on traceID after giving each task span a routing trace id from its task
    (keeping its own in the stash attribute); the trace copy for Jaeger is left untouched."""
    cfg = _load(SHARDED)
    lb = cfg["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID" and "routing_attributes" not in lb
    pipes = cfg["service"]["pipelines"]
    (sharding,) = [p for p in pipes.values() if "loadbalancing" in p["exporters"]]
    assert sharding["exporters"] == ["loadbalancing"]
    assert sharding["processors"] == ["memory_limiter", TASK_TRACE, "batch"]
    conditions, statements = _statements(cfg, TASK_TRACE)
    assert conditions == ['span.attributes["a2a.task.id"] != nil']
    assert statements == [
        f'set(span.attributes["{STASH}"], span.trace_id.string)',
        'set(span.trace_id.string, MD5(span.attributes["a2a.task.id"]))',
    ]
    untouched = [p for p in pipes.values() if "otlp/jaeger" in p["exporters"]]
    assert untouched and all(TASK_TRACE not in p["processors"] for p in untouched)


def test_each_shard_restores_the_trace_id() -> None:
    cfg = _load(SHARD)
    (pipe,) = cfg["service"]["pipelines"].values()
    assert pipe["processors"] == ["memory_limiter", RESTORE, "batch"]
    conditions, statements = _statements(cfg, RESTORE)
    assert conditions == [f'span.attributes["{STASH}"] != nil']
    assert statements == [
        f'set(span.trace_id.string, span.attributes["{STASH}"])',
        f'delete_key(span.attributes, "{STASH}")',
    ]


def _modules() -> list[tuple[str, str]]:
    manifest = _load(MANIFEST)
    return [
        tuple(entry["gomod"].split())  # type: ignore[misc]
        for section in ("receivers", "processors", "exporters", "extensions", "providers")
        for entry in manifest.get(section, [])
    ]


def test_the_manifest_is_one_collector_release() -> None:
    """Unstable modules (v0.x) all of one release, stable ones (v1.x) of its twin, the
    builder's own version (the Makefile reads it from the otlp receiver) the same."""
    versions = {v for _, v in _modules()}
    unstable = {v for v in versions if v.startswith("v0.")}
    stable = {v for v in versions if v.startswith("v1.")}
    assert len(unstable) == 1 and len(stable) == 1, versions
    (release,) = unstable
    minor = int(release.split(".")[1])
    assert stable == {f"v1.{minor - 94}.0"}, (release, stable)  # v0.148.0 goes with v1.54.0
    assert f"version: {release[1:]}-otel-a2a" in MANIFEST.read_text()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_the_minimum_version_is_the_release_built_here_or_older(path: Path) -> None:
    ((_, release), *_) = _modules()
    assert min_version(path) <= tuple(int(x) for x in release[1:].split("."))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_component_is_commented(path: Path) -> None:
    """Every component has a comment on the line right above its definition."""
    lines = path.read_text().splitlines()
    cfg = _load(path)
    for section in ("receivers", "processors", "exporters", "extensions"):
        head = lines.index(f"{section}:")
        for cid in cfg.get(section) or {}:
            idx = next(i for i in range(head, len(lines)) if lines[i] == f"  {cid}:")
            assert lines[idx - 1].strip().startswith("#"), f"{path.name}: {section}.{cid}"
