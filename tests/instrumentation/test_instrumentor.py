"""The instrumentor's life cycle (``A2AInstrumentor``, ``otel_a2a/instrumentation/__init__``)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest


def test_instrument_and_uninstrument_are_serialised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The base class checks and sets "instrumented" in two steps: unserialised, two threads
    both wrapped ``send`` (two spans per request, and uninstrument() peeled off one layer)."""
    import otel_a2a.instrumentation as inst

    others_got_in: list[bool] = []

    def probe(real: Any) -> Any:
        def run(self: Any, **kwargs: Any) -> None:
            def other_thread() -> None:
                got = inst.A2AInstrumentor._toggle_lock.acquire(blocking=False)
                if got:
                    inst.A2AInstrumentor._toggle_lock.release()
                others_got_in.append(got)

            other = threading.Thread(target=other_thread)
            other.start()
            other.join(timeout=30)
            real(self, **kwargs)

        return run

    monkeypatch.setattr(
        inst.A2AInstrumentor, "_instrument", probe(inst.A2AInstrumentor._instrument)
    )
    monkeypatch.setattr(
        inst.A2AInstrumentor, "_uninstrument", probe(inst.A2AInstrumentor._uninstrument)
    )
    original = httpx.Client.send
    start = threading.Barrier(8)

    def instrument() -> None:
        start.wait(timeout=30)
        inst.A2AInstrumentor().instrument()

    threads = [threading.Thread(target=instrument) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert httpx.Client.send.__wrapped__ is original  # type: ignore[attr-defined]
    inst.A2AInstrumentor().uninstrument()
    assert httpx.Client.send is original
    assert others_got_in == [False, False]  # one instrument, one uninstrument, each exclusive
