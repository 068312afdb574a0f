"""Spans, events and metrics for one process talking to a fake agent over MockTransport.

Unit level: the wire is hand-made here; the same checks run against the real SDK servers in
``test_real_peers.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otel_a2a import liveness_decision
from otel_a2a.protocol.jcs import canonicalize as jcs
from tests.instrumentation.conftest import V1, Clock, Harness, divergences, resolved
from tests.support.fake_agent import FakeAgent

BASE = "http://agent.test"


def test_card_fetch_span_carries_card_attributes(otel: Harness) -> None:
    agent = FakeAgent(heartbeat=12)
    with agent.client() as client:
        assert client.get("/.well-known/agent-card.json").status_code == 200
    span = otel.span("GetAgentCard")
    attrs = dict(span.attributes or {})
    assert attrs["a2a.method.name"] == "GetAgentCard"
    assert "rpc.system.name" not in attrs  # the convention's span names no RPC system
    assert attrs["otel_a2a.card.etag"] == 'W/"v1"'
    assert attrs["otel_a2a.card.heartbeat_interval"] == 12
    assert attrs["otel_a2a.card.streaming"] is True
    assert attrs["gen_ai.agent.version"] == "1.0.0"
    assert attrs["gen_ai.agent.name"] == "Fake Agent"
    assert attrs["otel_a2a.card.etag.changed"] is False
    assert "a2a.protocol.version" not in attrs and "otel_a2a.binding" not in attrs


def test_get_task_is_an_authoritative_observation(otel: Harness) -> None:
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        response = agent.rpc(client, "GetTask", {"id": "t1"})
    assert response.json()["result"]["status"]["state"] == "TASK_STATE_WORKING"
    attrs = dict(otel.span("GetTask").attributes or {})
    assert attrs["a2a.task.id"] == "t1"
    assert attrs["a2a.task.state"] == "TASK_STATE_WORKING"
    assert "otel_a2a.task.state.raw" not in attrs  # the wire said exactly a2a.task.state
    assert attrs["otel_a2a.observation.authoritative"] is True
    assert attrs["a2a.protocol.version"] == "1.0"
    assert attrs["otel_a2a.binding"] == "JSONRPC"
    assert "otel_a2a.jsonrpc.method" not in attrs  # v1.0's method is a2a.method.name
    assert attrs["otel_a2a.card.etag"] == 'W/"v1"'
    assert not any("secret" in str(v) for v in attrs.values())


def test_follow_up_without_observation_is_no_observation(otel: Harness) -> None:
    agent = FakeAgent(states={"t9": "TASK_STATE_WORKING"})
    with agent.client() as client:
        agent.rpc(
            client,
            "SendMessage",
            {"message": {"taskId": "t9", "messageId": "m", "role": "ROLE_USER", "parts": []}},
        )
    span = otel.span("SendMessage")
    assert divergences(span) == ["no_observation"]
    assert (span.attributes or {})["otel_a2a.liveness.decision"] is True
    assert otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="no_observation") == 1
    assert otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="divergent") == 1
    # the event is also a log record, in the span's trace context; the reply (the task
    # working: the agent took the follow-up) then refutes it, on the same span
    record, resolution = [d.log_record for d in otel.logs.get_finished_logs()]
    assert resolved(span) == [("no_observation", "refuted")]
    assert resolution.event_name == "otel_a2a.divergence.resolved"
    assert (resolution.severity_text, resolution.body) == (
        "INFO",
        "A2A divergence refuted: no_observation",
    )
    assert (resolution.trace_id, resolution.span_id) == (record.trace_id, record.span_id)
    attrs = dict(record.attributes or {})
    assert record.event_name == "otel_a2a.divergence"
    assert (attrs["otel_a2a.divergence.reason"], attrs["a2a.task.id"]) == ("no_observation", "t9")
    assert (attrs["a2a.method.name"], attrs["otel_a2a.card.heartbeat_interval"]) == (
        "SendMessage",
        30.0,
    )
    assert (record.severity_text, record.body) == ("WARN", "A2A divergence: no_observation")
    assert span.context is not None
    assert (record.trace_id, record.span_id) == (span.context.trace_id, span.context.span_id)


def test_heartbeat_gap_then_authoritative_after_poll(otel: Harness, clock: Clock) -> None:
    agent = FakeAgent(heartbeat=5, states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
        clock.advance(6)
        agent.rpc(client, "CancelTask", {"id": "t1"})
        agent.rpc(client, "GetTask", {"id": "t1"})
        clock.advance(1)
        agent.rpc(client, "CancelTask", {"id": "t1"})
    cancels = otel.spans("CancelTask")
    assert [divergences(s) for s in cancels] == [["heartbeat_gap"], []]
    event = next(e for e in cancels[0].events if e.name == "otel_a2a.divergence")
    assert event.attributes is not None
    assert event.attributes["otel_a2a.observation.age"] == pytest.approx(6)
    assert event.attributes["otel_a2a.card.heartbeat_interval"] == 5
    assert event.attributes["a2a.task.state"] == "TASK_STATE_WORKING"
    assert (
        otel.total("otel_a2a.liveness.decisions", otel_a2a__decision__outcome="authoritative") == 1
    )


def test_etag_change_wins_over_gap(otel: Harness, clock: Clock) -> None:
    agent = FakeAgent(heartbeat=5, states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
        agent.etag = 'W/"v2"'
        client.get("/.well-known/agent-card.json")
        clock.advance(60)
        agent.rpc(client, "CancelTask", {"id": "t1"})
    cards = otel.spans("GetAgentCard")
    assert (cards[1].attributes or {})["otel_a2a.card.etag.changed"] is True
    assert divergences(otel.span("CancelTask")) == ["etag_changed"]
    assert otel.total("otel_a2a.card.etag.changes") == 1


def test_304_keeps_the_etag(otel: Harness) -> None:
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
        revalidated = client.get(
            "/.well-known/agent-card.json", headers={"If-None-Match": agent.etag}
        )
        assert revalidated.status_code == 304
        agent.rpc(client, "CancelTask", {"id": "t1"})
    assert divergences(otel.span("CancelTask")) == []


def test_terminal_state_is_exempt_from_the_gap(otel: Harness, clock: Clock) -> None:
    agent = FakeAgent(heartbeat=5, states={"t1": "TASK_STATE_FAILED"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
        clock.advance(600)
        agent.rpc(
            client,
            "SendMessage",
            {"message": {"taskId": "t1", "messageId": "m", "role": "ROLE_USER", "parts": []}},
        )
    span = otel.span("SendMessage")
    assert divergences(span) == ["terminal_state"]
    # answered with the task still failed, no error: the agent did not take the follow-up
    assert resolved(span) == [("terminal_state", "confirmed")]
    assert otel.points("otel_a2a.divergence.resolutions") == [
        (
            {
                "otel_a2a.divergence.reason": "terminal_state",
                "otel_a2a.divergence.outcome": "confirmed",
            },
            1,
        )
    ]


@pytest.mark.parametrize(
    ("spelling", "reason"),
    [
        ("Working", "non_canonical_state"),
        ("working", "non_canonical_state"),
        ("TASK_STATE_CANCELLED", "non_canonical_state"),
        ("paused", "unknown_state"),
    ],
)
def test_observation_side_reasons(otel: Harness, spelling: str, reason: str) -> None:
    agent = FakeAgent(states={"t1": spelling})
    with agent.client() as client:
        agent.rpc(client, "GetTask", {"id": "t1"})
    span = otel.span("GetTask")
    assert divergences(span) == [reason]
    assert (
        otel.total(
            "otel_a2a.divergence", otel_a2a__divergence__reason=reason, a2a__method__name="GetTask"
        )
        == 1
    )


def test_terminal_regression_and_task_lost(otel: Harness) -> None:
    agent = FakeAgent(states={"t1": "TASK_STATE_COMPLETED", "t2": "TASK_STATE_WORKING"})
    with agent.client() as client:
        agent.rpc(client, "GetTask", {"id": "t1"})
        agent.states["t1"] = "TASK_STATE_WORKING"
        agent.rpc(client, "GetTask", {"id": "t1"})
        agent.rpc(client, "GetTask", {"id": "t2"})
        del agent.states["t2"]
        agent.rpc(client, "GetTask", {"id": "t2"})
    reasons = [divergences(s) for s in otel.spans("GetTask")]
    assert reasons == [[], ["terminal_regression"], [], ["task_lost"]]


def test_redundant_get_task_is_counted(otel: Harness, clock: Clock) -> None:
    agent = FakeAgent(heartbeat=10, states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
        clock.advance(1)
        agent.rpc(client, "GetTask", {"id": "t1"})  # fresh: redundant
        clock.advance(20)
        agent.rpc(client, "GetTask", {"id": "t1"})  # stale: needed
    assert otel.total("otel_a2a.task.get.redundant") == 1


def test_streamed_updates_and_abnormal_end(otel: Harness) -> None:
    frames = [
        b'data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"s1","contextId":"c",'
        b'"status":{"state":"TASK_STATE_SUBMITTED"}}}}\n\n',
        b": ping\n\n",
        b'data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"s1",'
        b'"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}\n\n',
    ]
    # split every frame across chunk boundaries: the parser must not care
    agent = FakeAgent(sse=[b"".join(frames)[i : i + 7] for i in range(0, len(b"".join(frames)), 7)])
    with agent.client() as client:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
        }
        with client.stream("POST", "/a2a", json=body, headers={"A2A-Version": "1.0"}) as r:
            received = b"".join(r.iter_raw())
    assert received == b"".join(frames)
    span = otel.span("SendStreamingMessage")
    names = [e.name for e in span.events]
    assert names == ["otel_a2a.task.status", "otel_a2a.stream.abnormal_end"]
    attrs = dict(span.attributes or {})
    assert attrs["a2a.task.id"] == "s1"
    assert attrs["a2a.task.state"] == "TASK_STATE_WORKING"
    assert otel.total("otel_a2a.task.tracked", otel_a2a__task__state__class="active") == 1


def test_a_stream_keeps_at_most_16_tasks_alive(
    otel: Harness, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer naming a new task on every frame must not make each frame cost one ledger update
    per task seen so far (quadratic: 20,000 frames took minutes)."""
    from otel_a2a.instrumentation import runtime

    rt = runtime.current()
    assert rt is not None
    touches: list[str] = []
    real_touch = rt.detector.on_stream_frame

    def counting(task_id: str, now: float) -> bool:
        touches.append(task_id)
        return real_touch(task_id, now)

    monkeypatch.setattr(rt.detector, "on_stream_frame", counting)
    n = 200

    def chunks() -> Iterator[bytes]:
        for i in range(n):
            yield (
                b'data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t%d",'
                b'"contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}\n\n' % i
            )
        clock.advance(5)
        yield b": ping\n\n"

    agent = FakeAgent(sse=chunks())  # type: ignore[arg-type]
    with agent.client() as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "t0"}}
        with client.stream("POST", "/a2a", json=body, headers={"A2A-Version": "1.0"}) as r:
            r.read()
    ledger = rt.detector.ledger
    assert all(ledger.get(f"t{i}") is not None for i in range(n))  # every report observed
    seen_at = {f"t{i}": getattr(ledger.get(f"t{i}"), "at", None) for i in range(n)}
    refreshed = {task for task, at in seen_at.items() if at == clock.now}
    assert refreshed == {f"t{i}" for i in range(16)}  # the ping keeps the first 16 alive
    assert len(touches) <= 16 * (n + 1), len(touches)  # at most 16 per chunk


