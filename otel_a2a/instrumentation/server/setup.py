"""The SDK set-up ``OTEL_A2A_ENABLED`` leaves to the first A2A operation (a client's first
request does it, see ``httpx_client``): on the worker's side, the first request served or the
first check, whichever comes first, off the event loop (it takes up to a few hundred ms)."""

from __future__ import annotations

import asyncio

from otel_a2a.instrumentation.runtime import Runtime


async def set_up(rt: Runtime) -> None:
    from otel_a2a.instrumentation.httpx_client import _late_setup_guarded, _setup_due

    if _setup_due(rt):
        await asyncio.to_thread(_late_setup_guarded, rt)
