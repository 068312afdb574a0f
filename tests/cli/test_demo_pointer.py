"""``otel-a2a demo`` only says where the demo is, even from a checkout: the command never puts
the source tree on ``sys.path`` nor imports ``demo``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from otel_a2a import cli


def test_the_verb_points_to_the_source_tree_whatever_follows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["demo"], ["demo", "--variant", "spelling", "--keep"]):
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == cli.NO_DEMO + "\n"


def test_the_command_leaves_sys_path_and_demo_alone() -> None:
    code = (
        "import sys; before = list(sys.path); from otel_a2a import cli; cli.build_parser();"
        "print(sys.path == before, 'demo' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["True", "False"]
