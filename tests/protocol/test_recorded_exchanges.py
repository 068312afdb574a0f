"""Every recorded real exchange (tests/fixtures/exchanges) is recognised by the wire layer.

The fixtures come from the real SDK peers (a2a-sdk 1.3.0, @a2a-js/sdk 1.3.0, a2a-go 2.3.1, the
A2A Java SDK 1.0.0.Alpha3); their ``expect`` blocks were written from what each request was
and a protocol reading of the response made by the capture script, independently of
``otel_a2a``. Here: each request classifies to its expected operation, binding and version;
each response (plain body or SSE stream, fed in small chunks) yields exactly the recorded task
states, in order, with the canonical value expected; errors are seen as errors; well-known
cards give their etag (or, with none, the JCS hash) and heartbeat.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from otel_a2a.protocol.card import parse_card
from otel_a2a.protocol.classify import classify_request
from otel_a2a.protocol.extract import extract_response
from otel_a2a.protocol.model import A2ARequest, ResponseFacts, TaskReport
from otel_a2a.protocol.sse import SSEParser

EXCHANGES = Path(__file__).resolve().parents[1] / "fixtures" / "exchanges"
FILES = sorted(EXCHANGES.glob("*/*.json"))

# Known wire-layer gaps, one strict xfail each (it fails loudly once fixed: remove it then).
KNOWN_GAPS: dict[str, str] = {}


def _load(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


def _ids(paths: list[Path]) -> list[str]:
    return [f"{p.parent.name}/{p.stem}" for p in paths]


def _params(paths: list[Path], gaps: dict[str, str] | None = None) -> list[Any]:
    out = []
    for path, ident in zip(paths, _ids(paths), strict=True):
        reason = (gaps or {}).get(ident)
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        out.append(pytest.param(path, id=ident, marks=marks))
    return out


def _classify(record: dict[str, Any]) -> A2ARequest | None:
    req = record["request"]
    body = None if req["body"] is None else req["body"].encode("utf-8")
    return classify_request(req["method"], req["path"], req["headers"], body)


def _facts(request: A2ARequest, record: dict[str, Any]) -> list[ResponseFacts]:
    response = record["response"]
    body = response["body"].encode("utf-8")
    if not response["sse"]:
        return [extract_response(request, response["status"], body)]
    parser = SSEParser(request, max_frame_bytes=1 << 20)
    events = []
    for start in range(0, len(body), 7):  # small, unaligned chunks: frames split anywhere
        events.extend(parser.feed(body[start : start + 7]))
    events.extend(parser.close())
    return [e.facts for e in events if not e.comment]


def _reports(facts: list[ResponseFacts]) -> list[TaskReport]:
    return [r for f in facts for r in f.reports]


def test_fixtures_exist() -> None:
    assert FILES, f"no recorded exchanges under {EXCHANGES}"


@pytest.mark.parametrize("path", _params(FILES))
def test_request_is_classified(path: Path) -> None:
    record = _load(path)
    expect = record["expect"]
    request = _classify(record)
    if expect["operation"] is None:
        assert request is None, f"not an A2A operation, classified as {request}"
        return
    assert request is not None, "an A2A request was not recognised"
    assert request.operation.value == expect["operation"]
    if expect["binding"] is not None:
        assert request.binding.value == expect["binding"]
    assert request.version == expect["version"]
    if expect["jsonrpc_method"] is not None:
        assert request.jsonrpc_method == expect["jsonrpc_method"]
    if expect["request_task_id"] is not None:
        assert request.task_id == expect["request_task_id"]


@pytest.mark.parametrize("path", _params(FILES, KNOWN_GAPS))
def test_response_states_are_extracted(path: Path) -> None:
    record = _load(path)
    expect = record["expect"]
    request = _classify(record)
    if request is None or expect["operation"] == "GetAgentCard":
        return
    facts = _facts(request, record)
    reports = [r for r in _reports(facts) if r.state is not None]
    assert [r.state.raw for r in reports if r.state] == expect["states"]
    assert [r.state.state.value for r in reports if r.state] == expect["canonical_states"]
    assert all(r.state.mapped for r in reports if r.state)
    seen_ids = {r.task_id for r in _reports(facts)}
    assert seen_ids == set(expect["task_ids"])
    errors = [f.error for f in facts if f.error is not None]
    if expect["error"] is None:
        assert not errors, f"unexpected error {errors}"
    else:
        assert errors, "a recorded error was not extracted"
        assert errors[0].task_not_found == expect["error"]["task_not_found"]
        if record["expect"]["binding"] == "JSONRPC":
            assert errors[0].code == expect["error"]["code"]
    assert all(f.recognized for f in facts), "a payload was not recognised"


CARDS = [p for p in FILES if _load(p)["expect"]["operation"] == "GetAgentCard"]


@pytest.mark.parametrize("path", _params(CARDS))
def test_card_is_parsed(path: Path) -> None:
    record = _load(path)
    response = record["response"]
    card_expect = record["expect"]["card"]
    if response["status"] != 200:
        return  # a 304 keeps the previous card (revalidation)
    info = parse_card(response["status"], response["headers"], response["body"].encode("utf-8"))
    assert info is not None
    if card_expect["etag"] is None:  # a2a-go: no ETag, no Cache-Control
        text = json.dumps(json.loads(response["body"]), sort_keys=True, separators=(",", ":"))
        assert info.etag == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        assert info.etag_source == "jcs"
        assert info.max_age is None
    else:
        assert info.etag == card_expect["etag"]
        assert info.etag_source == "header"
        assert info.max_age == 300
    assert info.heartbeat == card_expect["heartbeat_interval"]
    assert info.heartbeat_source == "extension"
    assert info.streaming is card_expect["streaming"]


# What each recorded error reply states about the task the request named (raw, canonical),
# read off the recorded bodies: a2a-sdk spells the proto name, @a2a-js/sdk the v1.0 enum
# number; a TaskNotCancelable says "not cancelable" and no state unless its message names
# one (a2a-go's does). Every other error: nothing.
STATED_BY_ERRORS: dict[str, tuple[str, str]] = {
    "python/040-cancel-jsonrpc-v1-terminal": ("TASK_NOT_CANCELABLE", "unknown"),
    "python/041-cancel-rest-v1-terminal": ("TASK_NOT_CANCELABLE", "unknown"),
    "python/042-subscribe-jsonrpc-v1-terminal": ("TASK_STATE_COMPLETED", "completed"),
    "python/043-send-jsonrpc-v1-followup-terminal": ("TASK_STATE_COMPLETED", "completed"),
    "node/040-cancel-jsonrpc-v1-terminal": ("TASK_NOT_CANCELABLE", "unknown"),
    "node/041-cancel-rest-v1-terminal": ("TASK_NOT_CANCELABLE", "unknown"),
    "node/042-subscribe-jsonrpc-v1-terminal": ("3", "completed"),
    "node/043-send-jsonrpc-v1-followup-terminal": ("3", "completed"),
    # a2a-go: 'task in non-cancelable state TASK_STATE_COMPLETED' (TaskNotCancelable), and
    # 'task in a terminal state "TASK_STATE_COMPLETED"' (InvalidParams) for a message
    "go/038-cancel-jsonrpc-v1-terminal": ("TASK_STATE_COMPLETED", "completed"),
    "go/039-cancel-rest-v1-terminal": ("TASK_STATE_COMPLETED", "completed"),
    "go/041-send-jsonrpc-v1-followup-terminal": ("TASK_STATE_COMPLETED", "completed"),
    # a2a-java: "Task cannot be canceled - current state: TASK_STATE_COMPLETED", over both
    # bindings (HTTP+JSON: 409 and the class-named error); its SubscribeToTask on a terminal
    # task answers TaskNotFound, which states nothing
    "jvm/028-cancel-jsonrpc-v1-terminal": ("TASK_STATE_COMPLETED", "completed"),
    "jvm/029-cancel-rest-v1-terminal": ("TASK_STATE_COMPLETED", "completed"),
}
ERRORS = [
    p for p in FILES if _load(p)["expect"]["error"] is not None and _classify(_load(p)) is not None
]


def test_the_stated_replies_are_recorded_errors() -> None:
    assert set(STATED_BY_ERRORS) <= set(_ids(ERRORS))


@pytest.mark.parametrize("path", _params(ERRORS))
def test_an_error_reply_states_what_it_says_of_the_named_task(path: Path) -> None:
    record = _load(path)
    request = _classify(record)
    assert request is not None
    [error] = [f.error for f in _facts(request, record) if f.error is not None]
    expected = STATED_BY_ERRORS.get(f"{path.parent.name}/{path.stem}")
    if expected is None:
        assert error.report is None
        return
    report = error.report
    assert report is not None and report.state is not None
    assert (report.task_id, report.kind) == (request.task_id, "error-reply")
    assert (report.state.raw, report.state.state.value) == expected
