"""A2A 1.1 ``generation``: a gap on a stream, a generation going back, peers keeping none.

The frames are ``tests/fixtures/a2a-1.1/streams.json`` (written from the spec's ``dev-1.1``
branch: see its README), read by the wire layer as the instrumentation reads them, then
judged by the detector.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_a2a.detect import Detector
from otel_a2a.detect.generations import GAP, REGRESSION, Generations
from otel_a2a.protocol.extract import extract_stream_payload
from otel_a2a.protocol.model import A2ARequest, Binding, Operation

STREAMS = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "a2a-1.1" / "streams.json").read_text()
)
STREAM = A2ARequest(Operation.SEND_STREAMING_MESSAGE, Binding.JSONRPC, "1.0")


def _findings(case: str) -> list[str]:
    detector = Detector()
    agent = detector.agent("http://worker")
    found: list[str] = []
    for i, payload in enumerate(STREAMS[case]):
        facts = extract_stream_payload(STREAM, payload)
        verdicts = detector.on_reports(agent, facts.reports, "SendStreamingMessage", float(i))
        found += [v.reason.value for v in verdicts if v.reason is not None]
    return found


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("healthy", []),
        ("missed_update", ["generation_gap"]),
        ("rehydrated", ["generation_regression"]),
        ("keeps_none_zero", []),
        ("keeps_none_repeated", []),  # 1 then 1: keeps none, so the jump to 5 is no gap
        ("subscribed_later", []),  # a snapshot may start anywhere
    ],
)
def test_each_recorded_stream(case: str, expected: list[str]) -> None:
    assert _findings(case) == expected


def test_the_wire_layer_reads_proto_json_int64_strings() -> None:
    facts = extract_stream_payload(STREAM, STREAMS["healthy"][2])
    assert [(r.kind, r.generation) for r in facts.reports] == [("artifact-update", 3)]
    bad = {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}
    for value in ("-1", "1e3", "x", 2**64, 1.5, True):
        bad["statusUpdate"]["generation"] = value
        assert extract_stream_payload(STREAM, bad).reports[0].generation is None
    bad["statusUpdate"].pop("generation")
    assert extract_stream_payload(STREAM, bad).reports[0].generation is None  # as today


def test_generations_are_bounded() -> None:
    seen = Generations(max_tasks=10)
    for i in range(1000):
        seen.see(f"t-{i}", 1, "task")
    assert len(seen) == 10 and seen.last("t-999") == 1 and seen.last("t-0") is None
    assert seen.see("t-999", 3, "status-update") is None  # a snapshot came before: no gap
    assert seen.see("t-999", 5, "status-update") == GAP
    assert seen.see("t-999", 2, "task") == REGRESSION
