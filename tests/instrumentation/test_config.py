"""``OTEL_A2A_*`` parsing: every bad value warns once, naming the variable, and falls back."""

from __future__ import annotations

import logging

import pytest

from otel_a2a import _env
from otel_a2a.instrumentation.config import Settings, load_settings


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    """A bad value warns once per process; each test here is a process start of its own."""
    _env._warned.clear()


def test_defaults() -> None:
    assert load_settings({}) == Settings()
    assert Settings().max_body_bytes == 4 * 1024 * 1024
    assert Settings().max_tracked_tasks == 100_000
    assert Settings().default_heartbeat == 30.0


def test_good_values() -> None:
    settings = load_settings(
        {
            "OTEL_A2A_ENABLED": "TRUE",
            "OTEL_A2A_MODE": "enforce",
            "OTEL_A2A_DEFAULT_HEARTBEAT": "2.5",
            "OTEL_A2A_HEARTBEAT_OVERRIDES": "Worker.internal:8080=5, gateway=0.5, [::1]:9000=2",
            "OTEL_A2A_MAX_TRACKED_TASKS": "10",
            "OTEL_A2A_MAX_BODY_BYTES": "1024",
            "OTEL_A2A_LEDGER_PATH": " /run/user/1000/otel-a2a.db ",
        }
    )
    assert settings.enabled and settings.enforce
    assert settings.default_heartbeat == 2.5
    assert dict(settings.heartbeat_overrides) == {
        "worker.internal:8080": 5.0,
        "gateway": 0.5,
        "[::1]:9000": 2.0,
    }
    assert (settings.max_tracked_tasks, settings.max_body_bytes) == (10, 1024)
    assert settings.ledger_path == "/run/user/1000/otel-a2a.db"


@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_ledger_path_keeps_the_ledger_in_memory(value: str) -> None:
    assert load_settings({"OTEL_A2A_LEDGER_PATH": value}).ledger_path is None


@pytest.mark.parametrize(
    ("name", "value", "field", "default"),
    [
        ("OTEL_A2A_ENABLED", "maybe", "enabled", False),
        ("OTEL_A2A_MODE", "strict", "enforce", False),
        ("OTEL_A2A_DEFAULT_HEARTBEAT", "-1", "default_heartbeat", 30.0),
        ("OTEL_A2A_DEFAULT_HEARTBEAT", "nan", "default_heartbeat", 30.0),
        ("OTEL_A2A_DEFAULT_HEARTBEAT", "inf", "default_heartbeat", 30.0),
        ("OTEL_A2A_MAX_TRACKED_TASKS", "1e5", "max_tracked_tasks", 100_000),
        ("OTEL_A2A_MAX_TRACKED_TASKS", "0", "max_tracked_tasks", 100_000),
        ("OTEL_A2A_MAX_BODY_BYTES", "lots", "max_body_bytes", 4 * 1024 * 1024),
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "a=1,b", "heartbeat_overrides", {}),
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "=3", "heartbeat_overrides", {}),
        # a URL, a path or a bad port would never match an agent: said, not kept
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "https://agent.example=0.5", "heartbeat_overrides", {}),
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "agent.example:443/=0.5", "heartbeat_overrides", {}),
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "agent.example:abc=0.5", "heartbeat_overrides", {}),
        ("OTEL_A2A_HEARTBEAT_OVERRIDES", "a:1=1,agent:70000=2", "heartbeat_overrides", {}),
    ],
)
def test_bad_value_warns_once_and_uses_default(
    caplog: pytest.LogCaptureFixture, name: str, value: str, field: str, default: object
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        settings = load_settings({name: value})
    assert getattr(settings, field) == default
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and name in warnings[0], warnings
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        load_settings({name: value})  # instrumenting again: no second warning for it
    assert len(caplog.records) == 1


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "false", "FALSE", ""])
def test_boolean_spellings(caplog: pytest.LogCaptureFixture, value: str) -> None:
    """OpenTelemetry's rule: only ``true`` (any case) is true; ``false`` and empty are false."""
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        settings = load_settings({"OTEL_A2A_ENABLED": value})
    assert settings.enabled is (value.lower() == "true")
    assert caplog.records == []


@pytest.mark.parametrize(
    ("value", "entry", "rule"),
    [
        ("a=1,b", "'b'", "not host[:port]=seconds"),
        ("a=1, https://agent.example=0.5", "'https://agent.example=0.5'", "not a host"),
        ("a:1=1,agent:70000=2", "'agent:70000=2'", "port outside 1-65535"),
        ("worker=-5", "'worker=-5'", "seconds must be a number > 0"),
        ("worker=soon", "'worker=soon'", "seconds must be a number > 0"),
    ],
)
def test_a_bad_override_is_named_with_the_rule_it_broke(
    caplog: pytest.LogCaptureFixture, value: str, entry: str, rule: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        load_settings({"OTEL_A2A_HEARTBEAT_OVERRIDES": value})
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"entry {entry}" in warning and rule in warning, warning


def test_the_worker_side_settings(caplog: pytest.LogCaptureFixture) -> None:
    assert (Settings().serve_heartbeat, Settings().serve_check_interval) == (None, 30.0)
    given = load_settings(
        {"OTEL_A2A_SERVE_HEARTBEAT": "1.5", "OTEL_A2A_SERVE_CHECK_INTERVAL": "0.25"}
    )
    assert (given.serve_heartbeat, given.serve_check_interval) == (1.5, 0.25)
    caplog.set_level(logging.WARNING, logger="otel_a2a")
    bad = load_settings({"OTEL_A2A_SERVE_HEARTBEAT": "-2", "OTEL_A2A_SERVE_CHECK_INTERVAL": "x"})
    assert (bad.serve_heartbeat, bad.serve_check_interval) == (None, 30.0)
    assert "OTEL_A2A_SERVE_HEARTBEAT" in caplog.text
    assert "OTEL_A2A_SERVE_CHECK_INTERVAL" in caplog.text


@pytest.mark.parametrize("value", ["1", "yes", "on", " true", "0", "no", "off"])
def test_other_boolean_spellings_are_false_with_one_warning(
    caplog: pytest.LogCaptureFixture, value: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        assert load_settings({"OTEL_A2A_ENABLED": value}).enabled is False
        load_settings({"OTEL_A2A_ENABLED": value})
    assert [r.getMessage() for r in caplog.records] == [
        f"otel-a2a: ignoring OTEL_A2A_ENABLED={value!r} (invalid); using the default False"
    ]
