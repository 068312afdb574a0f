"""The one fake A2A agent of the tests: configurable, in-process or on a real loopback socket.

The real servers are the SDK peers (``tests/support/peers.py``); this agent plays, on demand,
what they cannot be made to send: chosen state spellings, a TaskNotFound for a live task, a
card whose ETag changes, broken bodies and broken connections. The same answers reach a
client two ways:

- in-process, behind ``httpx.MockTransport`` (:meth:`FakeAgent.client`): unit tests that move
  a fake clock;
- on 127.0.0.1 (``with agent.serve() as base_url``), written by a small threaded HTTP/1.1
  server, so that an answer can also break below HTTP: a body shorter than its
  ``Content-Length``, a reset mid-stream, a pause before each chunk, a hang-up, raw bytes.

What it answers, as an A2A v1.0 JSON-RPC agent:

- ``GET .../.well-known/agent-card.json``: :meth:`FakeAgent.card` with its ``ETag`` (and
  ``Cache-Control``); ``304`` for a matching ``If-None-Match`` when ``revalidate``;
- ``POST`` (any path) ``GetTask``, ``CancelTask``, ``SendMessage``: the task in the next
  answer of its script (:meth:`FakeAgent.script`), else in ``states``; an unknown task is
  TaskNotFound (``SendMessage`` creates it, working); ``SendStreamingMessage`` and
  ``SubscribeToTask``: the ``sse`` chunks as an event stream; ``GetExtendedAgentCard``.

``misbehave(agent, request)`` is asked first: a :class:`Reply` it returns is sent instead.
:func:`by_last_segment` builds one from named cases; :data:`MISBEHAVIOURS` are the ways real
peers break (:func:`misbehaving_agent` serves them); :func:`new_task_for_follow_ups` answers a
follow-up with a new task, as fasta2a does.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import importlib.util
import json
import select
import socket
import socketserver
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any

import httpx

CARD_PATH = "/.well-known/agent-card.json"
HEARTBEAT_URI = "urn:otel-a2a:heartbeat:v1"
NOT_FOUND = "<TaskNotFound>"  # a scripted answer: the agent no longer knows the task
MAX_HEAD = 64 * 1024  # request line and headers: more is refused (memory stays bounded)
STREAMS = ("SendStreamingMessage", "SubscribeToTask")

# the v1.0 TaskNotFound error, with its google.rpc.ErrorInfo
TASK_NOT_FOUND = {
    "code": -32001,
    "message": "Task not found",
    "data": [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "TASK_NOT_FOUND",
            "domain": "a2a-protocol.org",
            "metadata": {},
        }
    ],
}


@dataclass
class Reply:
    """What the agent sends for one request.

    ``body`` as bytes goes out whole with its ``Content-Length``; as an iterable of chunks it
    is a stream (close-delimited on the socket), each chunk sent as it comes. The rest needs
    the socket: ``length`` announces another ``Content-Length`` than the body's, ``pause``
    waits before each chunk (the first included) while watching whether the client hung up,
    ``reset`` ends with a TCP reset instead of a close, ``raw`` chunks are the whole answer
    (status line and headers included), and ``keep_alive`` reads the next request on the same
    connection instead of closing it.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Iterable[bytes] = b""
    length: int | None = None
    pause: float = 0.0
    reset: bool = False
    raw: bool = False
    keep_alive: bool = False


@dataclass(frozen=True)
class Encoded:
    """A scripted answer: the task in ``state``, sent as a stream with ``Content-Encoding:
    encoding`` (its body compressed as :func:`encode` does)."""

    state: str
    encoding: str


Answer = str | Encoded  # a state spelling, NOT_FOUND, or an encoded task
Misbehave = Callable[["FakeAgent", httpx.Request], Reply | None]


