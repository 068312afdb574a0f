"""The timeline page in a real browser (headless Chromium): what a person would see.

Pages from the recorded demo run (``tests/fixtures/demo/restart.json``), from a fresh demo
run, from a large generated export (a few thousand spans per task) through ``otel-a2a
analyze --html``, and live from ``otel-a2a detector --ui-port``. Each test checks the lanes,
the flags with their reason, the text hovering and clicking show, and that the console stayed
free of errors, and saves a screenshot under its temporary folder.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from demo.model import ScenarioConfig
from demo.page import load, page
from otel_a2a import semconv as sc
from otel_a2a.cli import main
from tests.analyze.samples import MS, T0, kv, request, span
from tests.analyze.test_real_detector import _Lines
from tests.support import in_ci
from tests.support.browser import Tab, tab

pytestmark = pytest.mark.browser
DEMO = Path(__file__).parents[1] / "fixtures" / "demo" / "restart.json"
SPLIT = Path(__file__).parents[1] / "fixtures" / "otlp" / "jvm-split-brain.jsonl"


def _texts(t: Tab, selector: str) -> list[str]:
    return [str(s) for s in t.page.locator(selector).all_text_contents()]


def _shot(t: Tab, path: Path) -> None:
    t.page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def _hover_and_click(t: Tab, selector: str, *expected: str) -> str:
    """Hover the first ``selector``: the tooltip shows its span; click it: the text stays."""
    target = t.page.locator("section.task " + selector).first  # not the legend
    target.hover()
    tip = t.page.locator("#tip")
    assert tip.is_visible()
    hover = str(tip.text_content())
    for text in ("span: ", "service: ", "trace id: ", "span id: ", *expected):
        assert text in hover, hover
    target.click()
    details = target.locator("xpath=ancestor::section[1]").locator(".details")
    assert details.text_content() == hover
    return hover


def test_the_recorded_demo_run(tmp_path: Path) -> None:
    file = tmp_path / "demo.html"
    file.write_text(page(load(json.loads(DEMO.read_text()))))
    with tab() as t:
        t.page.goto(file.as_uri())
        [section] = t.page.locator("section.task").all()
        assert section.locator("h2").text_content() == "task d6904e2f-7ef5-4b08-85bc-d481cf579bc7"
        lanes = section.locator("g.lane")
        assert [lanes.nth(i).get_attribute("data-service") for i in range(lanes.count())] == [
            "orchestrator",
            "worker",
        ]
        assert set(_texts(t, ".divergence .flag-text")) == {"heartbeat_gap"}
        assert "TASK_STATE_WORKING \u00d72" in _texts(t, ".bar-label")
        assert any(
            s.startswith("blind window: orchestrator believed the task live")
            for s in _texts(t, ".window-label")
        )
        assert {"worker killed (SIGKILL)", "worker back: task FAILED"} <= set(
            _texts(t, ".note-text")
        )
        _hover_and_click(t, ".divergence .flag-head", "heartbeat_gap", "orchestrator wait_on_task")
        _hover_and_click(t, "g.belief rect", "TASK_STATE_WORKING (working)", "authoritative")
        _hover_and_click(t, "g.card rect", "card fetched", "GetAgentCard")
        _shot(t, tmp_path / "demo.png")
        assert t.errors == []


def test_a_fresh_demo_run_writes_its_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from demo.scenario import problem

    reason = problem(ScenarioConfig())
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the demo cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    out = tmp_path / "run" / "timeline.html"
    from demo.cli import main as demo_main

    assert demo_main(["--quiet", "--heartbeat", "1", "--html", str(out)]) == 0
    assert f"  page:    {out} (the timeline: open it in a browser)" in capsys.readouterr().out
    with tab() as t:
        t.page.goto(out.as_uri())
        assert t.page.locator("section.task g.lane[data-service=orchestrator]").count() == 1
        assert t.page.locator("section.task g.lane[data-service=worker]").count() == 1
        reasons = set(_texts(t, ".divergence .flag-text"))
        assert reasons & {"heartbeat_gap", "terminal_state"}, reasons
        assert _texts(t, ".window-label")
        _hover_and_click(t, ".divergence .flag-head", "divergence (otel-a2a, in process)")
        _shot(t, tmp_path / "fresh.png")
        assert t.errors == []


def _large(path: Path, tasks: int, spans: int) -> None:
    """``tasks`` tasks of ``spans`` GetTask spans each, half per service, exported by both
    services in turns of 25 as time goes (the analysis keeps 64 beliefs per task): the worker
    says failed for the last fifth while the orchestrator still reads working; a decision with
    a heartbeat_gap every 100 spans."""
    with path.open("w") as out:
        for n in range(tasks):
            task = f"task-{n}-{uuid.uuid4()}"
            for first in range(0, spans // 2, 25):
                for service in ("orchestrator", "worker"):
                    batch = []
                    for i in range(first, min(first + 25, spans // 2)):
                        late = service == "worker" and i >= spans * 2 // 5
                        raw = "TASK_STATE_FAILED" if late else "TASK_STATE_WORKING"
                        at = 20 * i + (5 if service == "worker" else 0)
                        span_id = f"{n:04x}{i:08x}{len(service):04x}"
                        s = span(task, raw, at, at + 12, span_id=span_id)
                        if service == "orchestrator" and i % 100 == 99:
                            s["attributes"] += [kv(sc.LIVENESS_DECISION, True)]
                            s["events"] = [
                                {
                                    "timeUnixNano": str(T0 + at * MS),
                                    "name": sc.EVENT_DIVERGENCE,
                                    "attributes": [kv(sc.DIVERGENCE_REASON, "heartbeat_gap")],
                                }
                            ]
                        batch.append(s)
                    out.write(json.dumps(request(service, *batch)) + "\n")


def test_a_large_export_stays_readable(tmp_path: Path) -> None:
    source, file = tmp_path / "large.jsonl", tmp_path / "large.html"
    _large(source, tasks=3, spans=3_000)
    assert main(["analyze", str(source), "--html", str(file)]) == 1
    with tab(height=900) as t:
        t.page.goto(file.as_uri())
        sections = t.page.locator("section.task")
        assert sections.count() == 3
        for i in range(3):
            section = sections.nth(i)
            services = section.locator("g.lane").evaluate_all(
                "lanes => lanes.map(l => l.dataset.service)"
            )
            assert services == ["orchestrator", "worker"]
            assert "3000 beliefs" in str(section.locator(".meta").text_content())
            labels = section.locator(".bar-label").all_text_contents()
            # thousands of polls of one state are a few bars, labelled with their count
            assert any(re.fullmatch("TASK_STATE_WORKING \u00d7[0-9]{3,4}", s) for s in labels), (
                labels
            )
            assert section.locator("g.belief").count() < 50
            assert (
                "cross_runtime_conflict"
                in section.locator(".finding .flag-text").all_text_contents()
            )
            assert "heartbeat_gap" in section.locator(".divergence .flag-text").all_text_contents()
            assert section.locator(".window-label").count() == 1
        _hover_and_click(t, ".finding .flag-head", "cross_runtime_conflict", "GetTask")
        hover = _hover_and_click(t, "g.belief rect", "beliefs drawn as one bar")
        assert "TASK_STATE_WORKING" in hover
        # drag across the first chart: it zooms in (finer ticks), a double-click zooms out
        chart = sections.nth(0).locator("svg.chart")
        before = chart.locator(".axis text").all_text_contents()
        box = chart.bounding_box()
        assert box is not None
        y = box["y"] + 12
        t.page.mouse.move(box["x"] + 300, y)
        t.page.mouse.down()
        t.page.mouse.move(box["x"] + 360, y, steps=4)
        t.page.mouse.up()
        chart = sections.nth(0).locator("svg.chart")
        zoomed = chart.locator(".axis text").all_text_contents()
        assert zoomed != before
        assert sections.nth(0).locator("g.belief").count() >= 1
        chart.dblclick(position={"x": 400, "y": 12})
        assert sections.nth(0).locator("svg.chart .axis text").all_text_contents() == before
        _shot(t, tmp_path / "large.png")
        assert t.errors == []


def test_the_bounds_are_said_on_the_page(tmp_path: Path) -> None:
    source, file = tmp_path / "busy.jsonl", tmp_path / "busy.html"
    _large(source, tasks=1, spans=12_000)  # over the 5,000 beliefs kept per task
    main(["analyze", str(source), "--html", str(file)])
    with tab() as t:
        t.page.goto(file.as_uri())
        bounded = " ".join(_texts(t, ".bounded"))
        assert "older beliefs or marks are not drawn (at most 5000 of each are kept per task)" in (
            bounded
        )
        assert t.errors == []


def test_the_detector_serves_the_page_live(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "otel_a2a.cli", "detector", "--port", "0", "--ui-port", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        _Lines(proc.stdout)
        banner = _Lines(proc.stderr).wait_for(lambda s: any("OTLP/HTTP on" in x for x in s), "up")
        match = re.search(r"OTLP/HTTP on (\S+), timeline page on (\S+)", banner[0])
        assert match, banner
        traces, ui = match.group(1), match.group(2)
        assert ui.startswith("http://127.0.0.1:")
        for line in SPLIT.read_text().splitlines():
            answer = httpx.post(traces, content=line, headers={"Content-Type": "application/json"})
            assert answer.status_code == 200
        with tab() as t:
            t.page.goto(ui)
            assert "live: redrawn every 2 s, read-only" in str(
                t.page.locator("#summary").text_content()
            )
            first = t.page.locator("section.task")
            assert first.count() == 1
            lanes = first.locator("g.lane").evaluate_all("l => l.map(x => x.dataset.service)")
            assert lanes == ["orchestrator", "jvm-worker"]
            _hover_and_click(t, ".finding .flag-head", "cross_runtime_conflict", "GetTask")
            # a new split brain arrives: the open page draws it at its next poll
            task = f"live-{uuid.uuid4()}"
            for doc in (
                request("orchestrator", span(task, "TASK_STATE_WORKING", 0, 100)),
                request("worker", span(task, "TASK_STATE_FAILED", 10, 20, span_id="2" * 16)),
            ):
                assert httpx.post(traces, json=doc).status_code == 200
            t.page.wait_for_selector(f'section.task[data-task="{task}"]', timeout=30_000)
            assert t.page.locator("section.task").count() == 2
            assert httpx.post(ui, content=b"{}").status_code == 501  # read-only
            _shot(t, tmp_path / "live.png")
            assert t.errors == []
    finally:
        proc.send_signal(2)
        assert proc.wait(timeout=30) == 0
