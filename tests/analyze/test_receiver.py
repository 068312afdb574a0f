"""The live OTLP/HTTP receiver, in process: JSON, protobuf, gzip, bad input, metric, dump."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_a2a.analyze import Correlator, Finding
from otel_a2a.analyze.receiver import MAX_BODIES_IN_HAND, Detector, Receiver
from otel_a2a.cli import main
from tests.analyze.samples import request, span

GATEWAY = request("gateway", span("t1", "TASK_STATE_FAILED", 0, 10, span_id="cccccccccccccccc"))
ORCHESTRATOR = request(
    "orchestrator",
    span("t1", "TASK_STATE_WORKING", 0, 20, span_id="aaaaaaaaaaaaaaaa", parent="bbbbbbbbbbbbbbbb"),
)


def to_protobuf(doc: dict[str, Any]) -> bytes:
    """OTLP JSON (hex ids) to the binary form an SDK exporter sends (bytes ids)."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    message = ExportTraceServiceRequest()
    ParseDict(doc, message)
    return bytes(message.SerializeToString())


class Running:
    def __init__(self, tmp_path: Path) -> None:
        self.found: list[Finding] = []
        self.dump_path = tmp_path / "dump.jsonl"
        self.dump = open(self.dump_path, "w", encoding="utf-8")  # noqa: SIM115
        self.detector = Detector(Correlator(), self.found.append, dump=self.dump, metrics_port=0)
        self.receiver = Receiver(self.detector, "127.0.0.1", 0, max_body=64 * 1024)
        self.receiver.start()
        self.url = f"http://127.0.0.1:{self.receiver.port}/v1/traces"
        self.client = httpx.Client(timeout=10)

    def post(self, body: bytes, content_type: str, **headers: str) -> httpx.Response:
        return self.client.post(
            self.url, content=body, headers={"Content-Type": content_type, **headers}
        )

    def close(self) -> None:
        self.client.close()
        self.receiver.stop()
        self.detector.close()
        self.dump.close()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    r = Running(tmp_path)
    try:
        yield r
    finally:
        r.close()


def test_json_and_protobuf_requests_are_correlated(running: Running) -> None:
    first = running.post(json.dumps(GATEWAY).encode(), "application/json")
    assert first.status_code == 200 and first.json() == {}
    assert running.found == []
    second = running.post(to_protobuf(ORCHESTRATOR), "application/x-protobuf")
    assert second.status_code == 200
    assert second.headers["content-type"] == "application/x-protobuf" and second.content == b""
    (finding,) = running.found
    assert finding.reason.value == "cross_runtime_conflict"
    assert finding.services == ("gateway", "orchestrator")
    assert finding.b.span_id == "aaaaaaaaaaaaaaaa"  # protobuf ids read back as hex
    metrics = httpx.get(f"http://127.0.0.1:{running.detector.metrics_port}/metrics").text
    lines = [x for x in metrics.splitlines() if x.startswith("a2a_divergence_total{")]
    assert len(lines) == 1, metrics
    assert 'a2a_divergence_reason="cross_runtime_conflict"' in lines[0]
    assert 'a2a_operation="GetTask"' in lines[0] and lines[0].endswith(" 1.0")


def test_operation_label_is_capped(running: Running) -> None:
    """A foreign span names any operation it likes: the metric label takes known ones only."""
    for i, name in enumerate(("A2A GetTask", "A2A order-4711", "A2A order-4712")):
        gateway = request("gateway", span(f"t{i}", "TASK_STATE_FAILED", 0, 10, name=name))
        orchestrator = request(
            "orchestrator",
            span(f"t{i}", "TASK_STATE_WORKING", 0, 20, span_id="aaaaaaaaaaaaaaaa", name=name),
        )
        for doc in (gateway, orchestrator):
            assert running.post(json.dumps(doc).encode(), "application/json").status_code == 200
    assert len(running.found) == 3
    metrics = httpx.get(f"http://127.0.0.1:{running.detector.metrics_port}/metrics").text
    lines = [x for x in metrics.splitlines() if x.startswith("a2a_divergence_total{")]
    labels = sorted(x.split('a2a_operation="', 1)[1].split('"', 1)[0] for x in lines)
    assert labels == ["GetTask", "_OTHER"], metrics
    assert any('a2a_operation="_OTHER"' in x and x.endswith(" 2.0") for x in lines), metrics


def test_gzip_body(running: Running) -> None:
    body = gzip.compress(json.dumps(GATEWAY).encode())
    assert running.post(body, "application/json", **{"Content-Encoding": "gzip"}).status_code == 200
    assert running.detector.correlator.stats.beliefs == 1


def test_bad_requests_are_refused_and_the_receiver_keeps_serving(running: Running) -> None:
    big = b"{" + b" " * (64 * 1024) + b"}"
    bomb = gzip.compress(b" " * (1024 * 1024))
    cases = [
        (running.post(b"{not json", "application/json"), 400),
        (running.post(b"[1, 2]", "application/json"), 400),
        (running.post(b"\xff\xff\xff\xff", "application/x-protobuf"), 400),
        (running.post(b"{}", "text/plain"), 415),
        (running.post(big, "application/json"), 413),
        (running.post(bomb, "application/json", **{"Content-Encoding": "gzip"}), 413),
        (running.post(b"xx", "application/json", **{"Content-Encoding": "gzip"}), 400),
        (running.post(b"{}", "application/json", **{"Content-Encoding": "br"}), 415),
        (running.client.post(running.url.replace("traces", "logs"), content=b"{}"), 404),
        (running.client.get(running.url), 405),
    ]
    assert [r.status_code for r, _ in cases] == [code for _, code in cases]
    assert running.post(b'{"resourceSpans": "odd"}', "application/json").status_code == 200
    assert running.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200
    assert running.detector.requests == 2


