"""Every value otel-a2a puts on a span is of an OpenTelemetry attribute type: an id of another
type given to ``liveness_decision`` is converted (a UUID, an integer) or refused (anything
else: one warning, counted, the block runs unjudged), so an exporter never drops the batch
that carries the application's own spans with it."""

from __future__ import annotations

import io
import logging
import uuid

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExportResult

from otel_a2a import liveness_decision
from tests.instrumentation.conftest import Harness

TASK = uuid.UUID("3f2c9a0e-6d1b-4b7e-9a55-0c8d2e41f7a1")
PRIMITIVE = (str, bool, int, float)


def _values_are_attribute_types(harness: Harness) -> None:
    for span in harness.spans():
        for value in (span.attributes or {}).values():
            assert isinstance(value, PRIMITIVE), (span.name, value)
        for event in span.events:
            for value in (event.attributes or {}).values():
                assert isinstance(value, PRIMITIVE), (event.name, value)


def _exported_alongside_the_application(harness: Harness) -> None:
    """The batch (the application's spans around ours) goes through the console exporter and
    OTLP's encoding whole."""
    spans = harness.spans()
    out = io.StringIO()
    assert ConsoleSpanExporter(out=out).export(spans) is SpanExportResult.SUCCESS
    written = out.getvalue()
    assert all(f'"name": "{s.name}"' in written for s in spans)
    encoded = encode_spans(spans)
    names = {s.name for rs in encoded.resource_spans for ss in rs.scope_spans for s in ss.spans}
    assert names == {s.name for s in spans}


@pytest.mark.parametrize("given", [TASK, 12345], ids=["uuid", "int"])
def test_an_id_of_another_type_is_recorded_as_its_text(otel: Harness, given: object) -> None:
    tracer = otel.tracer_provider.get_tracer("app")
    tracer.start_span("app before").end()
    with liveness_decision(given) as decision:  # type: ignore[arg-type]
        pass
    tracer.start_span("app after").end()
    span = otel.span("liveness_decision")
    assert span.end_time is not None
    assert (span.attributes or {})["a2a.task.id"] == str(given)
    assert decision.verdict is not None and decision.verdict.evidence.task_id == str(given)
    _values_are_attribute_types(otel)
    _exported_alongside_the_application(otel)


@pytest.mark.parametrize(
    "given",
    [["t1", "t2"], b"t1", 1.5, None, object()],
    ids=["list", "bytes", "float", "none", "object"],
)
def test_an_id_of_no_attribute_text_is_refused_once_warned_and_counted(
    otel: Harness, given: object, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = otel.tracer_provider.get_tracer("app")
    tracer.start_span("app before").end()
    ran = 0
    with caplog.at_level(logging.WARNING, logger="otel_a2a"):
        for _ in range(3):
            with liveness_decision(given) as decision:  # type: ignore[arg-type]
                ran += 1
    tracer.start_span("app after").end()
    assert ran == 3 and decision.verdict is None  # the block runs, unjudged
    assert otel.spans("liveness_decision") == []  # no span started, none left unended
    warnings = [r for r in caplog.records if "liveness_decision(task_id" in r.getMessage()]
    assert len(warnings) == 1
    errors = otel.total("otel_a2a.instrumentation.errors", error__type="invalid_decision_argument")
    assert errors == 3
    _values_are_attribute_types(otel)
    _exported_alongside_the_application(otel)


def test_an_assumed_state_of_another_type_is_refused_too(otel: Harness) -> None:
    with liveness_decision("t1", assumed_state=["working"]):  # type: ignore[arg-type]
        pass
    assert otel.spans("liveness_decision") == []
    errors = otel.total("otel_a2a.instrumentation.errors", error__type="invalid_decision_argument")
    assert errors == 1
