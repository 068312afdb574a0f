#!/usr/bin/env python3
"""Structural checker for OpenTelemetry Collector (otelcol-contrib) configuration files.

No collector binary runs where this project is tested, so this checks what `otelcol validate`
would catch for the components otel-a2a's configs use, plus a few rules of our own:

* every component type is known, and every key under it is in that component's allow-list
  (taken from the upstream component READMEs / ``config.go`` structs / mdatagen
  ``config.schema.yaml``; nested blocks such as ``tls``, ``sending_queue`` are checked too);
* component and pipeline ids are well formed (``type[/name]``, ``traces|metrics|logs[/name]``);
* every pipeline has receivers and exporters, references only defined components, and uses
  each component only for a signal it supports;
* every defined receiver, exporter and connector is used; extensions listed in ``service``
  are defined;
* a connector is used on both sides (as exporter of one pipeline and receiver of another) with a
  signal pair it supports (``spanmetrics``: traces -> metrics);
* ``memory_limiter`` is the first processor of a pipeline that has one;
* ``loadbalancing``: ``routing_key`` valid for the pipeline's signal, ``routing_attributes`` only
  and always with ``routing_key: attributes``, no ``protocol.otlp.endpoint``, exactly one
  resolver;
* the file states ``minimum otelcol-contrib version: vX.Y.Z`` in a comment, and the features it
  uses exist in that version.

Usage: ``python collector-config/checker.py FILE...`` (exit status 1 when a problem is found).
Only the standard library and PyYAML are needed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Version = tuple[int, int, int]


# --------------------------------------------------------------------------------------------
# Allow-lists. A spec is ANY (value not inspected), a dict of key -> spec, ListOf(spec) or
# MapOf(spec) (free keys, e.g. headers).
# --------------------------------------------------------------------------------------------


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()


@dataclass(frozen=True)
class ListOf:
    item: Spec


@dataclass(frozen=True)
class MapOf:
    value: Spec


Spec = _Any | ListOf | MapOf | dict[str, "Spec"]


def _keys(*names: str) -> dict[str, Spec]:
    return dict.fromkeys(names, ANY)


# configtls (client and server)
_TLS_COMMON = _keys(
    "ca_file",
    "ca_pem",
    "cert_file",
    "cert_pem",
    "key_file",
    "key_pem",
    "min_version",
    "max_version",
    "cipher_suites",
    "reload_interval",
    "include_system_ca_certs_pool",
    "curve_preferences",
)
TLS_CLIENT: dict[str, Spec] = {
    **_TLS_COMMON,
    **_keys("insecure", "insecure_skip_verify", "server_name_override"),
}
TLS_SERVER: dict[str, Spec] = {**_TLS_COMMON, **_keys("client_ca_file", "client_ca_file_reload")}

# configgrpc.ServerConfig / confighttp.ServerConfig
GRPC_SERVER: dict[str, Spec] = {
    **_keys(
        "endpoint",
        "transport",
        "max_recv_msg_size_mib",
        "max_concurrent_streams",
        "read_buffer_size",
        "write_buffer_size",
        "keepalive",
        "auth",
        "include_metadata",
    ),
    "tls": TLS_SERVER,
}
HTTP_SERVER: dict[str, Spec] = {
    **_keys(
        "endpoint",
        "auth",
        "max_request_body_size",
        "include_metadata",
        "response_headers",
        "compression_algorithms",
        "read_timeout",
        "read_header_timeout",
        "write_timeout",
        "idle_timeout",
        "keep_alives_enabled",
    ),
    "tls": TLS_SERVER,
    "cors": _keys("allowed_origins", "allowed_headers", "max_age"),
}

# exporterhelper
QUEUE: dict[str, Spec] = _keys(
    "enabled",
    "num_consumers",
    "queue_size",
    "storage",
    "blocking",
    "block_on_overflow",
    "sizer",
    "wait_for_result",
    "batch",
)
RETRY: dict[str, Spec] = _keys(
    "enabled",
    "initial_interval",
    "randomization_factor",
    "multiplier",
    "max_interval",
    "max_elapsed_time",
)
EXPORTER_HELPER: dict[str, Spec] = {
    "timeout": ANY,
    "sending_queue": QUEUE,
    "retry_on_failure": RETRY,
}

# configgrpc.ClientConfig
GRPC_CLIENT: dict[str, Spec] = {
    **_keys(
        "endpoint",
        "compression",
        "read_buffer_size",
        "write_buffer_size",
        "wait_for_ready",
        "balancer_name",
        "auth",
        "authority",
    ),
    "tls": TLS_CLIENT,
    "headers": MapOf(ANY),
    "keepalive": _keys("time", "timeout", "permit_without_stream"),
}

OTLP_EXPORTER: dict[str, Spec] = {**GRPC_CLIENT, **EXPORTER_HELPER}

OTLPHTTP_EXPORTER: dict[str, Spec] = {
    **_keys(
        "endpoint",
        "traces_endpoint",
        "metrics_endpoint",
        "logs_endpoint",
        "profiles_endpoint",
        "compression",
        "compression_params",
        "read_buffer_size",
        "write_buffer_size",
        "encoding",
        "auth",
        "proxy_url",
        "max_idle_conns",
        "max_idle_conns_per_host",
        "max_conns_per_host",
        "idle_conn_timeout",
        "disable_keep_alives",
        "http2_read_idle_timeout",
        "http2_ping_timeout",
        "cookies",
    ),
    "tls": TLS_CLIENT,
    "headers": MapOf(ANY),
    **EXPORTER_HELPER,
}

PROMETHEUS_EXPORTER: dict[str, Spec] = {
    **HTTP_SERVER,
    **_keys(
        "const_labels",
        "namespace",
        "send_timestamps",
        "metric_expiration",
        "enable_open_metrics",
        "add_metric_suffixes",
        "translation_strategy",
    ),
    "resource_to_telemetry_conversion": _keys("enabled"),
}

LOADBALANCING_EXPORTER: dict[str, Spec] = {
    "protocol": {"otlp": OTLP_EXPORTER},
    "resolver": {
        "static": _keys("hostnames"),
        "dns": _keys("hostname", "port", "interval", "timeout", "quarantine"),
        "k8s": _keys("service", "ports", "timeout", "return_hostnames"),
        "aws_cloud_map": _keys(
            "namespace", "service_name", "port", "interval", "timeout", "health_status"
        ),
    },
    **_keys("routing_key", "routing_attributes"),
    **EXPORTER_HELPER,
}

DEBUG_EXPORTER: dict[str, Spec] = _keys(
    "verbosity", "sampling_initial", "sampling_thereafter", "use_internal_logger"
)
FILE_EXPORTER: dict[str, Spec] = {
    **_keys(
        "path",
        "format",
        "encoding",
        "append",
        "compression",
        "flush_interval",
        "create_directory",
        "directory_permissions",
    ),
    "rotation": _keys("max_megabytes", "max_days", "max_backups", "localtime"),
    "group_by": _keys("enabled", "resource_attribute", "max_open_files"),
}

_ATTR_ACTION = ListOf(
    _keys("key", "value", "from_attribute", "from_context", "pattern", "action", "converted_type")
)

_DIMENSIONS = ListOf(_keys("name", "default"))
SPANMETRICS_CONNECTOR: dict[str, Spec] = {
    "histogram": {
        **_keys("disable", "unit"),
        "exponential": _keys("max_size"),
        "explicit": _keys("buckets"),
        "dimensions": _DIMENSIONS,
    },
    "dimensions": _DIMENSIONS,
    "calls_dimensions": _DIMENSIONS,
    "exemplars": _keys("enabled", "max_per_data_point"),
    "events": {"enabled": ANY, "dimensions": _DIMENSIONS},
    **_keys(
        "exclude_dimensions",
        "dimensions_cache_size",
        "aggregation_temporality",
        "namespace",
        "metrics_flush_interval",
        "metrics_expiration",
        "resource_metrics_key_attributes",
        "resource_metrics_cache_size",
        "aggregation_cardinality_limit",
        "include_instrumentation_scope",
        "add_resource_attributes",
    ),
}

SIGNALS = ("traces", "metrics", "logs")
ALL = frozenset(SIGNALS)


@dataclass(frozen=True)
class Component:
    spec: dict[str, Spec]
    signals: frozenset[str] = ALL


RECEIVERS: dict[str, Component] = {
    "otlp": Component(
        {
            "protocols": {
                "grpc": GRPC_SERVER,
                "http": {
                    **HTTP_SERVER,
                    **_keys("traces_url_path", "metrics_url_path", "logs_url_path"),
                },
            }
        }
    ),
}
PROCESSORS: dict[str, Component] = {
    "memory_limiter": Component(
        _keys(
            "check_interval",
            "limit_mib",
            "spike_limit_mib",
            "limit_percentage",
            "spike_limit_percentage",
            "min_gc_interval_when_soft_limited",
            "min_gc_interval_when_hard_limited",
        )
    ),
    "batch": Component(
        _keys(
            "timeout",
            "send_batch_size",
            "send_batch_max_size",
            "metadata_keys",
            "metadata_cardinality_limit",
        )
    ),
    "attributes": Component({"actions": _ATTR_ACTION, "include": ANY, "exclude": ANY}),
    "resource": Component({"attributes": _ATTR_ACTION}),
}
EXPORTERS: dict[str, Component] = {
    "otlp": Component(OTLP_EXPORTER),
    "otlphttp": Component(OTLPHTTP_EXPORTER),
    "prometheus": Component(PROMETHEUS_EXPORTER, frozenset({"metrics"})),
    "loadbalancing": Component(LOADBALANCING_EXPORTER),
    "load_balancing": Component(LOADBALANCING_EXPORTER),
    "debug": Component(DEBUG_EXPORTER),
    "file": Component(FILE_EXPORTER),
}
# connector type -> (exporter-side signal, receiver-side signal) pairs it supports
CONNECTORS: dict[str, tuple[Component, frozenset[tuple[str, str]]]] = {
    "spanmetrics": (Component(SPANMETRICS_CONNECTOR), frozenset({("traces", "metrics")})),
    "forward": (Component({}), frozenset((s, s) for s in SIGNALS)),
}
EXTENSIONS: dict[str, Component] = {
    "health_check": Component(
        {
            **HTTP_SERVER,
            "path": ANY,
            "response_body": _keys("healthy", "unhealthy"),
            "check_collector_pipeline": _keys("enabled", "interval", "exporter_failure_threshold"),
        }
    ),
    "pprof": Component(
        _keys("endpoint", "block_profile_fraction", "mutex_profile_fraction", "save_to_file")
    ),
    "zpages": Component({**HTTP_SERVER, "expvar": _keys("enabled")}),
}

TOP_LEVEL = ("receivers", "processors", "exporters", "connectors", "extensions", "service")
SERVICE_KEYS = ("extensions", "pipelines", "telemetry")
PIPELINE_KEYS = ("receivers", "processors", "exporters")

COMPONENT_ID = re.compile(r"^([a-z][a-z0-9_]*)(?:/([^/\s]+))?$")
PIPELINE_ID = re.compile(r"^(traces|metrics|logs)(?:/([^/\s]+))?$")
VERSION_LINE = re.compile(r"minimum otelcol-contrib version:\s*v?(\d+)\.(\d+)\.(\d+)")

# loadbalancing routing keys valid per pipeline signal, and the version each needs.
LB_ROUTING_KEYS: dict[str, dict[str, Version]] = {
    "traces": {"traceID": (0, 0, 0), "service": (0, 0, 0), "attributes": (0, 125, 0)},
    "metrics": {
        "service": (0, 0, 0),
        "resource": (0, 0, 0),
        "metric": (0, 0, 0),
        "streamID": (0, 0, 0),
        "attributes": (0, 147, 0),
    },
    # Before v0.154.0 logs ignored routing_key and always routed by trace id.
    "logs": {
        "traceID": (0, 0, 0),
        "service": (0, 154, 0),
        "resource": (0, 154, 0),
        "attributes": (0, 154, 0),
    },
}
LB_DEFAULT_KEY = {"traces": "traceID", "metrics": "service", "logs": "traceID"}
LB_RENAMED: Version = (0, 153, 0)  # `load_balancing` spelling


def _fmt(v: Version) -> str:
    return "v{}.{}.{}".format(*v)


def parse_min_version(text: str) -> Version | None:
    """The ``minimum otelcol-contrib version: vX.Y.Z`` a config states in a comment."""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            m = VERSION_LINE.search(line)
            if m:
                return (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return None


def _check_keys(value: Any, spec: Spec, path: str, problems: list[str]) -> None:
    if isinstance(spec, _Any) or value is None:
        return
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            _check_keys(item, spec.item, f"{path}[{i}]", problems)
        return
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a mapping, got {type(value).__name__}")
            return
        for k, v in value.items():
            _check_keys(v, spec.value, f"{path}.{k}", problems)
        return
    if not isinstance(value, dict):
        problems.append(f"{path}: expected a mapping, got {type(value).__name__}")
        return
    for key, sub in value.items():
        if key not in spec:
            allowed = ", ".join(sorted(spec)) or "(none)"
            problems.append(f"{path}: unknown key '{key}' (allowed: {allowed})")
            continue
        _check_keys(sub, spec[key], f"{path}.{key}", problems)


def _as_list(value: Any, path: str, problems: list[str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{path}: expected a list of component ids")
        return []
    return list(value)


def check(config: Any, *, min_version: Version | None) -> list[str]:
    """Problems found in a parsed collector config (empty list: it passes)."""
    problems: list[str] = []
    if min_version is None:
        problems.append(
            "the file does not state its minimum collector version "
            "(a comment '# minimum otelcol-contrib version: vX.Y.Z')"
        )
    if not isinstance(config, dict):
        return [*problems, "config: expected a mapping at the top level"]
    for key in config:
        if key not in TOP_LEVEL:
            problems.append(f"unknown top-level key '{key}' (allowed: {', '.join(TOP_LEVEL)})")

    kinds: dict[str, dict[str, Component]] = {
        "receivers": RECEIVERS,
        "processors": PROCESSORS,
        "exporters": EXPORTERS,
        "extensions": EXTENSIONS,
        "connectors": {t: c for t, (c, _) in CONNECTORS.items()},
    }
    defined: dict[str, dict[str, str]] = {}  # kind -> id -> type
    for kind, known in kinds.items():
        section = config.get(kind) or {}
        defined[kind] = {}
        if not isinstance(section, dict):
            problems.append(f"{kind}: expected a mapping")
            continue
        for cid, body in section.items():
            m = COMPONENT_ID.match(str(cid))
            if not m:
                problems.append(f"{kind}.{cid}: invalid component id (expected 'type[/name]')")
                continue
            ctype = m.group(1)
            if ctype not in known:
                problems.append(
                    f"{kind}.{cid}: unknown {kind[:-1]} type '{ctype}' "
                    f"(known: {', '.join(sorted(known))})"
                )
                continue
            defined[kind][str(cid)] = ctype
            _check_keys(body, known[ctype].spec, f"{kind}.{cid}", problems)

    service = config.get("service")
    if not isinstance(service, dict):
        return [*problems, "service: missing or not a mapping"]
    for key in service:
        if key not in SERVICE_KEYS:
            problems.append(f"service: unknown key '{key}' (allowed: {', '.join(SERVICE_KEYS)})")
    for ext in _as_list(service.get("extensions"), "service.extensions", problems):
        if ext not in defined["extensions"]:
            problems.append(f"service.extensions: '{ext}' is not defined under extensions")

    pipelines = service.get("pipelines")
    if not isinstance(pipelines, dict) or not pipelines:
        return [*problems, "service.pipelines: missing or empty"]

    used: dict[str, set[str]] = {k: set() for k in ("receivers", "exporters")}
    connector_as_exporter: dict[str, set[str]] = {}
    connector_as_receiver: dict[str, set[str]] = {}
    lb_uses: list[tuple[str, str, str]] = []  # (pipeline, signal, exporter id)

    for pid, pipe in pipelines.items():
        where = f"service.pipelines.{pid}"
        pm = PIPELINE_ID.match(str(pid))
        if not pm:
            problems.append(f"{where}: invalid pipeline id (expected traces|metrics|logs[/name])")
            continue
        signal = pm.group(1)
        if not isinstance(pipe, dict):
            problems.append(f"{where}: expected a mapping")
            continue
        for key in pipe:
            if key not in PIPELINE_KEYS:
                problems.append(f"{where}: unknown key '{key}'")
        receivers = _as_list(pipe.get("receivers"), f"{where}.receivers", problems)
        processors = _as_list(pipe.get("processors"), f"{where}.processors", problems)
        exporters = _as_list(pipe.get("exporters"), f"{where}.exporters", problems)
        if not receivers:
            problems.append(f"{where}: has no receivers")
        if not exporters:
            problems.append(f"{where}: has no exporters")

        for rid in receivers:
            if rid in defined["receivers"]:
                used["receivers"].add(rid)
                _check_signal(
                    RECEIVERS[defined["receivers"][rid]], signal, where, rid, "receiver", problems
                )
            elif rid in defined["connectors"]:
                connector_as_receiver.setdefault(rid, set()).add(signal)
            else:
                problems.append(
                    f"{where}: references receiver '{rid}' which is not defined "
                    "under receivers or connectors"
                )
        for xid in processors:
            if xid not in defined["processors"]:
                problems.append(
                    f"{where}: references processor '{xid}' which is not defined under processors"
                )
        limiters = [p for p in processors if defined["processors"].get(p) == "memory_limiter"]
        if limiters and processors[0] != limiters[0]:
            problems.append(f"{where}: memory_limiter must be the first processor")
        for eid in exporters:
            if eid in defined["exporters"]:
                used["exporters"].add(eid)
                etype = defined["exporters"][eid]
                _check_signal(EXPORTERS[etype], signal, where, eid, "exporter", problems)
                if etype in ("loadbalancing", "load_balancing"):
                    lb_uses.append((str(pid), signal, eid))
            elif eid in defined["connectors"]:
                connector_as_exporter.setdefault(eid, set()).add(signal)
            else:
                problems.append(
                    f"{where}: references exporter '{eid}' which is not defined "
                    "under exporters or connectors"
                )

    for kind in ("receivers", "exporters"):
        for cid in defined[kind]:
            if cid not in used[kind]:
                problems.append(f"{kind}.{cid}: defined but not used in any pipeline")
    for cid, ctype in defined["connectors"].items():
        as_exp = connector_as_exporter.get(cid, set())
        as_rcv = connector_as_receiver.get(cid, set())
        if not as_exp and not as_rcv:
            problems.append(f"connectors.{cid}: defined but not used in any pipeline")
        elif not as_rcv:
            problems.append(
                f"connectors.{cid}: used as an exporter but never as a receiver "
                "(a connector must be used on both sides)"
            )
        elif not as_exp:
            problems.append(
                f"connectors.{cid}: used as a receiver but never as an exporter "
                "(a connector must be used on both sides)"
            )
        else:
            pairs = CONNECTORS[ctype][1]
            if not any((a, b) in pairs for a in as_exp for b in as_rcv):
                want = ", ".join(f"{a} -> {b}" for a, b in sorted(pairs))
                problems.append(
                    f"connectors.{cid}: exported from {sorted(as_exp)} and received in "
                    f"{sorted(as_rcv)} pipelines, but a {ctype} connector supports only {want}"
                )

    exporters_section = config.get("exporters") or {}
    for pid, signal, eid in lb_uses:
        body = exporters_section.get(eid) or {}
        problems.extend(
            _check_loadbalancing(body, eid, defined["exporters"][eid], pid, signal, min_version)
        )
    return problems


def _check_signal(
    comp: Component, signal: str, where: str, cid: str, role: str, problems: list[str]
) -> None:
    if signal not in comp.signals:
        problems.append(
            f"{where}: {role} '{cid}' does not support {signal} "
            f"(supports: {', '.join(sorted(comp.signals))})"
        )


def _check_loadbalancing(
    body: Any, eid: str, etype: str, pid: str, signal: str, min_version: Version | None
) -> list[str]:
    problems: list[str] = []
    where = f"exporters.{eid}"
    if not isinstance(body, dict):
        return [f"{where}: expected a mapping"]
    if etype == "load_balancing" and min_version is not None and min_version < LB_RENAMED:
        problems.append(
            f"{where}: the type name 'load_balancing' needs otelcol-contrib >= "
            f"{_fmt(LB_RENAMED)}, but the file states {_fmt(min_version)} "
            "(use 'loadbalancing')"
        )
    key = body.get("routing_key")
    attrs = body.get("routing_attributes")
    valid = LB_ROUTING_KEYS[signal]
    effective = key if key is not None else LB_DEFAULT_KEY[signal]
    if (
        key is not None
        and key not in valid
        and key not in {k for keys in LB_ROUTING_KEYS.values() for k in keys}
    ):
        problems.append(
            f"{where}: routing_key '{key}' is not a loadbalancing routing key "
            f"(valid for {signal}: {', '.join(valid)})"
        )
    elif effective not in valid:
        problems.append(
            f"{where}: routing_key '{effective}' cannot route {signal} (pipeline {pid}; "
            f"valid for {signal}: {', '.join(valid)})"
        )
    else:
        need = valid[effective]
        if key is not None and min_version is not None and min_version < need:
            problems.append(
                f"{where}: routing_key '{key}' for {signal} needs otelcol-contrib >= "
                f"{_fmt(need)}, but the file states {_fmt(min_version)}"
            )
    if key == "attributes":
        if not attrs:
            problems.append(
                f"{where}: routing_key 'attributes' needs a non-empty routing_attributes list"
            )
        elif not isinstance(attrs, list) or not all(isinstance(a, str) and a for a in attrs):
            problems.append(f"{where}: routing_attributes must be a list of attribute names")
    elif attrs is not None:
        problems.append(
            f"{where}: routing_attributes is only used with routing_key 'attributes' "
            f"(routing_key is '{effective}')"
        )
    protocol = body.get("protocol")
    otlp = protocol.get("otlp") if isinstance(protocol, dict) else None
    if not isinstance(otlp, dict):
        problems.append(f"{where}: protocol.otlp is required (the per-backend exporter template)")
    elif "endpoint" in otlp:
        problems.append(
            f"{where}: protocol.otlp.endpoint must not be set (the resolver provides endpoints)"
        )
    resolver = body.get("resolver")
    kinds = [
        k
        for k in ("static", "dns", "k8s", "aws_cloud_map")
        if isinstance(resolver, dict) and k in resolver
    ]
    if len(kinds) != 1:
        problems.append(
            f"{where}: resolver must configure exactly one of static, dns, k8s, aws_cloud_map "
            f"(found: {', '.join(kinds) or 'none'})"
        )
    elif kinds == ["static"]:
        hosts = (resolver or {}).get("static", {}).get("hostnames")
        if not isinstance(hosts, list) or not hosts:
            problems.append(f"{where}: resolver.static.hostnames must be a non-empty list")
    return problems


def check_text(text: str) -> list[str]:
    """Problems in the text of a config file (YAML plus its version comment)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [f"YAML does not parse: {exc}"]
    return check(config, min_version=parse_min_version(text))


def check_file(path: str | Path) -> list[str]:
    return check_text(Path(path).read_text(encoding="utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    files = list(sys.argv[1:] if argv is None else argv)
    if not files:
        print("usage: checker.py CONFIG.yaml...", file=sys.stderr)
        return 2
    failed = False
    for name in files:
        problems = check_file(name)
        for p in problems:
            print(f"{name}: {p}")
        if problems:
            failed = True
        else:
            print(f"{name}: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
