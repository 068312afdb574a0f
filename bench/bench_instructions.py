"""The overhead ratio again, counted in instructions: deterministic where wall-clock is not.

On a shared 2-core machine the wall-clock ratio of ``bench_overhead`` moves by tens of points
from round to round. Valgrind's callgrind counts the instructions a process executes, which do
depend far less on what else the machine is doing than time does (hash seeds, ids and the
export thread's timing still move them a little), so compare ratios taken within one run. It
counts instructions, not time: a cache miss costs one.

The garbage collector's full collections scan the whole heap (millions of instructions each)
and come once every 1,500 to 3,000 requests here; a window of a few hundred requests either
catches one, which then adds 30,000 to 50,000 instructions to each of its requests, or none.
``REQUESTS`` is long enough for each configuration to pay its share.

Target: otel-a2a's increment (c - b) at most 50 % of the httpx instrumentation's (b - a),
through public APIs only (issue 30).

Each configuration of ``bench_overhead`` ((a) bare httpx, (b) + httpx instrumentation + SDK,
(c) (b) + otel_a2a) runs in its own interpreter under callgrind twice, with ``WARMUP`` requests
and with ``WARMUP + REQUESTS``; the difference divided by ``REQUESTS`` is the per-request count,
with start-up, imports and warm-up cancelled out. The BatchSpanProcessor's export thread is
counted too (callgrind counts every thread): exporting a span is part of its cost.

A fourth run, *floor*, starts and ends one SDK span per request carrying exactly the name,
kind and attributes of the span otel-a2a makes for that ``GetTask`` (taken from a real
request), under both span processors, all attributes given at start (the cheapest way the API
offers). No implementation of the span contract (docs/semantic-conventions.md) through the
SDK's API can cost less than this (otel-a2a gives the attributes learnt from the response in
a second ``set_attributes``, as the API asks, which costs a little more).
*floor-bare* is the same span under the ``BatchSpanProcessor`` alone (the SDK's part), and
*wire* classifies the request and extracts the response's task facts (the protocol layer's
part, no OpenTelemetry): together they bound from below what any implementation that reads
the state from the body pays.

The ``-other`` pair repeats (b) and (c) with a non-A2A POST of the same size shaped like an LLM
call, the commonest other httpx traffic of an agent: what otel-a2a costs where it only steps
aside.

Needs ``valgrind`` on ``PATH`` (Debian package ``valgrind``); without it the rows say so.
"""

from __future__ import annotations

import shutil
import sys

from bench import Row, check, instructions_per_call

WARMUP = 200
REQUESTS = 3000
TARGET_PCT = 50.0  # otel-a2a's increment as a share of the httpx instrumentation's
CONFIGS = ("a", "b", "c", "floor", "floor-bare", "wire", "b-other", "c-other")


def run() -> list[Row]:
    if shutil.which("valgrind") is None:
        return [Row("instructions: not measured (valgrind not installed)", "-")]
    per = instructions_per_call(
        lambda config, n: ["-m", "bench.bench_instructions", config, str(n)],
        CONFIGS,
        WARMUP,
        REQUESTS,
    )
    httpx_inc, a2a_inc = per["b"] - per["a"], per["c"] - per["b"]
    other = per["c-other"] - per["b-other"]
    return [
        Row("instructions: (a) bare httpx, 2 KB GetTask (per request)", f"{per['a']:,.0f}"),
        Row("instructions: (b) + httpx instrumentation + SDK", f"{per['b']:,.0f}"),
        Row("instructions: (c) (b) + otel_a2a", f"{per['c']:,.0f}"),
        check(
            "instructions: otel_a2a increment / httpx increment (%)",
            a2a_inc / httpx_inc * 100,
            ".0f",
            TARGET_PCT,
        ),
        Row(
            "instructions: floor, our GetTask span alone, as % of the httpx increment",
            f"{per['floor'] / httpx_inc:.0%}",
        ),
        Row("  the floor span (instructions per request)", f"{per['floor']:,.0f}"),
        Row(
            "  the same span, BatchSpanProcessor only (% of the httpx increment)",
            f"{per['floor-bare'] / httpx_inc:.0%}",
        ),
        Row(
            "  classify + extract alone, no OpenTelemetry (% of the httpx increment)",
            f"{per['wire'] / httpx_inc:.0%}",
        ),
        Row(
            "instructions: non-A2A 2 KB POST (LLM-style), otel_a2a increment (per request)",
            f"{other:,.0f}",
        ),
        Row("  as % of the httpx increment on the GetTask", f"{other / httpx_inc:.0%}"),
    ]


def _worker(config: str, requests: int) -> None:
    """One configuration, ``requests`` requests (callgrind counts the whole process)."""
    from bench import _payload as p
    from bench.bench_overhead import Setup, floor_span

    body, content = p.get_task_response(2048), p.request_body()
    path, headers = p.PATH, p.REQUEST_HEADERS
    if config.endswith("-other"):
        body, content = p.other_response_body(), p.other_request_body()
        path, headers = p.OTHER_PATH, p.OTHER_HEADERS
    if config.startswith("floor"):
        one_span, _ = floor_span(body, divergence=config == "floor")
        for _ in range(requests):
            one_span()
        return
    if config == "wire":
        _wire(body, content, requests)
        return
    setup = Setup(body, instrumented=config != "a")
    if config.startswith("c"):
        from otel_a2a.instrumentation import A2AInstrumentor

        A2AInstrumentor().instrument(
            tracer_provider=setup.tracer_provider, meter_provider=setup.meter_provider
        )
    post = setup.client.post
    for _ in range(requests):
        post(path, content=content, headers=headers).read()
    setup.close()


def _wire(body: bytes, content: bytes, requests: int) -> None:
    """The protocol layer's work on each request: classify it, extract the response's facts."""
    import httpx

    from bench._payload import PATH, REQUEST_HEADERS
    from otel_a2a.instrumentation.httpx_client import REQUEST_HEADERS as WANTED
    from otel_a2a.instrumentation.httpx_client import read_headers
    from otel_a2a.protocol import classify_request, extract_response

    headers = read_headers(httpx.Headers(REQUEST_HEADERS), WANTED)
    for _ in range(requests):
        request = classify_request("POST", PATH, headers, content)
        if request is None or not extract_response(request, 200, body).reports:
            raise RuntimeError("GetTask not recognised: the wire row would measure nothing")


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]))
