"""The demo's report: the timeline, the summary table, the time to detection, the checks and
where to look, ending with ``RESULT: PASS`` or ``RESULT: FAIL``."""

from __future__ import annotations

import sys
import time
from typing import IO

from demo.model import KEEPS_WORKING, OBSERVED_WORKERS, Divergence, ScenarioResult, Unfinished


def describe(d: Divergence) -> str:
    """The timeline's line for one divergence: its reason and what it rests on."""
    a = d.attributes
    text = f"otel_a2a.divergence {d.reason} on span '{d.span}'"
    if d.reason == "heartbeat_gap":
        text += (
            f" (last observation {a.get('a2a.task.state')}, "
            f"{float(a.get('otel_a2a.observation.age', 0)):.2f} s old > heartbeat "
            f"{float(a.get('otel_a2a.card.heartbeat_interval', 0)):g} s)"
        )
    elif d.reason == "terminal_state":
        text += f" (last authoritative observation: {a.get('a2a.task.state')})"
    elif d.reason == "etag_changed":
        text += (
            f" (card etag {a.get('otel_a2a.card.etag.observed')} -> {a.get('otel_a2a.card.etag')})"
        )
    elif d.reason == "non_canonical_state":
        raw = d.span_attributes.get("otel_a2a.task.state.raw")
        text += f" (wire spelling {raw!r} accepted as {d.span_attributes.get('a2a.task.state')})"
    elif d.reason == "task_lost":
        text += " (the worker answered TaskNotFound for a task observed working)"
    return text


def describe_unfinished(u: Unfinished) -> str:
    """The timeline's line for a worker's finding."""
    state = u.state.removeprefix("TASK_STATE_").lower().replace("_", "-")
    why = {
        "not_run_here": "its store brought it back, nothing runs it",
        "execution_ended": "its execution ended and left it so",
    }.get(u.cause, u.cause)
    return f"otel_a2a.task.unfinished on {u.worker}: task {u.task_id} {state} ({u.cause}: {why})"


def render(result: ScenarioResult, out: IO[str] | None = None) -> None:
    """The timeline, the summary table and where to look."""
    w = out or sys.stdout
    cfg = result.config
    start = result.start or (result.marks[0].t if result.marks else time.time())

    def rel(t: float) -> float:
        return t - start

    def line(text: str = "") -> None:
        w.write(text + "\n")

    t = cfg.timings
    line()
    line(
        f"== otel-a2a demo: variant {cfg.variant}, binding {cfg.binding}, "
        f"{'streaming' if cfg.streaming else 'polling'}; heartbeat {t.heartbeat:g} s, "
        f"card TTL {t.card_ttl:g} s, decision every {t.tick:g} s =="
    )
    line()
    line("Timeline (seconds since the scenario started)")
    for mark in sorted(result.marks, key=lambda m: m.t):
        line(f"  {rel(mark.t):7.2f}  {mark.side:<12} {mark.text}")
    line()
    line("Summary")
    rows: list[tuple[str, str, str]] = []
    restart = result.restart_at
    if restart is not None:
        kept = cfg.worker in KEEPS_WORKING  # back working, with nothing running it
        worker_view = {
            "forget": "task unknown (empty store)",
            "redeploy": f"{'working' if kept else 'failed'} (rehydrated), new card",
        }.get(
            cfg.variant,
            f"{'working, nothing runs it' if kept else 'failed'} (rehydrated on restart)",
        )
        rows.append(("worker", "working", f"until {rel(restart):.2f} (killed)"))
        back = result.restarted_at or restart
        rows.append(("worker", worker_view, f"from {rel(back):.2f} (back up)"))
    beliefs: list[tuple[str, float]] = []
    for step in result.timeline:
        belief = str(step.get("belief"))
        if belief == "none":
            continue
        if not beliefs or beliefs[-1][0] != belief:
            beliefs.append((belief, float(step.get("t", start))))
    for belief, since in beliefs:
        rows.append(("orchestrator", belief, f"from {rel(since):.2f}"))
    seen_reasons: dict[str, Divergence] = {}
    for d in result.divergences:
        seen_reasons.setdefault(d.reason, d)
    for reason, d in seen_reasons.items():
        count = sum(1 for x in result.divergences if x.reason == reason)
        rows.append(("otel-a2a", f"{reason} x{count} ({d.operation})", f"first at {rel(d.t):.2f}"))
    if result.stale_at is not None:
        rows.append(("otel-a2a", "otel_a2a_task_stale > 0", f"at {rel(result.stale_at):.2f}"))
    for u in result.unfinished:
        rows.append(("otel-a2a", f"otel_a2a.task.unfinished ({u.worker})", f"at {rel(u.t):.2f}"))
    if not result.divergences:
        rows.append(("otel-a2a", "no divergence", "-"))
    width = max(len(r[1]) for r in rows) if rows else 10
    line(f"  {'side':<13} {'believed / raised':<{width}}  when (s)")
    for side, what, when in rows:
        line(f"  {side:<13} {what:<{width}}  {when}")
    line()
    if result.detected_at is not None or result.baseline_at is not None:
        origin = restart if restart is not None else start
        what = "the restart" if restart is not None else "the start"
        det = "-" if result.detected_at is None else f"{result.detected_at - origin:.2f} s"
        base = (
            "never (it still believes the task is live)"
            if result.baseline_at is None
            else f"{result.baseline_at - origin:.2f} s"
        )
        line(f"Time to detection after {what}: otel-a2a {det}; uninstrumented baseline {base}")
        line("  (the baseline learns only from a response that says so, or at its own timeout)")
        line()
    redundant = result.metric("otel_a2a_task_get_redundant_total")
    decisions = result.metric("otel_a2a_liveness_decisions_total")
    divergences = result.metric("otel_a2a_divergence_total")
    line(
        f"Metrics at the end: otel_a2a_divergence_total={divergences:g} "
        f"otel_a2a_liveness_decisions_total={decisions:g} "
        f"otel_a2a_task_get_redundant_total={redundant:g} "
        f"otel_a2a_task_stale={result.metric('otel_a2a_task_stale'):g}"
    )
    line()
    line("Checks")
    for check in result.checks:
        line(f"  [{'PASS' if check.passed else 'FAIL'}] {check.name}: {check.detail}")
    line()
    line("Where to look")
    line(
        f"  spans:   console (the orchestrator's stdout; {len(result.spans)} spans, "
        "events named otel_a2a.divergence)"
        + (f"; also OTLP to {result.otlp_endpoint}" if result.otlp_endpoint else "")
    )
    line(f"  metrics: {result.metrics_url} (Prometheus, served by the orchestrator while it ran)")
    if result.page:
        line(f"  page:    {result.page} (the timeline: open it in a browser)")
    if cfg.worker in OBSERVED_WORKERS:
        line(
            "  worker:  console (each worker start's stdout, worker-<n>.out: its server spans "
            "and otel_a2a.task.unfinished)"
        )
    if cfg.keep_dir:
        line(
            f"  files:   {result.workdir} "
            "(timeline.jsonl, orchestrator.out, worker-*.out, *.err, tasks/)"
        )
    line()
    if result.attempts > 1:
        line("(run twice: the orchestrator's metrics port was taken before it bound it)")
    line(f"RESULT: {'PASS' if result.ok else 'FAIL'}")
