"""``otel-a2a check-card`` against the real SDK peers and real servers whose cards break rules."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from otel_a2a.check_card import check_card, render
from otel_a2a.cli import main
from tests.support.misbehaving import CARD, ETAG


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


class _CardHandler(BaseHTTPRequestHandler):
    """Cards that break the rules, served over a real socket (the first path segment picks)."""

    def do_GET(self) -> None:
        case = self.path.strip("/").split("/")[0]
        if case == "flaky" and self.headers.get("If-None-Match"):
            self.close_connection = True  # hang up without an answer: a failed revalidation
            return
        if case == "slow":  # headers, then one byte per moment: each read is quick
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            with contextlib.suppress(OSError):
                while True:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.05)  # the trickle itself, not synchronisation
            return
        raw = RAW_CASES.get(case)
        if raw is not None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        if case in CARD_CASES:
            card: object = CARD_CASES[case]
            headers: dict[str, str] = {}
        else:
            card, headers = CARD, {"ETag": ETAG, "Cache-Control": "max-age=60"}
        body = b"<html>" if case == "html" else json.dumps(card).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if case == "html" else "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


BROKEN_CARD = {
    "name": "x",
    "supportedInterfaces": [{"url": "/relative", "protocolBinding": "SOAP"}],
}
CARD_CASES: dict[str, object] = {
    "broken": BROKEN_CARD,
    "interfaces-not-a-list": {**CARD, "supportedInterfaces": 5},
    "bare-v03": {"url": "/x"},
}
RAW_CASES = {
    "deep": b"[" * 200_000,
    "huge": b'{"name": "' + b"x" * (9 * 1024 * 1024) + b'"}',
}


@pytest.fixture(scope="module")
def card_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CardHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_problems_are_reported(card_server: str) -> None:
    report = check_card(card_server + "/broken")
    assert report.exit_code == 1
    text = "\n".join(report.errors + report.warnings)
    assert "missing required v1.0 fields: description, version" in text
    assert "supportedInterfaces[0].protocolVersion is required" in text
    assert "not absolute" in text and "'SOAP'" in text
    assert "no ETag header" in text and "no Cache-Control max-age" in text
    assert report.card is not None and report.card.etag.startswith("sha256:")


def test_ignored_and_failed_revalidation_are_warnings(card_server: str) -> None:
    ignored = check_card(card_server + "/ignored")
    assert ignored.exit_code == 0, render(ignored)
    assert ignored.revalidation == "HTTP 200 (If-None-Match ignored)"
    assert any("If-None-Match not honoured" in w for w in ignored.warnings)
    failed = check_card(card_server + "/flaky")
    assert failed.exit_code == 0, render(failed)
    assert failed.revalidation.startswith("failed: RemoteProtocolError")
    assert any(w.startswith("revalidation failed: RemoteProtocolError") for w in failed.warnings)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/", "http://[::1", "ftp://agent.test/"])
def test_unreachable_or_unusable_url_is_a_report_not_a_traceback(url: str) -> None:
    report = check_card(url)
    assert report.exit_code == 2
    assert report.errors and report.errors[0].startswith("fetch failed: ")


def test_non_card_body(card_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-card", card_server + "/html"]) == 2
    out = capsys.readouterr().out
    assert "ERROR       the body is not a JSON Agent Card" in out
    assert "result      unusable" in out


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("interfaces-not-a-list", "supportedInterfaces is not an array"),
        ("bare-v03", "missing required v0.3 fields: name, description"),
        ("deep", "the body is not a JSON Agent Card"),
        ("huge", "body over"),
    ],
)
def test_cards_no_client_should_accept_are_reports_not_tracebacks(
    card_server: str, case: str, says: str
) -> None:
    report = check_card(f"{card_server}/{case}/.well-known/agent-card.json")
    assert report.exit_code in (1, 2)
    assert any(says in e for e in report.errors), report.errors


def test_a_card_trickling_in_is_given_up_on(
    card_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each byte arrives within the read timeout: only a deadline on the whole fetch ends it."""
    from otel_a2a import check_card as module

    monkeypatch.setattr(module, "FETCH_DEADLINE", 0.5)
    report = check_card(f"{card_server}/slow/.well-known/agent-card.json")
    assert report.exit_code == 2
    assert any("still arriving after 0.5 s" in e for e in report.errors), report.errors
