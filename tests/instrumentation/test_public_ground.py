"""otel-a2a uses the public APIs of OpenTelemetry, httpx, httpx2 and grpcio only, save the
touches docs/limits.md names ("Public APIs"), each guarded here: a release that moves one
fails this test instead of a user's process."""

from __future__ import annotations

import re
from pathlib import Path

import otel_a2a

PACKAGE = Path(otel_a2a.__file__).parent
# a private name of one of those libraries: a ``_name`` module or attribute reached through
# them, or an attribute of an object of theirs that the library keeps private
PRIVATE = re.compile(
    r"\b(?:opentelemetry|httpx2?|grpc)(?:\.\w+)*\._[a-z]\w*"
    r"|\.(?:_attributes|_real_tracer|_span_processors|_context|_end_time|_list|_interceptors"
    r"|_batch_processor|_dict|_value_)\b"
    r"|_OTelSDKConfigurator"
)
GUARDED = {
    # OpenTelemetry Python's Logs API has no public module yet (docs/limits.md)
    "from opentelemetry._logs import LoggerProvider, SeverityNumber, get_logger",
    "from opentelemetry._logs import SeverityNumber",
}
# the SDK set-up's two touches with no public API (the batch processor's shutdown bound, the
# order of exit handlers), named in docs/limits.md and guarded by test_providers on the
# oldest and newest SDK (the version matrix)
PENDING = {"instrumentation/providers.py"}


def test_no_private_name_of_the_instrumented_libraries_outside_the_guarded_touches() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in PENDING:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line) and line.strip() not in GUARDED:
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []


def test_the_logs_api_is_where_and_as_otel_a2a_reads_it() -> None:
    """The divergence log records go through ``opentelemetry._logs``: ``get_logger`` and
    ``Logger.emit`` with the keywords otel-a2a passes reach the SDK's exporter whole."""
    from opentelemetry import trace
    from opentelemetry._logs import SeverityNumber, get_logger
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    get_logger("probe", "0", provider).emit(
        event_name="otel_a2a.probe",
        body="body",
        severity_number=SeverityNumber.WARN,
        severity_text="WARN",
        attributes={"k": "v"},
        context=trace.set_span_in_context(trace.INVALID_SPAN),
    )
    [record] = [r.log_record for r in exporter.get_finished_logs()]
    assert (record.event_name, record.body, record.severity_number) == (
        "otel_a2a.probe",
        "body",
        SeverityNumber.WARN,
    )
    assert dict(record.attributes or {}) == {"k": "v"}
