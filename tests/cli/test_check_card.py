"""``otel-a2a check-card`` against the real SDK peers and a card that breaks the rules."""

from __future__ import annotations

import httpx
import pytest

from otel_a2a.check_card import check_card, render
from otel_a2a.cli import main


@pytest.mark.parametrize("peer", ["python_peer", "node_peer"])
def test_real_peer_cards_are_clean(peer: str, request: pytest.FixtureRequest) -> None:
    base: str = request.getfixturevalue(peer)
    report = check_card(base)
    assert report.exit_code == 0, render(report)
    assert report.card is not None
    assert report.card.etag_source == "header"
    assert report.card.heartbeat == 30 and report.card.heartbeat_source == "extension"
    assert report.revalidation.startswith("304")
    assert report.errors == [] and report.warnings == []


def test_cli_prints_the_report(python_peer: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-card", python_peer + "/.well-known/agent-card.json"]) == 0
    out = capsys.readouterr().out
    assert "heartbeat   30 s (from extension)" in out
    assert "result      ok" in out


def test_problems_are_reported() -> None:
    card = {"name": "x", "supportedInterfaces": [{"url": "/relative", "protocolBinding": "SOAP"}]}
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json=card))
    with httpx.Client(transport=transport) as client:
        report = check_card("http://agent.test", client)
    assert report.exit_code == 1
    text = "\n".join(report.errors + report.warnings)
    assert "missing required v1.0 fields: description, version" in text
    assert "supportedInterfaces[0].protocolVersion is required" in text
    assert "not absolute" in text and "'SOAP'" in text
    assert "no ETag header" in text and "no Cache-Control max-age" in text
    assert report.card is not None and report.card.etag.startswith("sha256:")


def test_unreachable_and_non_card() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, text="<html>"))
    with httpx.Client(transport=transport) as client:
        assert check_card("http://agent.test", client).exit_code == 2
    assert check_card("http://127.0.0.1:9/").exit_code == 2
