"""The httpx wrappers' edges: responses dropped unread and unclosed, and the SDK set-up of
``OTEL_A2A_ENABLED`` kept off the event loop (asyncio and trio, as httpx runs on both), with
httpx2's clients too where the library's own stream handling is involved."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otel_a2a.instrumentation import httpx_client, late_setup, runtime
from tests.instrumentation.conftest import V1, Harness, make_harness

BASE = "http://agent.test"
TASK = (
    b'{"jsonrpc":"2.0","id":1,"result":{"id":"t1","contextId":"c",'
    b'"status":{"state":"TASK_STATE_WORKING"}}}'
)
FRAME = (
    b'data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"s1","contextId":"c",'
    b'"status":{"state":"TASK_STATE_WORKING"}}}}\n\n'
)
BACKENDS = ["asyncio", "trio"]


def _rpc(method: str, params: dict[str, str]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


GET = _rpc("GetTask", {"id": "t1"})
SUBSCRIBE = _rpc("SubscribeToTask", {"id": "s1"})


async def _chunks(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _agent(lib: ModuleType, body: Callable[[list[bytes]], Any] = iter) -> Any:
    """A ``MockTransport`` of ``lib`` (httpx or httpx2) with streamed bodies, so that the
    application decides what is read: ``iter`` for a sync client, ``_chunks`` for an async one."""

    def handle(request: Any) -> Any:
        if request.url.path != "/a2a":
            return lib.Response(200, text="ok")
        if json.loads(request.content)["method"] == "GetTask":
            return lib.Response(200, content=body([TASK]))
        sse = {"Content-Type": "text/event-stream"}
        return lib.Response(200, headers=sse, content=body([FRAME] * 3))

    return lib.MockTransport(handle)


def test_a_response_dropped_unread_ends_its_span_at_the_next_request(
    otel: Harness, http_lib: ModuleType
) -> None:
    """Not at collection time: a finaliser may run inside a span processor holding its lock."""
    with http_lib.Client(transport=_agent(http_lib), base_url=BASE) as client:
        request = client.build_request("POST", "/a2a", json=GET, headers=V1)
        response = client.send(request, stream=True)
        del response
        gc.collect()
        assert otel.spans("GetTask") == []
        collected = time.time_ns()
        assert client.get("/health").text == "ok"  # any request through the client
    (span,) = otel.spans("GetTask")
    assert span.end_time is not None and span.end_time <= collected
    assert (span.attributes or {}).get("a2a.task.id") == "t1"


def test_a_stream_left_after_one_frame_ends_with_an_abnormal_end(
    otel: Harness, http_lib: ModuleType
) -> None:
    with http_lib.Client(transport=_agent(http_lib), base_url=BASE) as client:
        request = client.build_request("POST", "/a2a", json=SUBSCRIBE, headers=V1)
        response = client.send(request, stream=True)
        for _line in response.iter_lines():
            break
        del response, _line
        gc.collect()
        client.get("/health")
    span = otel.span("SubscribeToTask")
    assert [e.name for e in span.events] == ["otel_a2a.task.status", "otel_a2a.stream.abnormal_end"]
    assert (span.attributes or {})["a2a.task.state"] == "TASK_STATE_WORKING"


def test_uninstrument_ends_the_spans_of_dropped_responses() -> None:
    harness, instrumentor = make_harness()
    try:
        with httpx.Client(transport=_agent(httpx), base_url=BASE) as client:
            request = client.build_request("POST", "/a2a", json=GET, headers=V1)
            client.send(request, stream=True)  # dropped at once
            gc.collect()
            assert harness.spans("GetTask") == []
    finally:
        instrumentor.uninstrument()
    assert len(harness.spans("GetTask")) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_async_stream_left_unclosed_ends_its_span(
    otel: Harness, http_lib: ModuleType, backend: str
) -> None:
    """The event loop finalises the abandoned async generators; the next request ends the
    span (polled with a deadline: the loop decides when its finaliser runs)."""

    async def main() -> None:
        transport = _agent(http_lib, _chunks)
        async with http_lib.AsyncClient(transport=transport, base_url=BASE) as client:
            request = client.build_request("POST", "/a2a", json=SUBSCRIBE, headers=V1)
            response = await client.send(request, stream=True)
            async for _chunk in response.aiter_bytes():
                break
            del response
            deadline = time.monotonic() + 30
            while not otel.spans("SubscribeToTask") and time.monotonic() < deadline:
                gc.collect()
                await anyio.sleep(0)  # let the loop run its async-generator finaliser
                await client.get("/health")

    anyio.run(main, backend=backend)
    span = otel.span("SubscribeToTask")
    assert [e.name for e in span.events] == ["otel_a2a.task.status", "otel_a2a.stream.abnormal_end"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_sdk_set_up_runs_off_the_event_loop(
    otel: Harness, http_lib: ModuleType, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Configuring the SDK takes up to a few hundred ms: the loop must go on meanwhile. The
    fake set-up waits for a task of the loop; run on the loop, it would wait out its deadline
    and fail."""
    rt = runtime.current()
    assert rt is not None
    rt.setup_pending = "configure"
    loop_ran = threading.Event()
    setup_threads: list[int] = []

    def configure() -> bool:
        setup_threads.append(threading.get_ident())
        return loop_ran.wait(timeout=30)

    monkeypatch.setattr(late_setup, "configure_from_environment", configure)

    async def main() -> int:
        async def other_work() -> None:
            await anyio.sleep(0)
            loop_ran.set()

        transport = _agent(http_lib, _chunks)
        async with (
            anyio.create_task_group() as tg,
            http_lib.AsyncClient(transport=transport, base_url=BASE) as client,
        ):
            tg.start_soon(other_work)
            response = await client.post("/a2a", json=GET, headers=V1)
            assert response.json()["result"]["id"] == "t1"
        return threading.get_ident()

    loop_thread = anyio.run(main, backend=backend)
    assert loop_ran.is_set()
    assert len(setup_threads) == 1 and setup_threads[0] != loop_thread
    assert rt.setup_pending is None
    assert len(otel.spans("GetTask")) == 1


