"""The detector's live page server: read-only, bounded, fed by the analysis."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from otel_a2a.analyze import Correlator, parse_request
from otel_a2a.analyze.ui import LivePage
from tests.analyze.samples import request, span


@pytest.fixture
def live() -> Iterator[LivePage]:
    page = LivePage(port=0, max_drawn=1)
    page.start()
    try:
        yield page
    finally:
        page.close()


def _feed(page: LivePage, correlator: Correlator, task: str) -> None:
    for doc in (
        request("orchestrator", span(task, "TASK_STATE_WORKING", 0, 100, span_id="1" * 16)),
        request("worker", span(task, "TASK_STATE_FAILED", 10, 20, span_id="2" * 16)),
    ):
        batch = parse_request(doc)
        page.record(doc, batch, correlator.feed(batch))


def _get(url: str, method: str = "GET") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_serves_the_page_and_its_data_bounded(live: LivePage) -> None:
    assert live.url == f"http://127.0.0.1:{live.port}/"
    correlator = Correlator()
    status, kind, body = _get(live.url + "data.json")
    assert status == 200 and kind == "application/json"
    assert json.loads(body)["tasks"] == []
    _feed(live, correlator, "first")
    _feed(live, correlator, "second")
    data = json.loads(_get(live.url + "data.json")[2])
    assert [t["id"] for t in data["tasks"]] == ["second"]  # the most recent, max_drawn=1
    assert data["omitted"] == 1 and data["live"] is True
    status, kind, body = _get(live.url)
    assert status == 200 and kind.startswith("text/html")
    assert '"id":"second"' in body


def test_is_read_only(live: LivePage) -> None:
    assert _get(live.url, "POST")[0] == 501
    assert _get(live.url, "DELETE")[0] == 501
    assert _get(live.url + "v1/traces")[0] == 404


def test_a_request_it_cannot_take_is_counted_not_raised(live: LivePage) -> None:
    batch = parse_request({})
    live.record(None, batch._replace(beliefs=[None]), [])  # type: ignore[arg-type, list-item]
    assert live.errors == 1