def json_reply(doc: object, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(
        status,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps(doc).encode(),
    )


def rpc_result(rid: object, result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def encode(reply: Reply, encoding: str) -> Reply:
    """``reply`` with its body compressed (gzip, raw deflate; br when httpx can decode it) and
    labelled ``encoding``."""
    data = reply.body if isinstance(reply.body, bytes) else b"".join(reply.body)
    if encoding == "gzip":
        data = gzip.compress(data, 9)
    elif encoding == "deflate":  # raw deflate (no zlib header), which httpx accepts too
        packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        data = packer.compress(data) + packer.flush()
    elif encoding == "br" and importlib.util.find_spec("brotli") is not None:
        import brotli  # httpx decodes br only when it is installed; else the body is read as is

        data = brotli.compress(data)
    headers = {**reply.headers, "Content-Encoding": encoding}
    body: bytes | list[bytes] = data if isinstance(reply.body, bytes) else [data]
    return replace(reply, headers=headers, body=body)


@dataclass
class FakeAgent:
    """A fake A2A v1.0 JSON-RPC agent; every field may be changed between requests."""

    base: str = "http://agent.test"  # serve() sets the socket's own
    name: str = "Fake Agent"
    version: str = "1.0.0"
    etag: str = 'W/"v1"'
    heartbeat: float | None = 30.0  # the card's heartbeat extension; None: no extension
    streaming: bool = True
    cache_control: str | None = "max-age=60"
    revalidate: bool = True  # False: If-None-Match is ignored (always 200)
    rpc_path: str = "/a2a"  # the card's interface URL (requests are answered on any path)
    states: dict[str, str] = field(default_factory=dict)  # task id -> wire spelling
    sse: Iterable[bytes] = field(default_factory=list)
    misbehave: Misbehave | None = None
    requests: list[httpx.Request] = field(default_factory=list, init=False)
    # on the socket: bytes written, and whether a client hung up in the middle of an answer
    sent: int = field(default=0, init=False)
    hung_up: threading.Event = field(default_factory=threading.Event, init=False)
    _scripts: dict[str, deque[Answer]] = field(default_factory=dict, init=False, repr=False)

    # -- what it says -----------------------------------------------------------------------
    def card(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"streaming": self.streaming}
        if self.heartbeat is not None:
            capabilities["extensions"] = [
                {"uri": HEARTBEAT_URI, "params": {"intervalSeconds": self.heartbeat}}
            ]
        return {
            "name": self.name,
            "description": "a fake A2A agent for otel-a2a's tests",
            "version": self.version,
            "supportedInterfaces": [
                {
                    "url": self.base + self.rpc_path,
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ],
            "capabilities": capabilities,
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }

    def task(self, task_id: str, state: str) -> dict[str, Any]:
        return {
            "id": task_id,
            "contextId": f"ctx-{task_id}",
            "status": {"state": state},
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "secret"}]}],
        }

    def script(self, task_id: str, *answers: Answer) -> None:
        """Queue the answers for ``task_id``'s next requests; once they are used up, another
        request for it is a test error (the script did not foresee it)."""
        self._scripts.setdefault(task_id, deque()).extend(answers)

    # -- answering --------------------------------------------------------------------------
    def respond(self, request: httpx.Request) -> Reply:
        self.requests.append(request)
        if self.misbehave is not None:
            reply = self.misbehave(self, request)
            if reply is not None:
                return reply
        return self.answer(request)

    def answer(self, request: httpx.Request) -> Reply:
        """The well-behaved answer (what a misbehaviour may start from)."""
        if request.method == "GET" and request.url.path.endswith(CARD_PATH):
            headers = {"ETag": self.etag}
            if self.cache_control is not None:
                headers["Cache-Control"] = self.cache_control
            if self.revalidate and request.headers.get("if-none-match") == self.etag:
                return Reply(304, {"ETag": self.etag})
            return json_reply(self.card(), headers=headers)
        if request.method != "POST":
            return Reply(404)
        body = json.loads(request.content)
        method, params, rid = body["method"], body.get("params", {}), body.get("id")
        if method == "GetExtendedAgentCard":
            extended = {**self.card(), "name": f"{self.name} (extended)", "version": "1.0.1"}
            return Reply(200, {"Content-Type": "application/json"}, rpc_result(rid, extended))
        if method in STREAMS:
            return Reply(200, {"Content-Type": "text/event-stream"}, self.sse)
        task_id = params.get("id") or params.get("message", {}).get("taskId") or "task-new"
        answer = self._next(task_id, method)
        if answer is None and method == "SendMessage":
            answer = self.states[task_id] = "TASK_STATE_WORKING"
        if answer is None or answer == NOT_FOUND:
            return json_reply({"jsonrpc": "2.0", "id": rid, "error": TASK_NOT_FOUND})
        state = answer.state if isinstance(answer, Encoded) else answer
        result: dict[str, Any] = self.task(task_id, state)
        reply = Reply(
            200,
            {"Content-Type": "application/json"},
            rpc_result(rid, {"task": result} if method == "SendMessage" else result),
        )
        if isinstance(answer, Encoded):
            assert isinstance(reply.body, bytes)
            return encode(replace(reply, body=[reply.body]), answer.encoding)
        return reply

    def _next(self, task_id: str, method: str) -> Answer | None:
        if task_id in self._scripts:
            queue = self._scripts[task_id]
            if not queue:
                raise AssertionError(f"fake agent: no scripted answer left for {method} {task_id}")
            return queue.popleft()
        return self.states.get(task_id)

    # -- in-process ---------------------------------------------------------------------------
    def handler(self, request: httpx.Request) -> httpx.Response:
        """``httpx.MockTransport``'s handler (answers that need a socket are test errors)."""
        reply = self.respond(request)
        if reply.raw or reply.reset or reply.pause or reply.length is not None:
            raise AssertionError("this answer needs the socket: use FakeAgent.serve()")
        content = reply.body if isinstance(reply.body, bytes) else iter(reply.body)
        return httpx.Response(reply.status, headers=reply.headers, content=content)

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(
            transport=httpx.MockTransport(self.handler), base_url=self.base, **kwargs
        )

    def rpc(
        self, client: httpx.Client, method: str, params: dict[str, Any], **kwargs: Any
    ) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return client.post("/a2a", json=body, headers={"A2A-Version": "1.0"}, **kwargs)

    # -- on a socket --------------------------------------------------------------------------
    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on 127.0.0.1 (a free port) from threads; yields the base URL. On exit every
        answer still pausing gives up and every connection thread is joined."""
        server = _Server(self)
        self.base = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, name="fake-agent", daemon=True)
        thread.start()
        try:
            yield self.base
        finally:
            server.stopping.set()
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)


class _Server(socketserver.ThreadingTCPServer):
    block_on_close = True  # server_close() joins the connection threads: none outlives a test

    def __init__(self, agent: FakeAgent) -> None:
        super().__init__(("127.0.0.1", 0), _Connection)
        self.agent = agent
        self.stopping = threading.Event()
        self.lock = threading.Lock()


class _Connection(socketserver.BaseRequestHandler):
    server: _Server
    request: socket.socket

    def handle(self) -> None:
        conn, server = self.request, self.server
        conn.settimeout(30)  # no recv or send outlives a test by much, whatever the client does
        with contextlib.suppress(OSError):
            while not server.stopping.is_set():
                request = self._read_request()
                if request is None:
                    return
                reply = server.agent.respond(request)
                if not self._send(reply):
                    return
                if reply.reset:  # SO_LINGER 0: close() sends a RST, and no FIN came first
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()  # before socketserver's shutdown(SHUT_WR) would send a FIN
                    return
                if not reply.keep_alive:
                    return

    def _read_request(self) -> httpx.Request | None:
        """The next request on the connection; None when the client closed it (or the test
        is over, or the head is over :data:`MAX_HEAD`)."""
        conn, head = self.request, b""
        while b"\r\n\r\n" not in head:
            if len(head) > MAX_HEAD or not _readable(conn, self.server.stopping):
                return None
            data = conn.recv(4096)
            if not data:
                return None
            head += data
        head, _, body = head.partition(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = [(k.strip(), v.strip()) for k, _, v in (f.partition(":") for f in fields)]
        length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
        while len(body) < length:
            data = conn.recv(min(65536, length - len(body)))
            if not data:
                return None
            body += data
        base = self.server.agent.base
        return httpx.Request(method, base + target, headers=headers, content=body)

    def _send(self, reply: Reply) -> bool:
        """Write ``reply``; False when the client hung up first (or the test is over)."""
        chunks: Iterable[bytes] = [reply.body] if isinstance(reply.body, bytes) else reply.body
        if not reply.raw and not self._write(_head(reply)):
            return False
        for chunk in chunks:
            if reply.pause and _hung_up_within(self.request, reply.pause, self.server.stopping):
                self.server.agent.hung_up.set()
                return False
            if self.server.stopping.is_set() or not self._write(chunk):
                return False
        return True

    def _write(self, data: bytes) -> bool:
        try:
            self.request.sendall(data)
        except (BrokenPipeError, ConnectionResetError):  # not a send timeout
            self.server.agent.hung_up.set()
            return False
        with self.server.lock:
            self.server.agent.sent += len(data)
        return True


def _head(reply: Reply) -> bytes:
    headers = dict(reply.headers)
    if reply.length is not None:
        headers["Content-Length"] = str(reply.length)
    elif isinstance(reply.body, bytes):
        headers["Content-Length"] = str(len(reply.body))
    if not reply.keep_alive:
        headers["Connection"] = "close"
    lines = [f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _readable(conn: socket.socket, stopping: threading.Event) -> bool:
    """Wait until ``conn`` has something to read (or EOF); False once the test is over."""
    while not stopping.is_set():
        if select.select([conn], [], [], 0.1)[0]:
            return True
    return False


def _hung_up_within(conn: socket.socket, seconds: float, stopping: threading.Event) -> bool:
    """Whether the client closes ``conn`` within ``seconds`` (False once the test is over)."""
    end = time.monotonic() + seconds
    while not stopping.is_set():
        left = end - time.monotonic()
        readable, _, _ = select.select([conn], [], [], min(max(left, 0.0), 0.1))
        if readable:
            try:
                return conn.recv(1) == b""
            except ConnectionResetError:
                return True
        if left <= 0:
            return False
    return False


def by_last_segment(cases: Mapping[str, Misbehave]) -> Misbehave:
    """A misbehaviour picked by the last segment of the request's path (``/a2a/<case>``)."""

    def pick(agent: FakeAgent, request: httpx.Request) -> Reply | None:
        case = cases.get(request.url.path.rstrip("/").rsplit("/", 1)[-1])
        return None if case is None else case(agent, request)

    return pick


