"""Response extraction from wire bodies as the real SDKs send them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_a2a.protocol.extract import (
    MAX_LIST_ENTRIES,
    extract_from_prefixes,
    extract_prefix,
    extract_response,
    extract_stream_payload,
)
from otel_a2a.protocol.model import (
    A2AError,
    A2ARequest,
    Binding,
    Operation,
    ResponseFacts,
    TaskReport,
)
from otel_a2a.protocol.states import StateReading, TaskState

Op = Operation
S = TaskState
TID = "6ba9a812-6558-40a3-bd15-1af7274c4dd7"
CID = "0eb7bdd4-58da-41dc-ab49-b5f776baa368"

GET_V1 = A2ARequest(Op.GET_TASK, Binding.JSONRPC, "1.0", "GetTask", TID)
GET_V03 = A2ARequest(Op.GET_TASK, Binding.JSONRPC, "0.3", "tasks/get", TID)
SEND_V1 = A2ARequest(Op.SEND_MESSAGE, Binding.JSONRPC, "1.0", "SendMessage")
SEND_V03 = A2ARequest(Op.SEND_MESSAGE, Binding.JSONRPC, "0.3", "message/send")
REST_GET = A2ARequest(Op.GET_TASK, Binding.HTTP_JSON, "1.0", None, "t1")
REST_GET_V03 = A2ARequest(Op.GET_TASK, Binding.HTTP_JSON, "0.3", None, "t1")
REST_LIST = A2ARequest(Op.LIST_TASKS, Binding.HTTP_JSON, "1.0")

# Observed raw GetTask (JSON-RPC, Python 1.3.0 server), verbatim.
OBSERVED_GET_TASK = (
    b'{"result":{"id":"6ba9a812-6558-40a3-bd15-1af7274c4dd7","contextId":"0eb7bdd4-58da-41dc-'
    b'ab49-b5f776baa368","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-02T15:0'
    b'0:13.167426Z"},"artifacts":[{"artifactId":"f778cf8c-5935-45bc-9d22-e67b138c33fe","name":'
    b'"echo","parts":[{"text":"echo: hi"}]}],"history":[{"messageId":"m1","contextId":"0eb7bdd'
    b'4-58da-41dc-ab49-b5f776baa368","taskId":"6ba9a812-6558-40a3-bd15-1af7274c4dd7","role":"R'
    b'OLE_USER","parts":[{"text":"hi"}]}]},"id":2,"jsonrpc":"2.0"}'
)


def reading(raw: str, state: TaskState, exact: bool = True) -> StateReading:
    return StateReading(raw, state, True, exact)


def test_observed_get_task_v1() -> None:
    facts = extract_response(GET_V1, 200, OBSERVED_GET_TASK)
    assert facts == ResponseFacts(
        reports=(
            TaskReport(
                TID,
                CID,
                reading("TASK_STATE_COMPLETED", S.COMPLETED),
                "task",
                "2026-12-02T15:00:13.167426Z",
            ),
        )
    )


def test_observed_get_task_js_v1() -> None:
    body = (
        b'{"jsonrpc":"2.0","id":2,"result":{"id":"da47","contextId":"fae6","status":{"state":'
        b'"TASK_STATE_COMPLETED","timestamp":"2026-12-02T15:01:21.725Z"},"artifacts":[{"artifa'
        b'ctId":"3a4b","name":"echo","parts":[{"text":"echo: hi","mediaType":"text/plain"}]}],'
        b'"history":[{"role":"ROLE_USER","parts":[]}]}}'
    )
    facts = extract_response(GET_V1, 200, body)
    assert facts.reports == (
        TaskReport(
            "da47",
            "fae6",
            reading("TASK_STATE_COMPLETED", S.COMPLETED),
            "task",
            "2026-12-02T15:01:21.725Z",
        ),
    )


def test_v03_tasks_get_kind_task() -> None:
    body = (
        b'{"id":4,"jsonrpc":"2.0","result":{"id":"t4","contextId":"c4","kind":"task","status":'
        b'{"state":"completed","timestamp":"2026-12-02T15:00:13Z"},"history":[{"kind":"message",'
        b'"role":"user","parts":[{"kind":"text","text":"hi"}]}]}}'
    )
    facts = extract_response(GET_V03, 200, body)
    assert facts.reports == (
        TaskReport("t4", "c4", reading("completed", S.COMPLETED), "task", "2026-12-02T15:00:13Z"),
    )


def test_v03_state_spelled_v1_is_not_exact() -> None:
    body = (
        b'{"jsonrpc":"2.0","id":1,"result":{"id":"t","kind":"task","status":{"state":"Working"}}}'
    )
    (report,) = extract_response(GET_V03, 200, body).reports
    assert report.state == StateReading("Working", S.WORKING, True, False)


def test_send_message_v1_task_and_message() -> None:
    body = (
        b'{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"560b","contextId":"1706","status":'
        b'{"state":"TASK_STATE_INPUT_REQUIRED"},"artifacts":[]}}}'
    )
    facts = extract_response(SEND_V1, 200, body)
    assert facts.reports == (
        TaskReport("560b", "1706", reading("TASK_STATE_INPUT_REQUIRED", S.INPUT_REQUIRED), "task"),
    )
    msg = b'{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m","role":"ROLE_AGENT"}}}'
    assert extract_response(SEND_V1, 200, msg) == ResponseFacts(message_only=True)


def test_send_message_v03_kinds() -> None:
    msg = b'{"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"m","role":"agent"}}'
    assert extract_response(SEND_V03, 200, msg).message_only
    task = (
        b'{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","status":{"state":"submitted"}}}'
    )
    (report,) = extract_response(SEND_V03, 200, task).reports
    assert report.state == reading("submitted", S.SUBMITTED)


def test_rest_bodies() -> None:
    body = b'{"id":"t1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}'
    (report,) = extract_response(REST_GET, 200, body).reports
    assert report == TaskReport("t1", "c", reading("TASK_STATE_COMPLETED", S.COMPLETED), "task")
    send = A2ARequest(Op.SEND_MESSAGE, Binding.HTTP_JSON, "1.0")
    body = b'{"task":{"id":"t1","status":{"state":"TASK_STATE_SUBMITTED"}}}'
    assert extract_response(send, 200, body).reports[0].state == reading(
        "TASK_STATE_SUBMITTED", S.SUBMITTED
    )


def test_rest_v03_python_compat_proto_names_are_exact() -> None:
    body = b'{"id":"t1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}'
    (report,) = extract_response(REST_GET_V03, 200, body).reports
    assert report.state == reading("TASK_STATE_COMPLETED", S.COMPLETED)


def test_list_tasks_page() -> None:
    body = json.dumps(
        {
            "tasks": [
                {"id": "a", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}},
                {"id": "b", "status": {"state": "paused"}},
                {"status": {"state": "TASK_STATE_WORKING"}},
                "junk",
            ],
            "nextPageToken": "",
            "pageSize": 50,
            "totalSize": 2,
        }
    ).encode()
    facts = extract_response(REST_LIST, 200, body)
    assert facts.reports == (
        TaskReport("a", "c", reading("TASK_STATE_WORKING", S.WORKING), "list-entry"),
        TaskReport("b", None, StateReading("paused", S.UNKNOWN, False, False), "list-entry"),
    )
    assert extract_response(REST_LIST, 200, b'{"tasks":[],"nextPageToken":""}') == ResponseFacts()


def test_a_list_page_is_observed_up_to_ten_times_the_largest_page_a2a_allows() -> None:
    """A peer ignoring the page size must not cost one ledger update per entry without end
    (each is work on the application's event loop)."""
    entry = {"id": "x", "status": {"state": "TASK_STATE_WORKING"}}
    tasks = [{**entry, "id": f"t{i}"} for i in range(MAX_LIST_ENTRIES + 500)]
    facts = extract_response(REST_LIST, 200, json.dumps({"tasks": tasks}).encode())
    assert MAX_LIST_ENTRIES == 1000
    assert [r.task_id for r in facts.reports] == [f"t{i}" for i in range(MAX_LIST_ENTRIES)]


def test_missing_state_reads_unmapped() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{"id":"t","status":null,"kind":"task"}}'
    (report,) = extract_response(GET_V1, 200, body).reports
    assert report.state == StateReading("", S.UNKNOWN, False, False)
    # v0.3 JSON-RPC always spells the state: an empty status is a missing state
    body = b'{"jsonrpc":"2.0","id":1,"result":{"id":"t","kind":"task","status":{}}}'
    (report,) = extract_response(GET_V03, 200, body).reports
    assert report.state == StateReading("", S.UNKNOWN, False, False)


