"""`make tools` builds once and rebuilds only when a manifest (or, for the demo's Go gateway,
a source file) changes.

Asked of make itself, without building: ``-q`` (is anything out of date?) after the build
`make test` ran first, and ``-n -W FILE`` (what would run if FILE were new).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.pipeline import JAEGER, OTELCOL, REPO, require_tool


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is not installed", pytrace=False)
    return subprocess.run(
        [make, "--no-print-directory", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_built_tools_are_up_to_date() -> None:
    require_tool(OTELCOL)
    require_tool(JAEGER)
    res = _make("-q", "tools")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(
    ("manifest", "runs", "not_runs"),
    [
        ("collector-config/builder-config.yaml", "builder --config=", "go build"),
        ("tools/jaeger/go.mod", "go build", "builder --config="),
        ("tools/jaeger/go.sum", "go build", "builder --config="),
        ("demo/go/gateway/go.sum", "cd demo/go/gateway && go build", "cd tools/jaeger"),
        ("demo/go/gateway/forward.go", "cd demo/go/gateway && go build", "builder --config="),
    ],
)
def test_a_manifest_change_rebuilds_its_tool_only(manifest: str, runs: str, not_runs: str) -> None:
    require_tool(OTELCOL)
    require_tool(JAEGER)
    res = _make("-n", "-W", manifest, "tools")
    assert res.returncode == 0, res.stderr
    assert runs in res.stdout and not_runs not in res.stdout, res.stdout
