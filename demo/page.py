"""The demo's timeline page: the run's spans, its analysis and what the run itself did, drawn
by :mod:`otel_a2a.analyze.page` (``python -m demo --html FILE``).

The orchestrator's spans reach the demo as the console exporter prints them; they are turned
into one OTLP JSON export request, so that the page is made exactly as ``otel-a2a analyze
--html`` makes it. What no span says is added as the run knows it: the worker's kill and
restart as marks on a ``worker`` lane, and the seed's blind window on the orchestrator's lane,
from the restart until the orchestrator learned that the task was gone (or the run ended).

A run can be recorded (:func:`record`) and drawn again later (:func:`load`): the README's
screenshot and the browser tests draw ``tests/fixtures/demo/restart.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from demo.model import ScenarioConfig, ScenarioResult, Timings
from otel_a2a.analyze.correlate import Correlator
from otel_a2a.analyze.otlp import parse_request
from otel_a2a.analyze.page import render_page
from otel_a2a.analyze.timeline import TimelineBuilder
from otel_a2a.protocol import parse_timestamp

WORKER_LANE = "worker"
SERVICE_NAME = "service.name"  # the resource attribute (OpenTelemetry's, not otel-a2a's)


def _nanos(text: object) -> int | None:
    seconds = parse_timestamp(text)
    return None if seconds is None else round(seconds * 1e9)


def _value(value: object) -> dict[str, object] | None:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return None  # arrays: nothing the page reads


def _attributes(attrs: object) -> list[dict[str, object]]:
    if not isinstance(attrs, Mapping):
        return []
    out: list[dict[str, object]] = []
    for key, value in attrs.items():
        any_value = _value(value)
        if any_value is not None:
            out.append({"key": str(key), "value": any_value})
    return out


def _hex(value: object) -> str:
    return value.removeprefix("0x") if isinstance(value, str) else ""


def otlp_request(spans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Console-exporter spans as one ``ExportTraceServiceRequest`` (OTLP JSON form)."""
    by_service: dict[str, list[dict[str, Any]]] = {}
    resources: dict[str, object] = {}
    for span in spans:
        resource = (span.get("resource") or {}).get("attributes") or {}
        service = str(resource.get(SERVICE_NAME, "unknown_service"))
        resources.setdefault(service, resource)
        context = span.get("context") or {}
        otlp: dict[str, Any] = {
            "traceId": _hex(context.get("trace_id")),
            "spanId": _hex(context.get("span_id")),
            "parentSpanId": _hex(span.get("parent_id")),
            "name": span.get("name", ""),
            "startTimeUnixNano": str(_nanos(span.get("start_time")) or 0),
            "endTimeUnixNano": str(_nanos(span.get("end_time")) or 0),
            "attributes": _attributes(span.get("attributes")),
            "events": [
                {
                    "name": event.get("name", ""),
                    "timeUnixNano": str(_nanos(event.get("timestamp")) or 0),
                    "attributes": _attributes(event.get("attributes")),
                }
                for event in span.get("events") or []
            ],
        }
        by_service.setdefault(service, []).append(otlp)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resources[service])},
                "scopeSpans": [{"spans": spans}],
            }
            for service, spans in by_service.items()
        ]
    }


def task_id(result: ScenarioResult) -> str:
    """The task the orchestrator started (its timeline's ``start`` step)."""
    return next((str(s["task_id"]) for s in result.timeline if s.get("task_id")), "")


def learned_at(result: ScenarioResult, after: float) -> float | None:
    """When the orchestrator first believed the task over or gone, after ``after``."""
    for step in result.timeline:
        t = float(step.get("t", 0.0))
        if t >= after and (step.get("terminal") or step.get("step") == "learned"):
            return t
    return None


def timeline(result: ScenarioResult) -> TimelineBuilder:
    """The run's spans, their analysis, and the restart and blind window the run knows."""
    task = task_id(result)
    builder = TimelineBuilder(tasks=[task] if task else ())
    request = otlp_request(result.spans)
    batch = parse_request(request)
    builder.add(request, batch.beliefs, Correlator().feed(batch))
    restart = result.restart_at
    if task and restart is not None:
        builder.note(task, WORKER_LANE, round(restart * 1e9), "worker killed (SIGKILL)")
        if result.restarted_at is not None:
            back = {
                "forget": "worker back: empty store, task unknown",
                "redeploy": "worker back: new card, task FAILED",
            }.get(result.config.variant, "worker back: task FAILED")
            builder.note(task, WORKER_LANE, round(result.restarted_at * 1e9), back)
        ends = [float(s.get("t", 0.0)) for s in result.timeline]
        until = learned_at(result, restart) or max(ends, default=restart)
        service = next((b.service for b in batch.beliefs if b.task_id == task), "orchestrator")
        builder.window(
            task,
            service,
            round(restart * 1e9),
            round(until * 1e9),
            f"blind window: {service} believed the task live, the worker no longer held "
            f"it ({until - restart:.2f} s)",
        )
    return builder


def page(result: ScenarioResult) -> str:
    cfg = result.config
    title = f"otel-a2a demo: variant {cfg.variant}, binding {cfg.binding}"
    return render_page(timeline(result).view(), title=title)


def record(result: ScenarioResult) -> dict[str, Any]:
    """What :func:`page` needs of a run, as JSON."""
    cfg = result.config
    return {
        "variant": cfg.variant,
        "binding": cfg.binding,
        "streaming": cfg.streaming,
        "heartbeat": cfg.timings.heartbeat,
        "start": result.start,
        "restart_at": result.restart_at,
        "restarted_at": result.restarted_at,
        "timeline": result.timeline,
        "spans": result.spans,
    }


def load(doc: Mapping[str, Any]) -> ScenarioResult:
    """A run recorded by :func:`record`, enough of it to draw its page."""
    config = ScenarioConfig(
        variant=str(doc["variant"]),
        binding=str(doc["binding"]),
        streaming=bool(doc["streaming"]),
        timings=Timings.scaled(float(doc["heartbeat"])),
    )
    return ScenarioResult(
        config=config,
        start=float(doc["start"]),
        restart_at=doc.get("restart_at"),
        restarted_at=doc.get("restarted_at"),
        timeline=list(doc["timeline"]),
        spans=list(doc["spans"]),
    )
