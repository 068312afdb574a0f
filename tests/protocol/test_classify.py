"""Request classification: JSON-RPC (v1.0, v0.3, v0.1/v0.2 names), HTTP+JSON, gRPC, cards."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_a2a.protocol.classify import classify_request, parse_version
from otel_a2a.protocol.model import A2ARequest, Binding, Operation

Op = Operation
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
TID = "6ba9a812-6558-40a3-bd15-1af7274c4dd7"
CID = "0eb7bdd4-58da-41dc-ab49-b5f776baa368"


def rpc(method: str, params: object = None, **extra: object) -> bytes:
    doc: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": method, **extra}
    if params is not None:
        doc["params"] = params
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("method", "op"),
    [
        ("SendMessage", Op.SEND_MESSAGE),
        ("SendStreamingMessage", Op.SEND_STREAMING_MESSAGE),
        ("GetTask", Op.GET_TASK),
        ("ListTasks", Op.LIST_TASKS),
        ("CancelTask", Op.CANCEL_TASK),
        ("SubscribeToTask", Op.SUBSCRIBE_TO_TASK),
        ("CreateTaskPushNotificationConfig", Op.CREATE_PUSH_CONFIG),
        ("GetTaskPushNotificationConfig", Op.GET_PUSH_CONFIG),
        ("ListTaskPushNotificationConfigs", Op.LIST_PUSH_CONFIGS),
        ("DeleteTaskPushNotificationConfig", Op.DELETE_PUSH_CONFIG),
        ("GetExtendedAgentCard", Op.GET_EXTENDED_AGENT_CARD),
        ("message/send", Op.SEND_MESSAGE),
        ("message/stream", Op.SEND_STREAMING_MESSAGE),
        ("tasks/get", Op.GET_TASK),
        ("tasks/cancel", Op.CANCEL_TASK),
        ("tasks/resubscribe", Op.SUBSCRIBE_TO_TASK),
        ("tasks/pushNotificationConfig/set", Op.CREATE_PUSH_CONFIG),
        ("tasks/pushNotificationConfig/get", Op.GET_PUSH_CONFIG),
        ("tasks/pushNotificationConfig/list", Op.LIST_PUSH_CONFIGS),
        ("tasks/pushNotificationConfig/delete", Op.DELETE_PUSH_CONFIG),
        ("agent/getAuthenticatedExtendedCard", Op.GET_EXTENDED_AGENT_CARD),
        ("agent/authenticatedExtendedCard", Op.GET_EXTENDED_AGENT_CARD),
        ("tasks/send", Op.SEND_MESSAGE),
        ("tasks/sendSubscribe", Op.SEND_STREAMING_MESSAGE),
        ("tasks/pushNotification/set", Op.CREATE_PUSH_CONFIG),
        ("tasks/pushNotification/get", Op.GET_PUSH_CONFIG),
    ],
)
def test_jsonrpc_methods(method: str, op: Operation) -> None:
    req = classify_request("POST", "/a2a/jsonrpc", V1, rpc(method, {}))
    assert req is not None
    assert (req.operation, req.binding, req.jsonrpc_method) == (op, Binding.JSONRPC, method)
    assert req.version == "1.0"
    assert req.base_url_path == "/a2a/jsonrpc"


def test_jsonrpc_get_task_observed_request() -> None:
    body = rpc("GetTask", {"id": TID, "historyLength": 0})
    assert classify_request("POST", "/a2a/jsonrpc", V1, body) == A2ARequest(
        Op.GET_TASK, Binding.JSONRPC, "1.0", "GetTask", TID, None, "/a2a/jsonrpc"
    )


@pytest.mark.parametrize(
    ("method", "params", "task_id", "context_id"),
    [
        ("GetTask", {"id": "t1"}, "t1", None),
        ("CancelTask", {"id": "t1"}, "t1", None),
        ("SubscribeToTask", {"id": "t1"}, "t1", None),
        ("tasks/get", {"id": "t1", "historyLength": 2}, "t1", None),
        ("tasks/cancel", {"id": "t1"}, "t1", None),
        ("tasks/resubscribe", {"id": "t1"}, "t1", None),
        (
            "SendMessage",
            {"message": {"messageId": "m", "taskId": "t1", "contextId": "c1"}},
            "t1",
            "c1",
        ),
        ("SendMessage", {"message": {"messageId": "m", "contextId": "c1"}}, None, "c1"),
        ("message/send", {"message": {"kind": "message", "taskId": "t1"}}, "t1", None),
        ("message/stream", {"message": {"taskId": "t1", "contextId": "c"}}, "t1", "c"),
        ("SendStreamingMessage", {"message": {"parts": []}}, None, None),
        ("CreateTaskPushNotificationConfig", {"taskId": "t1", "url": "http://x"}, "t1", None),
        ("GetTaskPushNotificationConfig", {"taskId": "t1", "id": "cfg"}, "t1", None),
        ("ListTaskPushNotificationConfigs", {"taskId": "t1"}, "t1", None),
        ("DeleteTaskPushNotificationConfig", {"task_id": "t1", "id": "cfg"}, "t1", None),
        (
            "tasks/pushNotificationConfig/set",
            {"taskId": "t1", "pushNotificationConfig": {}},
            "t1",
            None,
        ),
        (
            "tasks/pushNotificationConfig/get",
            {"id": "t1", "pushNotificationConfigId": "c"},
            "t1",
            None,
        ),
        ("tasks/pushNotificationConfig/list", {"id": "t1"}, "t1", None),
        ("tasks/pushNotificationConfig/delete", {"id": "t1"}, "t1", None),
        ("tasks/send", {"id": "t1", "sessionId": "s", "message": {}}, "t1", None),
        ("tasks/pushNotification/set", {"id": "t1"}, "t1", None),
        ("GetTask", {"id": 7}, None, None),
        ("GetTask", {"id": ""}, None, None),
        ("GetTask", [TID], None, None),
        ("SendMessage", {"message": "t1"}, None, None),
    ],
)
def test_jsonrpc_ids(
    method: str, params: object, task_id: str | None, context_id: str | None
) -> None:
    req = classify_request("POST", "/rpc", V1, rpc(method, params))
    assert req is not None
    assert (req.task_id, req.context_id) == (task_id, context_id)


@pytest.mark.parametrize(
    ("headers", "version"),
    [
        ({}, "0.3"),
        ({"A2A-Version": ""}, "0.3"),
        ({"a2a-version": "1.0"}, "1.0"),
        ({"A2A-VERSION": "1.0.1"}, "1.0"),
        ({"A2a-Version": " 1 "}, "1.0"),
        ({"A2A-Version": "0.3"}, "0.3"),
        ({"A2A-Version": "1.5"}, "1.5"),
        ({"A2A-Version": "banana"}, "banana"),
    ],
)
def test_jsonrpc_version(headers: dict[str, str], version: str) -> None:
    req = classify_request("POST", "/", headers, rpc("GetTask", {"id": "t"}))
    assert req is not None and req.version == version


def test_pascal_case_method_without_header_is_v03() -> None:
    req = classify_request("POST", "/", {}, rpc("GetTask", {"id": "t"}))
    assert req is not None and req.version == "0.3"


def test_httpx_headers_are_case_insensitive() -> None:
    headers = httpx.Headers({"a2A-vErsion": "1.0"})
    req = classify_request("POST", "/", headers, rpc("tasks/get", {"id": "t"}))
    assert req is not None and req.version == "1.0"


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","method":"tasks/list","params":{}}',
        b'{"jsonrpc":"2.0","method":"sendMessage"}',
        b'{"jsonrpc":"2.0","method":7}',
        b'{"method":"GetTask","params":{"id":"t"}}',
        b'[{"jsonrpc":"2.0","method":"GetTask"}]',
        b'{"jsonrpc":"2.0","method":"GetTask"',
        b"not json",
        b"",
        b'\xff\xfe{"jsonrpc"',
    ],
)
def test_jsonrpc_rejects(body: bytes) -> None:
    assert classify_request("POST", "/a2a/jsonrpc", V1, body) is None


def test_jsonrpc_only_post() -> None:
    assert classify_request("GET", "/a2a/jsonrpc", V1, rpc("GetTask", {"id": "t"})) is None
    assert classify_request("PUT", "/a2a/jsonrpc", V1, rpc("GetTask", {"id": "t"})) is None


def test_large_jsonrpc_body_uses_bounded_prefix() -> None:
    head = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
    body = (
        head + b'{"taskId":"t1","contextId":"c1","parts":[{"text":"' + b"x" * (3 << 20) + b'"}]}}}'
    )
    req = classify_request("POST", "/rpc", V1, body)
    assert req is not None
    assert (req.operation, req.task_id, req.context_id) == (Op.SEND_MESSAGE, "t1", "c1")


def test_large_body_id_cut_by_prefix_is_not_returned() -> None:
    body = b'{"jsonrpc":"2.0","method":"GetTask","params":{"x":"' + b"y" * (70 * 1024)
    body += b'","id":"t1"}}' + b" " * (2 << 20)
    req = classify_request("POST", "/rpc", V1, body)
    assert req is not None and req.operation is Op.GET_TASK and req.task_id is None


REST = {"A2A-Version": "1.0", "Content-Type": "application/a2a+json"}


@pytest.mark.parametrize(
    ("method", "path", "op", "task_id", "base"),
    [
        ("POST", "/a2a/rest/message:send", Op.SEND_MESSAGE, None, "/a2a/rest"),
        ("POST", "/a2a/rest/message:stream", Op.SEND_STREAMING_MESSAGE, None, "/a2a/rest"),
        ("GET", "/a2a/rest/tasks/t1", Op.GET_TASK, "t1", "/a2a/rest"),
        ("GET", "/a2a/rest/tasks", Op.LIST_TASKS, None, "/a2a/rest"),
        ("GET", "/tasks", Op.LIST_TASKS, None, ""),
        ("GET", "/tasks/", Op.LIST_TASKS, None, ""),
        ("POST", "/a2a/rest/tasks/t1:cancel", Op.CANCEL_TASK, "t1", "/a2a/rest"),
        ("GET", "/a2a/rest/tasks/t1:subscribe", Op.SUBSCRIBE_TO_TASK, "t1", "/a2a/rest"),
        ("POST", "/a2a/rest/tasks/t1:subscribe", Op.SUBSCRIBE_TO_TASK, "t1", "/a2a/rest"),
        ("POST", "/r/tasks/t1/pushNotificationConfigs", Op.CREATE_PUSH_CONFIG, "t1", "/r"),
        ("GET", "/r/tasks/t1/pushNotificationConfigs", Op.LIST_PUSH_CONFIGS, "t1", "/r"),
        ("GET", "/r/tasks/t1/pushNotificationConfigs/c", Op.GET_PUSH_CONFIG, "t1", "/r"),
        ("DELETE", "/r/tasks/t1/pushNotificationConfigs/c", Op.DELETE_PUSH_CONFIG, "t1", "/r"),
        ("GET", "/a2a/rest/extendedAgentCard", Op.GET_EXTENDED_AGENT_CARD, None, "/a2a/rest"),
        ("GET", "/a2a/rest/acme/tasks/t1", Op.GET_TASK, "t1", "/a2a/rest/acme"),
        ("GET", "/tasks/urn:uuid:1", Op.GET_TASK, "urn:uuid:1", ""),
        ("GET", "/a2a/rest/tasks/t1?historyLength=2", Op.GET_TASK, "t1", "/a2a/rest"),
    ],
)
def test_rest_v1(method: str, path: str, op: Operation, task_id: str | None, base: str) -> None:
    req = classify_request(method, path, REST, b"{}" if method == "POST" else None)
    assert req == A2ARequest(op, Binding.HTTP_JSON, "1.0", None, task_id, None, base)


@pytest.mark.parametrize(
    ("method", "path", "op", "task_id"),
    [
        ("POST", "/a2a/rest/v1/message:send", Op.SEND_MESSAGE, None),
        ("GET", "/a2a/rest/v1/tasks/t1", Op.GET_TASK, "t1"),
        ("GET", "/a2a/rest/v1/tasks", Op.LIST_TASKS, None),
        ("POST", "/a2a/rest/v1/tasks/t1:cancel", Op.CANCEL_TASK, "t1"),
        ("GET", "/a2a/rest/v1/tasks/t1:subscribe", Op.SUBSCRIBE_TO_TASK, "t1"),
        ("POST", "/a2a/rest/v1/tasks/t1:subscribe", Op.SUBSCRIBE_TO_TASK, "t1"),
        ("POST", "/a2a/rest/v1/tasks/t1/pushNotificationConfigs", Op.CREATE_PUSH_CONFIG, "t1"),
        ("GET", "/a2a/rest/v1/card", Op.GET_EXTENDED_AGENT_CARD, None),
    ],
)
def test_rest_v03(method: str, path: str, op: Operation, task_id: str | None) -> None:
    for headers in ({}, {"a2a-version": "0.3"}):
        req = classify_request(method, path, headers, b"{}" if method == "POST" else None)
        assert req == A2ARequest(op, Binding.HTTP_JSON, "0.3", None, task_id, None, "/a2a/rest")


def test_v1_segment_under_v1_header_is_base_path() -> None:
    req = classify_request("GET", "/api/v1/tasks/t1", REST, None)
    assert req is not None and req.base_url_path == "/api/v1" and req.version == "1.0"
    assert classify_request("GET", "/api/v1/card", REST, None) is None


def test_rest_send_message_ids_from_body() -> None:
    body = json.dumps({"message": {"messageId": "m", "taskId": "t9", "contextId": "c9"}})
    req = classify_request("POST", "/a2a/rest/message:send", REST, body.encode())
    assert req is not None and (req.task_id, req.context_id) == ("t9", "c9")


@pytest.mark.parametrize(
    ("method", "path", "headers", "body"),
    [
        ("POST", "/a2a/rest/tasks/t1", REST, b"{}"),  # no POST on a task resource
        ("DELETE", "/a2a/rest/tasks/t1", REST, None),
        ("GET", "/a2a/rest/message:send", REST, None),
        ("POST", "/a2a/rest/tasks", REST, b"{}"),
        ("GET", "/a2a/rest/tasks/t1:cancel", REST, None),
        ("POST", "/a2a/rest/message:send", {"Content-Type": "multipart/form-data"}, b"--x"),
        ("POST", "/a2a/rest/message:send", {}, b"<xml/>"),
        ("GET", "/api/users/1", REST, None),
        ("GET", "/", {}, None),
        ("PATCH", "/tasks/t1", REST, None),
        ("GET", "/tasks/t1/pushNotificationConfigs/c/extra", REST, None),
    ],
)
def test_rest_rejects(method: str, path: str, headers: dict[str, str], body: bytes | None) -> None:
    assert classify_request(method, path, headers, body) is None


def test_generic_rest_api_is_a_documented_false_positive() -> None:
    req = classify_request("GET", "/api/tasks/123", {}, None)
    assert req is not None and req.operation is Op.GET_TASK and req.version == "0.3"


@pytest.mark.parametrize(
    ("path", "op", "version"),
    [
        ("/lf.a2a.v1.A2AService/GetTask", Op.GET_TASK, "1.0"),
        ("/lf.a2a.v1.A2AService/SubscribeToTask", Op.SUBSCRIBE_TO_TASK, "1.0"),
        ("/lf.a2a.v1.A2AService/ListTaskPushNotificationConfigs", Op.LIST_PUSH_CONFIGS, "1.0"),
        ("/lf.a2a.v1.A2AService/GetExtendedAgentCard", Op.GET_EXTENDED_AGENT_CARD, "1.0"),
        ("/a2a.v1.A2AService/TaskSubscription", Op.SUBSCRIBE_TO_TASK, "0.3"),
        ("/a2a.v1.A2AService/GetAgentCard", Op.GET_EXTENDED_AGENT_CARD, "0.3"),
        ("/a2a.v1.A2AService/ListTaskPushNotificationConfig", Op.LIST_PUSH_CONFIGS, "0.3"),
        ("/a2a.v1.A2AService/SendStreamingMessage", Op.SEND_STREAMING_MESSAGE, "0.3"),
    ],
)
def test_grpc(path: str, op: Operation, version: str) -> None:
    req = classify_request("POST", path, {"content-type": "application/grpc"}, b"\x00\x00")
    assert req == A2ARequest(op, Binding.GRPC, version)


def test_grpc_rejects_unknown_method_and_metadata_version_wins() -> None:
    assert classify_request("POST", "/lf.a2a.v1.A2AService/Nope", {}, b"") is None
    assert classify_request("POST", "/a2a.v1.A2AService/SubscribeToTask", {}, b"") is None
    req = classify_request("POST", "/lf.a2a.v1.A2AService/GetTask", {"a2a-version": "1.2"}, b"")
    assert req is not None and req.version == "1.2"


@pytest.mark.parametrize(
    ("path", "base"),
    [
        ("/.well-known/agent-card.json", ""),
        ("/agents/x/.well-known/agent-card.json", "/agents/x"),
        ("/.well-known/agent.json", ""),
    ],
)
def test_card(path: str, base: str) -> None:
    req = classify_request("GET", path, {"A2A-Version": "1.0.2"}, None)
    assert req == A2ARequest(
        Op.GET_AGENT_CARD, Binding.HTTP_JSON, None, base_url_path=base, card_variant="1.0"
    )
    plain = classify_request("GET", path, {}, None)  # not negotiated: no version, no variant
    assert plain == A2ARequest(Op.GET_AGENT_CARD, Binding.HTTP_JSON, None, base_url_path=base)
    assert classify_request("POST", path, {}, None) is None


def test_legacy_extended_card_path() -> None:
    req = classify_request("GET", "/agent/authenticatedExtendedCard", {}, None)
    assert req is not None and req.operation is Op.GET_EXTENDED_AGENT_CARD


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, "0.3"), ("", "0.3"), ("  ", "0.3"), ("1.0", "1.0"), ("1.0.1", "1.0"), ("01.02", "1.2")],
)
def test_parse_version(raw: str | None, expected: str) -> None:
    assert parse_version(raw) == expected


def test_parse_version_of_huge_headers_is_bounded_and_cached_bounded() -> None:
    """The cache holds 256 versions: not 256 headers of a megabyte each."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(300):
            assert parse_version(f"{i}." + "9" * 1_000_000) == (f"{i}." + "9" * 40)[:32]
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert retained < 1_000_000, retained  # 300 MB before the cache key was bounded
    assert parse_version("  1.0  ") == "1.0"


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["GET", "POST", "DELETE", "PUT", "get", "", "\x00"]),
    st.one_of(
        st.text(max_size=60),
        st.sampled_from(
            ["/tasks/x", "/v1/tasks", "/message:send", "/lf.a2a.v1.A2AService/GetTask", "/"]
        ),
    ),
    st.dictionaries(st.text(max_size=15), st.text(max_size=15), max_size=4),
    st.one_of(st.none(), st.binary(max_size=200), st.just(b'{"jsonrpc":"2.0","method":"GetTask"')),
)
def test_classify_never_raises(
    method: str, path: str, headers: dict[str, str], body: bytes | None
) -> None:
    req = classify_request(method, path, headers, body)
    assert req is None or isinstance(req, A2ARequest)


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=20,
    ),
    st.sampled_from(sorted({"GetTask", "SendMessage", "tasks/get", "message/send", "x"})),
)
def test_classify_any_params_never_raises(params: object, method: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()
    req = classify_request("POST", "/rpc", {}, body)
    assert req is None or req.task_id is None or isinstance(req.task_id, str)


def test_deep_nesting_does_not_blow_the_stack() -> None:
    body = b'{"jsonrpc":"2.0","method":"GetTask","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    req = classify_request("POST", "/rpc", {}, body)
    assert req is None or req.task_id is None


@pytest.mark.parametrize("jsonrpc_last", [False, True])
def test_large_jsonrpc_request_is_recognised_with_the_key_at_either_end(
    jsonrpc_last: bool,
) -> None:
    params = {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "q" * 100_000}]}
    }
    doc = {"params": params, "id": 1, "method": "SendMessage"}
    doc = {**doc, "jsonrpc": "2.0"} if jsonrpc_last else {"jsonrpc": "2.0", **doc}
    body = json.dumps(doc).encode()
    found = classify_request("POST", "/a2a", {"A2A-Version": "1.0"}, body)
    assert found is not None and found.operation is Operation.SEND_MESSAGE


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_follow_up_with_proto_field_names_is_recognised(binding: str) -> None:
    """ProtoJSON parsers accept the original field names: ``task_id``, ``context_id``."""
    message = {"message_id": "m", "task_id": "t7", "context_id": "c7", "role": "ROLE_USER"}
    if binding == "jsonrpc":
        doc: dict[str, object] = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": message},
        }
        found = classify_request("POST", "/a2a", {"A2A-Version": "1.0"}, json.dumps(doc).encode())
    else:
        body = json.dumps({"message": message}).encode()
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        found = classify_request("POST", "/a2a/message:send", headers, body)
    assert found is not None and (found.task_id, found.context_id) == ("t7", "c7")


