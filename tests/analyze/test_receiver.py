"""The live OTLP/HTTP receiver, in process on loopback: JSON, protobuf, gzip, bad input, metric,
dump, and its bounds against hostile clients (huge chunks, declared-huge bodies, drippers, a
full budget, the whole-body deadline) and a graceful stop."""

from __future__ import annotations

import base64
import contextlib
import copy
import gzip
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_a2a.analyze import Correlator, Finding
from otel_a2a.analyze.live import LiveAnalyzer
from otel_a2a.analyze.receiver import MAX_BODIES_IN_HAND, Receiver
from otel_a2a.cli import main
from tests.analyze.samples import request, span

GATEWAY = request("gateway", span("t1", "TASK_STATE_FAILED", 0, 10, span_id="cccccccccccccccc"))
ORCHESTRATOR = request(
    "orchestrator",
    span("t1", "TASK_STATE_WORKING", 0, 20, span_id="aaaaaaaaaaaaaaaa", parent="bbbbbbbbbbbbbbbb"),
)
LIMIT = 64 * 1024  # --max-body-bytes of the receiver under test
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
DEADLINE = 30.0


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


def poll(done: Callable[[], bool], what: str) -> None:
    """Wait for the receiver's state to satisfy ``done``, with a deadline."""
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Running:
    def __init__(self, tmp_path: Path, **options: Any) -> None:
        self.found: list[Finding] = []
        self.dump_path = tmp_path / "dump.jsonl"
        self.dump = open(self.dump_path, "w", encoding="utf-8")  # noqa: SIM115
        self.analyzer = LiveAnalyzer(
            Correlator(), self.found.append, dump=self.dump, metrics_port=0
        )
        self.receiver = Receiver(self.analyzer, "127.0.0.1", 0, max_body=LIMIT, **options)
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
        self.analyzer.close()
        self.dump.close()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.receiver.port), timeout=DEADLINE)


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
    metrics = httpx.get(f"http://127.0.0.1:{running.analyzer.metrics_port}/metrics").text
    lines = [x for x in metrics.splitlines() if x.startswith("otel_a2a_divergence_total{")]
    assert len(lines) == 1, metrics
    assert 'otel_a2a_divergence_reason="cross_runtime_conflict"' in lines[0]
    assert 'a2a_method_name="GetTask"' in lines[0] and lines[0].endswith(" 1.0")


def test_operation_label_is_capped(running: Running) -> None:
    """A foreign span names any operation it likes: the metric label takes known ones only."""
    for i, name in enumerate(("GetTask", "A2A order-4711", "A2A order-4712")):
        gateway = request("gateway", span(f"t{i}", "TASK_STATE_FAILED", 0, 10, name=name))
        orchestrator = request(
            "orchestrator",
            span(f"t{i}", "TASK_STATE_WORKING", 0, 20, span_id="aaaaaaaaaaaaaaaa", name=name),
        )
        for doc in (gateway, orchestrator):
            assert running.post(json.dumps(doc).encode(), "application/json").status_code == 200
    assert len(running.found) == 3
    metrics = httpx.get(f"http://127.0.0.1:{running.analyzer.metrics_port}/metrics").text
    lines = [x for x in metrics.splitlines() if x.startswith("otel_a2a_divergence_total{")]
    labels = sorted(x.split('a2a_method_name="', 1)[1].split('"', 1)[0] for x in lines)
    assert labels == ["GetTask", "_OTHER"], metrics
    assert any('a2a_method_name="_OTHER"' in x and x.endswith(" 2.0") for x in lines), metrics


def test_gzip_body(running: Running) -> None:
    body = gzip.compress(json.dumps(GATEWAY).encode())
    assert running.post(body, "application/json", **{"Content-Encoding": "gzip"}).status_code == 200
    assert running.analyzer.correlator.stats.beliefs == 1


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
    assert running.analyzer.requests == 2


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
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(request)
        return _answer(sock)


def _answer(sock: socket.socket) -> bytes:
    """Everything the receiver sends on ``sock`` until it closes its side (with a deadline)."""
    sock.settimeout(DEADLINE)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def _retry_after(answer: bytes) -> bytes | None:
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    return next((x[13:] for x in head.split(b"\r\n") if x.startswith(b"retry-after: ")), None)


