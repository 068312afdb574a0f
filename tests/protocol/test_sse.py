"""Incremental SSE parsing: observed streams, every chunking, bounded memory, never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_a2a.protocol.extract import UNRECOGNIZED
from otel_a2a.protocol.model import (
    A2AError,
    A2ARequest,
    Binding,
    Operation,
    ResponseFacts,
    StreamEvent,
    TaskReport,
)
from otel_a2a.protocol.sse import SSEParser
from otel_a2a.protocol.states import StateReading, TaskState

S = TaskState
STREAM_V1 = A2ARequest(
    Operation.SEND_STREAMING_MESSAGE, Binding.JSONRPC, "1.0", "SendStreamingMessage"
)
STREAM_V03 = A2ARequest(Operation.SEND_STREAMING_MESSAGE, Binding.JSONRPC, "0.3", "message/stream")
STREAM_REST = A2ARequest(Operation.SUBSCRIBE_TO_TASK, Binding.HTTP_JSON, "1.0", None, "t")

# Observed v1.0 JSON-RPC stream (Python 1.3.0 server); ids shortened as in the notes.
OBSERVED_V1 = (
    b'data: {"result": {"task": {"id": "6b51", "contextId": "44e1", "status": {"state": "TASK_'
    b'STATE_SUBMITTED"}, "history": []}}, "id": 7, "jsonrpc": "2.0"}\r\n\r\n'
    b": ping - 2026-12-02 15:00:19.500000+00:00\r\n\r\n"
    b'data: {"result": {"statusUpdate": {"taskId": "6b51", "contextId": "44e1", "status": {"sta'
    b'te": "TASK_STATE_WORKING", "timestamp": "2026-12-02T15:00:19.603403Z"}}}, "id": 7, "jsonr'
    b'pc": "2.0"}\r\n\r\n'
    b'data: {"result": {"artifactUpdate": {"taskId": "6b51", "contextId": "44e1", "artifact": {'
    b'"artifactId": "e9b8", "name": "echo", "parts": [{"text": "echo: stream me"}]}}}, "id": 7,'
    b' "jsonrpc": "2.0"}\r\n\r\n'
    b'data: {"result": {"statusUpdate": {"taskId": "6b51", "contextId": "44e1", "status": {"sta'
    b'te": "TASK_STATE_COMPLETED", "timestamp": "2026-12-02T15:00:19.805048Z"}}}, "id": 7, "jso'
    b'nrpc": "2.0"}\r\n\r\n'
)


def ok(raw: str, state: TaskState) -> StateReading:
    return StateReading(raw, state, True, True)


EXPECTED_V1 = [
    StreamEvent(
        ResponseFacts(
            (TaskReport("6b51", "44e1", ok("TASK_STATE_SUBMITTED", S.SUBMITTED), "task"),)
        )
    ),
    StreamEvent(comment=True),
    StreamEvent(
        ResponseFacts(
            (
                TaskReport(
                    "6b51",
                    "44e1",
                    ok("TASK_STATE_WORKING", S.WORKING),
                    "status-update",
                    "2026-12-02T15:00:19.603403Z",
                ),
            )
        )
    ),
    StreamEvent(ResponseFacts((TaskReport("6b51", "44e1", None, "artifact-update"),))),
    StreamEvent(
        ResponseFacts(
            (
                TaskReport(
                    "6b51",
                    "44e1",
                    ok("TASK_STATE_COMPLETED", S.COMPLETED),
                    "status-update",
                    "2026-12-02T15:00:19.805048Z",
                ),
            )
        )
    ),
]

OBSERVED_V03 = (
    b'data: {"id":8,"jsonrpc":"2.0","result":{"id":"t","contextId":"c","kind":"task","status":{"'
    b'state":"submitted"}}}\n\n'
    b'data: {"id":8,"jsonrpc":"2.0","result":{"contextId":"c","final":false,"kind":"status-updat'
    b'e","status":{"state":"working","timestamp":"2026-12-02T15:00:19Z"},"taskId":"t"}}\n\n'
    b'data: {"id":8,"jsonrpc":"2.0","result":{"append":false,"artifact":{},"kind":"artifact-upda'
    b'te","lastChunk":false,"taskId":"t"}}\n\n'
    b'data: {"id":8,"jsonrpc":"2.0","result":{"contextId":"c","final":false,"kind":"status-updat'
    b'e","status":{"state":"input-required"},"taskId":"t"}}\n\n'
)


def parse_all(
    request: A2ARequest, stream: bytes, cuts: list[int], limit: int = 1 << 20
) -> list[StreamEvent]:
    parser = SSEParser(request, limit)
    events: list[StreamEvent] = []
    last = 0
    for cut in sorted(set(cuts)):
        events += parser.feed(stream[last:cut])
        last = cut
    events += parser.feed(stream[last:])
    return events + parser.close()


def test_observed_v1_jsonrpc_stream() -> None:
    assert parse_all(STREAM_V1, OBSERVED_V1, []) == EXPECTED_V1


def test_observed_v1_stream_byte_by_byte() -> None:
    assert parse_all(STREAM_V1, OBSERVED_V1, list(range(len(OBSERVED_V1)))) == EXPECTED_V1


def test_observed_v03_stream_final_ignored() -> None:
    events = parse_all(STREAM_V03, OBSERVED_V03, [])
    states = [e.facts.reports[0].state for e in events]
    kinds = [e.facts.reports[0].kind for e in events]
    assert kinds == ["task", "status-update", "artifact-update", "status-update"]
    assert states == [
        ok("submitted", S.SUBMITTED),
        ok("working", S.WORKING),
        None,
        ok("input-required", S.INPUT_REQUIRED),
    ]


def test_rest_bare_stream_response_and_line_endings() -> None:
    body = '{"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}'
    expected = [
        StreamEvent(
            ResponseFacts(
                (TaskReport("t", None, ok("TASK_STATE_WORKING", S.WORKING), "status-update"),)
            )
        )
    ]
    for eol in ("\n", "\r", "\r\n"):
        stream = f"event: message{eol}data: {body}{eol}{eol}".encode()
        assert parse_all(STREAM_REST, stream, []) == expected


def test_multiline_data_joined_with_newline() -> None:
    stream = b'data: {"task": {"id": "t",\ndata: "status": {"state": "TASK_STATE_FAILED"}}}\n\n'
    (event,) = parse_all(STREAM_REST, stream, [])
    assert event.facts.reports[0].state == ok("TASK_STATE_FAILED", S.FAILED)


def test_error_frames() -> None:
    stream = (
        b'event: error\ndata: {"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"gone"}}\n\n'
        b'event: error\ndata: {"error":{"code":404,"status":"NOT_FOUND"}}\n\n'
    )
    events = parse_all(STREAM_REST, stream, [])
    assert events == [
        StreamEvent(ResponseFacts(error=A2AError(-32001, "TASK_NOT_FOUND", True)), error=True),
        StreamEvent(ResponseFacts(error=A2AError(404, "TASK_NOT_FOUND", True)), error=True),
    ]


def test_event_type_resets_per_frame_and_no_data_dispatches_nothing() -> None:
    stream = b"event: error\n\nid: 3\nretry: 10\n\ndata: {}\n\n"
    (event,) = parse_all(STREAM_REST, stream, [])
    assert event.error is False


def test_bom_and_field_without_space() -> None:
    stream = b'\xef\xbb\xbfdata:{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}\n\n'
    for cuts in ([], [1], [2], [1, 2, 3]):
        (event,) = parse_all(STREAM_REST, stream, cuts)
        assert event.facts.reports[0].task_id == "t"


def test_oversized_frame_is_dropped_and_reported() -> None:
    big = b"data: " + b"x" * 5000 + b"\n\n"
    small = b'data: {"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}\n\n'
    stream = small + big + b": ping\n\n" + small
    for cuts in ([], list(range(0, len(stream), 7)), [len(small) + 3, len(small) + 4000]):
        events = parse_all(STREAM_REST, stream, cuts, limit=200)
        assert [e.facts.recognized for e in events] == [True, False, True, True]
        assert events[2].comment


def test_oversized_frame_is_not_held() -> None:
    parser = SSEParser(STREAM_REST, 100)
    for _ in range(1000):
        parser.feed(b"data: " + b"x" * 1000)
    assert len(parser._pending) <= 100 and parser._data == []  # the line's start, bounded
    assert parser.feed(b"\n\n") == [StreamEvent(UNRECOGNIZED)]  # its prefix is no JSON


def test_oversized_snapshot_is_read_from_its_prefix() -> None:
    """A SubscribeToTask snapshot with a long history: status first, as both SDKs write it."""
    history = ",".join(
        f'{{"messageId":"m{i}","parts":[{{"text":"{"y" * 300}"}}]}}' for i in range(50)
    )
    big = (
        b'data: {"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_INPUT_REQUIRED"},'
        b'"history":[' + history.encode() + b"]}}\n\n"
    )
    for cuts in ([], list(range(0, len(big), 997)), [10, 11, 2000]):
        (event,) = parse_all(STREAM_REST, big + b": ping\n\n", cuts, limit=4096)[:1]
        assert [r.state.raw for r in event.facts.reports if r.state] == [
            "TASK_STATE_INPUT_REQUIRED"
        ]


def test_incomplete_trailing_frame_is_reported_at_close() -> None:
    parser = SSEParser(STREAM_REST, 1 << 16)
    assert parser.feed(b'data: {"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}\n') == []
    assert parser.close() == [StreamEvent(UNRECOGNIZED)]
    assert parser.close() == []


def test_invalid_json_and_non_utf8() -> None:
    events = parse_all(STREAM_REST, b"data: {not json\n\ndata: \xff\xfe\n\n", [])
    assert [e.facts.recognized for e in events] == [False, False]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(OBSERVED_V1)), max_size=40))
def test_every_chunking_gives_the_same_events(cuts: list[int]) -> None:
    assert parse_all(STREAM_V1, OBSERVED_V1, cuts) == EXPECTED_V1


LINE = st.sampled_from(
    [
        b'data: {"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}',
        b'data: {"statusUpdate":{"taskId":"t","status":{"state":"working"}}}',
        b"data: [1,",
        b"data: 2]",
        b": ping",
        b"event: error",
        b"event: message",
        b"id: 1",
        b"",
        b"",
        b"data",
        b"data:",
        b"data: " + b"x" * 300,
        b"\xef\xbb\xbfdata: {}",
    ]
)
EOL = st.sampled_from([b"\n", b"\r", b"\r\n"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(LINE, EOL), max_size=25),
    st.lists(st.integers(min_value=0, max_value=4000), max_size=30),
    st.integers(min_value=1, max_value=400),
)
def test_random_streams_are_chunking_invariant(
    lines: list[tuple[bytes, bytes]], cuts: list[int], limit: int
) -> None:
    stream = b"".join(line + eol for line, eol in lines)
    cuts = [c for c in cuts if c <= len(stream)]
    whole = parse_all(STREAM_REST, stream, [], limit)
    assert parse_all(STREAM_REST, stream, cuts, limit) == whole
    assert parse_all(STREAM_REST, stream, list(range(len(stream))), limit) == whole


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20), st.integers(min_value=-5, max_value=500))
def test_any_bytes_never_raise(chunks: list[bytes], limit: int) -> None:
    parser = SSEParser(STREAM_V03, limit)
    for chunk in chunks:
        assert all(isinstance(e, StreamEvent) for e in parser.feed(chunk))
    parser.close()


def test_the_kept_prefix_of_an_oversized_frame_does_not_depend_on_chunking() -> None:
    frame = (
        b'data: {"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"},'
        b'"history":[' + b'{"messageId":"m"},' * 20 + b"{}]}}\n\n"
    )
    for limit in (60, 75, 90):  # the state's value ends near 70 bytes
        whole = parse_all(STREAM_REST, frame, [], limit)
        for cut in range(1, len(frame)):
            assert parse_all(STREAM_REST, frame, [cut], limit) == whole, (limit, cut)
