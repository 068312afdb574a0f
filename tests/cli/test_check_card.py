"""``otel-a2a check-card`` against the real SDK peers and real servers whose cards break rules."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest

from otel_a2a import check_card as check_card_module
from otel_a2a.check_card import CardReport, card_url, check_card, check_card_async, render
from otel_a2a.cli import main
from tests.support.fake_agent import FakeAgent, Reply, json_reply
from tests.support.planted import CARD_PATH, RPC_PATH, SECRET, PlantedAgent, planted_agent


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


@pytest.mark.jvm
def test_the_jvm_peer_card_warns_that_revalidation_is_ignored(jvm_peer: str) -> None:
    """a2a-java's card as the seed's worker served it: a quoted MD5 ``ETag`` that
    ``If-None-Match`` never turns into a 304; usable, with a warning saying what it costs."""
    report = check_card(jvm_peer)
    assert report.exit_code == 0, render(report)
    assert report.card is not None and report.card.etag_source == "header"
    assert report.card.etag.startswith('"') and len(report.card.etag) == 34
    assert report.revalidation == "HTTP 200 (If-None-Match ignored)"
    assert report.errors == []
    assert report.warnings == [
        "If-None-Match not honoured: every revalidation downloads the card again"
    ]


def test_cli_prints_the_report(python_peer: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-card", python_peer + "/.well-known/agent-card.json"]) == 0
    out = capsys.readouterr().out
    assert "heartbeat   30 s (from extension)" in out
    assert "result      ok" in out


# Cards that break the rules, from the fake agent over a real socket (the first path segment
# picks; any other path gets its good card, If-None-Match ignored).
CARD = FakeAgent().card()
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
JSON = {"Content-Type": "application/json"}


def _bad_cards(agent: FakeAgent, request: httpx.Request) -> Reply | None:
    case = request.url.path.strip("/").split("/")[0]
    if case == "flaky" and "if-none-match" in request.headers:
        return Reply(raw=True)  # hang up without an answer: a failed revalidation
    if case == "slow":  # headers, then one byte per moment (each read is quick) for ever
        return Reply(200, JSON, itertools.repeat(b" "), pause=0.05)
    if case in RAW_CASES:
        return Reply(200, JSON, RAW_CASES[case])
    if case in CARD_CASES:
        return json_reply(CARD_CASES[case])
    if case == "html":
        return Reply(200, {"Content-Type": "text/html"}, b"<html>")
    return None


@pytest.fixture(scope="module")
def card_server() -> Iterator[str]:
    with FakeAgent(revalidate=False, misbehave=_bad_cards).serve() as base:
        yield base


@pytest.fixture
def agent() -> Iterator[PlantedAgent]:
    with planted_agent() as planted:
        yield planted


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.test", "http://a.test/.well-known/agent-card.json"),
        ("http://a.test/base/?token=t#f", "http://a.test/base/.well-known/agent-card.json?token=t"),
        ("http://a.test/card.json?token=t", "http://a.test/card.json?token=t"),
        ("http://[::1", "http://[::1/.well-known/agent-card.json"),  # for httpx to refuse
    ],
)
def test_the_well_known_path_goes_into_the_path_before_the_query(url: str, expected: str) -> None:
    assert card_url(url) == expected


def test_the_query_is_sent_and_never_printed(
    agent: PlantedAgent, capsys: pytest.CaptureFixture[str]
) -> None:
    """The query may be what authorises the fetch: it is sent, after the well-known path;
    neither it nor the credentials of the argument or of the card's interface URLs are
    printed, and interface URLs are shown as the spans record them."""
    hostport = agent.base.split("://", 1)[1]
    assert main(["check-card", f"http://alice:{SECRET}@{hostport}/?token={SECRET}#{SECRET}"]) == 1
    out = capsys.readouterr().out
    assert SECRET not in out, out
    assert f"card        {agent.base}{CARD_PATH}  (HTTP 200)" in out
    assert f"JSONRPC    1.0   {agent.base}{RPC_PATH}\n" in out  # credentials, query dropped
    assert "supportedInterfaces[2].url is not absolute: '_INVALID'" in out
    assert "HTTP+JSON  1.0   _INVALID" in out  # port out of range: cannot be read safely
    assert [target for _, target, _ in agent.received] == [f"{CARD_PATH}?token={SECRET}"] * 2
    assert agent.received[0][2]["Authorization"].startswith("Basic ")  # the userinfo, sent


def test_a_redirect_is_shown_without_its_credentials(agent: PlantedAgent) -> None:
    report = check_card(agent.base + "/redirect")
    text = render(report)
    assert report.card is not None, text
    assert SECRET not in text, text
    assert f"redirected  to {agent.base}{CARD_PATH}\n" in text
    assert any(SECRET in target for _, target, _ in agent.received)  # the Location was followed


def test_an_unparseable_redirect_is_not_quoted(agent: PlantedAgent) -> None:
    report = check_card(agent.base + "/bad-redirect")
    assert report.exit_code == 2
    assert report.errors == ["fetch failed: RemoteProtocolError: Invalid URL in location header"]


NOT_A_PORT = "fetch failed: InvalidURL: invalid literal for int() with base 10: "


@pytest.mark.parametrize(
    ("url", "says"),
    [
        # httpx reads the password as the port, and quotes it
        (f"http://alice:{SECRET}/x@127.0.0.1:9/", f"{NOT_A_PORT}'***'"),
        (f"http://u:p?{SECRET}@127.0.0.1:9/", f"{NOT_A_PORT}'***'"),
        (f"http://alice:{SECRET}@[::1/", f"{NOT_A_PORT}':1'"),
        (f"http://alice:{SECRET}@127.0.0.1:9/?k={SECRET}", "fetch failed: ConnectError: "),
    ],
)
def test_an_argument_nobody_can_fetch_is_reported_without_its_credentials(
    url: str, says: str
) -> None:
    report = check_card(url)
    text = render(report)
    assert report.exit_code == 2
    assert report.errors[0].startswith(says), report.errors
    assert SECRET not in text, text


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


@pytest.mark.parametrize(
    ("url", "says"),
    [
        # the socket's own words, not the async transport's "All connection attempts failed"
        ("http://127.0.0.1:9/", "fetch failed: ConnectError: [Errno 111] Connect call failed"),
        ("http://[::1", "fetch failed: InvalidURL: "),
        ("ftp://agent.test/", "fetch failed: UnsupportedProtocol: "),
    ],
)
def test_unreachable_or_unusable_url_is_a_report_not_a_traceback(url: str, says: str) -> None:
    report = check_card(url)
    assert report.exit_code == 2
    assert len(report.errors) == 1 and report.errors[0].startswith(says), report.errors


def test_a_tls_handshake_cut_short_says_what_it_met() -> None:
    """The server reads the ClientHello and hangs up: httpx's async transport raises a
    ConnectError with no message at all; the TLS error underneath is what the report says."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(30)

        def cut() -> None:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                with conn:
                    conn.recv(4096)

        thread = threading.Thread(target=cut, daemon=True)
        thread.start()
        report = check_card(f"https://127.0.0.1:{listener.getsockname()[1]}/")
        thread.join(30)
    assert report.exit_code == 2
    assert report.errors[0].startswith("fetch failed: ConnectError: [SSL: "), report.errors


