"""Judging a demo run: what the orchestrator exported, read back, and the checks of the seeded
incident against it (the verdict behind ``RESULT: PASS``)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from demo.model import (
    OBSERVED_WORKERS,
    RESPELLING,
    RESTARTING,
    Check,
    Divergence,
    ScenarioResult,
    Unfinished,
    expected_after_restart,
)
from otel_a2a import semconv as sc
from otel_a2a.protocol import parse_timestamp


def parse_console_spans(text: str) -> list[dict[str, Any]]:
    """Spans from ``ConsoleSpanExporter`` output: concatenated JSON objects, maybe with noise."""
    decoder = json.JSONDecoder()
    spans: list[dict[str, Any]] = []
    i, n = 0, len(text)
    while i < n:
        start = text.find("{", i)
        if start < 0:
            break
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        if isinstance(obj, dict) and "name" in obj and "context" in obj:
            spans.append(obj)
        i = end
    return spans


def parse_prometheus(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition (``/metrics``)."""
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def scrape(url: str, timeout: float = 2.0) -> list[Sample] | None:
    """The samples ``url`` serves now; None when it cannot be read or parsed."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body: bytes = response.read()
        return parse_prometheus(body.decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def divergences(spans: Sequence[Mapping[str, Any]]) -> list[Divergence]:
    found: list[Divergence] = []
    for span in spans:
        attrs = span.get("attributes") or {}
        for event in span.get("events") or []:
            if event.get("name") != "otel_a2a.divergence":
                continue
            ev_attrs = event.get("attributes") or {}
            found.append(
                Divergence(
                    t=parse_timestamp(event.get("timestamp"))
                    or parse_timestamp(span.get("start_time"))
                    or 0.0,
                    reason=str(ev_attrs.get("otel_a2a.divergence.reason", "?")),
                    span=str(span.get("name", "?")),
                    operation=str(attrs.get("a2a.method.name", span.get("name", "?"))),
                    attributes=dict(ev_attrs),
                    span_attributes=dict(attrs),
                )
            )
    found.sort(key=lambda d: d.t)
    return found


def unfinished(spans: Sequence[Mapping[str, Any]], worker: str) -> list[Unfinished]:
    """The ``otel_a2a.task.unfinished`` findings among a worker's console spans."""
    found: list[Unfinished] = []
    for span in spans:
        if span.get("name") != sc.EVENT_TASK_UNFINISHED:
            continue
        attrs = span.get("attributes") or {}
        found.append(
            Unfinished(
                t=parse_timestamp(span.get("start_time")) or 0.0,
                worker=worker,
                task_id=str(attrs.get(sc.TASK_ID, "")),
                state=str(attrs.get(sc.TASK_STATE, "")),
                cause=str(attrs.get(sc.UNFINISHED_CAUSE, "")),
            )
        )
    return found


def _task_id(result: ScenarioResult) -> str:
    """The orchestrator's task, as its timeline names it."""
    return next((str(s["task_id"]) for s in result.timeline if s.get("task_id")), "")


def _worker_checks(result: ScenarioResult) -> list[Check]:
    """What otel-a2a on an instrumented worker must have found: the task in flight at the
    restart, brought back from the same store with nothing running it, and nothing else."""
    variant = result.config.variant
    task_id = _task_id(result)
    seen = [f"{u.worker}: {u.task_id} {u.state} ({u.cause})" for u in result.unfinished]
    if variant in RESTARTING and variant != "forget":
        found = [
            u
            for u in result.unfinished
            if u.task_id == task_id
            and u.cause == "not_run_here"
            and result.restart_at is not None
            and u.t >= result.restart_at
        ]
        others = [u for u in result.unfinished if u not in found]
        return [
            Check(
                "the restarted worker reported the task unfinished (otel_a2a.task.unfinished)",
                bool(task_id) and bool(found) and not others,
                f"{found[0].worker}: task {task_id}, {found[0].state}, cause {found[0].cause}"
                if found and not others
                else f"task {task_id or '?'}; findings: {seen or 'none'}",
            )
        ]
    why = "its store was emptied" if variant == "forget" else "every task it took ended or runs"
    return [Check(f"no unfinished task on the worker ({why})", not result.unfinished, str(seen))]


def _first_learned(result: ScenarioResult, after: float) -> float | None:
    for step in result.timeline:
        t = float(step.get("t", 0.0))
        if t >= after and (step.get("terminal") or step.get("step") == "learned"):
            return t
    return None


