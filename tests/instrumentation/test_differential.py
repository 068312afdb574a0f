"""The host comes first: with and without otel-a2a, the application sees exactly the same.

The same client script runs in two fresh interpreters, one with ``OTEL_A2A_ENABLED=true``,
over a matrix of peer behaviours (success, 4xx/5xx, invalid JSON, truncated body, connection
reset mid-stream, SSE ``event: error``, 304 card) and both sync/async, stream and not, with
httpx and with httpx2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_agent import CASES, misbehaving_agent

SCRIPT = Path(__file__).with_name("differential_client.py")


def _run(base: str, library: str, enabled: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_A2A_ENABLED="true" if enabled else "false",
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
    )
    out = subprocess.run(
        [sys.executable, str(SCRIPT), base, ",".join(CASES), library],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_instrumented_application_sees_exactly_the_same(library: str) -> None:
    with misbehaving_agent().serve() as base:
        plain = _run(base, library, enabled=False)
        instrumented = _run(base, library, enabled=True)
    assert plain["instrumented"] is False
    assert instrumented["instrumented"] is True
    assert len(plain["seen"]) == len(CASES) * 4
    # the matrix really exercises failures, not only successes
    kinds = {v.get("exception") for v in plain["seen"].values()}
    assert {"RemoteProtocolError", "ReadError"} <= kinds, kinds
    assert plain["seen"]["card_304/sync/stream=False"]["status"] == 304
    assert plain["seen"] == instrumented["seen"]
