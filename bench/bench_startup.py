"""Interpreter start-up cost of the ``otel_a2a.pth`` hook (target: unset <= 2 ms over no package).

With ``OTEL_A2A_ENABLED`` unset, the only thing the installed package adds to an interpreter's
start is ``site`` executing the one ``import`` line of ``otel_a2a.pth``. Two measurements:

1. the exact cost of that line: ``exec`` of the installed line (compile included, as ``site``
   does it) with the variable unset, timeit, median of repeats;
2. end to end, ``python -c pass`` in fresh subprocesses, interleaved, in two throwaway venvs of
   the same base interpreter: one with no package at all, one holding only ``otel_a2a.pth``
   (with the variable unset the line never imports ``otel_a2a``, so the package itself is not
   needed). The project's own ``.venv`` is timed too, unset and with ``OTEL_A2A_ENABLED=true``
   (``PYTHONPATH`` kept, so that a checkout on it is what runs): ``-c pass``, which never
   needs the instrumentation, and ``-c "import httpx"``, which does.

Subprocesses share a temporary ``PYTHONPYCACHEPREFIX`` (warmed first), so every variant reads
compiled bytecode as a deployed service would, and nothing is written into the repository.
"""

from __future__ import annotations

import os
import site
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

from bench import Row, check, median

RUNS = 40  # per variant, interleaved
ENABLED_RUNS = 15
TARGET_MS = 2.0
PTH = "otel_a2a.pth"


def _installed_pth() -> Path:
    for directory in site.getsitepackages():
        path = Path(directory) / PTH
        if path.exists():
            return path
    raise FileNotFoundError(f"{PTH} not found in {site.getsitepackages()}")


def _import_line(pth: Path) -> str:
    lines = [ln for ln in pth.read_text().splitlines() if ln.startswith(("import ", "import\t"))]
    assert len(lines) == 1, lines
    return lines[0]


def _line_cost_us(line: str) -> float:
    saved = os.environ.pop("OTEL_A2A_ENABLED", None)
    try:
        number = 20_000
        times = timeit.repeat(lambda: exec(line, {}), number=number, repeat=7)
        assert "otel_a2a._autoload" not in sys.modules or saved is not None
        return median(times) / number * 1e6
    finally:
        if saved is not None:
            os.environ["OTEL_A2A_ENABLED"] = saved


def _make_venv(path: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True
    )
    return path / "bin" / "python"


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def _time_ms(python: Path, env: dict[str, str], code: str = "pass") -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", code], env=env, check=True)
    return (time.perf_counter() - start) * 1e3


def run() -> list[Row]:
    pth = _installed_pth()
    line = _import_line(pth)
    line_us = _line_cost_us(line)

    with tempfile.TemporaryDirectory(prefix="otel-a2a-bench-") as tmp:
        root = Path(tmp)
        bare = _make_venv(root / "no-package")
        with_pth = _make_venv(root / "pth-only")
        (_site_packages(with_pth) / PTH).write_text(pth.read_text())
        project = Path(sys.prefix) / "bin" / "python"

        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHON"))}
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        project_env = {**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        enabled_env = {**project_env, "OTEL_A2A_ENABLED": "true"}
        variants: list[tuple[str, Path, dict[str, str]]] = [
            ("none", bare, env),
            ("pth", with_pth, env),
            ("venv", project, project_env),
        ]
        probe = "import sys; print('otel_a2a._autoload' in sys.modules)"
        loaded = subprocess.run(
            [str(project), "-c", probe], env=enabled_env, capture_output=True, text=True
        ).stdout.strip()
        assert loaded == "True", f"OTEL_A2A_ENABLED=true did not load otel_a2a: {loaded!r}"
        # each timed ENABLED_RUNS times, spread over the RUNS rounds
        spread: list[tuple[str, dict[str, str], str]] = [
            ("on", enabled_env, "pass"),
            ("httpx", project_env, "import httpx"),
            ("httpx on", enabled_env, "import httpx"),
        ]
        for _, python, variant_env in variants:
            for _ in range(3):  # warm the bytecode cache and the OS caches
                _time_ms(python, variant_env)
        for _, variant_env, code in spread:
            for _ in range(3):
                _time_ms(project, variant_env, code)

        results: dict[str, list[float]] = {key: [] for key, _, _ in variants + spread}
        for i in range(RUNS):
            for key, python, variant_env in variants[i % 3 :] + variants[: i % 3]:
                results[key].append(_time_ms(python, variant_env))
            if i % (RUNS // ENABLED_RUNS) == 0 and len(results["on"]) < ENABLED_RUNS:
                for key, variant_env, code in spread:
                    results[key].append(_time_ms(project, variant_env, code))

    none_ms, pth_ms, venv_ms, on_ms, httpx_ms, httpx_on_ms = (
        median(results[k]) for k in ("none", "pth", "venv", "on", "httpx", "httpx on")
    )
    diffs = [p - n for p, n in zip(results["pth"], results["none"], strict=True)]
    return [
        check("startup: otel_a2a.pth line, unset, exact cost (ms)", line_us / 1e3, ".3f", 2.0),
        Row("  the same in us", f"{line_us:.1f}"),
        Row(
            f"startup: python -c pass, venv without the package (ms, median of {RUNS})",
            f"{none_ms:.1f}",
        ),
        Row("startup: python -c pass, venv + otel_a2a.pth, unset (ms)", f"{pth_ms:.1f}"),
        check(
            "startup: python -c pass, venv + otel_a2a.pth, unset (ms over none)",
            pth_ms - none_ms,
            ".2f",
            TARGET_MS,
        ),
        Row(
            "  paired per-run difference, median (quartiles) (ms)",
            f"{median(diffs):.2f} ({_quartiles(diffs)})",
        ),
        Row("startup: project .venv, OTEL_A2A_ENABLED unset (ms)", f"{venv_ms:.1f}"),
        Row(
            f"startup: project .venv, OTEL_A2A_ENABLED=true (ms, median of {ENABLED_RUNS})",
            f"{on_ms:.1f}",
        ),
        Row("  enabled minus unset, project .venv (ms)", f"{on_ms - venv_ms:.1f}"),
        Row(
            f'startup: python -c "import httpx", project .venv, unset (ms, median of '
            f"{ENABLED_RUNS})",
            f"{httpx_ms:.1f}",
        ),
        Row('startup: python -c "import httpx", OTEL_A2A_ENABLED=true (ms)', f"{httpx_on_ms:.1f}"),
        Row("  enabled minus unset, with httpx (ms)", f"{httpx_on_ms - httpx_ms:.1f}"),
    ]


def _quartiles(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{q1:.2f}-{q3:.2f}"