def test_an_empty_status_of_a_kind_tagged_task_is_a_missing_state() -> None:
    """A ``kind`` marks JSON-typed (not ProtoJSON) serialisation, as @a2a-js/sdk's v0.3
    HTTP+JSON: there an empty status lacks its state (``unknown_state``)."""
    body = b'{"id":"t","kind":"task","status":{"timestamp":"2026-01-01T00:00:00Z"}}'
    (report,) = extract_response(REST_GET_V03, 200, body).reports
    assert report.state == StateReading("", S.UNKNOWN, False, False)


@pytest.mark.parametrize("request_", [GET_V1, REST_GET, REST_GET_V03], ids=repr)
def test_an_empty_status_is_unspecified_under_protojson(request_: A2ARequest) -> None:
    """ProtoJSON omits a field at its default: both SDKs send ``TASK_STATE_UNSPECIFIED`` as
    ``"status": {}``, a legitimate ``unknown``, not an ``unknown_state``."""
    task = b'{"id":"t","contextId":"c","status":{}}'
    body = b'{"jsonrpc":"2.0","id":1,"result":' + task + b"}" if request_ is GET_V1 else task
    (report,) = extract_response(request_, 200, body).reports
    assert report.state == StateReading("", S.UNKNOWN, True, True)


def test_a_prefix_cut_inside_the_status_is_never_read_as_unspecified() -> None:
    """A partial parse closes a cut ``"status":{`` as ``{}``: the prefix path keeps only
    spelt states, so a cut is never taken for an omitted (default) state."""
    body = b'{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WOR'
    for cut in range(len(body) + 1):
        for report in extract_prefix(REST_GET, 200, body[:cut]).reports:
            assert report.state is not None and report.state.raw


