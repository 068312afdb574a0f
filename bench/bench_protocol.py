"""Classifier plus extractor on a 2 KB ``GetTask`` JSON-RPC response (target <= 15 us).

The figure is what the instrumentation pays per A2A response in the protocol layer: classify
the request (method, path, headers, body) and extract the task facts from the complete body.
Median of several timeit repeats; the ``json.loads`` of the same body is shown for scale.
"""

from __future__ import annotations

import json
import timeit

import httpx

from bench import Row, check, median
from bench._payload import PATH, REQUEST_HEADERS, STATE, get_task_response, request_body
from otel_a2a.instrumentation.httpx_client import REQUEST_HEADERS as WANTED
from otel_a2a.instrumentation.httpx_client import read_headers
from otel_a2a.protocol import classify_request, extract_response

SIZE = 2048
NUMBER = 5_000
REPEAT = 7
TARGET_US = 15.0


def _us(stmt: object) -> float:
    times = timeit.repeat(stmt, number=NUMBER, repeat=REPEAT)  # type: ignore[arg-type]
    return median(times) / NUMBER * 1e6


def run() -> list[Row]:
    body = get_task_response(SIZE)
    req = request_body()
    # what the instrumentation passes: the two headers classification reads, picked out of
    # the request's httpx.Headers in one pass
    headers = read_headers(httpx.Headers(REQUEST_HEADERS), WANTED)

    a2a = classify_request("POST", PATH, headers, req)
    assert a2a is not None, "GetTask request not classified"
    facts = extract_response(a2a, 200, body)
    assert facts.reports and facts.reports[0].state is not None, facts
    assert facts.reports[0].state.raw == STATE, facts

    def both() -> None:
        op = classify_request("POST", PATH, headers, req)
        assert op is not None
        extract_response(op, 200, body)

    classify_us = _us(lambda: classify_request("POST", PATH, headers, req))
    extract_us = _us(lambda: extract_response(a2a, 200, body))
    total_us = _us(both)
    loads_us = _us(lambda: json.loads(body))
    return [
        check(f"protocol: classify + extract, {len(body)} B GetTask (us)", total_us, ".1f", 15.0),
        Row("  classify_request alone (us)", f"{classify_us:.1f}"),
        Row("  extract_response alone (us)", f"{extract_us:.1f}"),
        Row("  for scale: json.loads of the same body (us)", f"{loads_us:.1f}"),
    ]
