"""``otel-a2a demo``'s options come from the source tree's ``demo/``; without it (an installed
wheel) the verb says where the demo is."""

from __future__ import annotations

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