def test_a_large_jsonrpc_call_with_jsonrpc_written_last() -> None:
    """a2a-sdk writes "jsonrpc" after "params": past 1 MiB only a prefix is parsed."""
    message = {"messageId": "m", "taskId": "t9", "role": "ROLE_USER"}
    message["parts"] = [{"text": "x" * 1_100_000}]  # type: ignore[list-item]
    doc = {"method": "SendMessage", "params": {"message": message}, "id": 1, "jsonrpc": "2.0"}
    found = classify_request("POST", "/a2a", {"A2A-Version": "1.0"}, json.dumps(doc).encode())
    assert found is not None
    assert (found.operation, found.task_id) == (Op.SEND_MESSAGE, "t9")


def test_v03_rest_follow_up_from_the_python_sdk_names_the_message_request() -> None:
    """a2a-sdk's v0.3 REST client serialises ``SendMessageRequest`` with proto field names
    (``compat/v0_3/rest_transport.py``: ``preserving_proto_field_name=True``): the message
    sits under ``request``, the proto name of the ``json_name="message"`` field."""
    message = {"message_id": "m", "task_id": "t7", "context_id": "c7", "role": "ROLE_USER"}
    body = json.dumps({"request": message, "configuration": {"blocking": True}}).encode()
    headers = {"Content-Type": "application/json"}
    found = classify_request("POST", "/a2a/rest/v1/message:send", headers, body)
    assert found is not None
    assert (found.operation, found.version) == (Op.SEND_MESSAGE, "0.3")
    assert (found.task_id, found.context_id) == ("t7", "c7")


