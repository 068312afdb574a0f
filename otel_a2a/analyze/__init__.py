"""Layer 4: cross-runtime correlation over exported spans (the analyzer's divergence reasons).

``otel-a2a analyze FILE…`` reads OTLP JSON lines (the collector file exporter's format) and
``otel-a2a detector`` receives OTLP/HTTP live (:mod:`otel_a2a.analyze.receiver`); both turn
spans into :class:`Belief` values (:mod:`otel_a2a.analyze.otlp`) and feed the pure, bounded
:class:`Correlator` (:mod:`otel_a2a.analyze.correlate`), which reports
``cross_runtime_conflict`` and ``renormalized_state`` findings, and into acts that the
:class:`FleetJudge` (:mod:`otel_a2a.analyze.fleet`) judges per service with the in-process
invariant. Importing this package does not
import OpenTelemetry; only the receiver does.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import sys
import zlib
from collections.abc import Iterator, Sequence
from typing import TextIO

from otel_a2a.analyze.correlate import Correlator, Stats, states_conflict
from otel_a2a.analyze.fleet import (
    FleetJudge,
    ServiceFinding,
    render_service_finding,
    service_finding_json,
    summary,
)
from otel_a2a.analyze.model import (
    Batch,
    Belief,
    Finding,
    SpanLink,
    finding_json,
    render_finding,
)
from otel_a2a.analyze.otlp import parse_documents, parse_lines, parse_request
from otel_a2a.analyze.timeline import TimelineBuilder

__all__ = [
    "Batch",
    "Belief",
    "Correlator",
    "Finding",
    "FleetJudge",
    "ServiceFinding",
    "SpanLink",
    "Stats",
    "analyze_files",
    "finding_json",
    "parse_lines",
    "parse_request",
    "render_finding",
    "states_conflict",
]


_MAX_DOCUMENT = 256 * 1024 * 1024  # a pretty-printed request is read whole up to this size


def _open(path: str) -> tuple[TextIO, bool]:
    """A file as text, and whether it is plain (not gzip): gzip (the collector's
    ``compression: gzip``) is recognised by its magic bytes, a UTF-8 byte-order mark dropped."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8-sig"), False
    return open(path, encoding="utf-8-sig"), True


def _batches(stream: TextIO, plain: bool) -> Iterator[tuple[object, Batch]]:
    """One request and its batch per line (the file exporter's format), or one for a whole
    file holding a single pretty-printed request (``jq .`` output) when its first line is no
    JSON alone; an unreadable line is None and an empty batch with one error."""
    first = stream.readline()
    try:
        if first.strip():
            json.loads(first)
        whole = False
    except (ValueError, RecursionError):
        whole = plain and _small_file(stream)  # a gzip file's size says nothing of its text
    if whole:
        try:
            doc = json.loads(first + stream.read())
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict):
            yield doc, parse_request(doc)
            return
        stream.seek(0)
        yield from parse_documents(stream)
        return
    yield from parse_documents(itertools.chain([first], stream))


def _small_file(stream: TextIO) -> bool:
    try:
        return stream.seekable() and os.fstat(stream.fileno()).st_size <= _MAX_DOCUMENT
    except (OSError, ValueError):
        return False


def analyze_files(
    paths: Sequence[str],
    *,
    as_json: bool = False,
    correlator: Correlator | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    timeline: TimelineBuilder | None = None,
    judge: FleetJudge | None = None,
) -> int:
    """The ``analyze`` command: 0 no finding, 1 findings, 2 an input could not be read.

    ``-`` reads standard input. A file whose every line is unreadable, or that holds no span
    at all (a metrics or logs export), counts as unreadable; isolated bad lines are skipped
    and counted on stderr. ``timeline`` (the ``--html`` page) is fed every request and
    finding.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    c = correlator or Correlator()
    j = judge or FleetJudge(max_tasks=c.max_tasks)
    findings: list[Finding] = []
    judged: list[ServiceFinding] = []
    unreadable = False
    for path in paths:
        lines = good = bad = spans = 0
        try:
            stream, plain = (sys.stdin, False) if path == "-" else _open(path)
            try:
                for doc, batch in _batches(stream, plain):
                    lines += 1
                    spans += batch.spans
                    if batch.spans == 0 and batch.errors:
                        bad += 1
                    else:
                        good += 1
                    found = c.feed(batch)
                    findings.extend(found)
                    judged.extend(j.feed(batch.acts, 0.0, batch.self_judging))
                    if timeline is not None and doc is not None:
                        timeline.add(doc, batch.beliefs, found)
            finally:
                if stream is not sys.stdin:
                    stream.close()
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:  # a cut or bad gzip
            print(f"otel-a2a analyze: {path}: cannot read: {exc}", file=err)
            unreadable = True
            continue
        if lines and not good:
            print(f"otel-a2a analyze: {path}: no OTLP JSON trace request in it", file=err)
            unreadable = True
        elif lines and not spans:  # valid OTLP JSON, but metrics or logs
            print(
                f"otel-a2a analyze: {path}: no trace spans in it (a metrics or logs export? "
                "analyze reads the traces export)",
                file=err,
            )
            unreadable = True
        elif bad:
            print(f"otel-a2a analyze: {path}: skipped {bad} unreadable line(s)", file=err)
    judged.extend(j.flush())
    for finding in findings:
        print(json.dumps(finding_json(finding)) if as_json else render_finding(finding), file=out)
    for service_finding in judged:  # in span-time order
        print(
            json.dumps(service_finding_json(service_finding))
            if as_json
            else render_service_finding(service_finding),
            file=out,
        )
    s = c.stats
    print(
        f"otel-a2a analyze: {s.spans} spans, {s.beliefs} task beliefs, {c.tasks} tasks, "
        f"{len(findings)} findings ({s.findings_dropped} more dropped by the bounds), "
        f"{s.errors} malformed line(s) or span(s) skipped; {summary(j)}",
        file=err,
    )
    if unreadable:
        return 2
    return 1 if findings or judged else 0