def test_chunked_bodies_as_the_opentelemetry_js_exporter_sends_them(running: Running) -> None:
    body = json.dumps(GATEWAY).encode()
    parts = iter([body[:10], body[10:]])  # no Content-Length: httpx sends it chunked
    answer = running.client.post(
        running.url, content=parts, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200
    assert answer.request.headers["Transfer-Encoding"] == "chunked"
    assert running.analyzer.correlator.stats.beliefs == 1
    big = iter([b"{" + b" " * (40 * 1024), b" " * (40 * 1024) + b"}"])
    refused = running.client.post(
        running.url, content=big, headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 413
    malformed = _raw(running.receiver.port, HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert malformed.startswith(b"HTTP/1.1 400")


def test_a_body_without_a_valid_length_is_answered(running: Running) -> None:
    port = running.receiver.port
    assert _raw(port, HEAD + b"Content-Length: \xb2\r\n\r\n{}").startswith(b"HTTP/1.1 400")
    assert _raw(port, HEAD + b"\r\n{}").startswith(b"HTTP/1.1 411")
    gzip_only = HEAD + b"Transfer-Encoding: gzip\r\n\r\n"
    assert _raw(port, gzip_only).startswith(b"HTTP/1.1 501")


def test_a_huge_chunk_is_refused_before_it_is_read(running: Running) -> None:
    """One 64 MiB chunk: answered 413 once the body passes the limit, long before the chunk
    is sent, with no more than the limit held (the budget's high-water mark)."""
    size = 64 * 1024 * 1024
    piece = b" " * 65536
    sent = 0
    with running.connect() as sock:
        sock.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % size)
        sock.setblocking(False)
        deadline = time.monotonic() + DEADLINE
        while sent < size and time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 1.0)
            if readable:
                break  # the answer is there
            if writable:
                with contextlib.suppress(BlockingIOError):
                    sent += sock.send(piece[: size - sent])
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert _retry_after(answer) == b"1"
    assert sent < size, "the answer came only once the whole chunk was sent"
    assert 0 < running.receiver.budget.peak <= LIMIT
    poll(lambda: running.receiver.budget.held == 0, "the budget to be free")


def test_a_declared_huge_body_is_refused_at_once(running: Running) -> None:
    """Content-Length: 1 TB and two bytes sent: 413 before the client sends any more."""
    with running.connect() as sock:
        sock.sendall(HEAD + b"Content-Length: 1000000000000\r\n\r\n{}")
        readable, _, _ = select.select([sock], [], [], DEADLINE)
        assert readable, "no answer while the client had sent only 2 bytes of its body"
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert _retry_after(answer) == b"1"
    assert b"connection: close" in answer.lower()
    assert running.receiver.budget.peak == 0  # not a byte of it taken in


def test_slow_drippers_hold_only_what_they_sent(running: Running) -> None:
    """Eight uploads announcing the limit and dripping a byte now and then must not shut other
    exporters out: the budget counts what arrived, not what was announced."""
    budget = running.receiver.budget
    assert budget.total == MAX_BODIES_IN_HAND * LIMIT  # eight announced bodies would fill it
    drippers = [running.connect() for _ in range(MAX_BODIES_IN_HAND)]
    try:
        for sock in drippers:
            sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n{" % LIMIT)
        poll(lambda: budget.held == MAX_BODIES_IN_HAND, "the drippers' first bytes")
        assert running.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200
        for sock in drippers:
            sock.sendall(b" ")
        poll(lambda: budget.held == 2 * MAX_BODIES_IN_HAND, "the drippers' second bytes")
        assert (
            running.post(json.dumps(ORCHESTRATOR).encode(), "application/json").status_code == 200
        )
        assert len(running.found) == 1
    finally:
        for sock in drippers:
            sock.close()
    poll(lambda: budget.held == 0, "the drippers' bytes to be released")


def test_a_full_budget_is_answered_503_with_retry_after(running: Running) -> None:
    """Bodies that did arrive fill the budget: others wait ``busy_wait``, then 503."""
    budget = running.receiver.budget
    running.receiver.busy_wait = 0.05
    holders = [running.connect() for _ in range(MAX_BODIES_IN_HAND)]
    try:
        for sock in holders:  # one byte short of the limit each: 8 bytes of the budget free
            sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % LIMIT + b" " * (LIMIT - 1))
        poll(lambda: budget.held == MAX_BODIES_IN_HAND * (LIMIT - 1), "the held bodies")
        busy = running.post(json.dumps(GATEWAY).encode(), "application/json")
        chunked = running.client.post(
            running.url, content=iter([b"{}" * 8]), headers={"Content-Type": "application/json"}
        )
    finally:
        for sock in holders:
            sock.close()
    assert (busy.status_code, busy.headers.get("Retry-After")) == (503, "1")
    assert (chunked.status_code, chunked.headers.get("Retry-After")) == (503, "1")
    poll(lambda: budget.held == 0, "the budget to be released")
    assert running.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200


def test_a_body_past_its_deadline_is_answered_408_and_frees_the_budget(tmp_path: Path) -> None:
    """A byte every 0.1 s keeps the connection busy but the body has half a second in all."""
    r = Running(tmp_path, body_timeout=0.5)
    try:
        with r.connect() as sock:
            sock.sendall(HEAD + b"Content-Length: 1000\r\n\r\n{")
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline:  # 100 s to send it all at this pace
                if select.select([sock], [], [], 0.1)[0]:
                    break  # the answer is there
                sock.sendall(b" ")
            answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
        assert r.receiver.budget.peak > 0
        poll(lambda: r.receiver.budget.held == 0, "the budget to be released")
        assert r.post(json.dumps(GATEWAY).encode(), "application/json").status_code == 200
    finally:
        r.close()


def test_expect_100_continue(running: Running) -> None:
    body = json.dumps(GATEWAY).encode()
    with running.connect() as sock:
        sock.sendall(
            HEAD + b"Expect: 100-continue\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 "), interim
        sock.sendall(body)
        assert _answer(sock).startswith(b"HTTP/1.1 200")
    assert running.analyzer.correlator.stats.beliefs == 1


def test_stop_answers_the_request_in_flight(running: Running) -> None:
    """A request half sent when the receiver stops is still read and answered."""
    body = json.dumps(GATEWAY).encode()
    half = len(body) // 2
    with running.connect() as sock:
        sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body[:half])
        poll(lambda: running.receiver.budget.held == half, "the first half")
        stopping = threading.Thread(target=running.receiver.stop)
        stopping.start()
        poll(lambda: running.receiver.closing, "the receiver to stop listening")
        sock.sendall(body[half:])
        answer = _answer(sock)
        stopping.join(timeout=DEADLINE)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b"connection: close" in answer.lower()
    assert running.analyzer.correlator.stats.beliefs == 1
    with pytest.raises(OSError):  # no longer listening
        running.connect().close()


