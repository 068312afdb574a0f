"""The timeline page: a :class:`~otel_a2a.analyze.timeline.Timeline` in, one HTML string out.

Self-contained: the stylesheet and script (``page_assets/``, package data) and the data (JSON
in a ``<script type="application/json">``) are inline, and the page's Content-Security-Policy
lets it load nothing from anywhere (the live page may read its own ``data.json``). The script
draws the lanes from the data with DOM calls only (no ``innerHTML``): span names and states
are shown as text, never interpreted.
"""

from __future__ import annotations

import datetime
import html
import json
import re
from importlib import resources
from typing import Any

from otel_a2a.analyze.timeline import SpanRef, TaskView, Timeline

DATA_PATH = "data.json"  # what the live page polls, beside itself
_ASSETS = "page_assets"
_PLACEHOLDER = re.compile(r"\{\{([A-Z]+)\}\}")


def _asset(name: str) -> str:
    return resources.files("otel_a2a.analyze").joinpath(_ASSETS, name).read_text("utf-8")


def _ms(ns: int, t0: int) -> float:
    return round((ns - t0) / 1e6, 3)


def _task_json(view: TaskView) -> dict[str, Any]:
    """Compact arrays: a few thousand bars per task stay a few hundred KB."""
    times = [b.start_ns for b in view.bars] + [b.end_ns for b in view.bars]
    times += [m.t_ns for m in view.marks] + [w.start_ns for w in view.windows]
    t0 = min(times, default=0)
    lane = {service: i for i, service in enumerate(view.services)}
    spans: dict[SpanRef, int] = {}

    def span(ref: SpanRef | None) -> int:
        if ref is None:
            return -1
        return spans.setdefault(ref, len(spans))

    bars = [
        [
            lane[b.service],
            b.state,
            b.raw,
            _ms(b.start_ns, t0),
            _ms(b.end_ns, t0),
            int(b.authoritative),
            span(b.span),
        ]
        for b in view.bars
    ]
    marks = [
        [m.kind, lane.get(m.service, 0), _ms(m.t_ns, t0), m.label, m.detail, span(m.span)]
        for m in view.marks
    ]
    windows = [
        [lane.get(w.service, 0), _ms(w.start_ns, t0), _ms(w.end_ns, t0), w.label]
        for w in view.windows
    ]
    return {
        "id": view.task_id,
        "t0": _iso(t0),
        "lanes": view.services,
        "spans": [list(ref) for ref in spans],
        "bars": bars,
        "marks": marks,
        "windows": windows,
        "dropped": view.dropped,
    }


def _iso(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def page_data(timeline: Timeline, *, title: str, live: bool = False) -> dict[str, Any]:
    """What the script draws (also the live page's ``data.json``)."""
    return {
        "title": title,
        "live": live,
        "generated": datetime.datetime.now(tz=datetime.UTC).isoformat(timespec="seconds"),
        "omitted": timeline.omitted,
        "max_items": timeline.max_items,
        "tasks": [_task_json(view) for view in timeline.tasks],
    }


def data_json(data: dict[str, Any]) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` as such."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(timeline: Timeline, *, title: str, live: bool = False) -> str:
    """The whole page; with ``live`` its script polls ``data.json`` and redraws."""
    data = page_data(timeline, title=title, live=live)
    connect = "'self'" if live else "'none'"
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        f"img-src data:; connect-src {connect}"
    )
    parts = {
        "POLICY": policy,
        "TITLE": html.escape(title),
        "CSS": _asset("page.css"),
        "JS": _asset("page.js"),
        "DATA": data_json(data),
    }
    # one pass: what one part holds is never read as another's placeholder
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _asset("page.html"))