def test_sampled_out_spans_still_detect() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    from tests.instrumentation.conftest import make_harness

    harness, instrumentor = make_harness(ParentBased(ALWAYS_OFF))
    try:
        agent = FakeAgent(states={"t1": "Working"})
        with agent.client() as client:
            agent.rpc(client, "GetTask", {"id": "t1"})
            agent.rpc(client, "CancelTask", {"id": "t1"})
        assert harness.spans() == []
        assert (
            harness.total("otel_a2a.divergence", otel_a2a__divergence__reason="non_canonical_state")
            == 2
        )
        assert (
            harness.total(
                "otel_a2a.liveness.decisions", otel_a2a__decision__outcome="authoritative"
            )
            == 1
        )
    finally:
        instrumentor.uninstrument()


def test_non_a2a_traffic_is_untouched(otel: Harness) -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={"ok": True}))
    with httpx.Client(transport=transport) as client:
        assert client.get("http://other.test/api/items").json() == {"ok": True}
        assert client.post("http://other.test/rpc", json={"jsonrpc": "2.0", "method": "x"}).json()
    assert otel.spans() == []


def test_uninstrument_restores_send(otel: Harness) -> None:
    from otel_a2a.instrumentation import A2AInstrumentor

    assert hasattr(httpx.Client.send, "__wrapped__")
    A2AInstrumentor().uninstrument()
    assert not hasattr(httpx.Client.send, "__wrapped__")
    assert not hasattr(httpx.AsyncClient.send, "__wrapped__")
    A2AInstrumentor().instrument(tracer_provider=otel.tracer_provider)


