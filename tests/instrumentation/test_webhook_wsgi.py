"""Push deliveries to a Flask application (``instrumentation.webhook_wsgi``), driven through
the WSGI interface as a server drives it: the application reads every byte unchanged, however
it reads them, the delivery becomes an observation, and nothing otel-a2a does reaches the
application."""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Response, request
from starlette.applications import Starlette
from starlette.routing import Mount
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.test import EnvironBuilder, run_wsgi_app

from otel_a2a.instrumentation.webhook_wsgi import Input
from tests.instrumentation.conftest import Harness
from tests.instrumentation.test_webhook_asgi import (
    AGENT,
    TOKEN,
    _outcomes,
    _payload,
    _register,
    _rt,
)
from tests.instrumentation.test_webhook_asgi import (
    _deliver as deliver_asgi,
)

Reader = Callable[[Any], bytes]


def _read_all(stream: Any) -> bytes:
    return bytes(stream.read())


def _read_in_pieces(stream: Any) -> bytes:
    pieces = []
    while piece := stream.read(7):
        pieces.append(piece)
    return b"".join(pieces)


def _read_lines(stream: Any) -> bytes:
    lines = []
    while line := stream.readline():
        lines.append(line)
    return b"".join(lines)


READERS: dict[str, Reader] = {
    "get_data": lambda _stream: request.get_data(),
    "read": _read_all,
    "read(7)": _read_in_pieces,
    "readline": _read_lines,
    "readlines": lambda stream: b"".join(stream.readlines()),
    "iteration": lambda stream: b"".join(stream),
}


class Hook:
    """A webhook application that keeps what it read (with ``reader``, from ``wsgi.input``
    through werkzeug's stream as a view does), and the input stream it was given."""

    def __init__(self, path: str = "/hook", reader: Reader = READERS["get_data"]) -> None:
        self.read: list[bytes] = []
        self.inputs: list[Any] = []
        self.reader = reader
        self.app = Flask(__name__)
        self.app.add_url_rule(path, "hook", self._receive, methods=["GET", "POST", "PUT"])

    def _receive(self) -> Response:
        self.inputs.append(request.environ["wsgi.input"])
        self.read.append(self.reader(request.stream))
        return Response(status=204)


def _deliver(
    app: Any,
    path: str,
    body: bytes,
    token: str | None = TOKEN,
    method: str = "POST",
    stream: io.IOBase | None = None,
) -> int:
    """One request through the WSGI interface; its status."""
    headers = [("Content-Type", "application/json")]
    if token is not None:
        headers.append(("X-A2A-Notification-Token", token))
    environ = EnvironBuilder(path=path, method=method, data=body, headers=headers).get_environ()
    if stream is not None:  # a server's own stream, and a body it terminates (chunked)
        environ["wsgi.input"] = stream
        environ["wsgi.input_terminated"] = True
        del environ["CONTENT_LENGTH"]
    return _status(app, environ)


def _status(app: Any, environ: dict[str, Any]) -> int:
    """The status of ``app``'s answer to ``environ``, its body read as a server does."""
    _, status, _ = run_wsgi_app(app, environ, buffered=True)
    return int(status.split()[0])


class Socketish(io.RawIOBase):
    """A server's input stream with only ``read`` and ``readline`` (as gunicorn's ``Body``):
    no ``readinto``, which werkzeug then does without."""

    def __init__(self, data: bytes, piece: int = 5) -> None:
        self._data = io.BytesIO(data)
        self._piece = piece

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self._data.read()
        return self._data.read(min(size, self._piece))

    def readline(self, size: int | None = -1) -> bytes:
        return self._data.readline(size)

    def __getattribute__(self, name: str) -> Any:
        if name == "readinto":
            raise AttributeError(name)
        return super().__getattribute__(name)


def _observed(state: str = "input-required") -> None:
    last = _rt().detector.ledger.get("T")
    assert last is not None
    assert (last.agent, last.state.value, last.source) == (AGENT, state, "push_notification")


