"""Generated OTLP/HTTP protobuf trace exports: A2A spans of three services, as SDKs batch them.

Each task is read by the three services (``orchestrator``, ``gateway``, ``worker``), each with a
``SendMessage`` and a ``GetTask`` span under a parent of its own trace, carrying the attributes
otel-a2a's client spans carry. One task in a hundred is a split brain (the gateway reads it
``failed`` while the others read ``working``): some findings, as in a fleet, not a flood. A
request holds up to 512 spans of one service (the BatchSpanProcessor's default batch).
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

SERVICES = ("orchestrator", "gateway", "worker")
OPERATIONS = ("SendMessage", "GetTask")
BATCH = 512
T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _kv(key: str, value: str | bool | int) -> KeyValue:
    kv = KeyValue(key=key)
    if isinstance(value, bool):
        kv.value.bool_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    else:
        kv.value.string_value = value
    return kv


def _span(service: int, task: int, op: int) -> Span:
    task_id = f"{task:08x}-6d1b-4b7e-9a55-0c8d2e41f7a1"
    failed = task % 100 == 0 and SERVICES[service] == "gateway"
    raw = "TASK_STATE_FAILED" if failed else "TASK_STATE_WORKING"
    start = T0 + (task * 10 + op) * MS
    trace = (task * 3 + service).to_bytes(16, "big")
    span = Span(
        trace_id=trace,
        span_id=(task * 6 + service * 2 + op + 1).to_bytes(8, "big"),
        parent_span_id=(task * 3 + service + 1 << 32).to_bytes(8, "big"),
        name=OPERATIONS[op],
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 5 * MS,
    )
    span.attributes.extend(
        _kv(k, v)
        for k, v in (
            ("a2a.method.name", OPERATIONS[op]),
            ("otel_a2a.agent.url", "http://worker.example:9999/a2a"),
            ("a2a.protocol.version", "1.0"),
            ("otel_a2a.binding", "JSONRPC"),
            ("gen_ai.agent.name", "worker-agent"),
            ("server.address", "worker.example"),
            ("server.port", 9999),
            ("a2a.task.id", task_id),
            ("gen_ai.conversation.id", f"{task:08x}-5f0a-4d83-b6e2-71a4c9d03e58"),
            ("http.response.status_code", 200),
            ("a2a.task.state", raw),
            ("otel_a2a.observation.authoritative", True),
        )
    )
    return span


def bodies(spans: int, first_task: int = 0) -> list[bytes]:
    """``spans`` A2A spans (a multiple of 6: 3 services x 2 operations per task, tasks
    numbered from ``first_task``) as serialised export requests, the services' batches
    interleaved."""
    tasks = first_task + spans // (len(SERVICES) * len(OPERATIONS))
    per_batch = BATCH // len(OPERATIONS)  # tasks per request
    out: list[bytes] = []
    for first in range(first_task, tasks, per_batch):
        for service, name in enumerate(SERVICES):
            request = ExportTraceServiceRequest()
            rs = request.resource_spans.add()
            rs.resource.attributes.extend(
                [_kv("service.name", name), _kv("telemetry.sdk.language", "python")]
            )
            ss = rs.scope_spans.add()
            ss.scope.name = "otel_a2a"
            ss.spans.extend(
                _span(service, task, op)
                for task in range(first, min(first + per_batch, tasks))
                for op in range(len(OPERATIONS))
            )
            out.append(request.SerializeToString())
    return out