def new_task_for_follow_ups(agent: FakeAgent, request: httpx.Request) -> Reply | None:
    """Answer a follow-up naming a task with a new, ``submitted`` task, as fasta2a does: its
    ``TaskManager.send_message`` submits a new task whatever ``message.taskId`` says. v0.3
    ``message/send`` (the dialect fasta2a speaks) gets the new Task tagged ``kind: task``,
    v1.0 ``SendMessage`` gets ``{"task": ...}``. The new task joins ``states``; anything else
    gets the usual answer."""
    if request.method != "POST" or request.url.path.endswith(CARD_PATH):
        return None
    body = json.loads(request.content)
    method = body.get("method")
    message = body.get("params", {}).get("message", {})
    named = message.get("taskId")
    if method not in ("message/send", "SendMessage") or not named:
        return None
    v03 = method == "message/send"
    new_id = f"{named}-new-{len(agent.states)}"
    state = agent.states[new_id] = "submitted" if v03 else "TASK_STATE_SUBMITTED"
    task = agent.task(new_id, state)
    task["contextId"] = message.get("contextId", task["contextId"])  # fasta2a keeps the context
    result = {**task, "kind": "task"} if v03 else {"task": task}
    return Reply(200, {"Content-Type": "application/json"}, rpc_result(body.get("id"), result))