def test_enum_number_state() -> None:
    body = b'{"id":"t","status":{"state":3}}'
    (report,) = extract_response(REST_GET, 200, body).reports
    assert report.state == StateReading("3", S.COMPLETED, True, False)


def test_jsonrpc_task_not_found_v1_error_info() -> None:
    body = (
        b'{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"Task not found","data":[{"@'
        b'type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a'
        b'2a-protocol.org","metadata":{}}]}}'
    )
    assert extract_response(GET_V1, 200, body) == ResponseFacts(
        error=A2AError(-32001, "TASK_NOT_FOUND", True)
    )


@pytest.mark.parametrize(
    ("code", "reason", "not_found"),
    [
        (-32001, "TASK_NOT_FOUND", True),
        (-32004, "UNSUPPORTED_OPERATION", False),
        (-32009, "VERSION_NOT_SUPPORTED", False),
        (-32601, "METHOD_NOT_FOUND", False),
        (-31999, None, False),
    ],
)
def test_jsonrpc_error_code_table(code: int, reason: str | None, not_found: bool) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "x"}})
    facts = extract_response(GET_V03, 200, body.encode())
    assert facts.error == A2AError(code, reason, not_found)
    assert facts.reports == ()


@pytest.mark.parametrize("code", [2**63, -(2**63) - 1, 10**30, True, 1.5, "-32001"])
def test_error_codes_outside_int64_are_dropped(code: object) -> None:
    """An OTLP attribute is an int64: a larger code would make the exporter drop it noisily."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "x"}})
    facts = extract_response(GET_V03, 200, body.encode())
    assert facts.error == A2AError(None, None, False)


def test_rest_status_errors() -> None:
    body = (
        b'{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found","details":[{"@type'
        b'":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-p'
        b'rotocol.org"}]}}'
    )
    assert extract_response(REST_GET, 404, body).error == A2AError(404, "TASK_NOT_FOUND", True)
    bare = b'{"error":{"code":404,"status":"NOT_FOUND","message":"nope"}}'
    assert extract_response(REST_GET, 404, bare).error == A2AError(404, "TASK_NOT_FOUND", True)
    push = A2ARequest(Op.GET_PUSH_CONFIG, Binding.HTTP_JSON, "1.0", None, "t1")
    assert extract_response(push, 404, bare).error == A2AError(404, None, False)
    send_new = A2ARequest(Op.SEND_MESSAGE, Binding.HTTP_JSON, "1.0")
    assert extract_response(send_new, 404, bare).error == A2AError(404, None, False)
    failed = (
        b'{"error":{"code":400,"status":"FAILED_PRECONDITION",'
        b'"details":[{"reason":"UNSUPPORTED_OPERATION"}]}}'
    )
    assert extract_response(REST_GET, 400, failed).error == A2AError(
        400, "UNSUPPORTED_OPERATION", False
    )


def test_http_error_without_a2a_body() -> None:
    """No error code is made up from the HTTP status (the span has the status already)."""
    facts = extract_response(REST_GET, 404, b"<html>Not Found</html>")
    assert facts == ResponseFacts(error=A2AError(None, None, False), recognized=False)
    assert extract_response(REST_GET, 502, b"").error == A2AError(None, None, False)
    assert extract_response(GET_V03, 500, b"<html>oops</html>").error == A2AError(None, None, False)


@pytest.mark.parametrize(
    "body",
    [b"", b"null", b"[]", b"{}", b'{"result":null,"jsonrpc":"2.0"}', b"\xff", b'{"id":"t"}'],
)
def test_unrecognized_bodies(body: bytes) -> None:
    assert extract_response(GET_V1, 200, body).recognized is False


def test_non_task_results_are_understood_and_empty() -> None:
    card = A2ARequest(Op.GET_EXTENDED_AGENT_CARD, Binding.JSONRPC, "1.0", "GetExtendedAgentCard")
    body = b'{"jsonrpc":"2.0","id":1,"result":{"name":"x","supportedInterfaces":[]}}'
    assert extract_response(card, 200, body) == ResponseFacts()


def test_stream_payloads() -> None:
    req = A2ARequest(Op.SEND_STREAMING_MESSAGE, Binding.JSONRPC, "1.0", "SendStreamingMessage")
    facts = extract_stream_payload(
        req,
        {"result": {"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {}}}, "id": 7},
    )
    assert facts.reports == (TaskReport("t", "c", None, "artifact-update"),)
    facts = extract_stream_payload(req, {"statusUpdate": {"taskId": "t", "status": {"state": "x"}}})
    assert facts.reports == (
        TaskReport("t", None, StateReading("x", S.UNKNOWN, False, False), "status-update"),
    )
    assert extract_stream_payload(req, "nope").recognized is False
    assert extract_stream_payload(req, {"result": {"kind": "weird"}}).recognized is False


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "taskId",
                    "contextId",
                    "status",
                    "state",
                    "task",
                    "kind",
                    "result",
                    "error",
                    "tasks",
                    "message",
                    "statusUpdate",
                    "artifactUpdate",
                    "code",
                    "data",
                    "details",
                    "reason",
                    "jsonrpc",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)
REQUESTS = st.sampled_from([GET_V1, GET_V03, SEND_V1, SEND_V03, REST_GET, REST_LIST])


@settings(max_examples=300, deadline=None)
@given(REQUESTS, st.integers(min_value=0, max_value=999), JSON)
def test_extract_any_json_never_raises(req: A2ARequest, status: int, doc: object) -> None:
    facts = extract_response(req, status, json.dumps(doc).encode())
    assert isinstance(facts, ResponseFacts)
    for report in facts.reports:
        assert isinstance(report.task_id, str) and report.task_id
    assert isinstance(extract_stream_payload(req, doc), ResponseFacts)


@settings(max_examples=200, deadline=None)
@given(REQUESTS, st.integers(), st.binary(max_size=300))
def test_extract_any_bytes_never_raises(req: A2ARequest, status: int, body: bytes) -> None:
    assert isinstance(extract_response(req, status, body), ResponseFacts)


def test_deeply_nested_response() -> None:
    body = b'{"result":{"id":"t","status":{"state":"TASK_STATE_WORKING"},"history":'
    body += b"[" * 100_000 + b"]" * 100_000 + b"}}"
    facts = extract_response(GET_V1, 200, body)
    assert facts.recognized is False  # beyond the parser's nesting limit: not guessed


def test_js_v03_rest_bare_error_object() -> None:
    body = b'{"code":-32001,"message":"Task not found: d52f623a-57f8-4ed9-882d-a4293d3c41a0"}'
    assert extract_response(REST_GET_V03, 404, body) == ResponseFacts(
        error=A2AError(-32001, "TASK_NOT_FOUND", True)
    )


def _task_body(state: str, history: int = 50) -> bytes:
    result = {
        "id": TID,
        "contextId": "c1",
        "status": {"state": state},
        "history": [{"messageId": f"m{i}", "parts": [{"text": "x" * 100}]} for i in range(history)],
    }
    doc = {"jsonrpc": "2.0", "id": 1, "result": result}
    return json.dumps(doc, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    ("state", "canonical", "mapped"),
    [("TASK_STATE_WORKING", TaskState.WORKING, True), ("paused", TaskState.UNKNOWN, False)],
)
def test_prefix_keeps_every_state_that_arrived_whole(
    state: str, canonical: TaskState, mapped: bool
) -> None:
    body = _task_body(state)
    facts = extract_prefix(GET_V1, 200, body[: len(body) // 2])  # cut inside the history
    assert [r.task_id for r in facts.reports] == [TID]
    reading = facts.reports[0].state
    assert reading is not None
    assert (reading.raw, reading.state, reading.mapped) == (state, canonical, mapped)


@pytest.mark.parametrize("cut_after", [b'"status":{"state":"TASK_STA', b'"contextId":"c1",'])
def test_prefix_cut_before_the_state_is_not_a_missing_state(cut_after: bytes) -> None:
    body = _task_body("TASK_STATE_WORKING")
    prefix = body[: body.index(cut_after) + len(cut_after)]
    facts = extract_prefix(GET_V1, 200, prefix)
    assert facts.reports == ()


def test_prefix_of_a_message_reply_says_message_only() -> None:
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "y" * 5000}]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"message": message}}).encode()
    assert extract_prefix(SEND_V1, 200, body[:2000]).message_only


def test_a_large_reply_with_result_first_is_read_from_its_prefix() -> None:
    """a2a-sdk writes ``{"result": …, "id": …, "jsonrpc": …}``: the prefix of a large reply
    holds neither "id" nor "jsonrpc", and is still a JSON-RPC reply to a JSON-RPC call."""
    history = [{"messageId": f"m{i}", "parts": [{"text": "x" * 500}]} for i in range(200)]
    task = {"id": TID, "contextId": CID, "status": {"state": "TASK_STATE_WORKING"}}
    body = json.dumps({"result": {**task, "history": history}, "id": 1, "jsonrpc": "2.0"})
    facts = extract_prefix(GET_V1, 200, body.encode()[:4096])
    assert [r.state.state for r in facts.reports if r.state] == [S.WORKING]
    rest = A2ARequest(Op.GET_TASK, Binding.HTTP_JSON, "1.0", None, TID)  # no envelope there
    assert extract_prefix(rest, 200, body.encode()[:4096]).reports == ()


def test_a_byte_order_mark_is_skipped_as_httpx_does() -> None:
    body = (
        b"\xef\xbb\xbf"
        + json.dumps(
            {"jsonrpc": "2.0", "id": 1, "result": {"id": TID, "status": {"state": "working"}}}
        ).encode()
    )
    assert [r.task_id for r in extract_response(GET_V03, 200, body).reports] == [TID]


def test_prefixes_copy_only_what_they_parse() -> None:
    """A 50 MiB body whose state is in its first bytes: the search copies one small prefix,
    never the ``limit`` (a 4 MiB copy of it doubled the instrumentation's memory)."""
    import tracemalloc

    task = {"id": TID, "contextId": CID, "status": {"state": "TASK_STATE_WORKING"}}
    head = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {**task, "history": []}})
    body = head[:-2].encode() + b'"' + b"x" * (50 << 20) + b'"]}}'
    tracemalloc.start()
    try:
        facts = extract_from_prefixes(GET_V1, 200, body, 4 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.state.state for r in facts.reports if r.state] == [S.WORKING]
    assert peak < 1 << 20


