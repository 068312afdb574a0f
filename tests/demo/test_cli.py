"""``python -m demo``'s options: refused before any process starts when they cannot apply."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo import processes
from demo.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_command_takes_the_demo_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m demo ")
    for option in ("--variant", "--binding", "--no-streaming", "--real-timings", "--keep"):
        assert option in out
    assert "{restart,spelling,both,healthy,forget,redeploy,follow-up}" in out
    assert "--gateway {python,go}" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["--heartbeat", "0"])
    assert exit_info.value.code == 2
    assert "'0': must be a number of seconds > 0" in capsys.readouterr().err


def test_python_m_demo_runs_from_the_source_tree() -> None:
    """What ``make demo`` runs: the module form, from the repository root."""
    done = subprocess.run(
        [sys.executable, "-m", "demo", "--heartbeat", "nan"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "python -m demo: error: argument --heartbeat: 'nan'" in done.stderr


def test_a_go_gateway_missing_or_stale_names_the_make_target(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--gateway go`` needs the Go-built binary: missing or older than its source, the
    demo says which make target builds it, before starting any process."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "main.go").write_text("package main\n")
    binary = tmp_path / "a2a-go-gateway"
    monkeypatch.setattr(processes, "GO_GATEWAY_DIR", source)
    monkeypatch.setattr(processes, "GO_GATEWAY_BIN", binary)
    assert main(["--gateway", "go", "--quiet"]) == 2
    assert f"{binary} is missing: run `make go-gateway`" in capsys.readouterr().err
    binary.write_text("")
    os.utime(binary, (1, 1))  # older than main.go
    assert main(["--gateway", "go", "--quiet"]) == 2
    assert f"{binary} is older than its source in {source}" in capsys.readouterr().err
