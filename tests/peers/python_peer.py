"""A real A2A peer on a2a-sdk 1.3 (starlette + uvicorn) for otel-a2a's tests.

Run: ``python tests/peers/python_peer.py --port N`` (``0`` picks a free port). Once the socket
listens it prints ``READY <base_url>`` on stdout and serves, on 127.0.0.1 only:

- ``/.well-known/agent-card.json``: the card, ``Cache-Control: public, max-age=300``, weak ETag
  from the SDK, ``If-None-Match`` revalidation (304);
- ``/a2a/jsonrpc``: v1.0 JSON-RPC plus the v0.3 method names (``enable_v0_3_compat``);
- ``/a2a/rest``: v1.0 HTTP+JSON plus the v0.3 ``/v1/...`` routes;
- with ``--grpc``: a gRPC server on another port of 127.0.0.1 serving the v1.0 service
  (``GrpcHandler``) and the v0.3 one (``CompatGrpcHandler``) side by side, announced by a
  ``GRPC <host:port>`` line before ``READY`` and declared in the card as two ``GRPC``
  interfaces (``1.0`` and ``0.3``) at that ``host:port``; the card then also offers an
  extended card (version ``1.0.0-extended``, one more skill).

The executor's behaviour depends on the first word of the message text:

- ``echo ...`` (and any text not listed below): submitted, working, artifact, completed;
- ``slow ...``: submitted, working, then waits (at most ``--slow-timeout`` s, default 30) until a
  follow-up message for the task or a cancel; on timeout the task fails. A follow-up releases
  the waiting request (its stream ends with the task still ``working``) and is then executed
  as a fresh text on the same task (``echo`` completes it);
- ``input ...``: submitted, working, input-required (a follow-up continues the task);
- ``fail``: submitted, working, failed;
- ``reject``: submitted, rejected.

Cancel is supported on any non-terminal task.

``--push MODE`` makes the agent push-capable (a2a-sdk's in-memory push config store and its
``BasePushNotificationSender``, which POSTs each event of a task to the webhooks registered for
it with the config's ``X-A2A-Notification-Token``): ``deliver`` as configured, ``drop`` never
(a push that never comes), ``forge`` with the token ``forged-token`` instead of the config's.

``--card-per-caller`` serves one card per caller, as a multi-tenant agent does with a2a-sdk's
``card_modifier``: the card's description names the ``Authorization`` the fetch sent (so the
SDK's weak ETag differs per caller). ``--card-version V`` serves the card as version ``V``
(a redeploy, when the peer is restarted on the same port with another one). ``--task-db PATH``
keeps the tasks in a SQLite file (a2a-sdk's ``DatabaseTaskStore``) instead of memory: a peer
restarted on the same file still has them (a redeploy that kept the tasks).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import socket
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.agent_execution.simple_request_context_builder import (
    SimpleRequestContextBuilder,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware

HEARTBEAT_URI = "urn:otel-a2a:heartbeat:v1"
HEARTBEAT_SECONDS = 30
CARD_CACHE_CONTROL = "public, max-age=300"
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"


class SlowWaiters:
    """Tasks whose ``slow`` execution waits for a follow-up or a cancel."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[str]] = {}

    def register(self, task_id: str) -> asyncio.Future[str]:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._futures[task_id] = future
        return future

    def release(self, task_id: str, reason: str) -> bool:
        future = self._futures.pop(task_id, None)
        if future is None or future.done():
            return False
        future.set_result(reason)
        return True

    def forget(self, task_id: str) -> None:
        self._futures.pop(task_id, None)


class FollowUpAwareContextBuilder(SimpleRequestContextBuilder):
    """Wakes a waiting ``slow`` execution when a follow-up message for its task arrives.

    a2a-sdk 1.3 runs the requests of one task one after the other, so a follow-up cannot reach
    the executor while the ``slow`` request still runs; the request-context builder is the one
    hook that sees every incoming message first.
    """

    def __init__(self, waiters: SlowWaiters) -> None:
        super().__init__()
        self._waiters = waiters

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if task_id:
            self._waiters.release(task_id, "follow-up")
        return await super().build(
            context=context, params=params, task_id=task_id, context_id=context_id, task=task
        )


def _agent_text(text: str, task_id: str, context_id: str) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


