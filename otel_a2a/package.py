"""The libraries otel-a2a instruments, as ``opentelemetry-instrumentation`` expects them.

Any of them, none required (``instruments-any`` in pyproject.toml, as contrib's httpx
instrumentation declares httpx and httpx2): ``opentelemetry-instrument`` loads the ``a2a``
entry point when at least one is installed within its range. Each is wrapped only when it is
imported, and only within its range.
"""

_instruments_httpx = ("httpx >= 0.28.1",)
_instruments_httpx2 = ("httpx2 >= 2.16",)
_instruments_grpcio = ("grpcio >= 1.63.2",)

_instruments: tuple[str, ...] = ()
_instruments_any = (*_instruments_httpx, *_instruments_httpx2, *_instruments_grpcio)

_supports_metrics = True