@pytest.mark.parametrize(
    ("target", "headers", "version"),
    [
        ("/a2a/tasks/t1?A2A-Version=1.0", {}, "1.0"),
        ("/a2a/tasks/t1?historyLength=2&a2a-version=1.0", {}, "1.0"),
        ("/a2a/tasks/t1?A2A%2DVersion=1%2E0", {}, "1.0"),
        ("/a2a/tasks/t1?A2A-Version=1.0", {"A2A-Version": "0.3"}, "0.3"),  # the header wins
        ("/a2a/tasks/t1?historyLength=2", {}, "0.3"),
        (
            "/a2a/tasks/t1?" + "&".join(f"k{i}=v" for i in range(500)) + "&A2A-Version=1.0",
            {},
            "1.0",
        ),
    ],
)
def test_version_as_a_query_parameter(target: str, headers: dict[str, str], version: str) -> None:
    """Spec §3.6.1: "Clients MAY provide the ``A2A-Version`` as a request parameter instead
    of a header"; without this a 1.0 call read as 0.3 judged every ``TASK_STATE_*`` inexact."""
    found = classify_request("GET", target, headers, None)
    assert found is not None and found.operation is Op.GET_TASK
    assert (found.version, found.task_id, found.base_url_path) == (version, "t1", "/a2a")
    rpc_found = classify_request(
        "POST", target.replace("/tasks/t1", ""), headers, rpc("GetTask", {"id": "t1"})
    )
    assert rpc_found is not None and rpc_found.version == version


