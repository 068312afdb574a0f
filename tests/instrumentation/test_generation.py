"""A2A 1.1 ``generation`` through the instrumentation, over loopback HTTP.

An instrumented httpx client reads a ``SendStreamingMessage`` event stream whose frames are
``tests/fixtures/a2a-1.1/streams.json`` (see its README: written from the spec, since no SDK
serves 1.1 yet): a missed update is a ``generation_gap`` on the stream's span, a rehydrated
task a ``generation_regression``, and a healthy stream or a peer without generations nothing.
"""

from __future__ import annotations

import httpx
import pytest

from tests.detect.test_generations import STREAMS
from tests.instrumentation.conftest import Harness, divergences
from tests.support.fake_agent import FakeAgent, rpc_result


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("healthy", []),
        ("missed_update", ["generation_gap"]),
        ("rehydrated", ["generation_regression"]),
        ("keeps_none_zero", []),
    ],
)
def test_generation_findings_on_the_stream_span(
    otel: Harness, case: str, expected: list[str]
) -> None:
    frames = [b"data: " + rpc_result(1, payload) + b"\n\n" for payload in STREAMS[case]]
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
    }
    agent = FakeAgent(sse=frames)
    with agent.serve() as base, httpx.Client(base_url=base) as client:
        response = client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
        assert response.status_code == 200
    [span] = otel.spans("SendStreamingMessage")
    assert divergences(span) == expected
    assert otel.total("otel_a2a.instrumentation.errors") == 0