def test_a_v03_python_sdk_rest_404_is_task_not_found() -> None:
    """a2a-sdk 0.3.x HTTP+JSON: TaskNotFoundError -> 404 ``{"message": "Task not found"}``
    (``a2a/utils/error_handlers.py``); without this ``task_lost`` went unreported there."""
    body = b'{"message":"Task not found"}'
    facts = extract_response(REST_GET_V03, 404, body)
    assert facts.error is not None and facts.error.task_not_found
    assert facts.error.reason == "TASK_NOT_FOUND"
    # not under v1.0 (its errors carry a google.rpc.Status), nor a route miss, nor a 500
    assert not extract_response(REST_GET, 404, body).error.task_not_found  # type: ignore[union-attr]
    route_miss = extract_response(REST_GET_V03, 404, b'{"detail":"Not Found"}')
    assert route_miss.error is not None and not route_miss.error.task_not_found
    server_error = extract_response(REST_GET_V03, 500, body)
    assert server_error.error is not None and not server_error.error.task_not_found
    # route misses of gateways and frameworks carry a "message" too: never a lost task
    for miss in (
        b'{"message":"Route GET:/x not found","error":"Not Found","statusCode":404}',  # Fastify
        b'{"message":"Cannot GET /x","error":"Not Found","statusCode":404}',  # NestJS
        b'{"message":"no Route matched with those values"}',  # Kong
        b'{"message":"Not Found"}',  # AWS API Gateway
    ):
        facts = extract_response(REST_GET_V03, 404, miss)
        assert facts.error is not None and not facts.error.task_not_found, miss
    list_v03 = A2ARequest(Op.LIST_TASKS, Binding.HTTP_JSON, "0.3")
    assert not extract_response(list_v03, 404, body).error.task_not_found  # type: ignore[union-attr]