def test_streaming_a_response_httpx_already_read(otel: Harness) -> None:
    """``MockTransport`` bodies built from bytes are read at creation: streaming them never
    touches the stream again, so the exchange must observe the body httpx holds."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    with agent.client() as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
        with client.stream("POST", "/a2a", json=body, headers={"A2A-Version": "1.0"}) as r:
            assert r.is_stream_consumed
            data = b"".join(r.iter_bytes())
    assert b"TASK_STATE_WORKING" in data
    attrs = dict(otel.span("GetTask").attributes or {})
    assert attrs["a2a.task.state"] == "TASK_STATE_WORKING"


def test_body_over_the_limit_is_observed_from_its_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.instrumentation.conftest import make_harness

    monkeypatch.setenv("OTEL_A2A_MAX_BODY_BYTES", "4096")
    harness, instrumentor = make_harness()
    try:
        history = [
            {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": "x" * 100}]}
            for i in range(200)
        ]
        task = {
            "id": "big",
            "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"},
            "history": history,
        }
        payload = json.dumps({"jsonrpc": "2.0", "id": 1, "result": task}).encode()
        assert len(payload) > 4 * 4096
        chunks = [payload[i : i + 1000] for i in range(0, len(payload), 1000)]

        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(
                200, headers={"Content-Type": "application/json"}, content=iter(chunks)
            )

        with httpx.Client(transport=httpx.MockTransport(handler)) as client:
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "big"}}
            with client.stream(
                "POST", "http://a.test/a2a", json=body, headers={"A2A-Version": "1.0"}
            ) as r:
                assert b"".join(r.iter_bytes()) == payload
        attrs = dict(harness.span("GetTask").attributes or {})
        assert attrs["a2a.task.state"] == "TASK_STATE_WORKING"
    finally:
        instrumentor.uninstrument()


def test_reinstrumenting_on_the_same_meter_provider_reports_the_new_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A meter keeps the first callbacks of an instrument name: the gauges and observable
    counters must still follow the runtime in force, and report nothing between runs."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    from otel_a2a.instrumentation import A2AInstrumentor
    from tests.instrumentation.conftest import Harness as H

    monkeypatch.setenv("OTEL_A2A_MAX_TRACKED_TASKS", "2")
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    harness = H(None, reader, TracerProvider())  # type: ignore[arg-type]
    instrumentor = A2AInstrumentor()

    def run(task_ids: list[str]) -> None:
        agent = FakeAgent(states={t: "TASK_STATE_WORKING" for t in task_ids})
        with agent.client() as client:
            for task_id in task_ids:
                agent.rpc(client, "GetTask", {"id": task_id})
                agent.rpc(client, "GetTask", {"id": task_id})  # fresh: redundant

    instrumentor.instrument(tracer_provider=harness.tracer_provider, meter_provider=meter_provider)
    run(["a1"])
    assert harness.total("otel_a2a.task.tracked") == 1
    instrumentor.uninstrument()
    assert harness.total("otel_a2a.task.tracked") == 0  # nothing reported between runs
    instrumentor.instrument(tracer_provider=harness.tracer_provider, meter_provider=meter_provider)
    try:
        run(["b1", "b2", "b3"])
        assert harness.total("otel_a2a.task.tracked") == 2  # the new ledger, bounded at 2
        assert harness.total("otel_a2a.task.evicted") == 1
        assert harness.total("otel_a2a.task.get.redundant") == 3
    finally:
        instrumentor.uninstrument()


def test_extended_card_is_recorded_with_its_own_etag(otel: Harness) -> None:
    """Its etag is the JCS hash of its ``result``; the invariant's etag does not move."""
    agent = FakeAgent()
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        extended = agent.rpc(client, "GetExtendedAgentCard", {}).json()["result"]
    attrs = dict(otel.span("GetExtendedAgentCard").attributes or {})
    assert attrs["otel_a2a.card.etag"] == "sha256:" + hashlib.sha256(jcs(extended)).hexdigest()
    assert attrs["gen_ai.agent.name"] == "Fake Agent (extended)"
    assert attrs["gen_ai.agent.version"] == "1.0.1"
    assert attrs["otel_a2a.card.heartbeat_interval"] == 30
    with liveness_decision("t-none", agent="http://agent.test/a2a"):
        pass
    decision = dict(otel.span("liveness_decision").attributes or {})
    assert decision["otel_a2a.card.etag"] == agent.etag  # the well-known card's, still


