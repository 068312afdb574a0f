"""``make upgrade``: resolve the project's ``dev`` extra afresh and write the pins.

``requirements/lock.txt``: every package ``make test`` and CI install (``pip install -c``), so
that a new upstream release cannot change a fresh CI run. ``requirements/matrix/wrapt1.txt``:
the newest wrapt 1, for the version matrix (``.ci/matrix``; the lock has the newest wrapt 2).
pip's own resolver does the work (``--dry-run --report``); nothing else is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed"]
HEADER = "# Written by `make upgrade` (requirements/lock.py): pip's resolution of .[dev].\n"


def resolve(*requirements: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [*PIP, "--report", str(report), *requirements],
            check=True,
            cwd=ROOT,
        )
        found = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in found}


def main() -> None:
    pins = resolve(".[dev]")
    pins.pop("otel-a2a", None)
    names = sorted(pins, key=str.lower)
    lines = [f"{name}=={pins[name]}\n" for name in names]
    (ROOT / "requirements" / "lock.txt").write_text(HEADER + "".join(lines))
    wrapt1 = resolve("wrapt<2")["wrapt"]
    (ROOT / "requirements" / "matrix" / "wrapt1.txt").write_text(
        "# the newest wrapt 1 (make upgrade); everything else as requirements/lock.txt\n"
        f"wrapt=={wrapt1}\n"
    )


if __name__ == "__main__":
    main()
