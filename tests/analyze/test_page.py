"""The page as a string: self-contained, its data escaped, what the script draws from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from otel_a2a.analyze.page import page_data, render_page
from otel_a2a.analyze.timeline import TimelineBuilder
from otel_a2a.cli import main
from tests.analyze.samples import request, span

FIXTURE = Path(__file__).parents[1] / "fixtures" / "otlp" / "jvm-split-brain.jsonl"
HOSTILE = "</script><script>alert(1)</script><!--"


def _data(page: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert match, "no data element"
    data: dict[str, object] = json.loads(match.group(1))
    return data


def test_the_page_loads_nothing_from_anywhere() -> None:
    builder = TimelineBuilder(tasks=["t"])
    builder.add(request("gateway", span("t", "TASK_STATE_WORKING", 0, 10)))
    page = render_page(builder.view(), title="x")
    assert re.search(r"""(src|href)=["']?(https?:)?//""", page) is None
    assert "connect-src 'none'" in page and "default-src 'none'" in page
    assert "{{" not in page  # every placeholder filled
    live = render_page(builder.view(), title="x", live=True)
    assert "connect-src 'self'" in live and _data(live)["live"] is True


def test_names_from_spans_cannot_close_the_script() -> None:
    builder = TimelineBuilder(tasks=[HOSTILE])
    builder.add(request(HOSTILE, span(HOSTILE, HOSTILE, 0, 10, name=HOSTILE)))
    page = render_page(builder.view(), title=HOSTILE)
    assert page.count("</script>") == 2  # the data element's and the script's own
    assert "<script>alert" not in page
    [task] = _data(page)["tasks"]  # type: ignore[misc]
    assert task["id"] == HOSTILE and task["lanes"] == [HOSTILE]
    assert task["bars"][0][2] == HOSTILE and task["spans"][0][0] == HOSTILE


def test_the_data_is_relative_milliseconds_with_span_references() -> None:
    builder = TimelineBuilder(tasks=["t"])
    builder.add(request("gateway", span("t", "TASK_STATE_WORKING", 5, 25, span_id="ab" * 8)))
    [task] = page_data(builder.view(), title="x")["tasks"]
    [bar] = task["bars"]
    assert bar[:6] == [0, "working", "TASK_STATE_WORKING", 0.0, 20.0, 1]
    assert task["spans"][bar[6]] == [
        "GetTask",
        "gateway",
        "5b8efff798038103d269b633813fc60c",
        "ab" * 8,
    ]
    assert task["t0"].endswith("Z")


def test_analyze_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "page.html"
    assert main(["analyze", str(FIXTURE), "--html", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"page with 1 task(s) written to {out}" in err
    [task] = _data(out.read_text())["tasks"]  # type: ignore[misc]
    assert task["lanes"] == ["orchestrator", "jvm-worker"]
    assert [m[3] for m in task["marks"] if m[0] == "finding"] == ["cross_runtime_conflict"]


def test_analyze_task_draws_a_task_without_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = tmp_path / "spans.jsonl", tmp_path / "page.html"
    source.write_text(json.dumps(request("gateway", span("quiet", "TASK_STATE_WORKING", 0, 9))))
    assert main(["analyze", str(source), "--html", str(out)]) == 0
    assert _data(out.read_text())["tasks"] == []
    assert main(["analyze", str(source), "--html", str(out), "--task", "quiet"]) == 0
    assert [t["id"] for t in _data(out.read_text())["tasks"]] == ["quiet"]  # type: ignore[attr-defined]
    assert main(["analyze", str(source), "--html", str(tmp_path / "no" / "x.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