class BehaviourExecutor(AgentExecutor):
    """Executor driven by the message text (see the module docstring)."""

    def __init__(self, waiters: SlowWaiters, slow_timeout: float) -> None:
        self._waiters = waiters
        self._slow_timeout = slow_timeout

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        if context.current_task is None:  # the SDK requires a Task event first
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=history,
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = context.get_user_input().strip()
        word = text.split(maxsplit=1)[0].lower() if text else ""
        if word == "reject":
            await updater.reject(_agent_text("rejected: " + text, task_id, context_id))
            return
        await updater.start_work()
        if word == "fail":
            await updater.failed(_agent_text("failed as asked", task_id, context_id))
        elif word == "input":
            await updater.requires_input(_agent_text("more input needed", task_id, context_id))
        elif word == "slow":
            future = self._waiters.register(task_id)
            try:
                await asyncio.wait_for(future, timeout=self._slow_timeout)
            except TimeoutError:
                await updater.failed(_agent_text("slow task timed out", task_id, context_id))
            finally:
                self._waiters.forget(task_id)
            # Released by a follow-up: return with the task still working; the follow-up
            # request runs next and decides what happens to the task.
        else:
            reply = text.split(maxsplit=1)[1] if word == "echo" and " " in text else text
            await updater.add_artifact([Part(text=f"echo: {reply}")], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        self._waiters.release(task_id, "cancel")
        await TaskUpdater(event_queue, task_id, context.context_id or "").cancel()


FORGED_TOKEN = "forged-token"


class PlantedPushStore(InMemoryPushNotificationConfigStore):
    """The configs a2a-sdk's sender dispatches to, as ``--push`` plants them: none (``drop``),
    or each with a forged token (``forge``)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self._mode = mode

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        configs = list(await super().get_info_for_dispatch(task_id))
        if self._mode == "drop":
            return []
        if self._mode == "forge":
            forged = []
            for config in configs:
                copy = TaskPushNotificationConfig()
                copy.CopyFrom(config)
                copy.token = FORGED_TOKEN
                forged.append(copy)
            return forged
        return configs


_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="anonymous")


class CallerMiddleware:
    """Remembers each request's ``Authorization`` for the ``card_modifier``, which is given
    the card only (a2a-sdk's ``create_agent_card_routes``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name == b"authorization":
                    _CALLER.set(value.decode("latin-1"))
        await self.app(scope, receive, send)


async def card_per_caller(card: AgentCard) -> AgentCard:
    served = AgentCard()
    served.CopyFrom(card)
    served.description = f"{card.description} (as served to {_CALLER.get()})"
    return served


def build_card(
    base_url: str, grpc_target: str | None = None, version: str = "1.0.0", push: bool = False
) -> AgentCard:
    extension = AgentExtension(
        uri=HEARTBEAT_URI,
        description="Task liveness: an authoritative observation is fresh for this long",
        params={"intervalSeconds": HEARTBEAT_SECONDS},
    )
    return AgentCard(
        name="otel-a2a Python test peer",
        description="a2a-sdk 1.3 peer whose behaviour follows the message text",
        version=version,
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + JSONRPC_PATH
            ),
            AgentInterface(
                protocol_binding="HTTP+JSON", protocol_version="1.0", url=base_url + REST_PATH
            ),
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="0.3", url=base_url + JSONRPC_PATH
            ),
            AgentInterface(
                protocol_binding="HTTP+JSON", protocol_version="0.3", url=base_url + REST_PATH
            ),
            *(
                AgentInterface(protocol_binding="GRPC", protocol_version=v, url=grpc_target)
                for v in (("1.0", "0.3") if grpc_target else ())
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=push,
            extensions=[extension],
            # served over gRPC only (``--grpc``): the other tests' card stays as it was
            extended_agent_card=grpc_target is not None,
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="behave",
                name="Behave",
                description="echo / slow / input / fail / reject, chosen by the first word",
                tags=["test"],
            )
        ],
    )


