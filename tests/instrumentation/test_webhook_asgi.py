"""Push deliveries to a Starlette application (``instrumentation.webhook_asgi``), driven through
the ASGI interface as a server drives it: the application reads every byte unchanged, the
delivery becomes an observation, and nothing otel-a2a does reaches the application."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from otel_a2a.instrumentation import runtime
from otel_a2a.protocol.model import PushTarget
from otel_a2a.protocol.push import token_digest
from tests.instrumentation.conftest import Harness

AGENT = "http://agent.example/a2a"
TOKEN = "the-caller-token"


class Hook:
    """A webhook application that keeps what it read."""

    def __init__(self, path: str = "/hook") -> None:
        self.read: list[bytes] = []
        self.app = Starlette(routes=[Route(path, self._receive, methods=["POST"])])

    async def _receive(self, request: Request) -> Response:
        self.read.append(await request.body())
        return Response(status_code=204)


def _deliver(
    app: Any, path: str, chunks: list[bytes], token: str | None = TOKEN
) -> tuple[int, list[dict[str, Any]]]:
    """One POST through the ASGI interface, its body in ``chunks``; (status, messages the
    application sent)."""
    headers = [(b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"x-a2a-notification-token", token.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    incoming = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], sent


def _payload(task_id: str = "T", state: str = "TASK_STATE_INPUT_REQUIRED", pad: int = 0) -> bytes:
    status = {"taskId": task_id, "contextId": "c", "status": {"state": state}}
    if pad:
        status["metadata"] = {"pad": "x" * pad}
    return json.dumps({"statusUpdate": status}).encode()


def _rt() -> runtime.Runtime:
    rt = runtime.current()
    assert rt is not None
    return rt


def _register(path: str = "/hook", task_id: str | None = "T") -> None:
    _rt().webhooks.register(PushTarget(path, token_digest(TOKEN)), AGENT, task_id)


def _outcomes(otel: Harness) -> dict[str, float]:
    return {
        str(attrs["otel_a2a.push.outcome"]): value
        for attrs, value in otel.points("otel_a2a.push.deliveries")
    }


def test_a_delivery_read_in_chunks_is_observed_and_reaches_the_app_unchanged(
    otel: Harness,
) -> None:
    _register()
    hook = Hook()
    body = _payload()
    status, _ = _deliver(hook.app, "/hook", [body[:7], body[7:30], body[30:]])
    assert status == 204 and hook.read == [body]
    last = _rt().detector.ledger.get("T")
    assert last is not None
    assert (last.agent, last.state.value, last.source) == (
        AGENT,
        "input-required",
        "push_notification",
    )
    assert _outcomes(otel) == {"observed": 1}


def test_other_tokens_tasks_and_payloads_observe_nothing(otel: Harness) -> None:
    _register()
    hook = Hook()
    _deliver(hook.app, "/hook", [_payload()], token="forged")
    _deliver(hook.app, "/hook", [_payload()], token=None)
    _deliver(hook.app, "/hook", [_payload("U")])
    _deliver(hook.app, "/hook", [json.dumps({"message": {"messageId": "m"}}).encode()])
    assert len(hook.read) == 4
    assert _rt().detector.ledger.get("T") is None and _rt().detector.ledger.get("U") is None
    assert _outcomes(otel) == {"token_mismatch": 2, "unexpected_task": 1, "unrecognized": 1}
    exported = [str(s.to_json()) for s in otel.spans()]
    exported += [str(r.log_record.to_json()) for r in otel.logs.get_finished_logs()]
    assert not any(TOKEN in text or "forged" in text for text in exported)


def test_a_path_not_registered_is_left_alone(otel: Harness) -> None:
    _register("/elsewhere")
    hook = Hook()
    _deliver(hook.app, "/hook", [_payload()])
    assert hook.read == [_payload()]
    assert _outcomes(otel) == {} and _rt().detector.ledger.get("T") is None


def test_a_large_delivery_is_held_up_to_the_limit_and_read_from_its_prefix(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = _rt()
    monkeypatch.setattr(rt, "settings", dataclasses.replace(rt.settings, max_body_bytes=4096))
    _register()
    hook = Hook()
    body = _payload(pad=200_000)
    chunks = [body[i : i + 10_000] for i in range(0, len(body), 10_000)]
    _deliver(hook.app, "/hook", chunks)
    assert hook.read == [body]
    last = rt.detector.ledger.get("T")
    assert last is not None and last.state.value == "input-required"


def test_a_failure_inside_otel_a2a_never_reaches_the_application(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register()

    def broken(*_args: object) -> None:
        raise RuntimeError("inside otel-a2a")

    monkeypatch.setattr(_rt().webhooks, "deliver", broken)
    hook = Hook()
    status, _ = _deliver(hook.app, "/hook", [_payload()])
    assert status == 204 and hook.read == [_payload()]
    assert otel.total("otel_a2a.instrumentation.errors", error__type="RuntimeError") == 1


def test_a_mounted_application_sees_the_delivery_once(otel: Harness) -> None:
    _register("/outer/hook")
    inner = Hook()
    outer = Starlette(routes=[Mount("/outer", app=inner.app)])
    _deliver(outer, "/outer/hook", [_payload()])
    assert inner.read == [_payload()]
    assert _outcomes(otel) == {"observed": 1}


def test_a_pending_config_is_bound_by_its_first_push(otel: Harness) -> None:
    _register(task_id=None)
    hook = Hook("/hook/")
    _deliver(hook.app, "/hook/", [_payload("T")])  # a trailing slash is the same path
    _deliver(hook.app, "/hook/", [_payload("U")])
    assert len(hook.read) == 2
    assert _outcomes(otel) == {"observed": 1, "unexpected_task": 1}
    assert _rt().detector.ledger.get("T") is not None


def test_uninstrument_restores_starlette() -> None:
    from otel_a2a.instrumentation import A2AInstrumentor

    original = Starlette.__dict__["__call__"]
    instrumentor = A2AInstrumentor()
    instrumentor.instrument()
    try:
        assert Starlette.__dict__["__call__"] is not original
        assert Starlette.__dict__["__call__"].__wrapped__ is original
    finally:
        instrumentor.uninstrument()
    assert Starlette.__dict__["__call__"] is original