# -- the ways real peers break ----------------------------------------------------------------

BOMB = "gzip_bomb"  # 32 MiB of JSON in ~32 KB of gzip
BOMB_TEXT_BYTES = 32 * 1024 * 1024
_SSE = {"Content-Type": "text/event-stream"}


def _status_frame(state: str) -> bytes:
    update = {"statusUpdate": {"taskId": "t-1", "contextId": "c-1", "status": {"state": state}}}
    return b"data: " + rpc_result(1, update) + b"\n\n"


@functools.cache
def bomb_body() -> bytes:
    task = {
        "id": "t-1",
        "contextId": "c-1",
        "status": {"state": "TASK_STATE_WORKING"},
        "history": [{"messageId": "m", "parts": [{"text": "a" * BOMB_TEXT_BYTES}]}],
    }
    return gzip.compress(rpc_result(1, task), 9)


def _corrupt_gzip(agent: FakeAgent, request: httpx.Request) -> Reply:
    """A gzip header, then 256 KiB that inflate to nothing."""
    body = b"\x1f\x8b\x08\x00" + bytes(range(256)) * 1024
    return Reply(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, body)


def _truncated(agent: FakeAgent, request: httpx.Request) -> Reply:
    reply = agent.answer(request)
    assert isinstance(reply.body, bytes)
    return replace(reply, length=len(reply.body) + 500)