@pytest.mark.parametrize("how", list(READERS))
def test_a_delivery_however_read_is_observed_and_reaches_the_app_unchanged(
    otel: Harness, how: str
) -> None:
    _register()
    hook = Hook(reader=READERS[how])
    body = json.dumps(json.loads(_payload()), indent=1).encode()  # lines to read
    assert _deliver(hook.app, "/hook", body) == 204
    assert hook.read == [body] and isinstance(hook.inputs[0], Input)
    _observed()
    assert _outcomes(otel) == {"observed": 1}


@pytest.mark.parametrize("how", ["get_data", "read(7)", "readline"])
def test_a_body_the_server_terminates_is_whole_at_its_end(otel: Harness, how: str) -> None:
    _register()
    hook = Hook(reader=READERS[how])
    body = _payload()
    assert _deliver(hook.app, "/hook", body, stream=Socketish(body)) == 204
    assert hook.read == [body]
    assert not hasattr(hook.inputs[0], "readinto")  # as the server's stream
    _observed()


def test_other_tokens_tasks_and_payloads_observe_nothing(otel: Harness) -> None:
    _register()
    hook = Hook()
    _deliver(hook.app, "/hook", _payload(), token="forged")
    _deliver(hook.app, "/hook", _payload(), token=None)
    _deliver(hook.app, "/hook", _payload("U"))
    _deliver(hook.app, "/hook", json.dumps({"message": {"messageId": "m"}}).encode())
    assert len(hook.read) == 4
    assert _rt().detector.ledger.get("T") is None and _rt().detector.ledger.get("U") is None
    assert _outcomes(otel) == {"token_mismatch": 2, "unexpected_task": 1, "unrecognized": 1}
    exported = [str(s.to_json()) for s in otel.spans()]
    exported += [str(r.log_record.to_json()) for r in otel.logs.get_finished_logs()]
    assert not any(TOKEN in text or "forged" in text for text in exported)


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_a_request_other_than_a_post_is_left_alone(otel: Harness, method: str) -> None:
    _register()
    hook = Hook()
    assert _deliver(hook.app, "/hook", _payload(), method=method) == 204
    assert hook.read == [_payload()] and not isinstance(hook.inputs[0], Input)
    assert _outcomes(otel) == {} and _rt().detector.ledger.get("T") is None


def test_a_path_not_registered_is_left_alone(otel: Harness) -> None:
    _register("/elsewhere")
    hook = Hook()
    _deliver(hook.app, "/hook", _payload())
    assert hook.read == [_payload()] and not isinstance(hook.inputs[0], Input)
    assert _outcomes(otel) == {} and _rt().detector.ledger.get("T") is None


def test_a_body_the_app_does_not_read_is_not_read(otel: Harness) -> None:
    _register()
    app = Flask(__name__)
    app.add_url_rule("/hook", "hook", lambda: Response(status=401), methods=["POST"])
    stream = io.BytesIO(_payload())
    assert _deliver(app, "/hook", _payload(), stream=stream) == 401
    assert stream.tell() == 0
    assert _outcomes(otel) == {}


