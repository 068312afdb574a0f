"""The recorded wire exchanges (tests/fixtures/exchanges) are well formed and all present."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.peers import RUNTIMES

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXCHANGES = FIXTURES / "exchanges"
README = FIXTURES / "README.md"
OPERATIONS = {
    "GetAgentCard",
    "GetExtendedAgentCard",
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
}
CANONICAL = {
    "submitted",
    "working",
    "input-required",
    "auth-required",
    "completed",
    "failed",
    "canceled",
    "rejected",
    "unknown",
}
REQUEST_HEADERS = {"content-type", "a2a-version", "if-none-match"}
RESPONSE_HEADERS = {"content-type", "etag", "cache-control"}
EXPECT_KEYS = {
    "operation",
    "binding",
    "version",
    "jsonrpc_method",
    "request_task_id",
    "streaming",
    "note",
    "http_status",
    "states",
    "canonical_states",
    "final_state",
    "task_ids",
    "message_only",
    "error",
}
NAME = re.compile(r"^(\d{3})-([a-z0-9.]+(?:-[a-z0-9.]+)*)\.json$")


def _readme_counts() -> dict[str, int]:
    counts = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^- `(\w+)`: (\d+) exchanges$", README.read_text("utf-8"), re.M)
    }
    return counts


def _files(runtime: str) -> list[Path]:
    return sorted((EXCHANGES / runtime).glob("*.json"))


ALL = [p for rt in RUNTIMES for p in _files(rt)]


def test_counts_match_readme() -> None:
    counts = _readme_counts()
    assert set(counts) == set(RUNTIMES), f"README lists {counts}"
    for runtime in RUNTIMES:
        assert len(_files(runtime)) == counts[runtime], runtime
    assert not [p for p in EXCHANGES.iterdir() if p.name not in RUNTIMES]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_numbering_is_dense(runtime: str) -> None:
    numbers = []
    for path in _files(runtime):
        match = NAME.match(path.name)
        assert match, path.name
        numbers.append(int(match.group(1)))
    assert numbers == list(range(1, len(numbers) + 1))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_operation_is_recorded(runtime: str) -> None:
    seen = {json.loads(p.read_text("utf-8"))["expect"]["operation"] for p in _files(runtime)}
    assert seen - {None} == OPERATIONS
    assert None in seen  # the unknown-method exchange


def _check_body(record: dict[str, Any]) -> None:
    response = record["response"]
    body = response["body"]
    if response["sse"]:
        assert response["headers"]["content-type"].startswith("text/event-stream")
        frames = [
            line[5:].strip() for line in re.split(r"\r\n|\r|\n", body) if line.startswith("data:")
        ]
        assert frames, "an SSE exchange without data frames"
        for frame in frames:
            json.loads(frame)
        assert record["expect"]["sse_events"] == len(frames)
    elif response["status"] == 304:
        assert body == ""
    else:
        allowed = {"application/json", "application/a2a+json"}
        if record["expect"]["error"] is not None:
            # a2a-go's errors: REST application/problem+json; v0.3 JSON-RPC sets no type, Go's
            # net/http sniffs text/plain
            allowed |= {"application/problem+json", "text/plain"}
        assert response["headers"]["content-type"].split(";")[0] in allowed
        assert isinstance(json.loads(body), dict)


@pytest.mark.parametrize("path", ALL, ids=[f"{p.parent.name}/{p.stem}" for p in ALL])
def test_exchange_is_well_formed(path: Path) -> None:
    record: dict[str, Any] = json.loads(path.read_text("utf-8"))
    assert set(record) == {"runtime", "name", "request", "response", "expect"}
    assert record["runtime"] == path.parent.name
    assert path.name == f"{path.name[:3]}-{record['name']}.json"

    request = record["request"]
    assert set(request) == {"method", "path", "headers", "body"}
    assert request["method"] in {"GET", "POST", "DELETE"}
    assert request["path"].startswith("/")
    assert set(request["headers"]) <= REQUEST_HEADERS
    assert request["body"] is None or isinstance(request["body"], str)
    if request["body"] is not None:
        json.loads(request["body"])

    response = record["response"]
    assert set(response) == {"status", "headers", "body", "sse"}
    assert isinstance(response["status"], int) and 200 <= response["status"] < 600
    assert set(response["headers"]) <= RESPONSE_HEADERS
    assert isinstance(response["body"], str) and isinstance(response["sse"], bool)
    _check_body(record)

    expect = record["expect"]
    assert set(expect) >= EXPECT_KEYS
    assert expect["operation"] is None or expect["operation"] in OPERATIONS
    assert expect["binding"] in {None, "JSONRPC", "HTTP+JSON"}
    assert expect["http_status"] == response["status"]
    assert len(expect["states"]) == len(expect["canonical_states"])
    assert set(expect["canonical_states"]) <= CANONICAL
    if expect["states"]:
        assert expect["final_state"] == expect["canonical_states"][-1]
        assert expect["task_ids"]
    if expect["operation"] == "GetAgentCard":
        assert expect["version"] is None and expect["binding"] is None
        # a2a-go's card handler sends no ETag (and no Cache-Control)
        assert "card" in expect and (expect["card"]["etag"] or record["runtime"] == "go")
    elif expect["operation"] is not None:
        assert expect["version"] in {"1.0", "0.3", "2.0"}
        assert expect["binding"] in {"JSONRPC", "HTTP+JSON"}
    if expect["binding"] == "JSONRPC":
        assert request["method"] == "POST" and request["body"] is not None
        assert json.loads(request["body"])["method"] == expect["jsonrpc_method"]
    if expect["error"] is not None:
        assert not expect["states"]
        assert {"code", "http_status", "reason", "task_not_found"} <= set(expect["error"])
