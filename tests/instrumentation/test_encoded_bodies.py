"""Content-encoded responses from a real socket: observed whatever the encoding, and a body
that inflates a thousandfold never costs more than ``OTEL_A2A_MAX_BODY_BYTES`` of memory."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from tests.instrumentation.conftest import Harness, make_harness
from tests.support.fake_agent import BOMB, BOMB_TEXT_BYTES, bomb_body, misbehaving_agent

GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t-1"}}
LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with misbehaving_agent().serve() as base:
        yield base


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setenv("OTEL_A2A_MAX_BODY_BYTES", str(LIMIT))
    harness, instrumentor = make_harness()
    try:
        yield harness
    finally:
        instrumentor.uninstrument()


def _state(harness: Harness) -> object:
    return dict(harness.span("GetTask").attributes or {}).get("a2a.task.state")


@pytest.mark.parametrize("case", ["gzip", "deflate_raw"])
@pytest.mark.parametrize("stream", [False, True])
def test_encoded_task_is_observed(harness: Harness, server: str, case: str, stream: bool) -> None:
    headers = {"A2A-Version": "1.0"}
    with httpx.Client() as client:
        if stream:
            with client.stream("POST", f"{server}/{case}", json=GET_TASK, headers=headers) as r:
                assert b"TASK_STATE_WORKING" in b"".join(r.iter_bytes())
        else:
            r = client.post(f"{server}/{case}", json=GET_TASK, headers=headers)
            assert r.json()["result"]["status"]["state"] == "TASK_STATE_WORKING"
    assert _state(harness) == "TASK_STATE_WORKING"
    assert harness.total("otel_a2a.instrumentation.errors") == 0


def test_a_gzip_bomb_costs_at_most_the_body_limit(harness: Harness, server: str) -> None:
    raw = 0
    bomb_body()  # built (and cached) for the server before memory is traced
    with httpx.Client() as client:
        tracemalloc.start()
        try:
            with client.stream(
                "POST", f"{server}/{BOMB}", json=GET_TASK, headers={"A2A-Version": "1.0"}
            ) as r:
                for chunk in r.iter_raw():  # the application never inflates it
                    raw += len(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert raw < BOMB_TEXT_BYTES // 100  # it really is a bomb
    assert peak < 4 * LIMIT, f"peak {peak / 2**20:.1f} MiB for a {LIMIT / 2**20:.0f} MiB limit"
    assert _state(harness) == "TASK_STATE_WORKING"  # the status precedes the history
    assert harness.total("otel_a2a.instrumentation.errors") == 0


def test_a_gzip_bomb_is_never_inflated_past_the_limit(
    harness: Harness, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Peak memory cannot tell: inflated pieces are dropped as they come. Counted instead:
    what is inflated for the exchange stops at exactly what it may hold."""
    from otel_a2a.instrumentation import http_exchange as exchange

    inflated: list[int] = []
    pieces = exchange._Inflater.pieces

    def counting(self: exchange._Inflater, chunk: bytes) -> Iterator[bytes]:
        for piece in pieces(self, chunk):
            inflated.append(len(piece))
            yield piece

    monkeypatch.setattr(exchange._Inflater, "pieces", counting)
    with (
        httpx.Client() as client,
        client.stream(
            "POST", f"{server}/{BOMB}", json=GET_TASK, headers={"A2A-Version": "1.0"}
        ) as r,
    ):
        for _ in r.iter_raw():
            pass
    assert inflated, "the bomb was never seen encoded"
    assert sum(inflated) == LIMIT
    assert _state(harness) == "TASK_STATE_WORKING"


def test_an_oversized_reply_is_never_parsed_past_the_limit(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_a2a.protocol import extract

    parsed: list[int] = []
    real = extract.extract_prefix

    def spy(request: object, status: int, prefix: bytes) -> object:
        parsed.append(len(prefix))
        return real(request, status, prefix)  # type: ignore[arg-type]

    monkeypatch.setattr(extract, "extract_prefix", spy)
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "y" * (10 * LIMIT)}]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"message": message}}).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    with httpx.Client(transport=transport) as client:
        client.post("http://a.test/a2a", json=send, headers={"A2A-Version": "1.0"}).read()
    assert parsed and max(parsed) <= LIMIT
    assert len(parsed) == 1  # a Message reply: the first prefix says so, no more parsing
    assert "a2a.task.state" not in dict(harness.span("SendMessage").attributes or {})


def test_a_corrupt_encoding_is_one_counted_error_and_the_bytes_pass_untouched(
    harness: Harness, server: str
) -> None:
    raw = b""
    with (
        httpx.Client() as client,
        client.stream(
            "POST", f"{server}/gzip_corrupt", json=GET_TASK, headers={"A2A-Version": "1.0"}
        ) as r,
    ):
        for chunk in r.iter_raw():
            raw += chunk
    assert raw.startswith(b"\x1f\x8b") and len(raw) > 4 * 65536  # read in several chunks
    assert harness.total("otel_a2a.instrumentation.errors", error__type="error") == 1  # zlib.error
    assert "a2a.task.state" not in dict(harness.span("GetTask").attributes or {})
