"""otel-a2a's own spans: started, given attributes and ended here.

Span processors' hooks (``DivergenceSpanProcessor``'s among them) leave otel-a2a's spans alone,
and must see that at once: reading a span's attributes costs more than the rest of a hook.
``starting`` is the thread starting one of them (a span a sampler or processor starts inside
that start is another: its scope tells), ``ending`` the span context of the one ending
(``on_end`` gets a snapshot, which shares it). A flag another thread clears or replaces early
only sends a hook down its ordinary path.

The SDK cleans each attribute value in Python as it is set: a ``GetTask`` span's 13 attributes
cost 75,000 to 90,000 instructions, a fifth of otel-a2a's whole work on the request. otel-a2a's
values are ``str``, ``bool``, ``int`` or ``float`` by construction, so where nothing can tell
the difference they go straight into the span's attribute dict:

- the SDK is a release whose ``set_attributes`` was read (``CHECKED_SDK``), the span is its own,
  laid out as checked once on a probe span (a ``BoundedAttributes`` holding a dict, locks, an
  end time), no value length limit is set, and the count limit leaves room (else the SDK
  truncates, or drops the oldest and counts it);
- at start, moreover, only where nobody reads attributes given at start: the tracer's sampler is
  one of the SDK's (they decide on ids and the parent alone) and every span processor's
  ``on_start`` reads none (the SDK's batch and simple processors; ``DivergenceSpanProcessor``
  skips otel-a2a's spans). An application's own sampler or processor gets them at start,
  through the API, as ever (one added by another thread while one of otel-a2a's spans starts
  may see that one without them).

Both paths make the same span (tests/instrumentation/test_own_spans.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version
from threading import get_ident

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import (
    ConcurrentMultiSpanProcessor,
    SynchronousMultiSpanProcessor,
    Tracer,
    TracerProvider,
    sampling,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import ProxyTracer, SpanKind

Value = str | bool | int | float

starting: int | None = None
ending: object = None


def _sdk_span_type() -> type | None:
    """The SDK's span class, where its layout is the one read and written here; else None."""
    try:
        try:  # no meter: the SDK's own metrics must not count the probe
            provider = TracerProvider(
                sampling.ALWAYS_ON,
                Resource.get_empty(),
                shutdown_on_exit=False,
                meter_provider=NoOpMeterProvider(),  # type: ignore[call-arg,unused-ignore]
            )
        except TypeError:  # an SDK without its own metrics
            provider = TracerProvider(sampling.ALWAYS_ON, Resource.get_empty(), False)
        span = provider.get_tracer("probe").start_span("probe", attributes={"k": "v"})
        held = getattr(span, "_attributes", None)
        if (
            type(held) is BoundedAttributes
            and held._dict == {"k": "v"} == span.attributes  # type: ignore[attr-defined]
            and hasattr(held, "maxlen")
            and hasattr(held, "max_value_len")
            and hasattr(getattr(held, "_lock", None), "__enter__")
            and getattr(span, "_end_time", 0) is None
            and hasattr(getattr(span, "_lock", None), "__enter__")
            and isinstance(getattr(span, "_context", None), trace.SpanContext)
        ):
            span.end()
            return type(span)
    except Exception:  # another SDK: the API's path only
        pass
    return None


# The SDK releases whose ``set_attributes`` was read and does nothing the direct write leaves
# out (cleaning, limits, the ended-span check), and under which tests/instrumentation/
# test_own_spans.py passed (1.42.1, 1.43.0, 1.44.0, 1.45.2): a later release goes through the
# API until checked.
CHECKED_SDK = ((1, 42), (1, 45))


def _checked_sdk() -> bool:
    try:
        release = tuple(int(part) for part in version("opentelemetry-sdk").split(".")[:2])
    except Exception:  # not installed as a distribution, or an unusual version string
        return False
    return CHECKED_SDK[0] <= release <= CHECKED_SDK[1]