def _sse_error(agent: FakeAgent, request: httpx.Request) -> Reply:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "internal"}}
    failed = b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
    return Reply(200, _SSE, [_status_frame("TASK_STATE_WORKING"), failed])


MISBEHAVIOURS: dict[str, Misbehave] = {
    "ok": lambda agent, request: agent.answer(request),
    "http404": lambda agent, request: json_reply(
        {"error": {"code": 404, "status": "NOT_FOUND", "message": "no"}}, 404
    ),
    "http500": lambda agent, request: Reply(500, {"Content-Type": "text/plain"}, b"boom"),
    "invalid_json": lambda agent, request: Reply(
        200, {"Content-Type": "application/json"}, b'{"jsonrpc": "2.0", "result": {"id": '
    ),
    "truncated": _truncated,
    "reset_stream": lambda agent, request: Reply(
        200, _SSE, [_status_frame("TASK_STATE_WORKING")], reset=True
    ),
    "sse_error": _sse_error,
    "sse_ok": lambda agent, request: Reply(
        200,
        _SSE,
        [b": ping\n\n", _status_frame("TASK_STATE_WORKING"), _status_frame("TASK_STATE_COMPLETED")],
    ),
    "gzip": lambda agent, request: encode(agent.answer(request), "gzip"),
    "deflate_raw": lambda agent, request: encode(agent.answer(request), "deflate"),
    "gzip_corrupt": _corrupt_gzip,
    BOMB: lambda agent, request: Reply(
        200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb_body()
    ),
}
# every case but the bomb (the differential test reads each case four times); a client asks
# for "card" and "card_304" at the card path, the others at /a2a/<case>
CASES = ("card", "card_304", *(name for name in MISBEHAVIOURS if name != BOMB))
MISBEHAVING_ETAG = 'W/"card-1"'


def misbehaving_agent() -> FakeAgent:
    """The agent of :data:`MISBEHAVIOURS`: task ``t-1`` is working; its card revalidates."""
    return FakeAgent(
        name="Misbehaving",
        etag=MISBEHAVING_ETAG,
        heartbeat=None,
        states={"t-1": "TASK_STATE_WORKING"},
        misbehave=by_last_segment(MISBEHAVIOURS),
    )
