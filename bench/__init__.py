"""Benchmarks of otel-a2a (``make bench``): one table of figures against the design targets.

Each module exposes ``run() -> list[Row]``. A row's ``met`` is ``True``/``False`` against its
target, or ``None`` for a figure reported without a target (context, calibration). Benchmarks
never fail the build: ``python -m bench`` prints the table and exits 0.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple


class Row(NamedTuple):
    name: str
    value: str
    target: str = ""
    met: bool | None = None


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def check(name: str, value: float, fmt: str, limit: float, unit: str = "") -> Row:
    """A row for ``value <= limit``, both formatted with ``fmt``."""
    suffix = f" {unit}" if unit else ""
    return Row(name, f"{value:{fmt}}{suffix}", f"<= {limit:{fmt}}{suffix}", value <= limit)


def format_table(rows: Sequence[Row]) -> str:
    header = Row("benchmark", "figure", "target", None)
    cells = [(r.name, r.value, r.target, _met(r.met)) for r in rows]
    head = (header.name, header.value, header.target, "met")
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(4)]

    def line(c: tuple[str, str, str, str]) -> str:
        return (
            f"{c[0]:<{widths[0]}}  {c[1]:>{widths[1]}}  {c[2]:<{widths[2]}}  {c[3]:<{widths[3]}}"
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(head), rule, *(line(c) for c in cells)])


def _met(met: bool | None) -> str:
    return "" if met is None else ("yes" if met else "NO")


_COLLECTED = re.compile(rb"Collected : (\d+)")


def _callgrind(args: list[str]) -> int:
    """Instructions executed by ``python *args`` (callgrind's total, every thread)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
    done = subprocess.run([*command, *args], capture_output=True, check=True, timeout=900)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind: {done.stderr[-400:]!r}")
    return int(found.group(1))


def instructions_per_call(
    args: Callable[[str, int], list[str]], configs: Sequence[str], warmup: int, calls: int
) -> dict[str, float]:
    """Instructions per call of each configuration: ``python *args(config, n)`` under
    callgrind with ``n`` = ``warmup`` and ``warmup + calls``, the difference divided by
    ``calls`` (start-up, imports and warm-up cancel out); two processes at a time (2 cores)."""
    jobs = [(config, n) for config in configs for n in (warmup, warmup + calls)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        totals = dict(zip(jobs, pool.map(lambda job: _callgrind(args(*job)), jobs), strict=True))
    return {c: (totals[c, warmup + calls] - totals[c, warmup]) / calls for c in configs}