def test_works_where_an_event_loop_is_running(card_server: str) -> None:
    async def inside_a_loop() -> CardReport:
        return check_card(card_server)

    report = asyncio.run(inside_a_loop())
    assert report.exit_code == 0, render(report)
    assert report.card is not None


def test_a_name_lookup_that_never_ends_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio resolves names on a worker thread the deadline cannot stop (closing the loop
    would wait for it): check_card() stops waiting after ABANDON_AFTER and says so."""
    release = threading.Event()
    real = socket.getaddrinfo

    def stuck(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("stuck.invalid", b"stuck.invalid"):  # anyio passes it IDNA-encoded
            release.wait(60)  # the system resolver's own timeout, much later
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    monkeypatch.setattr(check_card_module, "FETCH_DEADLINE", 0.5)
    monkeypatch.setattr(check_card_module, "ABANDON_AFTER", 1.0)
    try:
        report = check_card("http://stuck.invalid/")
    finally:
        release.set()
    assert report.exit_code == 2
    assert report.errors == ["fetch failed: no answer after 1 s (name resolution?)"]


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


# Below HTTP: the fake agent answers each request with raw chunks sent a pause apart (the pause
# comes before each chunk, the first included), watching between chunks whether the client
# hung up. An answer gives up at the end of its chunks, when the client hangs up or when the
# test ends, so a client that never gives up fails its test instead of hanging it.

Answer = tuple[list[bytes], float]  # the chunks, the pause before each


def _raw(answer: Callable[[httpx.Request], Answer]) -> FakeAgent:
    def reply(agent: FakeAgent, request: httpx.Request) -> Reply:
        chunks, pause = answer(request)
        return Reply(body=chunks, pause=pause, raw=True, keep_alive=True)

    return FakeAgent(misbehave=reply)


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[httpx.Request], Answer]], tuple[str, FakeAgent]]]:
    with contextlib.ExitStack() as stack:

        def start(answer: Callable[[httpx.Request], Answer]) -> tuple[str, FakeAgent]:
            agent = _raw(answer)
            return stack.enter_context(agent.serve()), agent

        yield start


CARD_BODY = json.dumps(CARD).encode()
CARD_HEAD = (
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: max-age=60\r\n"
    f"ETag: {FakeAgent().etag}\r\nContent-Length: {len(CARD_BODY)}\r\n\r\n"
).encode()
TRICKLE_PAUSE = 0.5  # per byte of the head: about a minute for all of it, against a 1 s deadline


def _card_at_once(request: httpx.Request) -> Answer:
    return [CARD_HEAD + CARD_BODY], 0.0


def _card_head_trickling(request: httpx.Request) -> Answer:
    """A good card, once the status line and headers have come one byte at a time."""
    return [CARD_HEAD[i : i + 1] for i in range(len(CARD_HEAD))] + [CARD_BODY], TRICKLE_PAUSE


def _silence(request: httpx.Request) -> Answer:
    """Nothing for a minute (the client's 10 s read timeout would end it after 10)."""
    return [CARD_HEAD + CARD_BODY], 60.0


def test_headers_trickling_in_are_given_up_on(
    raw_server: Callable[[Callable[[httpx.Request], Answer]], tuple[str, FakeAgent]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each header byte arrives well within the read timeout: the deadline covers the headers
    too, the command says so and exits 2, and the connection is closed, not left open."""
    monkeypatch.setattr(check_card_module, "FETCH_DEADLINE", 2.0)  # a head byte is due every 0.5 s
    base, agent = raw_server(_card_head_trickling)
    assert main(["check-card", base]) == 2
    out = capsys.readouterr().out
    assert "ERROR       fetch failed: _FetchRefused: still arriving after 2 s" in out, out
    assert "result      unusable" in out
    # the old check, made after each chunk of body only, said the same once the head was in
    assert 0 < agent.sent < len(CARD_HEAD), "the headers were waited for to the end"
    assert agent.hung_up.wait(30), "the client left the connection open"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_silence_after_the_request_is_given_up_on_at_the_deadline(
    raw_server: Callable[[Callable[[httpx.Request], Answer]], tuple[str, FakeAgent]],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """A deadline shorter than the read timeout ends the wait for a status line, under either
    event loop :func:`check_card_async` supports."""
    monkeypatch.setattr(check_card_module, "FETCH_DEADLINE", 1.0)
    base, agent = raw_server(_silence)
    report = anyio.run(check_card_async, base, backend=backend)
    assert report.exit_code == 2
    assert report.errors == ["fetch failed: _FetchRefused: still arriving after 1 s"]
    assert agent.hung_up.wait(30), "the client left the connection open"
    assert agent.sent == 0


def test_revalidation_trickling_in_is_given_up_on(
    raw_server: Callable[[Callable[[httpx.Request], Answer]], tuple[str, FakeAgent]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The revalidation has a deadline of its own: a failed one is a warning, as before."""
    monkeypatch.setattr(check_card_module, "FETCH_DEADLINE", 2.0)  # a head byte is due every 0.5 s

    def answer(request: httpx.Request) -> Answer:
        revalidating = "if-none-match" in request.headers
        return (_card_head_trickling if revalidating else _card_at_once)(request)

    base, agent = raw_server(answer)
    report = check_card(base)
    assert report.exit_code == 0, render(report)
    assert report.revalidation == "failed: _FetchRefused"
    assert "revalidation failed: _FetchRefused: still arriving after 2 s" in report.warnings
    assert len(agent.requests) == 2
    answered = len(CARD_HEAD) + len(CARD_BODY)
    assert answered < agent.sent < answered + len(CARD_HEAD), "the headers were waited for"
    assert agent.hung_up.wait(30), "the client left the connection open"


def test_an_enormous_header_block_is_refused(
    raw_server: Callable[[Callable[[httpx.Request], Answer]], tuple[str, FakeAgent]],
) -> None:
    """Header lines without end: httpcore's h11 refuses a head over 100 KiB (its
    max_incomplete_event_size), long before the server would stop at 64 MiB or the deadline."""
    block = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"a" * 1000) for i in range(64))
    chunks = [b"HTTP/1.1 200 OK\r\n", *[block] * 1024]
    base, agent = raw_server(lambda request: (chunks, 0.0))
    report = check_card(base)
    assert report.exit_code == 2
    assert report.errors == ["fetch failed: RemoteProtocolError: Receive buffer too long"]
    assert agent.hung_up.wait(30), "the client left the connection open"
    assert agent.sent < sum(map(len, chunks)) // 16
