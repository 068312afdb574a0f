"""End to end, where users feel it: ``GetTask`` through the a2a-sdk client against a real
a2a-sdk worker on loopback (``tests/peers/python_peer.py``, JSON-RPC, a completed task).

Three client processes, each configured before it imports a2a-sdk (whose tracing is decided
at import): *plain* (``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, no SDK), *a2a-sdk
tracing* (its own spans, with the SDK: a global ``TracerProvider`` with a
``BatchSpanProcessor`` to a no-op exporter) and *otel-a2a* (a2a-sdk's tracing off, the same
SDK set-up, ``A2AInstrumentor().instrument()``, a ``MeterProvider``). The parent asks each for
``CALLS`` calls in turn, the order rotated every round, and takes the median per call over
``ROUNDS`` rounds. The worker answers all three, so its own time is in every figure alike.

Target: otel-a2a's increment over plain at most 0.75 times a2a-sdk's tracing increment
(otel-a2a does far more: it reads the state, judges, records metrics). Wall-clock on a shared
machine: the three are interleaved so that load hits all alike, but a busy neighbour still
moves each round's figures by tens of µs; read the quartiles. The same calls are counted in
instructions too (callgrind, every thread of the client: ``COUNTED`` calls after
``COUNTED_WARMUP``, as ``bench_instructions`` counts), against the same worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench import Row, check, instructions_per_call, median

ROUNDS = 61  # the increments (~200 µs) are small beside the noise of a shared machine
CALLS = 300
WARMUP = 200
TARGET_RATIO = 0.75
COUNTED_WARMUP, COUNTED = 100, 600  # calls under callgrind (about 50 times slower)
CONFIGS = ("plain", "sdk", "otel_a2a")
_PEER = Path(__file__).resolve().parent.parent / "tests" / "peers" / "python_peer.py"


@contextlib.contextmanager
def _worker() -> Iterator[str]:
    """The a2a-sdk worker; its base URL."""
    env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false", "OTEL_A2A_ENABLED": ""}
    process = subprocess.Popen(
        [sys.executable, str(_PEER), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("READY "):
                yield line.split()[1]
                break
        else:
            raise RuntimeError("the a2a-sdk worker exited before READY")
    finally:
        process.terminate()
        process.wait(30)


def _environment(config: str) -> dict[str, str]:
    """A client's environment: a2a-sdk reads whether it traces when it is imported."""
    return {
        "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "true" if config == "sdk" else "false",
        "OTEL_A2A_ENABLED": "",
    }


def _client(config: str, base: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.bench_e2e", config, base],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **_environment(config)},
    )


def _ask(process: subprocess.Popen[str], calls: int) -> float:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{calls}\n")
    process.stdin.flush()
    answer = process.stdout.readline()
    if not answer:
        raise RuntimeError("a bench client exited")
    return float(answer)


def _instructions(base: str) -> list[Row]:
    """Each configuration's instructions per call under callgrind: what the wall-clock rows
    measure, without the caches a loaded machine (the worker beside it) leaves cold."""
    if shutil.which("valgrind") is None:
        return [Row("e2e instructions: not measured (valgrind not installed)", "-")]
    per = instructions_per_call(
        lambda config, n: ["-m", "bench.bench_e2e", "count", config, base, str(n)],
        CONFIGS,
        COUNTED_WARMUP,
        COUNTED,
    )
    return _rows(
        (
            "e2e instructions: plain (per call)",
            "e2e instructions: + a2a-sdk's own tracing",
            "e2e instructions: + otel-a2a instead",
        ),
        "e2e instructions",
        per,
        ",.0f",
    )


def _rows(names: tuple[str, str, str], prefix: str, per: dict[str, float], fmt: str) -> list[Row]:
    """The three configurations' figures under ``names`` and the ratio of the increments."""
    plain, sdk, ours = (per[c] for c in CONFIGS)
    return [
        *(Row(name, format(per[c], fmt)) for name, c in zip(names, CONFIGS, strict=True)),
        check(
            f"{prefix}: otel-a2a increment / a2a-sdk tracing increment",
            (ours - plain) / (sdk - plain),
            ".2f",
            TARGET_RATIO,
        ),
    ]


def run() -> list[Row]:
    with _worker() as base:
        clients = {config: _client(config, base) for config in CONFIGS}
        try:
            for process in clients.values():
                _ask(process, WARMUP)
            samples: dict[str, list[float]] = {c: [] for c in CONFIGS}
            for round_no in range(ROUNDS):
                shift = round_no % len(CONFIGS)
                for config in CONFIGS[shift:] + CONFIGS[:shift]:
                    samples[config].append(_ask(clients[config], CALLS))
        finally:
            for process in clients.values():
                assert process.stdin is not None
                process.stdin.close()
                process.wait(30)
        instructions = _instructions(base)
    ratios = [
        (o - p) / (s - p)
        for p, s, o in zip(samples["plain"], samples["sdk"], samples["otel_a2a"], strict=True)
        if s != p
    ]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    wall = _rows(
        (
            "e2e: GetTask, a2a-sdk client to a2a-sdk worker, plain (us/call)",
            "e2e: + a2a-sdk's own tracing, with the SDK (us/call)",
            "e2e: + otel-a2a instead, with the SDK (us/call)",
        ),
        "e2e",
        {c: median(samples[c]) for c in CONFIGS},
        ".0f",
    )
    return [
        *wall,
        Row(
            f"  per-round ratio, median (quartiles) over {ROUNDS} rounds",
            f"{median(ratios):.2f} ({q1:.2f}-{q3:.2f})",
        ),
        *instructions,
    ]


def _serve_calls(config: str, base: str, count: int | None = None) -> None:
    """One client process: answers each line ``n`` on stdin with µs per ``GetTask`` call;
    given ``count``, makes that many calls and ends (counted under callgrind)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if config != "plain":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Discard()))
        trace.set_tracer_provider(provider)
        if config == "otel_a2a":
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader

            from otel_a2a.instrumentation import A2AInstrumentor

            meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
            A2AInstrumentor().instrument(tracer_provider=provider, meter_provider=meters)

    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, create_client
    from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest

    async def main() -> None:
        async with httpx.AsyncClient(timeout=30.0) as http:
            card = await A2ACardResolver(http, base).get_agent_card()
            config = ClientConfig(
                streaming=False, supported_protocol_bindings=["JSONRPC"], httpx_client=http
            )
            client = await create_client(card, client_config=config)
            msg = Message(message_id="bench-1", role=Role.ROLE_USER, parts=[Part(text="echo")])
            [event] = [e async for e in client.send_message(SendMessageRequest(message=msg))]
            request = GetTaskRequest(id=event.task.id)
            get_task = client.get_task
            if count is not None:
                for _ in range(count):
                    await get_task(request)
                return
            loop = asyncio.get_running_loop()
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                calls = int(line)
                start = time.perf_counter()
                for _ in range(calls):
                    await get_task(request)
                print(f"{(time.perf_counter() - start) / calls * 1e6:.1f}", flush=True)

    asyncio.run(main())


if __name__ == "__main__":
    if sys.argv[1] == "count":
        os.environ.update(_environment(sys.argv[2]))
        _serve_calls(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        _serve_calls(sys.argv[1], sys.argv[2])