def evaluate(result: ScenarioResult) -> list[Check]:
    """Did the detector behave as specified for this variant?"""
    cfg = result.config
    variant, t = cfg.variant, cfg.timings
    checks: list[Check] = []
    exit_steps = [s for s in result.timeline if s.get("step") == "exit"]
    checks.append(
        Check(
            "orchestrator ran to the end",
            bool(exit_steps) and exit_steps[-1].get("code") == 0,
            f"exit step code {exit_steps[-1].get('code') if exit_steps else 'missing'}, "
            f"process exit code {result.orchestrator_code}",
        )
    )
    a2a_spans = [s for s in result.spans if (s.get("attributes") or {}).get("a2a.method.name")]
    checks.append(
        Check(
            "instrumented by OTEL_A2A_ENABLED alone",
            bool(a2a_spans) and bool(result.metrics),
            f"{len(a2a_spans)} spans with a2a.method.name, "
            f"{len(result.metrics)} Prometheus samples",
        )
    )
    if variant in RESTARTING:
        restart = result.restart_at
        after = [] if restart is None else result.decisions(after=restart)
        expected = expected_after_restart(variant, cfg.worker, cfg.streaming)
        learned = _first_learned(result, restart or 0.0)
        if not after and not cfg.streaming and learned is not None:
            checks.append(
                Check(
                    "first decision after the restart diverges",
                    True,
                    "polling: the orchestrator's own GetTask saw the failure before any decision "
                    "(no stale belief was acted on)",
                )
            )
        elif not after:
            checks.append(Check("first decision after the restart diverges", False, "no decision"))
        elif not expected:
            respelled = {"non_canonical_state"} if variant in RESPELLING else set()
            raised = sorted({r for d in after for r in d.reasons} - respelled)
            checks.append(
                Check(
                    "no decision after the restart diverges over it (the worker's answers)",
                    not raised,
                    f"{len(after)} decisions raised {raised or 'nothing'}: polled, the worker "
                    "answers working, so only its own side can tell",
                )
            )
        else:
            first = after[0]
            reasons = list(first.reasons)
            checks.append(
                Check(
                    "first decision after the restart diverges",
                    bool(reasons) and reasons[0] in expected,
                    f"'{first.name}' raised {reasons or 'nothing'}; "
                    f"expected one of {sorted(expected)}",
                )
            )
        if variant != "redeploy" and cfg.streaming:
            before = result.stale_before
            checks.append(
                Check(
                    "otel_a2a_task_stale 0 before the restart, > 0 after it",
                    before == 0 and result.stale_at is not None,
                    f"before: {'not scraped' if before is None else f'{before:g}'}; after: "
                    + ("never seen" if result.stale_at is None else "> 0"),
                )
            )
            limit = t.heartbeat + t.export_interval
            delay = (
                None if result.stale_at is None or restart is None else result.stale_at - restart
            )
            checks.append(
                Check(
                    "otel_a2a_task_stale > 0 within heartbeat + export interval",
                    delay is not None and delay <= limit,
                    "never seen"
                    if delay is None
                    else f"seen {delay:.2f} s after the restart (limit {limit:g} s)",
                    timing=True,
                )
            )
        if variant == "forget":
            lost = [d for d in result.divergences if d.reason == "task_lost"]
            checks.append(
                Check(
                    "task_lost raised",
                    bool(lost),
                    f"on '{lost[0].span}'" if lost else f"reasons seen: {result.reasons()}",
                )
            )
        detections = [d.t for d in result.divergences if restart is not None and d.t >= restart]
        detections += [u.t for u in result.unfinished if restart is not None and u.t >= restart]
        if result.stale_at is not None:
            detections.append(result.stale_at)
        result.detected_at = min(detections) if detections else None
        result.baseline_at = _first_learned(result, restart or 0.0)

    if variant in RESPELLING:
        carried = [
            d
            for d in result.divergences
            if d.reason == "non_canonical_state"
            and not str(d.span_attributes.get("otel_a2a.task.state.raw", "TASK_STATE_")).startswith(
                "TASK_STATE_"
            )
        ]
        checks.append(
            Check(
                "non_canonical_state on the observation that carried it",
                bool(carried),
                f"on '{carried[0].span}' (otel_a2a.task.state.raw="
                f"{carried[0].span_attributes.get('otel_a2a.task.state.raw')!r})"
                if carried
                else f"reasons seen: {result.reasons()}",
            )
        )
        if variant == "spelling":
            result.detected_at = carried[0].t if carried else None
            result.baseline_at = _first_learned(result, 0.0)

    if variant == "healthy":
        counted = result.metric("otel_a2a_divergence_total")
        checks.append(
            Check(
                "zero divergences (no false positive)",
                not result.divergences and counted == 0,
                f"{len(result.divergences)} span events {result.reasons()}, "
                f"otel_a2a_divergence_total = {counted:g}",
            )
        )
        authoritative = result.metric(
            "otel_a2a_liveness_decisions_total", otel_a2a_decision_outcome="authoritative"
        )
        decisions = result.decisions()
        checks.append(
            Check(
                "liveness decisions judged authoritative",
                authoritative > 0 and len(decisions) > 0,
                f"{len(decisions)} decision spans, otel_a2a_liveness_decisions_total"
                f"{{outcome=authoritative}} = {authoritative:g}",
            )
        )
        redundant = result.metric("otel_a2a_task_get_redundant_total")
        checks.append(
            Check(
                "over-polling counted in otel_a2a_task_get_redundant_total",
                redundant > 0,
                f"otel_a2a_task_get_redundant_total = {redundant:g}",
            )
        )
    if cfg.worker in OBSERVED_WORKERS:
        checks.extend(_worker_checks(result))
    return checks


def judge(result: ScenarioResult) -> None:
    """Fill in the checks and the verdict: ok when there are checks and every one passed."""
    result.checks = evaluate(result)
    result.ok = bool(result.checks) and all(c.passed for c in result.checks)