SDK_SPAN = _sdk_span_type()  # read in place by the span processor, whatever the release
_WRITABLE = SDK_SPAN if _checked_sdk() else None
_MULTI = (SynchronousMultiSpanProcessor, ConcurrentMultiSpanProcessor)
_STATIC = (sampling.StaticSampler, sampling.TraceIdRatioBased)
_PARENT_BASED_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)
# (tracer, its processors and sampler as last seen, whether attributes may skip the start);
# adding a span processor to a provider replaces its tuple, so a changed tuple is a new answer
_quiet: tuple[object, object, object, bool] = (None, None, None, False)


def _sdk_sampler(sampler: object) -> bool:
    """Whether ``sampler`` is one of the SDK's, which never read a span's attributes."""
    kind = type(sampler)
    if kind.__module__ != sampling.__name__:  # the application's own, a subclass too
        return False
    if issubclass(kind, sampling.ParentBased):
        return all(_sdk_sampler(getattr(sampler, d, None)) for d in _PARENT_BASED_DELEGATES)
    return issubclass(kind, _STATIC)


def _quiet_processors(processors: object) -> bool:
    from otel_a2a.instrumentation.processor import DivergenceSpanProcessor

    quiet = (BatchSpanProcessor, SimpleSpanProcessor, DivergenceSpanProcessor)
    return isinstance(processors, tuple) and all(type(p) in quiet for p in processors)


def _start_unread(tracer: trace.Tracer) -> bool:
    """Whether no sampler or span processor of ``tracer`` reads attributes given at start."""
    global _quiet
    sdk = tracer._real_tracer if type(tracer) is ProxyTracer else tracer
    if type(sdk) is not Tracer or _WRITABLE is None:
        return False
    multi, sampler = sdk.span_processor, sdk.sampler
    processors = getattr(multi, "_span_processors", None) if type(multi) in _MULTI else None
    seen_tracer, seen_processors, seen_sampler, quiet = _quiet
    if seen_tracer is not sdk or seen_processors is not processors or seen_sampler is not sampler:
        quiet = _sdk_sampler(sampler) and _quiet_processors(processors)
        _quiet = (sdk, processors, sampler, quiet)
    return quiet


def forget() -> None:
    """Drop what ``_start_unread`` remembers (at ``uninstrument``: it holds the processors)."""
    global _quiet
    _quiet = (None, None, None, False)


def start(
    tracer: trace.Tracer, name: str, kind: SpanKind, attributes: Mapping[str, Value]
) -> trace.Span:
    """Start one of otel-a2a's spans with ``attributes``."""
    global starting
    starting = get_ident()
    try:
        if not _start_unread(tracer):
            return tracer.start_span(name, kind=kind, attributes=attributes)
        span = tracer.start_span(name, kind=kind)
        set_attributes(span, attributes)
        return span
    finally:
        starting = None


def set_attributes(span: trace.Span, attributes: Mapping[str, Value]) -> None:
    """Set ``attributes`` on one of otel-a2a's spans, as the SDK does: a key set again moves
    last (the count limit drops the oldest), and an ended span is left as it is, with the
    SDK's warning."""
    if type(span) is _WRITABLE:
        held: BoundedAttributes = span._attributes  # type: ignore[attr-defined]
        found = held._dict
        room = held.maxlen is None or len(found) + len(attributes) <= held.maxlen
        if room and held.max_value_len is None:
            with span._lock, held._lock:  # type: ignore[attr-defined]
                live = span._end_time is None  # type: ignore[attr-defined]
                if live:
                    if not found.keys().isdisjoint(attributes):  # seldom: no set built
                        for key in attributes:
                            found.pop(key, None)
                    found.update(attributes)
            if live:
                return
    span.set_attributes(attributes)


def end(span: trace.Span, end_time: int | None = None) -> None:
    """End one of otel-a2a's spans."""
    global ending
    sdk = type(span) is SDK_SPAN  # the SDK's ``get_span_context`` costs two Python calls
    ending = span._context if sdk else span.get_span_context()  # type: ignore[attr-defined]
    try:
        span.end(end_time)
    finally:
        ending = None
