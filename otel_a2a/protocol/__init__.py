"""Layer 1: pure A2A wire knowledge (v1.0 and v0.3; JSON-RPC, HTTP+JSON, gRPC paths).

No OpenTelemetry here: classify requests, extract task facts from bodies and SSE frames, parse
Agent Cards. Nothing in this package raises on wire input.
"""

from otel_a2a.protocol._util import MAX_ID_LEN
from otel_a2a.protocol.card import (
    HEARTBEAT_EXTENSION_URI,
    cache_max_age,
    extended_card_etag,
    parse_card,
    parse_extended_card,
)
from otel_a2a.protocol.classify import classify_request, parse_version
from otel_a2a.protocol.extract import (
    extract_from_prefixes,
    extract_prefix,
    extract_response,
    extract_stream_payload,
)
from otel_a2a.protocol.jcs import CanonicalizationError, canonicalize, jcs_sha256
from otel_a2a.protocol.model import (
    A2AError,
    A2ARequest,
    Binding,
    CardInfo,
    Interface,
    Operation,
    ResponseFacts,
    StreamEvent,
    TaskReport,
)
from otel_a2a.protocol.sse import SSEParser
from otel_a2a.protocol.states import (
    StateClass,
    StateReading,
    TaskState,
    normalize_task_state,
    read_state,
)
from otel_a2a.protocol.timestamps import parse_timestamp

__all__ = [
    "HEARTBEAT_EXTENSION_URI",
    "MAX_ID_LEN",
    "A2AError",
    "A2ARequest",
    "Binding",
    "CanonicalizationError",
    "CardInfo",
    "Interface",
    "Operation",
    "ResponseFacts",
    "SSEParser",
    "StateClass",
    "StateReading",
    "StreamEvent",
    "TaskReport",
    "TaskState",
    "cache_max_age",
    "canonicalize",
    "classify_request",
    "extended_card_etag",
    "extract_from_prefixes",
    "extract_prefix",
    "extract_response",
    "extract_stream_payload",
    "jcs_sha256",
    "normalize_task_state",
    "parse_card",
    "parse_extended_card",
    "parse_timestamp",
    "parse_version",
    "read_state",
]