def test_a2a_java_rest_errors_named_by_their_class() -> None:
    """a2a-java before 1.0.0.Final answers HTTP+JSON errors as ``{"error": "<Java class>",
    "message"}`` (recorded: ``tests/fixtures/exchanges/jvm``); the class names the reason, so
    a TaskNotFound there is a lost task, and a TaskNotCancelable states the task's state."""
    lost = b'{"error": "io.a2a.spec.TaskNotFoundError", "message": "Task not found"}'
    facts = extract_response(REST_GET, 404, lost)
    assert facts.error is not None and facts.error.task_not_found
    assert (facts.error.code, facts.error.reason) == (None, "TASK_NOT_FOUND")
    # the package of the 1.0.0.Final line too
    final = b'{"error": "org.a2aproject.sdk.spec.TaskNotFoundError", "message": "x"}'
    assert extract_response(REST_GET, 404, final).error.task_not_found  # type: ignore[union-attr]
    cancel = A2ARequest(Op.CANCEL_TASK, Binding.HTTP_JSON, "1.0", None, "t1")
    stated = (
        b'{"error": "io.a2a.spec.TaskNotCancelableError", "message": "Task cannot be canceled'
        b' - current state: TASK_STATE_COMPLETED"}'
    )
    facts = extract_response(cancel, 409, stated)
    assert facts.error is not None and facts.error.reason == "TASK_NOT_CANCELABLE"
    report = facts.error.report
    assert report is not None and report.state is not None
    assert (report.task_id, report.state.state) == ("t1", S.COMPLETED)
    # another package's class, an unknown spec class, or a 2xx: no A2A reason, never lost
    for body, status in (
        (b'{"error": "com.example.TaskNotFoundError", "message": "Task not found"}', 404),
        (b'{"error": "io.a2a.spec.SomethingNewError", "message": "?"}', 404),
    ):
        facts = extract_response(REST_GET, status, body)
        assert facts.error is not None and not facts.error.task_not_found, body
        assert facts.error.reason is None
    assert extract_response(REST_GET, 200, lost).error is None


