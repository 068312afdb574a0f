"""httpx2 (Pydantic's continuation of httpx) against the real a2a-sdk peer: the same A2A calls
sent with httpx2's ``Client`` or ``AsyncClient`` give the spans, attributes, events and metrics
that httpx gives, and the application reads what it reads uninstrumented (``elapsed`` too).
What is installed and imported decides what is wrapped, and when: httpx2 absent (blocked from
import), outside the supported range, imported after ``instrument()``, or aliased to ``httpx``
(``httpx2.alias_httpx()``, which must run before anything imports httpx: so otel-a2a's start-up
hook must not)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import httpx
import httpx2
import pytest
from opentelemetry.instrumentation.utils import suppress_instrumentation

from otel_a2a.instrumentation import A2AInstrumentor, libraries
from otel_a2a.instrumentation.httpx_client import library
from tests.instrumentation.conftest import V1, Harness, make_harness

TIMEOUT = 10.0


@dataclass(frozen=True)
class Step:
    method: str
    url: str
    body: dict[str, Any] | None = None
    stream: bool = False
    hidden: bool = False  # sent with instrumentation suppressed: created out of our sight
    headers: dict[str, str] = field(default_factory=lambda: dict(V1))


Reply = tuple[int, bytes]
Scenario = Generator[Step, Reply, None]


def _rpc(base: str, method: str, params: dict[str, Any], **kw: Any) -> Step:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return Step("POST", base + "/a2a/jsonrpc", body, **kw)


def _message(text: str, task: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task is not None:
        msg |= {"taskId": task["id"], "contextId": task["contextId"]}
    return {"message": msg}


def _task(reply: Reply) -> dict[str, Any]:
    status, body = reply
    assert status == 200, body
    task: dict[str, Any] = json.loads(body)["result"]["task"]
    return task


def _scenario(base: str) -> Scenario:
    """Card, a task left waiting for input, GetTask read as a stream, the follow-up, a streamed
    message (SSE), and a follow-up to a task created out of sight (``no_observation``)."""
    status, _ = yield Step("GET", base + "/.well-known/agent-card.json", headers={})
    assert status == 200
    waiting = _task((yield _rpc(base, "SendMessage", _message("input please"))))
    yield _rpc(base, "GetTask", {"id": waiting["id"]}, stream=True)
    assert _task((yield _rpc(base, "SendMessage", _message("echo done", waiting))))["id"]
    status, sse = yield _rpc(base, "SendStreamingMessage", _message("echo sse"), stream=True)
    assert status == 200 and sse.count(b"data:") >= 3, sse
    hidden = _rpc(base, "SendMessage", _message("input elsewhere"), hidden=True)
    elsewhere = _task((yield hidden))
    _task((yield _rpc(base, "SendMessage", _message("echo here", elsewhere))))


def _drive(
    scenario: Scenario,
    send: Callable[[Step], Awaitable[Reply]],
    close: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Each step of ``scenario`` sent by ``send``, which also checks ``elapsed``: httpx2 reads
    it from the stream the tee stands in for. ``close``: the async client's, at the end."""

    async def drive() -> None:
        step = next(scenario)
        try:
            while True:
                with suppress_instrumentation() if step.hidden else contextlib.nullcontext():
                    reply = await send(step)
                try:
                    step = scenario.send(reply)
                except StopIteration:
                    return
        finally:
            if close is not None:
                await close()

    asyncio.run(asyncio.wait_for(drive(), 3 * TIMEOUT))


def _read_sync(lib: ModuleType, scenario: Scenario) -> None:
    with lib.Client(timeout=TIMEOUT) as client:

        async def send(step: Step) -> Reply:  # blocking: the sync client, as a sync app has it
            request = client.build_request(
                step.method, step.url, json=step.body, headers=step.headers
            )
            response = client.send(request, stream=step.stream)
            try:
                body = b"".join(response.iter_bytes())
            finally:
                response.close()
            assert isinstance(response.elapsed, datetime.timedelta)
            return response.status_code, body

        _drive(scenario, send)


def _read_async(lib: ModuleType, scenario: Scenario) -> None:
    client = lib.AsyncClient(timeout=TIMEOUT)

    async def send(step: Step) -> Reply:
        request = client.build_request(step.method, step.url, json=step.body, headers=step.headers)
        response = await client.send(request, stream=step.stream)
        try:
            body = b"".join([chunk async for chunk in response.aiter_bytes()])
        finally:
            await response.aclose()
        assert isinstance(response.elapsed, datetime.timedelta)
        return response.status_code, body

    _drive(scenario, send, client.aclose)


_IDS = ("a2a.task.id", "gen_ai.conversation.id", "otel_a2a.task.id.requested", "a2a.message.id")


