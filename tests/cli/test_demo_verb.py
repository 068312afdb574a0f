"""``otel-a2a demo``'s options come from the source tree's ``demo/``; without it (an installed
wheel) the verb says where the demo is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otel_a2a import cli


def test_the_verb_takes_the_demo_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--variant", "--binding", "--no-streaming", "--real-timings", "--keep"):
        assert option in out
    assert "{restart,spelling,both,healthy,forget,redeploy}" in out
    assert "--gateway {python,go}" in out
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--heartbeat", "0"])
    assert exit_info.value.code == 2
    assert "'0': must be a number of seconds > 0" in capsys.readouterr().err


def test_without_the_source_tree_the_verb_says_where_the_demo_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text("")  # a tree, but one without demo/
    for root in (tmp_path, tmp_path / "site-packages"):
        monkeypatch.setattr(cli, "SOURCE_ROOT", root)
        assert cli.main(["demo"]) == 2
        assert cli.main(["demo", "--variant", "spelling", "--keep"]) == 2
        assert capsys.readouterr().err == (cli.NO_DEMO + "\n") * 2


def test_a_go_gateway_missing_or_stale_names_the_make_target(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--gateway go`` needs the Go-built binary: missing or older than its source, the verb
    says which make target builds it, before starting any process."""
    from demo import processes

    source = tmp_path / "src"
    source.mkdir()
    (source / "main.go").write_text("package main\n")
    binary = tmp_path / "a2a-go-gateway"
    monkeypatch.setattr(processes, "GO_GATEWAY_DIR", source)
    monkeypatch.setattr(processes, "GO_GATEWAY_BIN", binary)
    assert cli.main(["demo", "--gateway", "go", "--quiet"]) == 2
    assert f"{binary} is missing: run `make go-gateway`" in capsys.readouterr().err
    binary.write_text("")
    os.utime(binary, (1, 1))  # older than main.go
    assert cli.main(["demo", "--gateway", "go", "--quiet"]) == 2
    assert f"{binary} is older than its source in {source}" in capsys.readouterr().err
