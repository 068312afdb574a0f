"""Hand-written OTLP JSON, shaped as the collector's file exporter writes it."""

from __future__ import annotations

from typing import Any

T0 = 1_700_000_000_000_000_000  # a Unix time in nanoseconds
MS = 1_000_000
TRACE = "5b8efff798038103d269b633813fc60c"


def kv(key: str, value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def span(
    task: str | None,
    raw: str | None,
    start_ms: int,
    end_ms: int,
    *,
    canonical: str | None = None,
    span_id: str = "1111111111111111",
    parent: str = "",
    trace: str = TRACE,
    name: str = "GetTask",
    events: list[dict[str, Any]] | None = None,
    extra: dict[str, object] | None = None,
) -> dict[str, Any]:
    attrs: dict[str, object] = {
        "rpc.system.name": "a2a",
        "a2a.method.name": name.removeprefix("A2A "),
    }
    if task is not None:
        attrs["a2a.task.id"] = task
    if raw is not None:
        attrs["otel_a2a.task.state.raw"] = raw
        attrs["a2a.task.state"] = canonical or raw.lower().removeprefix("task_state_")
        attrs["otel_a2a.observation.authoritative"] = True
    attrs.update(extra or {})
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(T0 + start_ms * MS),
        "endTimeUnixNano": str(T0 + end_ms * MS),
        "attributes": [kv(k, v) for k, v in attrs.items()],
        "status": {},
    }
    if parent:
        out["parentSpanId"] = parent
    if events:
        out["events"] = events
    return out


def status_event(task: str, raw: str, at_ms: int, canonical: str | None = None) -> dict[str, Any]:
    return {
        "timeUnixNano": str(T0 + at_ms * MS),
        "name": "otel_a2a.task.status",
        "attributes": [
            kv("a2a.task.id", task),
            kv("a2a.task.state", canonical or raw.lower().removeprefix("task_state_")),
            kv("otel_a2a.task.state.raw", raw),
        ],
    }


def request(service: str, *spans: dict[str, Any]) -> dict[str, Any]:
    """One ExportTraceServiceRequest with one resource (``service``)."""
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        kv("service.name", service),
                        kv("telemetry.sdk.language", "python"),
                    ]
                },
                "scopeSpans": [
                    {"scope": {"name": "otel_a2a", "version": "0.1.0"}, "spans": list(spans)}
                ],
            }
        ]
    }
