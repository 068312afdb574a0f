"""How soon the seeded incident is detected (docs/architecture.md): the demo's timing promise.

The seeded incident asks that ``otel_a2a.task.stale`` rise within one heartbeat of the restart
(plus one metric export interval, which is when a reader can first see it) and that the
orchestrator's first decision after the restart diverge, long before the uninstrumented
baseline learns anything at its own timeout. The end-to-end tests check *that* these happen;
how soon is a wall-clock figure, so it lives here. Each run is the ``restart`` variant of
``python -m demo`` at the scaled timings of the tests (heartbeat 1 s, metric export every 1 s,
the stale gauge scraped every 0.2 s); the figures are the medians over ``RUNS`` runs.

Needs Node >= 20 and the peer's packages (``make setup``); without them the row says so.
"""

from __future__ import annotations

from bench import Row, check, median
from demo.scenario import ScenarioConfig, Timings, problem, run_scenario

RUNS = 3
TIMINGS = Timings.scaled(heartbeat=1.0)


def run() -> list[Row]:
    config = ScenarioConfig(variant="restart", timings=TIMINGS)
    reason = problem(config)
    if reason is not None:
        return [Row(f"incident: not measured ({reason})", "-")]
    stale: list[float] = []
    detected: list[float] = []
    baseline: list[float] = []
    for _ in range(RUNS):
        result = run_scenario(config)
        restart = result.restart_at
        if restart is None:
            return [Row("incident: ERROR the worker was never restarted", "-", "", False)]
        if result.stale_at is not None:
            stale.append(result.stale_at - restart)
        if result.detected_at is not None:
            detected.append(result.detected_at - restart)
        if result.baseline_at is not None:
            baseline.append(result.baseline_at - restart)
    limit = TIMINGS.heartbeat + TIMINGS.export_interval
    rows = [
        check(
            f"incident: otel_a2a_task_stale > 0 after the restart, median of {RUNS} (s)",
            median(stale) if len(stale) == RUNS else float("inf"),
            ".2f",
            limit,
        ),
        Row("  runs where the gauge rose at all", f"{len(stale)}/{RUNS}"),
    ]
    if detected:
        rows.append(
            Row(
                "incident: first detection after the restart, median (s)", f"{median(detected):.2f}"
            )
        )
    rows.append(
        Row(
            "  uninstrumented baseline learned after (s)",
            f"{median(baseline):.2f}" if baseline else "never (it still believed the task live)",
        )
    )
    return rows
