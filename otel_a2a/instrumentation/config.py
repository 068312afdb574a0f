"""Configuration from ``OTEL_A2A_*`` environment variables (docs/configuration.md).

A bad value never stops the host: it logs one warning naming the variable and the default is
used instead.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from otel_a2a._env import parse_bool
from otel_a2a._env import warn_invalid as _warn


@dataclass(frozen=True)
class Settings:
    enabled: bool = False
    enforce: bool = False
    default_heartbeat: float = 30.0
    heartbeat_overrides: Mapping[str, float] = field(default_factory=dict)
    max_tracked_tasks: int = 100_000
    max_body_bytes: int = 4 * 1024 * 1024
    ledger_path: str | None = None  # a SQLite file shared by this host's processes
    # the worker's side (instrumentation/server): the heartbeat the card advertises (None: the
    # card is left as it is) and the period of the accepted-never-finished check
    serve_heartbeat: float | None = None
    serve_check_interval: float = 30.0


_DEFAULTS = Settings()
_D = TypeVar("_D", float, None)


def _positive_float(env: Mapping[str, str], name: str, default: _D) -> float | _D:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        _warn(name, raw, default)
        return default
    return value


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        _warn(name, raw, default)
        return default
    return value


# ``host`` or ``host:port`` (an IPv6 address in brackets): a URL, a path or a bad port never
# matches an agent, so it is a mistake to be told about, not an entry to keep
_HOST_KEY = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?)(:(\d{1,5}))?")


def _host_key(host: str) -> bool:
    found = _HOST_KEY.fullmatch(host)
    return found is not None and (found.group(4) is None or 0 < int(found.group(4)) < 65536)


def _overrides(env: Mapping[str, str], name: str) -> dict[str, float]:
    """Parse ``host[:port]=seconds,…``; one bad entry invalidates the variable (no half-config),
    and the warning names that entry and the rule it broke."""
    raw = env.get(name, "")
    result: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        why = _bad_override(item)
        if why is not None:
            _warn(name, raw, "", f"entry {item!r}: {why}")
            return {}
        host, _, seconds = item.rpartition("=")
        result[host.strip().lower()] = float(seconds)
    return result


def _bad_override(item: str) -> str | None:
    """What is wrong with one ``host[:port]=seconds`` entry, or None."""
    host, sep, seconds = item.rpartition("=")
    if not sep:
        return "not host[:port]=seconds"
    if not _host_key(host.strip().lower()):
        return "not a host or host:port (no scheme, path or port outside 1-65535)"
    try:
        value = float(seconds)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        return "seconds must be a number > 0"
    return None


def _mode(env: Mapping[str, str]) -> bool:
    raw = env.get("OTEL_A2A_MODE")
    if raw is None or raw.strip().lower() in ("", "observe"):
        return False
    if raw.strip().lower() == "enforce":
        return True
    _warn("OTEL_A2A_MODE", raw, "observe")
    return False


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read every ``OTEL_A2A_*`` variable; never raises."""
    env = os.environ if env is None else env
    return Settings(
        enabled=parse_bool(env, "OTEL_A2A_ENABLED"),
        enforce=_mode(env),
        default_heartbeat=_positive_float(
            env, "OTEL_A2A_DEFAULT_HEARTBEAT", _DEFAULTS.default_heartbeat
        ),
        heartbeat_overrides=_overrides(env, "OTEL_A2A_HEARTBEAT_OVERRIDES"),
        max_tracked_tasks=_positive_int(
            env, "OTEL_A2A_MAX_TRACKED_TASKS", _DEFAULTS.max_tracked_tasks
        ),
        max_body_bytes=_positive_int(env, "OTEL_A2A_MAX_BODY_BYTES", _DEFAULTS.max_body_bytes),
        ledger_path=env.get("OTEL_A2A_LEDGER_PATH", "").strip() or None,
        serve_heartbeat=_positive_float(env, "OTEL_A2A_SERVE_HEARTBEAT", None),
        serve_check_interval=_positive_float(
            env, "OTEL_A2A_SERVE_CHECK_INTERVAL", _DEFAULTS.serve_check_interval
        ),
    )