def test_chunk_framing_is_checked(running: Running) -> None:
    head = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
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

    async def reset(*args: object, **kwargs: object) -> None:
        raise ConnectionResetError("client gone")

    monkeypatch.setattr(receiver._Connection, "_respond", reset)
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

    analyzer = LiveAnalyzer(Correlator(), stalled)
    receiver = Receiver(analyzer, "127.0.0.1", 0)
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
        analyzer.close()


def test_listens_on_ipv6(tmp_path: Path) -> None:
    analyzer = LiveAnalyzer(Correlator())
    receiver = Receiver(analyzer, "::1", 0)
    receiver.start()
    try:
        url = f"http://[::1]:{receiver.port}/v1/traces"
        assert httpx.post(url, json=GATEWAY, timeout=10).status_code == 200
    finally:
        receiver.stop()
        analyzer.close()


def test_beliefs_from_ever_new_services_about_one_task_are_bounded(running: Running) -> None:
    """The attack that took the detector from 31 to 196 MB and 1.3 million lines: 40 requests
    of beliefs from ever-new services about one task, alternating states. The task's record
    of reported pairs stops at its bound, what is dropped is counted (stats and metric)."""
    correlator = running.analyzer.correlator
    for r in range(40):
        spans = [
            span(
                "t1",
                "TASK_STATE_FAILED" if i % 2 else "TASK_STATE_WORKING",
                0,
                1000,
                span_id=f"{r:08x}{i:08x}",
            )
            for i in range(60)
        ]
        doc = {
            "resourceSpans": [
                request(f"svc-{r}-{i}", s)["resourceSpans"][0] for i, s in enumerate(spans)
            ]
        }
        body = json.dumps(doc).encode()
        assert len(body) <= LIMIT
        assert running.post(body, "application/json").status_code == 200
    assert correlator.stats.beliefs == 40 * 60
    assert len(running.found) == correlator.max_pairs == 64
    assert len(correlator._tasks["t1"].reported) == correlator.max_pairs
    dropped = correlator.stats.findings_dropped
    assert dropped > 40 * 60  # each later belief conflicts with about half of those held
    metrics = httpx.get(f"http://127.0.0.1:{running.analyzer.metrics_port}/metrics").text
    (line,) = [
        x for x in metrics.splitlines() if x.startswith("otel_a2a_instrumentation_errors_total")
    ]
    assert 'error_type="finding_dropped"' in line and line.endswith(f" {float(dropped)}")
