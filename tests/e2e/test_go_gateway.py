"""The Go gateway (``demo/go/gateway``, on a2a-go) in front of a real peer: the card contract
(URLs rewritten, validators and 304 passed through), re-spelling in every style and from any
spelling, gRPC translated to the worker's JSON-RPC or HTTP+JSON, the start-up contract
(READY line, a taken port named as such), and its calls on the worker exported by OTLP as
OpenTelemetry's A2A client spans (otel-a2a's Go interceptor, ``go/otela2a``).

The variants of the seeded incident through it are in test_incident.py.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import os
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

from tests.support import in_ci
from tests.support.peers import GO_PEER, go_problem

pytestmark = pytest.mark.go
CARD = "/.well-known/agent-card.json"


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    reason = go_problem()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the Go gateway cannot run: {reason}", pytrace=False)
        pytest.skip(reason)


@contextlib.contextmanager
def gateway(upstream: str, *flags: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A Go gateway on a free port in front of ``upstream``: its base URL."""
    with gateway_lines(upstream, *flags, env=env) as lines:
        yield lines["READY"]


@contextlib.contextmanager
def gateway_lines(
    upstream: str, *flags: str, env: dict[str, str] | None = None
) -> Iterator[dict[str, str]]:
    """A Go gateway in front of ``upstream``: its start-up lines up to READY, by first word
    (``GRPC`` with ``--grpc``)."""
    proc = subprocess.Popen(
        [str(GO_PEER), "--upstream", upstream, "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines: dict[str, str] = {}
        while "READY" not in lines:
            line = proc.stdout.readline()  # READY (GRPC first), or EOF if it exited
            assert line.split(" ")[0] in ("GRPC", "READY"), (
                line,
                proc.stderr.read() if proc.stderr else "",
            )
            lines[line.split()[0]] = line.split()[1]
        yield lines
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def send(base: str, text: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    response = httpx.post(
        base + "/a2a/jsonrpc",
        json=body,
        headers={"A2A-Version": "1.0", **(headers or {})},
        timeout=10.0,
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def test_the_card_is_forwarded_with_its_validators(python_peer: str) -> None:
    with gateway(python_peer) as base, httpx.Client(timeout=10.0) as http:
        direct = http.get(python_peer + CARD)
        first = http.get(base + CARD)
        again = http.get(base + CARD, headers={"If-None-Match": first.headers["etag"]})
    assert first.status_code == 200
    assert first.headers["etag"] == direct.headers["etag"]
    assert first.headers["cache-control"] == direct.headers["cache-control"]
    urls = {i["url"] for i in first.json()["supportedInterfaces"]}
    assert urls == {base + "/a2a/jsonrpc", base + "/a2a/rest"}
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize(
    ("style", "completed", "input_required"),
    [
        ("pascal", "Completed", "InputRequired"),
        ("lower", "completed", "input_required"),
        ("kebab", "completed", "input-required"),
        ("upper", "COMPLETED", "INPUT_REQUIRED"),
    ],
)
def test_respell_styles(python_peer: str, style: str, completed: str, input_required: str) -> None:
    with gateway(python_peer, "--respell", "--respell-style", style) as base:
        assert send(base, "echo hi")["task"]["status"]["state"] == completed
        assert send(base, "input more")["task"]["status"]["state"] == input_required


def test_states_are_recognised_in_any_spelling(python_peer: str) -> None:
    """A gateway in front of one that spells states ``input-required``/``completed`` re-spells
    them as it would ``TASK_STATE_*``; without ``--respell`` it passes them as they came."""
    with gateway(python_peer, "--respell", "--respell-style", "kebab") as kebab:
        with gateway(kebab, "--respell") as pascal:
            assert send(pascal, "input more")["task"]["status"]["state"] == "InputRequired"
            assert send(pascal, "echo hi")["task"]["status"]["state"] == "Completed"
        with gateway(kebab) as plain:
            assert send(plain, "input more")["task"]["status"]["state"] == "input-required"
    with gateway(python_peer) as plain:
        assert send(plain, "echo hi")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_other_paths_under_a2a_pass_as_they_are(go_peer: str) -> None:
    """The gateway's SDK transports serve /a2a/jsonrpc and /a2a/rest; any other path under
    /a2a/ (here the a2a-go peer's v0.3 JSON-RPC) is passed to the worker at the HTTP level."""
    body = {
        "jsonrpc": "2.0",
        "id": "v03",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": str(uuid.uuid4()),
                "role": "user",
                "parts": [{"kind": "text", "text": "echo old"}],
            }
        },
    }
    with gateway(go_peer, "--respell") as base:
        response = httpx.post(base + "/a2a/v0.3/jsonrpc", json=body, timeout=10.0)
    assert response.status_code == 200
    result = response.json()
    assert result["id"] == "v03"
    assert (result["result"]["kind"], result["result"]["status"]["state"]) == ("task", "completed")


@pytest.mark.parametrize("upstream", ["JSONRPC", "HTTP+JSON"])
def test_grpc_is_translated_to_the_workers_binding(python_peer: str, upstream: str) -> None:
    """``--grpc``: a2a-go's gRPC server in front of a JSON-RPC or HTTP+JSON worker. The card
    gains the gateway's GRPC interface (the worker's ETag kept); answers and errors come
    back as gRPC (TaskNotFound as NOT_FOUND with its ErrorInfo reason); ``--respell`` leaves
    the gRPC side alone (TaskState is an enum there) while JSON-RPC is re-spelled."""
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.rpc import error_details_pb2, status_pb2

    flags = ("--grpc", "--grpc-upstream", upstream, "--respell")
    with gateway_lines(python_peer, *flags) as lines, httpx.Client(timeout=10.0) as http:
        base, target = lines["READY"], lines["GRPC"]
        card = http.get(base + CARD)
        assert card.headers["etag"] == http.get(python_peer + CARD).headers["etag"]
        grpc_ifaces = [
            i for i in card.json()["supportedInterfaces"] if i["protocolBinding"] == "GRPC"
        ]
        assert grpc_ifaces == [{"url": target, "protocolBinding": "GRPC", "protocolVersion": "1.0"}]
        assert send(base, "echo hi")["task"]["status"]["state"] == "Completed"
        request = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(
                message_id=str(uuid.uuid4()),
                role=a2a_pb2.ROLE_USER,
                parts=[a2a_pb2.Part(text="input x")],
            )
        )
        metadata = [("a2a-version", "1.0")]
        with grpc.insecure_channel(target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            reply = stub.SendMessage(request, metadata=metadata)
            got = stub.GetTask(a2a_pb2.GetTaskRequest(id=reply.task.id), metadata=metadata)
            with pytest.raises(grpc.RpcError) as caught:
                stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=metadata)
    assert reply.task.status.state == got.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    error = caught.value
    assert error.code() == grpc.StatusCode.NOT_FOUND
    raw = dict(error.trailing_metadata() or ())["grpc-status-details-bin"]
    info = error_details_pb2.ErrorInfo()
    assert status_pb2.Status.FromString(raw).details[0].Unpack(info)
    assert info.reason == "TASK_NOT_FOUND"


def test_a_taken_port_is_named(python_peer: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(GO_PEER), "--upstream", python_peer, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode != 0 and done.stdout == ""
    assert "address already in use" in done.stderr


def test_an_unknown_style_is_refused(python_peer: str) -> None:
    done = subprocess.run(
        [str(GO_PEER), "--upstream", python_peer, "--respell", "--respell-style", "camel"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert json.dumps("camel") in done.stderr and "pascal, lower, kebab, upper" in done.stderr


@contextlib.contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[trace_service_pb2.ExportTraceServiceRequest]]]:
    """An OTLP/HTTP protobuf trace receiver on a free port: its endpoint and what it got."""
    received: list[trace_service_pb2.ExportTraceServiceRequest] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.append(request)
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _value(v: common_pb2.AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def test_its_calls_on_the_worker_are_convention_spans(go_peer: str) -> None:
    trace_id, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with otlp_receiver() as (endpoint, received):
        env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_SERVICE_NAME="go-gateway-under-test",
        )
        with gateway(go_peer, env=env) as base:
            task = send(base, "echo spans", headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        # the gateway has exited (SIGTERM): it flushed its spans on the way out
    spans = [
        (rs, ss, span)
        for request in received
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    assert len(spans) == 1, spans
    resource, scope, span = spans[0]
    service = {a.key: _value(a.value) for a in resource.resource.attributes}["service.name"]
    assert service == "go-gateway-under-test"
    assert scope.scope.name == "github.com/otel-a2a/otel-a2a/go/otela2a"
    assert scope.schema_url == "https://opentelemetry.io/schemas/1.44.0"
    assert span.name == "SendMessage"
    assert span.kind == span.SPAN_KIND_CLIENT
    # a child of the caller's span: the trace goes on through the gateway
    assert span.trace_id.hex() == trace_id
    assert span.parent_span_id.hex() == parent
    attributes = {a.key: _value(a.value) for a in span.attributes}
    message_id = attributes.pop("a2a.message.id")
    assert isinstance(message_id, str) and message_id
    assert attributes == {
        "a2a.method.name": "SendMessage",
        "a2a.protocol.version": "1.0",
        "a2a.task.id": task["task"]["id"],
        "a2a.task.state": "TASK_STATE_COMPLETED",
        "gen_ai.conversation.id": task["task"]["contextId"],
        "server.address": "127.0.0.1",
        "server.port": int(go_peer.rsplit(":", 1)[1]),
    }