def test_a_large_delivery_is_held_up_to_the_limit_and_read_from_its_prefix(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = _rt()
    monkeypatch.setattr(rt, "settings", dataclasses.replace(rt.settings, max_body_bytes=4096))
    _register()
    hook = Hook(reader=READERS["read(7)"])
    body = _payload(pad=200_000)
    _deliver(hook.app, "/hook", body)
    assert hook.read == [body]
    _observed()


def test_a_failing_application_fails_as_it_would_and_what_it_read_counts(
    otel: Harness,
) -> None:
    _register()
    failure = RuntimeError("the application's own")

    def fail() -> Response:
        request.get_data()
        raise failure

    app = Flask(__name__)
    app.add_url_rule("/hook", "hook", fail, methods=["POST"])
    assert _deliver(app, "/hook", _payload()) == 500  # Flask's answer to it
    app.testing = True  # the exception itself reaches the server
    with pytest.raises(RuntimeError) as raised:
        _deliver(app, "/hook", _payload())
    assert raised.value is failure
    assert _outcomes(otel) == {"observed": 2}
    assert otel.total("otel_a2a.instrumentation.errors") == 0


def test_a_failure_inside_otel_a2a_never_reaches_the_application(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register()

    def broken(*_args: object) -> None:
        raise RuntimeError("inside otel-a2a")

    monkeypatch.setattr(_rt().webhooks, "deliver", broken)
    hook = Hook(reader=READERS["read(7)"])
    assert _deliver(hook.app, "/hook", _payload()) == 204
    assert hook.read == [_payload()]
    assert otel.total("otel_a2a.instrumentation.errors", error__type="RuntimeError") == 1


def test_a_client_gone_before_the_end_is_no_delivery(otel: Harness) -> None:
    _register()
    app = Flask(__name__)
    app.add_url_rule("/hook", "hook", lambda: Response(request.get_data()), methods=["POST"])
    environ = EnvironBuilder(path="/hook", method="POST", data=_payload()).get_environ()
    environ["wsgi.input"] = io.BytesIO(_payload()[:20])  # Content-Length says more
    assert _status(app, environ) == 400  # werkzeug's ClientDisconnected
    assert _outcomes(otel) == {} and otel.total("otel_a2a.instrumentation.errors") == 0


def test_a_mounted_application_behind_a_middleware_is_observed(otel: Harness) -> None:
    _register("/outer/hook")
    inner = Hook()
    inner.app.wsgi_app = ProxyFix(inner.app.wsgi_app)  # type: ignore[method-assign]
    outer = Flask(__name__)
    outer.wsgi_app = DispatcherMiddleware(outer.wsgi_app, {"/outer": inner.app})  # type: ignore[method-assign]
    _deliver(outer, "/outer/hook", _payload())
    assert inner.read == [_payload()]
    assert _outcomes(otel) == {"observed": 1}


def test_a_flask_application_a_starlette_one_runs_sees_the_delivery_once(
    otel: Harness,
) -> None:
    with warnings.catch_warnings():  # deprecated for a2wsgi, which works alike
        warnings.simplefilter("ignore")
        from starlette.middleware.wsgi import WSGIMiddleware

    _register("/outer/hook")
    # the middleware sends no Content-Length: werkzeug's stream would be empty
    inner = Hook(reader=lambda _stream: request.environ["wsgi.input"].read())
    outer = Starlette(routes=[Mount("/outer", app=WSGIMiddleware(inner.app))])
    assert deliver_asgi(outer, "/outer/hook", [_payload()])[0] == 204
    assert inner.read == [_payload()] and not isinstance(inner.inputs[0], Input)
    assert _outcomes(otel) == {"observed": 1}


def test_a_pending_config_is_bound_by_its_first_push(otel: Harness) -> None:
    _register(task_id=None)
    hook = Hook("/hook/")
    _deliver(hook.app, "/hook/", _payload("T"))  # a trailing slash is the same path
    _deliver(hook.app, "/hook/", _payload("U"))
    assert len(hook.read) == 2
    assert _outcomes(otel) == {"observed": 1, "unexpected_task": 1}
    _observed()


EARLY = Hook()  # made on import, before the test instruments


def test_an_application_made_before_instrument_is_observed(otel: Harness) -> None:
    _register()
    _deliver(EARLY.app, "/hook", _payload())
    assert EARLY.read == [_payload()] and isinstance(EARLY.inputs[0], Input)
    _observed()


def test_a_middleware_that_took_wsgi_app_before_instrument_is_not_observed() -> None:
    """docs/limits.md: it holds the method as it was."""
    from otel_a2a.instrumentation import A2AInstrumentor

    hook = Hook()
    hook.app.wsgi_app = ProxyFix(hook.app.wsgi_app)  # type: ignore[method-assign]
    instrumentor = A2AInstrumentor()
    instrumentor.instrument()
    try:
        _register()
        _deliver(hook.app, "/hook", _payload())
        assert hook.read == [_payload()] and not isinstance(hook.inputs[0], Input)
        assert _rt().detector.ledger.get("T") is None
    finally:
        instrumentor.uninstrument()


def test_uninstrument_restores_flask() -> None:
    from otel_a2a.instrumentation import A2AInstrumentor

    original = Flask.__dict__["wsgi_app"]
    instrumentor = A2AInstrumentor()
    instrumentor.instrument()
    try:
        assert Flask.__dict__["wsgi_app"] is not original
        assert Flask.__dict__["wsgi_app"].__wrapped__ is original
    finally:
        instrumentor.uninstrument()
    assert Flask.__dict__["wsgi_app"] is original
