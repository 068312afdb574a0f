"""otel-a2a: OpenTelemetry detection of silent task-state divergence between A2A agents.

See :mod:`otel_a2a.instrumentation` for the user manual and docs/configuration.md for every
setting. Public names load lazily, so importing the pure layers (``otel_a2a.protocol``,
``otel_a2a.detect``) never imports OpenTelemetry, httpx or grpc.
"""

from __future__ import annotations

from otel_a2a.version import __version__

# Not ``typing.TYPE_CHECKING``: on Python >= 3.15 the ``.start`` hook imports this package in
# every interpreter, and importing ``typing`` there would cost milliseconds when unset.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from otel_a2a.detect import (
        DivergenceReason,
        TaskStateDivergenceError,
        assert_state_authoritative,
    )
    from otel_a2a.instrumentation import (
        A2AInstrumentor,
        DivergenceSpanProcessor,
        grpc_aio_interceptors,
        instrument_grpc_channel,
        liveness_decision,
    )
    from otel_a2a.protocol.states import TaskState, normalize_task_state

_HOME = {
    "A2AInstrumentor": "otel_a2a.instrumentation",
    "DivergenceSpanProcessor": "otel_a2a.instrumentation",
    "liveness_decision": "otel_a2a.instrumentation",
    "instrument_grpc_channel": "otel_a2a.instrumentation",
    "grpc_aio_interceptors": "otel_a2a.instrumentation",
    "DivergenceReason": "otel_a2a.detect",
    "TaskStateDivergenceError": "otel_a2a.detect",
    "assert_state_authoritative": "otel_a2a.detect",
    "TaskState": "otel_a2a.protocol.states",
    "normalize_task_state": "otel_a2a.protocol.states",
}

__all__ = [
    "A2AInstrumentor",
    "DivergenceReason",
    "DivergenceSpanProcessor",
    "TaskState",
    "TaskStateDivergenceError",
    "__version__",
    "assert_state_authoritative",
    "grpc_aio_interceptors",
    "instrument_grpc_channel",
    "liveness_decision",
    "normalize_task_state",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'otel_a2a' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
