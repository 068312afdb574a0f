"""The wheel users install: built from this tree by pip (as `pip install .` does) and read
back, so that a file the start-up hook, type checkers or the licence need cannot go missing."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from otel_a2a import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"),
            *("-w", str(out), str(ROOT)),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("otel_a2a-*.whl")
    return zipfile.ZipFile(built)


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(path).decode()


def test_the_start_up_hooks_sit_at_the_top_of_site_packages(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert {"otel_a2a.pth", "otel_a2a.start"} <= names
    assert wheel.read("otel_a2a.pth").decode().startswith("import ")


def test_typed_licensed_and_nothing_of_the_repository_but_the_package(
    wheel: zipfile.ZipFile,
) -> None:
    names = wheel.namelist()
    assert "otel_a2a/py.typed" in names
    assert "Apache License" in _dist_info(wheel, "licenses/LICENSE")
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"otel_a2a"}
    assert not [n for n in names if "node_modules" in n or "__pycache__" in n]
    # the demo and its Node peers stay in the source tree
    assert not [n for n in names if "demo" in n.split("/")[:-1]]
    assert not [n for n in names if n.endswith((".mjs", "package.json", "package-lock.json"))]


def test_the_installed_demo_verb_says_where_the_demo_is(
    wheel: zipfile.ZipFile, tmp_path: Path
) -> None:
    """Run from the wheel's files alone, ``otel-a2a demo`` (any options) exits 2 saying that
    the demo runs from the source tree, instead of a traceback or a usage error."""
    wheel.extractall(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for argv in (["demo"], ["demo", "--variant", "spelling", "--quiet"]):
        done = subprocess.run(
            [sys.executable, "-m", "otel_a2a.cli", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr == cli.NO_DEMO + "\n", done


def test_entry_points_and_extras(wheel: zipfile.ZipFile) -> None:
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert "a2a = otel_a2a.instrumentation:A2AInstrumentor" in entry_points
    assert "otel-a2a = otel_a2a.cli:main" in entry_points
    metadata = _dist_info(wheel, "METADATA")
    assert "Provides-Extra: dev" in metadata
    assert "Provides-Extra: demo" not in metadata  # nothing of the demo is in the wheel
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    # a lean library: the API, the instrumentation base, the wire layer; nothing else
    core = sorted(line.split()[1].split(">")[0] for line in requires if "extra ==" not in line)
    assert core == [
        "opentelemetry-api",
        "opentelemetry-instrumentation",
        "opentelemetry-semantic-conventions",
        "pydantic-core",
        "wrapt",
    ]
    # the instrumented libraries, any of them, as contrib declares them
    for name in ("httpx", "httpx2", "grpcio"):
        assert any(
            line.startswith(f"Requires-Dist: {name}>=") and "extra == 'instruments-any'" in line
            for line in requires
        ), name
    for extra in ("auto", "cli", "test", "dev"):
        assert f"Provides-Extra: {extra}" in metadata
    assert "Requires-Dist: opentelemetry-distro>=0.60b0; extra == 'auto'" in metadata
    assert "Requires-Dist: opentelemetry-exporter-prometheus>=0.63b0; extra == 'cli'" in metadata