def test_dump_is_analyzable_offline(running: Running, capsys: pytest.CaptureFixture[str]) -> None:
    running.post(to_protobuf(GATEWAY), "application/x-protobuf")
    running.post(json.dumps(ORCHESTRATOR).encode(), "application/json")
    running.dump.flush()
    lines = running.dump_path.read_text().splitlines()
    assert len(lines) == 2
    span0 = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span0["spanId"] == "cccccccccccccccc"  # hex, as the collector file exporter writes
    assert (
        span0["startTimeUnixNano"]
        == GATEWAY["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"]
    )
    assert main(["analyze", str(running.dump_path)]) == 1
    assert "cross_runtime_conflict" in capsys.readouterr().out


def _raw(port: int, request: bytes) -> bytes:
    """One request over a plain socket (for what httpx will not send), the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_chunked_bodies_as_the_opentelemetry_js_exporter_sends_them(running: Running) -> None:
    body = json.dumps(GATEWAY).encode()
    parts = iter([body[:10], body[10:]])  # no Content-Length: httpx sends it chunked
    answer = running.client.post(
        running.url, content=parts, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200
    assert answer.request.headers["Transfer-Encoding"] == "chunked"
    assert running.detector.correlator.stats.beliefs == 1
    big = iter([b"{" + b" " * (40 * 1024), b" " * (40 * 1024) + b"}"])
    refused = running.client.post(
        running.url, content=big, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 413
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    malformed = _raw(running.receiver.port, head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert malformed.startswith(b"HTTP/1.1 400")


def test_a_content_length_that_is_no_number_is_answered(running: Running) -> None:
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    answer = _raw(running.receiver.port, head + b"Content-Length: \xb2\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 411")


def test_bodies_in_hand_are_bounded_and_a_busy_receiver_says_so(running: Running) -> None:
    budget = running.receiver.budget
    total = budget.free
    assert total == MAX_BODIES_IN_HAND * 64 * 1024
    assert budget.reserve(total, 0)  # other requests hold every byte
    running.receiver.busy_wait = 0.05
    try:
        busy = running.post(json.dumps(GATEWAY).encode(), "application/json")
        chunked = running.client.post(
            running.url, content=iter([b"{}"]), headers={"Content-Type": "application/json"}
        )
    finally:
        budget.release(total)
    assert (busy.status_code, busy.headers.get("Retry-After")) == (503, "1")
    assert chunked.status_code == 503  # a chunked body is drained too: the client reads it
    assert running.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200
    deadline = time.monotonic() + 30  # released once the reply is out: poll, with a deadline
    while budget.free != total and time.monotonic() < deadline:
        time.sleep(0.01)
    assert budget.free == total


def test_clients_trickling_their_bodies_hold_only_what_they_announced(running: Running) -> None:
    """Eight uploads stalled after one byte must not shut other exporters out."""
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    stalled = [socket.create_connection(("127.0.0.1", running.receiver.port)) for _ in range(8)]
    budget = running.receiver.budget
    total = budget.free
    try:
        for sock in stalled:
            sock.sendall(head + b"Content-Length: 1000\r\n\r\n{")
        deadline = time.monotonic() + 30
        while budget.free != total - 8 * 1000 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling the receiver's state, with a deadline
        assert budget.free == total - 8 * 1000
        assert running.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200
    finally:
        for sock in stalled:
            sock.close()


def test_chunk_framing_is_checked(running: Running) -> None:
    head = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    port = running.receiver.port
    assert _raw(port, head + b"2\r\n{}X\r\n0\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _raw(port, head + b"0x2\r\n{}\r\n0\r\n\r\n").startswith(b"HTTP/1.1 400")
    keep_alive_off = head.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
    ok = _raw(port, keep_alive_off + b"2;ext=1\r\n{}\r\n0\r\nTrailer: x\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200")


def test_findings_are_reported_even_when_the_reply_cannot_be_sent(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The correlator reports a finding once: a client gone before the reply must not lose it."""
    from otel_a2a.analyze import receiver

    assert running.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200

    def reset(*args: object) -> None:
        raise ConnectionResetError("client gone")

    monkeypatch.setattr(receiver._Handler, "_reply", reset)
    with pytest.raises(httpx.HTTPError):
        running.post(json.dumps(ORCHESTRATOR).encode(), "application/json")
    assert [f.task_id for f in running.found] == ["t1"]


def test_a_stalled_finding_consumer_does_not_stop_other_requests(tmp_path: Path) -> None:
    """``detector | less`` not reading: the request that found something waits on stdout,
    every other one is still answered."""
    entered, release = threading.Event(), threading.Event()

    def stalled(finding: Finding) -> None:
        entered.set()
        release.wait(timeout=30)

    detector = Detector(Correlator(), stalled)
    receiver = Receiver(detector, "127.0.0.1", 0)
    receiver.start()
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    try:
        with httpx.Client(timeout=10) as client:
            post = client.post
            client.post(url, json=GATEWAY)
            finder = threading.Thread(target=post, args=(url,), kwargs={"json": ORCHESTRATOR})
            finder.start()
            assert entered.wait(timeout=30)
            with httpx.Client(timeout=10) as other:
                assert other.post(url, json={"resourceSpans": []}).status_code == 200
            release.set()
            finder.join(timeout=30)
    finally:
        release.set()
        receiver.stop()
        detector.close()


def test_listens_on_ipv6(tmp_path: Path) -> None:
    detector = Detector(Correlator())
    receiver = Receiver(detector, "::1", 0)
    receiver.start()
    try:
        url = f"http://[::1]:{receiver.port}/v1/traces"
        assert httpx.post(url, json=GATEWAY, timeout=10).status_code == 200
    finally:
        receiver.stop()
        detector.close()