class _StrictProcessor(SpanProcessor):
    """An application's span processor that rejects every span it sees end."""

    def on_end(self, span: ReadableSpan) -> None:
        raise KeyError("tenant")


def test_an_application_processor_that_raises_never_reaches_the_application(
    otel: Harness,
) -> None:
    otel.tracer_provider.add_span_processor(_StrictProcessor())
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with agent.client() as client:
        assert agent.rpc(client, "GetTask", {"id": "t1"}).json()["result"]["id"] == "t1"
        with client.stream("POST", "/a2a", json=request, headers=V1) as r:
            assert json.loads(b"".join(r.iter_bytes()))["result"]["id"] == "t1"
        r = client.send(client.build_request("POST", "/a2a", json=request, headers=V1), stream=True)
        r.close()  # unread
    with (
        httpx.Client(transport=httpx.MockTransport(down)) as client,
        pytest.raises(httpx.ConnectError, match="connection refused"),
    ):
        client.post("http://agent.test/a2a", json=request, headers=V1)
    assert len(otel.spans("GetTask")) == 4  # ended all the same
    assert otel.total("otel_a2a.instrumentation.errors", error__type="KeyError") == 4


def test_error_responses_name_their_error_type(otel: Harness) -> None:
    """``error.type``: over HTTP+JSON the A2A reason when known; else as the RPC and HTTP
    conventions spell it: the JSON-RPC code, else the HTTP status, else ``_OTHER``;
    ``rpc.response.status_code`` only from a JSON-RPC error."""
    agent = FakeAgent()
    with agent.client() as client:
        agent.rpc(client, "GetTask", {"id": "missing"})  # -32001 TaskNotFound
    html = httpx.MockTransport(lambda r: httpx.Response(500, text="<html>oops</html>"))
    with httpx.Client(transport=html, base_url="http://agent.test") as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
        assert client.post("/a2a", json=body, headers=V1).status_code == 500
    found, failed = otel.spans("GetTask")
    assert found.attributes is not None and failed.attributes is not None
    assert found.attributes["rpc.response.status_code"] == "-32001"
    assert found.attributes["error.type"] == "-32001"
    assert "rpc.response.status_code" not in failed.attributes  # not the HTTP status
    assert failed.attributes["http.response.status_code"] == 500
    assert failed.attributes["error.type"] == "500"
    assert failed.status.description == "HTTP 500"

    # HTTP+JSON: the status as error.type (the convention's rule), the A2A reason beside it
    # when the body carries one (the status is 400 for most)
    info = {"reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org"}
    for error in ({"code": 400, "status": "FAILED_PRECONDITION"}, {"code": 400, "details": [info]}):
        rest = httpx.MockTransport(lambda r, e=error: httpx.Response(400, json={"error": e}))
        with httpx.Client(transport=rest, base_url="http://agent.test") as client:
            client.post("/a2a/rest/tasks/t1:cancel", headers={"A2A-Version": "1.0"})
    plain, reasoned = otel.spans("CancelTask")
    assert dict(plain.attributes or {})["error.type"] == "400"
    assert dict(reasoned.attributes or {})["error.type"] == "400"
    assert "otel_a2a.error.reason" not in dict(plain.attributes or {})
    assert dict(reasoned.attributes or {})["otel_a2a.error.reason"] == "TASK_NOT_CANCELABLE"
    assert "rpc.response.status_code" not in dict(reasoned.attributes or {})

    stream = FakeAgent(sse=[b"event: error\ndata: {}\n\n"])
    with stream.client() as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "t1"}}
        with client.stream("POST", "/a2a", json=body, headers=V1) as r:
            r.read()
    errored = otel.span("SubscribeToTask")
    assert errored.attributes is not None
    assert errored.attributes["error.type"] == "_OTHER"
    assert errored.status.description == "SSE error event"


