"""Layer 4: cross-runtime correlation over exported spans (DESIGN §1 analyzer reasons).

``otel-a2a analyze FILE…`` reads OTLP JSON lines (the collector file exporter's format) and
``otel-a2a detector`` receives OTLP/HTTP live (:mod:`otel_a2a.analyze.receiver`); both turn
spans into :class:`Belief` values (:mod:`otel_a2a.analyze.otlp`) and feed the pure, bounded
:class:`Correlator` (:mod:`otel_a2a.analyze.correlate`), which reports
``cross_runtime_conflict`` and ``renormalized_state`` findings. Importing this package does not
import OpenTelemetry; only the receiver does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

from otel_a2a.analyze.correlate import Correlator, Stats, states_conflict
from otel_a2a.analyze.model import (
    Batch,
    Belief,
    Finding,
    SpanLink,
    finding_json,
    render_finding,
)
from otel_a2a.analyze.otlp import parse_lines, parse_request

__all__ = [
    "Batch",
    "Belief",
    "Correlator",
    "Finding",
    "SpanLink",
    "Stats",
    "analyze_files",
    "finding_json",
    "parse_lines",
    "parse_request",
    "render_finding",
    "states_conflict",
]


def analyze_files(
    paths: Sequence[str],
    *,
    as_json: bool = False,
    correlator: Correlator | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """The ``analyze`` command: 0 no finding, 1 findings, 2 an input could not be read.

    ``-`` reads standard input. A file whose every line is unreadable, or that holds no span
    at all (a metrics or logs export), counts as unreadable; isolated bad lines are skipped
    and counted on stderr.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    c = correlator or Correlator()
    findings: list[Finding] = []
    unreadable = False
    for path in paths:
        lines = good = bad = spans = 0
        try:
            stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
            try:
                for batch in parse_lines(stream):
                    lines += 1
                    spans += batch.spans
                    if batch.spans == 0 and batch.errors:
                        bad += 1
                    else:
                        good += 1
                    findings.extend(c.feed(batch))
            finally:
                if stream is not sys.stdin:
                    stream.close()
        except (OSError, UnicodeDecodeError) as exc:
            print(f"otel-a2a analyze: {path}: cannot read: {exc}", file=err)
            unreadable = True
            continue
        if lines and not good:
            print(f"otel-a2a analyze: {path}: no OTLP JSON trace request in it", file=err)
            unreadable = True
        elif lines and not spans:  # valid OTLP JSON, but metrics or logs
            print(f"otel-a2a analyze: {path}: no trace spans in it (a traces export?)", file=err)
            unreadable = True
        elif bad:
            print(f"otel-a2a analyze: {path}: skipped {bad} unreadable line(s)", file=err)
    for finding in findings:
        print(json.dumps(finding_json(finding)) if as_json else render_finding(finding), file=out)
    s = c.stats
    print(
        f"otel-a2a analyze: {s.spans} spans, {s.beliefs} task beliefs, {c.tasks} tasks, "
        f"{len(findings)} findings, {s.errors} malformed line(s) or span(s) skipped",
        file=err,
    )
    if unreadable:
        return 2
    return 1 if findings else 0