def test_ending_dropped_responses_never_re_enters_a_span_processor(otel: Harness) -> None:
    """An application processor that makes an httpx request in ``on_end`` (a webhook, say)
    while a dropped response's span ends must not be re-entered by that request."""
    depth, deepest, ended = [0], [0], []
    webhook = httpx.Client(transport=_agent(httpx), base_url=BASE)

    class Webhook(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            depth[0] += 1
            deepest[0] = max(deepest[0], depth[0])
            try:
                ended.append(span.name)
                webhook.get("/health")
            finally:
                depth[0] -= 1

    otel.tracer_provider.add_span_processor(Webhook())
    with httpx.Client(transport=_agent(httpx), base_url=BASE) as client:
        for _ in range(2):
            client.send(client.build_request("POST", "/a2a", json=GET, headers=V1), stream=True)
        gc.collect()
        client.get("/health")
    webhook.close()
    assert ended == ["GetTask", "GetTask"]
    assert deepest == [1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_attaching_to_a_provider_stays_on_the_loop(
    otel: Harness, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Waiting for an SDK provider to attach to is a cheap check: no thread hop per request
    (a non-SDK provider, to which nothing can be attached, would otherwise cost one forever)."""
    from anyio import to_thread
    from opentelemetry import trace
    from opentelemetry.trace import NoOpTracerProvider

    rt = runtime.current()
    assert rt is not None
    rt.setup_pending = "attach"
    monkeypatch.setattr(trace, "get_tracer_provider", NoOpTracerProvider)
    hops: list[object] = []
    real_run_sync = to_thread.run_sync

    async def counted(*args: object, **kwargs: object) -> object:
        hops.append(args[0])
        return await real_run_sync(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(to_thread, "run_sync", counted)

    async def main() -> None:
        transport = _agent(httpx, _chunks)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            for _ in range(3):
                assert (await client.post("/a2a", json=GET, headers=V1)).status_code == 200

    anyio.run(main, backend=backend)
    assert hops == []
    assert rt.setup_pending == "attach"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_sdk_set_up_needs_no_token_of_the_default_thread_limiter(
    otel: Harness, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Starlette runs sync endpoints on anyio's default limiter: threads waiting on this
    request may hold all of it. The set-up hop has a limiter of its own."""
    from anyio import to_thread

    rt = runtime.current()
    assert rt is not None
    rt.setup_pending = "configure"
    monkeypatch.setattr(late_setup, "configure_from_environment", lambda: True)

    async def main() -> None:
        default = to_thread.current_default_thread_limiter()
        before = default.total_tokens
        default.total_tokens = 1
        try:
            async with default:  # the application's threads hold every token
                with anyio.fail_after(30):
                    transport = _agent(httpx, _chunks)
                    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
                        await client.post("/a2a", json=GET, headers=V1)
        finally:
            default.total_tokens = before

    anyio.run(main, backend=backend)
    assert rt.setup_pending is None
    assert len(otel.spans("GetTask")) == 1


_EXIT_SCRIPT = """
import gc, httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from otel_a2a.instrumentation import A2AInstrumentor

class Printing(SpanExporter):
    def export(self, spans):
        for span in spans:
            print("exported", span.name, flush=True)
        return SpanExportResult.SUCCESS
    def shutdown(self):
        print("shutdown", flush=True)

A2AInstrumentor().instrument()  # before the application's provider: attached at first use
provider = TracerProvider()  # registers its exit-time shutdown now
provider.add_span_processor(SimpleSpanProcessor(Printing()))
trace.set_tracer_provider(provider)

def agent(request):
    body = b'{"jsonrpc":"2.0","id":1,"result":{"id":"t1","status":{"state":"TASK_STATE_WORKING"}}}'
    return httpx.Response(200, content=iter([body]))

client = httpx.Client(transport=httpx.MockTransport(agent), base_url="http://agent.test")
request = client.build_request(
    "POST", "/a2a", headers={"A2A-Version": "1.0"},
    json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t1"}},
)
client.send(request, stream=True)  # dropped unread
gc.collect()
"""


def test_a_dropped_response_is_exported_at_exit_before_the_provider_shuts_down() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["exported GetTask", "shutdown"]


def test_the_headers_read_are_those_of_the_public_raw(http_lib: ModuleType) -> None:
    """Headers are read from ``Headers.raw`` (httpx and httpx2 each): the names wanted,
    whatever their case, the first of a repeated one last (as a dict keeps it), nothing
    else; a subclass keeping them elsewhere is read through its ``raw`` too."""
    items = [
        ("A2A-Version", "1.0"),
        ("CONTENT-TYPE", "application/json"),
        ("X-Other", "ignored"),
        ("etag", '"v1"'),
        ("Cache-Control", "max-age=5"),
        ("Content-Encoding", "gzip"),
        ("Authorization", "Bearer caller"),  # read for per-caller cards (card_variant)
        ("Cookie", "session=1"),
        ("X-API-Key", "k"),
    ]

    class Elsewhere(http_lib.Headers):  # type: ignore[misc,name-defined]
        """A subclass whose public ``raw`` is all that may be trusted."""

        @property
        def raw(self) -> list[tuple[bytes, bytes]]:
            return [(k.encode(), v.encode()) for k, v in items]

    for headers in (http_lib.Headers(items), Elsewhere([("A2A-Version", "forged")])):
        read = httpx_client.read_headers(headers, httpx_client.REQUEST_HEADERS)
        assert read == {
            "a2a-version": "1.0",
            "content-type": "application/json",
            "authorization": "Bearer caller",
            "cookie": "session=1",
            "x-api-key": "k",
        }
        read = httpx_client.read_headers(headers, httpx_client._RESPONSE_HEADERS)
        assert read == {
            "content-type": "application/json",
            "etag": '"v1"',
            "cache-control": "max-age=5",
            "content-encoding": "gzip",
        }