def test_a_v03_rest_list_answered_with_a_bare_array() -> None:
    """The v0.3 specification's HTTP+JSON ``tasks/list`` answers ``[Task]``."""
    list_v03 = A2ARequest(Op.LIST_TASKS, Binding.HTTP_JSON, "0.3")
    body = b'[{"id":"a","status":{"state":"working"}},{"id":"b","status":{"state":"completed"}}]'
    facts = extract_response(list_v03, 200, body)
    assert [(r.task_id, r.state.state if r.state else None) for r in facts.reports] == [
        ("a", S.WORKING),
        ("b", S.COMPLETED),
    ]
    assert extract_response(REST_GET_V03, 200, body).recognized is False


CANCEL_V1 = A2ARequest(Op.CANCEL_TASK, Binding.JSONRPC, "1.0", "CancelTask", "t1")
FOLLOW_UP_V03 = A2ARequest(Op.SEND_MESSAGE, Binding.JSONRPC, "0.3", "message/send", "t1", "c1")


def _rpc_error(code: int, message: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}})


@pytest.mark.parametrize(
    ("request_", "code", "message", "stated"),
    [
        # a2a-sdk 1.x, a2a-sdk 0.3, @a2a-js/sdk, a2a-sdk's legacy cancel
        (
            FOLLOW_UP_V03,
            -32004,
            "Task t1 is in terminal state: TASK_STATE_FAILED",
            ("TASK_STATE_FAILED", S.FAILED),
        ),
        (
            FOLLOW_UP_V03,
            -32004,
            "Task t1 is in terminal state: completed",
            ("completed", S.COMPLETED),
        ),
        (
            FOLLOW_UP_V03,
            -32004,
            "Task t1 is in a terminal state (7) and cannot be modified.",
            ("7", S.REJECTED),
        ),
        (
            CANCEL_V1,
            -32002,
            "Task cannot be canceled - current state: TASK_STATE_WORKING",
            ("TASK_STATE_WORKING", S.WORKING),
        ),
        (
            CANCEL_V1,
            -32002,
            "Task cannot be canceled - current state: TASK_STATE_CANCELED",
            ("TASK_STATE_CANCELED", S.CANCELED),
        ),
        # not cancelable, no state said
        (CANCEL_V1, -32002, "Task not cancelable: t1", ("TASK_NOT_CANCELABLE", S.UNKNOWN)),
        (CANCEL_V1, -32002, None, ("TASK_NOT_CANCELABLE", S.UNKNOWN)),
        # a "terminal state" that is none is a contradiction, not a reading
        (
            CANCEL_V1,
            -32002,
            "Task t1 is in terminal state: TASK_STATE_WORKING",
            ("TASK_NOT_CANCELABLE", S.UNKNOWN),
        ),
        (FOLLOW_UP_V03, -32004, "Task t1 is in terminal state: TASK_STATE_WORKING", None),
        (FOLLOW_UP_V03, -32004, "Task t1 is in a terminal state and cannot be modified.", None),
        (FOLLOW_UP_V03, -32004, "Task t1 is in terminal state: 0", None),
        (FOLLOW_UP_V03, -32004, "Streaming is not supported", None),
        # only the errors about a task's state are read, and only the message's head
        (FOLLOW_UP_V03, -32603, "Task t1 is in terminal state: TASK_STATE_FAILED", None),
        (FOLLOW_UP_V03, -32004, "x" * 600 + " terminal state: TASK_STATE_FAILED", None),
        (FOLLOW_UP_V03, -32004, ["terminal state: TASK_STATE_FAILED"], None),
        # a request naming no task: nothing to say it of
        (SEND_V03, -32004, "Task t1 is in terminal state: TASK_STATE_FAILED", None),
    ],
)
def test_an_error_reply_states_the_named_task_s_state(
    request_: A2ARequest, code: int, message: object, stated: tuple[str, TaskState] | None
) -> None:
    error = extract_response(request_, 200, _rpc_error(code, message)).error
    assert error is not None
    if stated is None:
        assert error.report is None
        return
    raw, state = stated
    assert error.report == TaskReport(
        "t1", request_.context_id, StateReading(raw, state, True, True), "error-reply"
    )


def test_a_streamed_error_frame_states_the_task_s_state() -> None:
    """a2a-sdk's v0.3 ``message/stream`` answers a follow-up to a terminal task so."""
    stream = FOLLOW_UP_V03._replace(operation=Op.SEND_STREAMING_MESSAGE)
    frame = json.loads(_rpc_error(-32004, "Task t1 is in terminal state: TASK_STATE_FAILED"))
    error = extract_stream_payload(stream, frame).error
    assert error is not None and error.report is not None and error.report.state is not None
    assert error.report.state.state is S.FAILED
