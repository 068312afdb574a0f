"""Without the ``cli`` extra, ``check-card`` and ``detector`` say in one line what to install."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from otel_a2a import cli


@pytest.mark.parametrize(
    ("argv", "absent", "named"),
    [
        (["check-card", "http://127.0.0.1:9"], "httpx", "httpx"),
        (["detector", "--port", "0"], "h11", "h11"),
        (["detector", "--port", "0"], "google.protobuf", "google.protobuf"),
        (["detector", "--metrics-port", "0"], "prometheus_client", "prometheus_client"),
    ],
)
def test_a_command_without_its_extra_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    absent: str,
    named: str,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == absent else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert cli.main(argv) == 2
    command = argv[0]
    assert capsys.readouterr().err == (
        f"otel-a2a {command}: needs {named}: pip install 'otel-a2a[cli]'\n"
    )