def _observed(harness: Harness) -> dict[str, Any]:
    """What otel-a2a exported, with the peer's generated ids numbered by first appearance and
    the measured times (an observation's age, a divergence's) left out."""
    ids: dict[str, str] = {}

    def attrs(found: Any) -> dict[str, Any]:
        out = {}
        for key, value in dict(found or {}).items():
            if key in _IDS:
                value = ids.setdefault(value, f"id-{len(ids)}")
            if key not in ("otel_a2a.observation.age", "otel_a2a.divergence.age"):
                out[key] = value
        return out

    spans = [
        (
            s.name,
            s.kind.name,
            s.status.status_code.name,
            attrs(s.attributes),
            [(e.name, attrs(e.attributes)) for e in s.events],
        )
        for s in harness.spans()
    ]
    data = harness.reader.get_metrics_data()
    names = {
        m.name
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    metrics = {name: sorted(map(str, harness.points(name))) for name in sorted(names)}
    return {"spans": spans, "metrics": metrics}


def _observe(lib: ModuleType, read: Callable[[ModuleType, Scenario], None], base: str) -> Any:
    harness, instrumentor = make_harness()
    try:
        read(lib, _scenario(base))
    finally:
        instrumentor.uninstrument()
    return _observed(harness)


@pytest.mark.parametrize("read", [_read_sync, _read_async], ids=["sync", "async"])
def test_httpx2_is_observed_as_httpx_is(
    python_peer: str, read: Callable[[ModuleType, Scenario], None]
) -> None:
    through_httpx = _observe(httpx, read, python_peer)
    through_httpx2 = _observe(httpx2, read, python_peer)
    assert through_httpx2 == through_httpx
    # and what both saw is the scenario's: its spans, states, decisions and the divergence
    spans = through_httpx["spans"]
    assert [s[0] for s in spans] == [
        "GetAgentCard",
        *("SendMessage", "GetTask", "SendMessage"),
        *("SendStreamingMessage", "SendMessage"),
    ]
    states = [s[3].get("a2a.task.state") for s in spans]
    assert states == [
        None,
        *["TASK_STATE_INPUT_REQUIRED"] * 2,
        *["TASK_STATE_COMPLETED"] * 3,
    ]
    assert [e for e, _ in spans[4][4]] == ["otel_a2a.task.status", "otel_a2a.task.status"]
    # the follow-up diverged, and its own successful reply refuted that (the task was live)
    assert [
        (e, a["otel_a2a.divergence.reason"], a.get("otel_a2a.divergence.outcome"))
        for e, a in spans[5][4]
    ] == [
        ("otel_a2a.divergence", "no_observation", None),
        ("otel_a2a.divergence.resolved", "no_observation", "refuted"),
    ]
    assert spans[3][3]["otel_a2a.liveness.decision"] is True and spans[3][4] == []
    metrics = through_httpx["metrics"]
    assert "otel_a2a.instrumentation.errors" not in metrics
    assert len(metrics["otel_a2a.liveness.decisions"]) == 2  # authoritative, divergent


# -- what is wrapped ------------------------------------------------------------------------------


def _original(cls: type) -> Any:
    method = vars(cls)["send"]
    return getattr(method, "__wrapped__", method)


def test_uninstrument_restores_httpx2() -> None:
    originals = {cls: _original(cls) for cls in (httpx2.Client, httpx2.AsyncClient)}
    _, instrumentor = make_harness()
    try:
        for cls, original in originals.items():
            assert vars(cls)["send"].__wrapped__ is original
    finally:
        instrumentor.uninstrument()
    for cls, original in originals.items():
        assert vars(cls)["send"] is original


def test_an_unsupported_httpx2_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside the supported range: httpx only, and one warning saying so."""
    monkeypatch.setattr(libraries, "_instruments_httpx2", ("httpx2 >= 999",))
    original = _original(httpx2.Client)
    _, instrumentor = make_harness()
    try:
        assert vars(httpx2.Client)["send"] is original
        assert hasattr(vars(httpx.Client)["send"], "__wrapped__")
    finally:
        instrumentor.uninstrument()
    [warning] = [r.getMessage() for r in caplog.records if r.name == "otel_a2a"]
    assert f"httpx2 {httpx2.__version__} is installed" in warning and ">= 999" in warning


def _python(script: str, **env: str) -> dict[str, Any]:
    """``script`` in a fresh interpreter (no ``OTEL_*`` variable but ``env``); its last stdout
    line, a JSON document."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_without_httpx2_only_httpx_is_wrapped() -> None:
    """httpx2 blocked from import, as if not installed: instrument() wraps httpx, waits for
    no import of httpx2 and says nothing."""
    seen = _python(
        """
        import json, sys
        sys.modules["httpx2"] = None  # ``import httpx2`` raises ModuleNotFoundError
        import httpx
        from otel_a2a.instrumentation import A2AInstrumentor

        A2AInstrumentor().instrument()
        wrapped = [hasattr(c.send, "__wrapped__") for c in (httpx.Client, httpx.AsyncClient)]
        patches = A2AInstrumentor._libraries
        attached = [m.__name__ for m, _ in patches._undo] + sorted(patches._hooked)
        A2AInstrumentor().uninstrument()
        restored = not hasattr(httpx.Client.send, "__wrapped__")
        print(json.dumps({"wrapped": wrapped, "attached": attached, "restored": restored,
                          "blocked": sys.modules["httpx2"] is None}))
        """
    )
    assert seen["wrapped"] == [True, True] and seen["restored"] is True
    # httpx; flask, grpc and starlette are patched once imported (this interpreter imports none)
    assert seen["attached"] == ["httpx", "flask.app", "grpc", "starlette.applications"]
    assert seen["blocked"] is True
    assert "otel-a2a" not in seen["stderr"]


def test_httpx2_aliased_as_httpx_is_wrapped_once() -> None:
    """After ``httpx2.alias_httpx()`` both names are one module: one wrapper, one span."""
    seen = _python(
        """
        import json
        import httpx2
        httpx2.alias_httpx()
        import httpx
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from otel_a2a.instrumentation import A2AInstrumentor

        exporter, provider = InMemorySpanExporter(), TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        original = httpx2.Client.send
        A2AInstrumentor().instrument(tracer_provider=provider)
        layers = 0
        send = httpx2.Client.send
        while hasattr(send, "__wrapped__"):
            send, layers = send.__wrapped__, layers + 1
        task = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
        reply = {"jsonrpc": "2.0", "id": 1, "result": task}
        agent = httpx.MockTransport(lambda request: httpx.Response(200, json=reply))
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
        with httpx.Client(transport=agent) as client:
            client.post("http://agent.test/a2a", json=rpc, headers={"A2A-Version": "1.0"})
        A2AInstrumentor().uninstrument()
        print(json.dumps({"same": httpx is httpx2, "layers": layers,
                          "spans": [s.name for s in exporter.get_finished_spans()],
                          "restored": httpx2.Client.send is original}))
        """
    )
    assert seen["same"] is True and seen["layers"] == 1
    assert seen["spans"] == ["GetTask"] and seen["restored"] is True


def test_each_library_is_wrapped_once_it_is_imported() -> None:
    """instrument() imports neither library; each is wrapped when the application imports it,
    not after uninstrument(), and at the next instrument() since it is imported by then."""
    seen = _python(
        """
        import json, sys
        from otel_a2a.instrumentation import A2AInstrumentor

        def wrapped(module):
            return [hasattr(c.send, "__wrapped__") for c in (module.Client, module.AsyncClient)]

        A2AInstrumentor().instrument()
        imported = [name in sys.modules for name in ("httpx", "httpx2")]
        import httpx
        on_import = wrapped(httpx)
        A2AInstrumentor().uninstrument()
        import httpx2
        after_uninstrument = wrapped(httpx2) + wrapped(httpx)
        A2AInstrumentor().instrument()
        again = wrapped(httpx2) + wrapped(httpx)
        A2AInstrumentor().uninstrument()
        print(json.dumps({"imported": imported, "on_import": on_import, "again": again,
                          "after_uninstrument": after_uninstrument,
                          "restored": wrapped(httpx2) + wrapped(httpx)}))
        """
    )
    assert seen["imported"] == [False, False]
    assert seen["on_import"] == [True, True]
    assert seen["after_uninstrument"] == [False] * 4
    assert seen["again"] == [True] * 4
    assert seen["restored"] == [False] * 4


def test_alias_httpx_still_works_under_otel_a2a_enabled() -> None:
    """The start-up hook instruments before the application runs: had it imported httpx,
    httpx2 would refuse the alias (``RuntimeError``) and the application would not start."""
    seen = _python(
        """
        import json
        import httpx2

        httpx2.alias_httpx()
        import httpx

        send, layers = httpx.AsyncClient.send, 0
        while hasattr(send, "__wrapped__"):
            send, layers = send.__wrapped__, layers + 1
        print(json.dumps({"same": httpx is httpx2, "layers": layers}))
        """,
        OTEL_A2A_ENABLED="true",
        OTEL_TRACES_EXPORTER="none",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
    )
    assert seen == {"same": True, "layers": 1, "stderr": ""}


def test_the_tees_are_httpx2s() -> None:
    """The tees an httpx2 response gets are httpx2 streams (it refuses others)."""
    attachment = library(httpx2)
    assert attachment.module is httpx2
    assert issubclass(attachment.tee, httpx2.SyncByteStream)
    assert issubclass(attachment.async_tee, httpx2.AsyncByteStream)


def test_a_library_that_cannot_be_wrapped_is_reported_not_raised(
    otel: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The import hook runs inside the application's ``import``: a module that cannot be
    wrapped (here one without the httpx API) is counted and logged, never raised there."""
    patches = A2AInstrumentor._libraries
    patches._imported("httpx2", ModuleType("httpx2"))
    assert otel.total("otel_a2a.instrumentation.errors", error__type="AttributeError") == 1
    [warning] = [r.getMessage() for r in caplog.records if r.name == "otel_a2a"]
    assert warning.startswith("otel-a2a: httpx2 could not be instrumented (AttributeError")
    assert [m for m, _ in patches._undo][:2] == [httpx, httpx2]  # the real ones, still