def test_the_operation_decides_how_a_body_is_read_not_its_content_type(otel: Harness) -> None:
    """A JSON Task labelled ``text/event-stream`` on ``GetTask`` is a Task (the SDK client reads
    it as one); an SSE body there is nothing the client accepts, so nothing is observed."""
    task = {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
    json_body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": task}).encode()
    sse_body = b"data: " + json_body + b"\n\n"
    sse_type = {"Content-Type": "text/event-stream"}
    for body in (json_body, sse_body):
        transport = httpx.MockTransport(
            lambda r, b=body: httpx.Response(200, headers=sse_type, content=b)
        )
        with httpx.Client(transport=transport, base_url="http://agent.test") as client:
            request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
            client.post("/a2a", json=request, headers=V1)
    as_json, as_sse = otel.spans("GetTask")
    assert dict(as_json.attributes or {})["a2a.task.state"] == "TASK_STATE_WORKING"
    assert "a2a.task.state" not in dict(as_sse.attributes or {})
    assert [e.name for e in (*as_json.events, *as_sse.events)] == []


def test_agents_sharing_an_origin_keep_their_own_etags(otel: Harness) -> None:
    def gateway(request: httpx.Request) -> httpx.Response:
        name = request.url.path.split("/")[2]  # /agents/{name}/...
        if request.url.path.endswith("agent-card.json"):
            card = {"name": name, "supportedInterfaces": [], "capabilities": {}}
            return httpx.Response(200, json=card, headers={"ETag": f'"{name}-1"'})
        task = {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": task})

    transport = httpx.MockTransport(gateway)
    with httpx.Client(transport=transport, base_url="http://gw.test") as client:
        client.get("/agents/a/.well-known/agent-card.json")
        client.get("/agents/b/.well-known/agent-card.json")
        client.get("/agents/a/.well-known/agent-card.json")
        request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
        client.post("/agents/a/rpc", json=request, headers=V1)
    cards = otel.spans("GetAgentCard")
    assert [dict(s.attributes or {})["otel_a2a.card.etag.changed"] for s in cards] == [False] * 3
    attrs = dict(otel.span("GetTask").attributes or {})
    assert (attrs["otel_a2a.agent.url"], attrs["gen_ai.agent.name"]) == (
        "http://gw.test/agents/a",
        "a",
    )
    assert attrs["otel_a2a.card.etag"] == '"a-1"'
    assert otel.total("otel_a2a.card.etag.changes") == 0


def test_a_version_given_as_a_query_parameter_is_the_negotiated_version(otel: Harness) -> None:
    """Spec §3.6.1 lets a client send ``?A2A-Version=1.0`` instead of the header: read as
    0.3, every ``TASK_STATE_*`` of the reply was a false ``non_canonical_state``. The query
    is read for that only: the span's URL never carries it."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
    with agent.client() as client:
        client.post("/a2a", params={"A2A-Version": "1.0", "token": "s3cret"}, json=body)
    span = otel.span("GetTask")
    attrs = dict(span.attributes or {})
    assert attrs["a2a.protocol.version"] == "1.0"
    assert divergences(span) == []
    assert not any("s3cret" in str(v) or "?" in str(v) for v in attrs.values())


def test_an_unspecified_state_omitted_by_protojson_is_unknown_not_a_divergence(
    otel: Harness,
) -> None:
    """Both SDKs send ``TASK_STATE_UNSPECIFIED`` as ``"status": {}`` (ProtoJSON omits the
    default): recorded ``unknown``, no divergence, and it authorises no decision."""
    task = {"id": "t1", "contextId": "c1", "status": {}}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": task})

    with httpx.Client(transport=httpx.MockTransport(handler), base_url=BASE) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
        client.post("/a2a", json=body, headers=V1)
        with liveness_decision("t1", agent=BASE):
            pass
    span = otel.span("GetTask")
    attrs = dict(span.attributes or {})
    assert (attrs["a2a.task.state"], attrs["otel_a2a.task.state.raw"]) == (
        "TASK_STATE_UNSPECIFIED",
        "",
    )
    assert divergences(span) == []
    assert divergences(otel.span("liveness_decision")) == ["no_observation"]
    assert otel.total("otel_a2a.divergence", otel_a2a__divergence__reason="unknown_state") == 0


@pytest.mark.parametrize(
    ("states", "abnormal"),
    [
        (["TASK_STATE_INPUT_REQUIRED"], False),  # paused for input: a normal place to stop
        (["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING"], True),  # resumed, then cut
        (["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], False),
    ],
)
def test_a_stream_that_resumes_after_an_interruption_and_is_cut_ends_abnormally(
    otel: Harness, states: list[str], abnormal: bool
) -> None:
    """Only the last state counts: a task that asked for input, then went back to work and
    lost its stream, ended abnormally although the stream once held an interrupted state."""
    frames = [
        b'data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"s1","contextId":"c",'
        b'"status":{"state":"' + state.encode() + b'"}}}}\n\n'
        for state in states
    ]
    agent = FakeAgent(sse=frames)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "s1"}}
    with (
        agent.client() as client,
        client.stream("POST", "/a2a", json=body, headers={"A2A-Version": "1.0"}) as r,
    ):
        r.read()
    names = [e.name for e in otel.span("SubscribeToTask").events]
    assert names.count("otel_a2a.task.status") == len(states)
    assert ("otel_a2a.stream.abnormal_end" in names) is abnormal


def test_a_card_fetched_later_claims_the_urls_its_interfaces_name(otel: Harness) -> None:
    """The URL -> agent lookup is memoised; a card fetch must drop what was memoised before
    it, or requests to its interface stay attributed to a bare address (no name, no etag)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("agent-card.json"):
            card = {
                "name": "Billing",
                "supportedInterfaces": [
                    {"url": "http://rpc.test/a2a", "protocolBinding": "JSONRPC"}
                ],
                "capabilities": {},
            }
            return httpx.Response(200, json=card, headers={"ETag": '"b-1"'})
        task = {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": task})

    request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}}
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        client.post("http://rpc.test/a2a", json=request, headers=V1)
        client.get("http://cards.test/.well-known/agent-card.json")
        client.post("http://rpc.test/a2a", json=request, headers=V1)
    before, after = (dict(s.attributes or {}) for s in otel.spans("GetTask"))
    assert "gen_ai.agent.name" not in before
    assert (after["gen_ai.agent.name"], after["otel_a2a.agent.url"]) == (
        "Billing",
        "http://cards.test",
    )
    assert after["otel_a2a.card.etag"] == '"b-1"'


def test_the_stale_gauge_counts_silent_non_terminal_tasks_per_agent(
    otel: Harness, clock: Clock
) -> None:
    """``otel_a2a.task.stale`` shows a silent divergence with no decision taken."""
    agent = FakeAgent(
        heartbeat=5, states={"t1": "TASK_STATE_WORKING", "t2": "TASK_STATE_COMPLETED"}
    )
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "GetTask", {"id": "t1"})
        agent.rpc(client, "GetTask", {"id": "t2"})
        assert otel.total("otel_a2a.task.stale", otel_a2a__agent__name="Fake Agent") == 0
        clock.advance(6)  # past the heartbeat: t1 is stale, t2 has ended (never stale)
        assert otel.total("otel_a2a.task.stale", otel_a2a__agent__name="Fake Agent") == 1
        agent.rpc(client, "GetTask", {"id": "t1"})  # observed again
        assert otel.total("otel_a2a.task.stale", otel_a2a__agent__name="Fake Agent") == 0