def build_handler(
    card: AgentCard,
    slow_timeout: float,
    push: str | None = None,
    http: Any = None,
    task_store: TaskStore | None = None,
) -> DefaultRequestHandler:
    """The agent's request handler; ``push`` the ``--push`` mode (``http``: the sender's
    ``httpx.AsyncClient``); ``task_store`` a store of ``--task-db`` (else in memory)."""
    waiters = SlowWaiters()
    store = PlantedPushStore(push) if push is not None else None
    sender = BasePushNotificationSender(http, store) if store is not None else None
    extended = None
    if card.capabilities.extended_agent_card:  # the card with one more skill
        extended = AgentCard()
        extended.CopyFrom(card)
        extended.version = "1.0.0-extended"
        extended.skills.add(id="extended", name="Extended", description="for callers known")
    return DefaultRequestHandler(
        agent_executor=BehaviourExecutor(waiters, slow_timeout),
        task_store=task_store or InMemoryTaskStore(),
        agent_card=card,
        extended_agent_card=extended,
        request_context_builder=FollowUpAwareContextBuilder(waiters),
        push_config_store=store,
        push_sender=sender,
    )


def build_app(
    base_url: str,
    slow_timeout: float = 30.0,
    card: AgentCard | None = None,
    handler: DefaultRequestHandler | None = None,
    per_caller: bool = False,
) -> Starlette:
    card = card or build_card(base_url)
    handler = handler or build_handler(card, slow_timeout)
    modifier = card_per_caller if per_caller else None
    return Starlette(
        middleware=[Middleware(CallerMiddleware)] if per_caller else [],
        routes=[
            *create_agent_card_routes(card, modifier, cache_control=CARD_CACHE_CONTROL),
            *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH, enable_v0_3_compat=True),
            *create_rest_routes(handler, path_prefix=REST_PATH, enable_v0_3_compat=True),
        ],
    )


class _ReadyServer(uvicorn.Server):
    """A uvicorn server that announces ``READY <base_url>`` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, base_url: str) -> None:
        super().__init__(config)
        self._base_url = base_url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            sys.stdout.write(f"READY {self._base_url}\n")
            sys.stdout.flush()


async def _start_grpc() -> tuple[Any, str]:
    """A grpc.aio server bound to a free loopback port (services added once the card, which
    names the port, exists)."""
    import grpc.aio

    server = grpc.aio.server()
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    return server, f"127.0.0.1:{grpc_port}"


def _add_grpc_services(server: Any, handler: DefaultRequestHandler) -> None:
    from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
    from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
    from a2a.server.request_handlers import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(CompatGrpcHandler(handler), server)


async def _task_store(path: str | None) -> TaskStore | None:
    """a2a-sdk's ``DatabaseTaskStore`` on the SQLite file ``path`` (None: in memory)."""
    if path is None:
        return None
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    store = DatabaseTaskStore(create_async_engine(f"sqlite+aiosqlite:///{path}"))
    await store.initialize()
    return store


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1; 0 = any")
    parser.add_argument("--slow-timeout", type=float, default=30.0, help="seconds, at most 30")
    parser.add_argument("--grpc", action="store_true", help="serve gRPC too (see above)")
    parser.add_argument("--card-per-caller", action="store_true", help="see above")
    parser.add_argument("--card-version", default="1.0.0", help="the card's version")
    parser.add_argument("--push", choices=("deliver", "drop", "forge"), help="see above")
    parser.add_argument("--task-db", help="SQLite file of the tasks (see above)")
    args = parser.parse_args(argv)
    slow_timeout = min(max(float(args.slow_timeout), 0.1), 30.0)

    # IPPROTO_TCP, as uvicorn's own listening sockets have (getaddrinfo gives it): asyncio sets
    # TCP_NODELAY on the connections of such a socket only, else each response waits ~40 ms
    # for a delayed ACK between its header and body segments
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(args.port)))
    port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"

    async def serve() -> None:
        grpc_server, grpc_target = (await _start_grpc()) if args.grpc else (None, None)
        card = build_card(base_url, grpc_target, args.card_version, args.push is not None)
        http = httpx.AsyncClient(timeout=10.0) if args.push is not None else None
        handler = build_handler(
            card, slow_timeout, args.push, http, await _task_store(args.task_db)
        )
        if grpc_server is not None:
            _add_grpc_services(grpc_server, handler)
            await grpc_server.start()
            sys.stdout.write(f"GRPC {grpc_target}\n")
        config = uvicorn.Config(
            build_app(base_url, slow_timeout, card, handler, args.card_per_caller),
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        try:
            await _ReadyServer(config, base_url).serve(sockets=[sock])
        finally:
            if grpc_server is not None:
                await grpc_server.stop(0.5)
            if http is not None:
                await http.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
