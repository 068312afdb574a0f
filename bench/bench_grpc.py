"""Per-call cost of a unary ``GetTask`` over a real loopback gRPC channel (the gRPC binding).

(a) a bare sync channel; (b) + opentelemetry-instrumentation-grpc's client with the SDK
(``TracerProvider`` with a ``BatchSpanProcessor`` to a no-op exporter, as ``bench_overhead``);
(c) (b) + otel_a2a (its interceptor on the same channel, first in line). The agent is a grpcio
server in another process (``python -m bench.bench_grpc serve``) answering a Task of about
2 KB (status first, a long history), so the client process holds only the client's work.

Wall-clock: the three channels are made once, in that order, each as its instrumentation
stands (a channel keeps the interceptors it was made with), then timed in interleaved rounds,
median per call. Instructions: each configuration in its own interpreter under valgrind's
callgrind, with ``WARMUP`` and ``WARMUP + COUNTED`` calls, the difference per call (start-up and
imports cancel out), as ``bench_instructions`` does for HTTP, over as many calls and for the
same reason (the garbage collector's full collections). The figure is otel-a2a's
increment (c - b) as a share of the grpc instrumentation's (b - a); target: the HTTP rows'
50 %. The *floor* row is the HTTP rows' floor (``bench_instructions``: the contract's span
alone through the SDK's API) as a share of the grpc instrumentation's increment, which is far
cheaper than httpx's: it shows how far any implementation of the contract can get.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent import futures

from bench import Row, check, instructions_per_call, median
from bench.bench_instructions import REQUESTS

WARMUP = 200
CALLS = 300
COUNTED = REQUESTS  # calls per configuration under callgrind
ROUNDS = 21
TARGET_PCT = 50.0  # the HTTP rows' target, in force for gRPC too (see bench/README.md)
TASK_ID = "3f2c9a0e-6d1b-4b7e-9a55-0c8d2e41f7a1"
METADATA = (("a2a-version", "1.0"),)


def _task() -> object:
    from a2a.types import a2a_pb2

    task = a2a_pb2.Task(
        id=TASK_ID, context_id="ctx-bench", status={"state": a2a_pb2.TaskState.TASK_STATE_WORKING}
    )
    text = "lorem ipsum dolor sit amet " * 10
    for i in range(6):  # about 2 KB serialised
        task.history.add(message_id=f"msg-{i:08d}", task_id=TASK_ID).parts.add(text=text)
    return task


def _serve() -> None:
    """The agent: prints its port, serves until stdin closes."""
    import grpc
    from a2a.types import a2a_pb2

    reply = _task()
    handler = grpc.unary_unary_rpc_method_handler(
        lambda request, context: reply,
        request_deserializer=a2a_pb2.GetTaskRequest.FromString,
        response_serializer=a2a_pb2.Task.SerializeToString,
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("lf.a2a.v1.A2AService", {"GetTask": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)


@contextlib.contextmanager
def _agent() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_grpc", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield f"127.0.0.1:{int(process.stdout.readline())}"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


class _Providers:
    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from bench.bench_overhead import CountingExporter

        self.exporter = CountingExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])


def _channels(target: str, configs: str) -> tuple[dict[str, Callable[[], object]], _Providers]:
    """A ``GetTask`` callable per configuration, each on a channel made as it stands."""
    import grpc
    from a2a.types import a2a_pb2
    from opentelemetry import trace
    from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient

    from otel_a2a.instrumentation import A2AInstrumentor

    providers = _Providers()
    trace.set_tracer_provider(providers.tracer_provider)  # where the grpc client looks
    request = a2a_pb2.GetTaskRequest(id=TASK_ID)
    calls: dict[str, Callable[[], object]] = {}

    def call_on(channel: grpc.Channel) -> Callable[[], object]:
        method = channel.unary_unary(
            "/lf.a2a.v1.A2AService/GetTask",
            request_serializer=a2a_pb2.GetTaskRequest.SerializeToString,
            response_deserializer=a2a_pb2.Task.FromString,
        )
        return lambda: method(request, metadata=METADATA)

    if "a" in configs:
        calls["a"] = call_on(grpc.insecure_channel(target))
    if "b" in configs or "c" in configs:
        GrpcInstrumentorClient().instrument()
    if "b" in configs:
        calls["b"] = call_on(grpc.insecure_channel(target))
    if "c" in configs:
        A2AInstrumentor().instrument(
            tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider
        )
        calls["c"] = call_on(grpc.insecure_channel(target))
    return calls, providers


def _sample(call: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e6


def _wall_clock(target: str) -> list[Row]:
    calls, providers = _channels(target, "abc")
    for call in calls.values():
        _sample(call, WARMUP)
    results: dict[str, list[float]] = {k: [] for k in calls}
    keys = list(calls)
    for round_no in range(ROUNDS):
        shift = round_no % len(keys)
        for key in keys[shift:] + keys[:shift]:
            results[key].append(_sample(calls[key], CALLS))
    providers.tracer_provider.force_flush()
    names = providers.exporter.names
    total = WARMUP + ROUNDS * CALLS
    if names["GetTask"] != total:  # the rows would measure nothing of ours
        raise RuntimeError(f"expected {total} 'GetTask' spans, exported {dict(names)}")
    a, b, c = (median(results[k]) for k in "abc")
    return [
        Row("grpc: (a) bare sync channel, unary GetTask, ~2 KB Task (us/call)", f"{a:.1f}"),
        Row("grpc: (b) + opentelemetry-instrumentation-grpc + SDK (us/call)", f"{b:.1f}"),
        Row("grpc: (c) (b) + otel_a2a (us/call)", f"{c:.1f}"),
        check(
            "grpc: otel_a2a increment / grpc instrumentation increment (%)",
            (c - b) / (b - a) * 100,
            ".0f",
            TARGET_PCT,
        ),
    ]


def _instructions(target: str) -> list[Row]:
    if shutil.which("valgrind") is None:
        return [Row("grpc instructions: not measured (valgrind not installed)", "-")]

    def args(config: str, n: int) -> list[str]:
        if config == "floor":  # the HTTP rows' floor: the contract's span through the API
            return ["-m", "bench.bench_instructions", "floor", str(n)]
        return ["-m", "bench.bench_grpc", "worker", config, target, str(n)]

    per = instructions_per_call(args, ("a", "b", "c", "floor"), WARMUP, COUNTED)
    grpc_inc, a2a_inc = per["b"] - per["a"], per["c"] - per["b"]
    return [
        Row("grpc instructions: (a) bare sync channel (per call)", f"{per['a']:,.0f}"),
        Row("grpc instructions: (b) + grpc instrumentation + SDK", f"{per['b']:,.0f}"),
        Row("grpc instructions: (c) (b) + otel_a2a", f"{per['c']:,.0f}"),
        check(
            "grpc instructions: otel_a2a increment / grpc instrumentation increment (%)",
            a2a_inc / grpc_inc * 100,
            ".0f",
            TARGET_PCT,
        ),
        Row(
            "  floor: the contract's GetTask span alone, through the API (% of that increment)",
            f"{per['floor'] / grpc_inc * 100:.0f}",
        ),
    ]


def run() -> list[Row]:
    with _agent() as target:
        # instrumenting is process-wide (the global tracer provider, channel factories):
        # the wall-clock rows are measured in a child, leaving this process as it was
        done = subprocess.run(
            [sys.executable, "-m", "bench.bench_grpc", "wall", target],
            capture_output=True,
            text=True,
            check=True,
            timeout=900,
        )
        rows = [Row(*json.loads(line)) for line in done.stdout.splitlines() if line]
        return rows + _instructions(target)


def _worker(config: str, target: str, n: int) -> None:
    calls, providers = _channels(target, config)
    call = calls[config]
    for _ in range(n):
        call()
    providers.tracer_provider.shutdown()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        _serve()
    elif sys.argv[1] == "wall":
        for row in _wall_clock(sys.argv[2]):
            print(json.dumps(list(row)))
    else:
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