def test_the_conventions_request_card_and_server_attributes(otel: Harness) -> None:
    """A2A convention: the message id, the tasks it references, the tenant, the card's name,
    version and description, and where the request went, on every binding's span."""
    agent = FakeAgent(states={"t1": "TASK_STATE_WORKING"})
    message = {
        "taskId": "t1",
        "messageId": "m-1",
        "referenceTaskIds": ["t0", 7, "", *(f"r{i}" for i in range(20))],
        "role": "ROLE_USER",
        "parts": [],
    }
    with agent.client() as client:
        client.get("/.well-known/agent-card.json")
        agent.rpc(client, "SendMessage", {"tenant": "acme", "message": message})
        agent.rpc(client, "GetTask", {"id": "t1"})
    sent = otel.span("SendMessage")
    attrs = dict(sent.attributes or {})
    assert attrs["a2a.message.id"] == "m-1"
    # the strings among the first 16
    assert attrs["a2a.message.reference_task_ids"] == ("t0", *(f"r{i}" for i in range(13)))
    assert attrs["a2a.tenant"] == "acme"
    attrs = dict(otel.span("GetTask").attributes or {})
    assert "a2a.message.id" not in attrs and "a2a.tenant" not in attrs
    host = httpx.URL(agent.base)
    for span in (sent, otel.span("GetTask")):
        attrs = dict(span.attributes or {})
        assert attrs["gen_ai.agent.name"] == agent.name
        assert attrs["gen_ai.agent.version"] == agent.version
        assert attrs["gen_ai.agent.description"] == "a fake A2A agent for otel-a2a's tests"
        assert attrs["server.address"] == host.host
        assert attrs["server.port"] == (host.port or {"http": 80, "https": 443}[host.scheme])
