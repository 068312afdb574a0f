"""No credential reaches telemetry, whatever the URL looks like.

A secret is planted in every place an application or a peer can put one: the userinfo, query
and fragment of agent hints (``liveness_decision(agent=...)``, ``otel_a2a.agent.url`` on foreign
decision and observation spans; well-formed and malformed), of request URLs sent through the
instrumented httpx and httpx2 clients to real loopback agents (the a2a-sdk peer and the
planted agent of ``tests/support/planted.py``), card fields (interface, provider and
documentation URLs, descriptions, extensions), request and response headers, message contents.
Everything exported is then serialised as the OTLP exporters send it (spans with their events,
links and resource; log records with body and attributes; every metric data point) and
grepped.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_a2a import liveness_decision
from otel_a2a.instrumentation import DivergenceSpanProcessor
from otel_a2a.protocol.urls import INVALID_URL
from tests.instrumentation.conftest import Harness
from tests.support.planted import (
    CARD_PATH,
    ETAG,
    RPC_PATH,
    SECRET,
    TASK_ID,
    PlantedAgent,
    planted_agent,
)

V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
PLANTED_REQUEST_HEADERS = {
    "Authorization": f"Bearer {SECRET}",
    "Cookie": f"sid={SECRET}",
    "X-API-Key": SECRET,
    "X-Custom-Token": SECRET,
}


def well_formed_hints(hostport: str) -> list[str]:
    return [
        f"http://alice:{SECRET}@{hostport}{RPC_PATH}?token={SECRET}#{SECRET}",
        f"HTTP://alice:{SECRET}@{hostport}/elsewhere/?token={SECRET}",
        f"http://{hostport}{RPC_PATH}?{SECRET}",
    ]


def malformed_hints(hostport: str) -> list[str]:
    host = hostport.split(":", 1)[0]
    return [
        f"http://alice:{SECRET}@{host}:99999{RPC_PATH}",  # port out of range
        f"http://alice:{SECRET}@[::1{RPC_PATH}",  # unclosed IPv6 bracket
        f"alice:{SECRET}@{hostport}{RPC_PATH}",  # no scheme
        f"//alice:{SECRET}@{hostport}{RPC_PATH}",  # no scheme, network-path reference
        f"http://alice:{SECRET}/x@{hostport}{RPC_PATH}",  # a '/' in the password
        f"http://alice:{SECRET}@",  # no host
        SECRET,  # no URL at all
    ]


def _message(text: str, task_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"token": SECRET},
    }
    if task_id is not None:
        message["taskId"] = task_id
    return message


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _with_credentials(base: str, path: str) -> str:
    scheme, hostport = base.split("://", 1)
    return f"{scheme}://alice:{SECRET}@{hostport}{path}?token={SECRET}#{SECRET}"


def drive_planted(http: httpx.Client, agent: PlantedAgent) -> None:
    """Card fetch and revalidation, SendMessage, GetTask and a follow-up (an implicit
    decision) against the planted agent, every URL and header carrying the secret."""
    card_url = _with_credentials(agent.base, CARD_PATH)
    http.get(card_url, headers=PLANTED_REQUEST_HEADERS).raise_for_status()
    assert http.get(card_url, headers={"If-None-Match": ETAG}).status_code == 304
    rpc_url = _with_credentials(agent.base, RPC_PATH)
    sent = http.post(rpc_url, json=_rpc("SendMessage", {"message": _message(SECRET)}), headers=V1)
    assert sent.json()["result"]["task"]["id"] == TASK_ID
    query_only = f"{agent.base}{RPC_PATH}?token={SECRET}#{SECRET}"
    headers = {**V1, **PLANTED_REQUEST_HEADERS}
    http.post(query_only, json=_rpc("GetTask", {"id": TASK_ID}), headers=headers)
    follow_up = _rpc("SendMessage", {"message": _message(SECRET, TASK_ID)})
    http.post(query_only, json=follow_up, headers=headers).raise_for_status()


def drive_sdk_peer(http: httpx.Client, base: str) -> None:
    """The a2a-sdk peer: its card, a task it completes (echoing the secret back as an
    artifact), the task read over HTTP+JSON, a stream, and a follow-up on the ended task."""
    http.get(_with_credentials(base, CARD_PATH), headers=PLANTED_REQUEST_HEADERS)
    rpc_url = _with_credentials(base, "/a2a/jsonrpc")
    reply = http.post(
        rpc_url, json=_rpc("SendMessage", {"message": _message(f"echo {SECRET}")}), headers=V1
    ).json()
    task = reply["result"]["task"]
    assert SECRET in json.dumps(task)  # the peer echoed it: it is in the response body
    rest = f"{base}/a2a/rest/tasks/{task['id']}?historyLength=5&token={SECRET}#{SECRET}"
    http.get(rest, headers={**V1, **PLANTED_REQUEST_HEADERS}).raise_for_status()
    stream = _rpc("SendStreamingMessage", {"message": _message(f"echo {SECRET}")})
    with http.stream("POST", rpc_url, json=stream, headers=V1) as response:
        assert SECRET in response.read().decode()
    follow_up = _rpc("SendMessage", {"message": _message(SECRET, task["id"])})
    http.post(rpc_url, json=follow_up, headers={**V1, **PLANTED_REQUEST_HEADERS})


class ForeignSpans:
    """An application's own tracer provider, with otel-a2a's span processor: the spans it
    starts carry the secret because the application put it there; only what otel-a2a adds to
    them (events, attributes) is otel-a2a's to keep clean."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(DivergenceSpanProcessor())
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("the-application")
        self.given: dict[str, Mapping[str, Any]] = {}

    def span(self, name: str, attributes: Mapping[str, Any]) -> None:
        self.given[name] = attributes
        with self.tracer.start_as_current_span(name, attributes=dict(attributes)):
            pass

    def added_by_otel_a2a(self) -> str:
        lines = []
        for span in self.exporter.get_finished_spans():
            given = self.given.get(span.name, {})
            attrs = {k: v for k, v in (span.attributes or {}).items() if given.get(k) != v}
            events = [(e.name, dict(e.attributes or {})) for e in span.events]
            lines.append(repr((span.name, attrs, events, span.status.description)))
        return "\n".join(lines)