def test_the_query_is_read_only_for_a2a_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other traffic never pays for its query string (an LLM call's, a storage URL's)."""
    from otel_a2a.protocol import classify

    searched: list[str] = []

    class Spy:
        def search(self, query: str) -> None:
            searched.append(query)

    monkeypatch.setattr(classify, "_QUERY_VERSION", Spy())
    huge = b"api-version=2024-01-01&" + b"x" * 1_000_000
    assert classify_request("GET", "/v1/models", {}, None, huge) is None
    assert classify_request("POST", "/v1/chat/completions", {}, b'{"model":"m"}', huge) is None
    assert searched == []
    assert classify_request("GET", "/a2a/tasks/t1", {}, None, b"A2A-Version=1.0") is not None
    assert searched == ["A2A-Version=1.0"]


def test_a_question_mark_in_a_decoded_path_is_part_of_it_when_the_query_is_given() -> None:
    """httpx hands the path decoded: a task id spelt with ``%3F`` holds a ``?``."""
    found = classify_request("GET", "/a2a/tasks/a?b", {}, None, b"A2A-Version=1.0")
    assert found is not None and (found.task_id, found.version) == ("a?b", "1.0")


@pytest.mark.parametrize("binding", ["jsonrpc", "rest", "rest-v03-proto-names"])
def test_message_id_references_and_tenant(binding: str) -> None:
    refs = ["t0", 7, "", *(f"r{i}" for i in range(20))]
    if binding == "rest-v03-proto-names":  # a2a-sdk's v0.3 REST client: proto field names
        message = {"message_id": "m1", "reference_task_ids": refs}
        path, doc, headers = "/a2a/rest/v1/message:send", {"request": message}, {}
    else:
        message = {"messageId": "m1", "referenceTaskIds": refs}
        if binding == "jsonrpc":
            rpc = {"tenant": "acme", "message": message}
            doc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": rpc}
            path = "/a2a/jsonrpc"
        else:
            path, doc = "/a2a/rest/message:send", {"tenant": "acme", "message": message}
        headers = {"A2A-Version": "1.0"}
    req = classify_request("POST", path, headers, json.dumps(doc).encode())
    assert req is not None and req.operation is Op.SEND_MESSAGE
    assert req.message_id == "m1"
    # the strings among the first 16 references
    assert req.reference_task_ids == ("t0", *(f"r{i}" for i in range(13)))
    assert req.tenant == (None if binding == "rest-v03-proto-names" else "acme")
