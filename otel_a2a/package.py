"""The library otel-a2a instruments, as ``opentelemetry-instrumentation`` expects it."""

_instruments = ("httpx >= 0.27",)
# instrumented too when installed, never required (so not in ``_instruments``): the range
# checked before it is wrapped
_instruments_httpx2 = ("httpx2 >= 2.16",)
_supports_metrics = True