def judge_hints(hints: list[str], foreign: ForeignSpans) -> None:
    """Every hint as ``liveness_decision(agent=...)`` on a task seen and one never seen, and as
    ``otel_a2a.agent.url`` of a foreign decision span and of foreign observations (one canonical,
    one in a non-canonical spelling: an observation-side divergence)."""
    for i, hint in enumerate(hints):
        with liveness_decision(TASK_ID, agent=hint):
            pass
        with liveness_decision(f"t-unseen-{i}", agent=hint):
            pass
        foreign.span(
            f"app decides {i}",
            {
                "otel_a2a.liveness.decision": True,
                "a2a.task.id": TASK_ID,
                "otel_a2a.agent.url": hint,
            },
        )
        foreign.span(
            f"app observes {i}",
            {
                "a2a.task.id": f"t-foreign-{i}",
                "a2a.task.state": "TASK_STATE_WORKING",
                "otel_a2a.agent.url": hint,
            },
        )
        foreign.span(
            f"app observes oddly {i}",
            {
                "a2a.task.id": f"t-odd-{i}",
                "otel_a2a.task.state.raw": "Working",
                "a2a.protocol.version": "1.0",
                "otel_a2a.binding": "JSONRPC",
                "otel_a2a.agent.url": hint,
            },
        )
        with liveness_decision(f"t-foreign-{i}"):  # judged where the foreign span saw it
            pass


def exported(otel: Harness) -> str:
    """Everything the harness's exporters received, as the OTLP exporters encode it."""
    spans: list[ReadableSpan] = list(otel.exporter.get_finished_spans())
    metrics = otel.reader.get_metrics_data()
    assert metrics is not None
    return "\n".join(
        (
            str(encode_spans(spans)),
            str(encode_logs(list(otel.logs.get_finished_logs()))),
            str(encode_metrics(metrics)),
        )
    )


def where(text: str) -> list[str]:
    """The first few places the secret appears in ``text``, with what precedes it."""
    found, start = [], text.find(SECRET)
    while start >= 0 and len(found) < 10:
        found.append(text[max(0, start - 160) : start + 40])
        start = text.find(SECRET, start + 1)
    return found


@pytest.fixture
def agent() -> Iterator[PlantedAgent]:
    with planted_agent() as planted:
        yield planted


def test_no_planted_secret_reaches_any_span_log_or_metric(
    otel: Harness, http_lib: ModuleType, agent: PlantedAgent, python_peer: str
) -> None:
    foreign = ForeignSpans()
    hostport = agent.base.split("://", 1)[1]
    with http_lib.Client(timeout=20) as http:
        drive_planted(http, agent)
        drive_sdk_peer(http, python_peer)
    judge_hints(well_formed_hints(hostport) + malformed_hints(hostport), foreign)

    text = exported(otel) + "\n" + foreign.added_by_otel_a2a()
    leaks = where(text)
    assert not leaks, "\n---\n".join(leaks)

    # the secret was planted and the telemetry is there: a clean export is not an empty one
    assert agent.saw_secret()
    assert SECRET in repr(foreign.given)
    ops = {dict(s.attributes or {}).get("a2a.method.name") for s in otel.spans()}
    assert {"GetAgentCard", "SendMessage", "GetTask", "SendStreamingMessage"} <= ops
    urls = {dict(s.attributes or {}).get("otel_a2a.agent.url") for s in otel.spans()}
    assert agent.base in urls and python_peer in urls
    assert INVALID_URL in urls  # what a malformed hint is recorded as
    assert len(otel.logs.get_finished_logs()) >= len(malformed_hints(hostport))
    assert otel.total("otel_a2a.divergence", otel_a2a__agent__name=INVALID_URL) > 0


@pytest.mark.parametrize("hint", malformed_hints("127.0.0.1:8080"))
def test_a_malformed_hint_is_recorded_as_invalid(otel: Harness, hint: str) -> None:
    with liveness_decision("t-never-seen", agent=hint):
        pass
    span = otel.span("liveness_decision")
    assert dict(span.attributes or {})["otel_a2a.agent.url"] == INVALID_URL
    (record,) = otel.logs.get_finished_logs()
    assert dict(record.log_record.attributes or {})["otel_a2a.agent.name"] == INVALID_URL
    assert otel.total("otel_a2a.divergence", otel_a2a__agent__name=INVALID_URL) == 1


def test_a_well_formed_hint_keeps_only_its_origin(otel: Harness) -> None:
    with liveness_decision("t-never-seen", agent=f"HTTP://u:{SECRET}@Agent.Test:80/a?k={SECRET}"):
        pass
    span = otel.span("liveness_decision")
    assert dict(span.attributes or {})["otel_a2a.agent.url"] == "http://agent.test"
