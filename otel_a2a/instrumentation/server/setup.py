"""The SDK set-up ``OTEL_A2A_ENABLED`` leaves to the first A2A operation (``late_setup``): on
the worker's side, the first request served or the first check, whichever comes first, off
the event loop (it takes up to a few hundred ms)."""

from __future__ import annotations

from otel_a2a.instrumentation import late_setup
from otel_a2a.instrumentation.runtime import Runtime


async def set_up(rt: Runtime) -> None:
    if late_setup.due(rt):
        await late_setup.run_async(rt)
