"""The library otel-a2a instruments, as ``opentelemetry-instrumentation`` expects it."""

_instruments = ("httpx >= 0.27",)
_supports_metrics = True
