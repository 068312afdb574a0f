"""The demo's orchestrator: a plain a2a-sdk client, the way a real service would write one.

    python demo/orchestrator.py --agent http://127.0.0.1:G [options]

It imports nothing from otel-a2a: it is instrumented only by ``OTEL_A2A_ENABLED=true`` in its
environment (the interpreter-start hook), which is the point of the demo. What it does:

1. fetches the Agent Card through the gateway with ``A2ACardResolver`` and caches it for
   ``--card-ttl`` seconds (re-fetched when the TTL has run out at the next step);
2. starts a long job on the worker, streaming (``SendStreamingMessage``, the default: the card
   says ``streaming: true``) or not (``SendMessage`` with ``returnImmediately``, then polling
   ``GetTask`` every ``--poll-interval`` s), over ``--binding JSONRPC``, ``HTTP+JSON`` or
   ``GRPC`` (the card's gRPC interface, on ``grpc.aio.insecure_channel``);
3. every ``--tick`` seconds takes one liveness decision, like a real orchestrator:
   tick ``--follow-up-tick`` sends a follow-up message to the task, tick ``--cancel-tick``
   cancels it, every other tick *waits on it*, which it marks as an explicit decision with the
   plain OpenTelemetry API (a span that starts with ``otel_a2a.liveness.decision=true``,
   ``a2a.task.id`` and ``otel_a2a.agent.url``); ``--over-poll`` adds a ``GetTask`` every
   ``--poll-interval`` s even while the stream is healthy;
4. gives up after ``--timeout`` seconds, its own uninstrumented baseline: only then does it
   check the task (``GetTask``) and cancel it if it still looks live.

It believes what its responses tell it and nothing else: it learns that the task died only
from a response that says so or from its own timeout. Each step is printed as one JSON line
(``t`` wall-clock seconds, ``elapsed``, ``step``, ``belief``, ``action``, ``detail``) to stdout
or to ``--timeline FILE``. ``--hold`` keeps the process (and the Prometheus ``/metrics`` it
serves when instrumented) alive after the last step until stdin is closed (at most 60 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from opentelemetry import trace

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# Error texts that tell the orchestrator the task is gone (JS and Python SDK wordings).
_GONE_HINTS = ("terminal state", "not found", "not cancelable", "notcancelable", "notfound")


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``; unknown values -> ``unspecified``."""
    try:
        name = str(TaskState.Name(state))
    except ValueError:
        return "unspecified"
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass
class Belief:
    """What the orchestrator believes about its task, and since when."""

    state: str = "none"
    terminal: bool = False
    source: str = ""


class Timeline:
    """One JSON line per step, flushed at once (the scenario reads it while we run)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.start = time.time()
        self.lock = threading.Lock()

    def step(self, step: str, belief: Belief, action: str, detail: str = "", **extra: Any) -> None:
        now = time.time()
        record = {
            "t": round(now, 6),
            "elapsed": round(now - self.start, 3),
            "step": step,
            "belief": belief.state,
            "terminal": belief.terminal,
            "action": action,
            "detail": detail,
            **extra,
        }
        with self.lock:
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()


class CardCache:
    """The card as a real orchestrator keeps it: fetched once, trusted for the TTL."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, ttl: float, tl: Timeline) -> None:
        self.resolver = A2ACardResolver(http, base_url)
        self.ttl = ttl
        self.tl = tl
        self.card: AgentCard | None = None
        self.fetched = 0.0

    async def get(self, belief: Belief) -> AgentCard:
        if self.card is not None and time.monotonic() - self.fetched < self.ttl:
            return self.card
        try:
            card = await self.resolver.get_agent_card()
        except Exception as exc:
            if self.card is None:
                raise
            self.tl.step("card", belief, "card refresh failed: keep the cached card", _err(exc))
            self.fetched = time.monotonic()
            return self.card
        action = "fetched the agent card" if self.card is None else "re-fetched the card (TTL)"
        self.card, self.fetched = card, time.monotonic()
        self.tl.step(
            "card",
            belief,
            action,
            f"version {card.version}, streaming={card.capabilities.streaming}, "
            f"cached for {self.ttl:g} s",
            card_version=card.version,
        )
        return card


def _err(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def _gone(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower().replace("_", " ")
    return any(hint in text or hint in text.replace(" ", "") for hint in _GONE_HINTS)


class Orchestrator:
    def __init__(self, args: argparse.Namespace, tl: Timeline) -> None:
        self.args = args
        self.tl = tl
        self.belief = Belief()
        self.task_id = ""
        self.context_id = ""
        self.agent_url = ""
        self.tracer = trace.get_tracer("demo.orchestrator")
        self.started = asyncio.Event()
        self.stream_open = False

    # -- beliefs ------------------------------------------------------------------------------
    def observe(self, state: int, source: str) -> None:
        self.belief = Belief(state_name(state), state in TERMINAL, source)

    def learn_gone(self, source: str, exc: BaseException) -> None:
        self.belief = Belief("gone", True, source)
        self.tl.step(
            "learned", self.belief, f"{source}: the worker says the task is gone", _err(exc)
        )

    def _from_task(self, task: Task, source: str) -> None:
        if task.id and not self.task_id:
            self.task_id, self.context_id = task.id, task.context_id
        self.observe(task.status.state, source)

    def _from_event(self, event: StreamResponse, source: str) -> str:
        kind = event.WhichOneof("payload")
        if kind == "task":
            self._from_task(event.task, source)
        elif kind == "status_update":
            self.observe(event.status_update.status.state, source)
        return kind or "?"

    # -- the job ------------------------------------------------------------------------------
    def _message(self, text: str, follow_up: bool) -> SendMessageRequest:
        message = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)]
        )
        if follow_up:
            message.task_id, message.context_id = self.task_id, self.context_id
        return SendMessageRequest(message=message)

    async def consume_stream(self, client: Client) -> None:
        request = self._message(f"long job {self.args.job_seconds:g}", follow_up=False)
        frames = 0
        try:
            async for event in client.send_message(request):
                frames += 1
                kind = self._from_event(event, "stream")
                if not self.started.is_set() and self.task_id:
                    self.stream_open = True
                    self.started.set()
                    self.tl.step(
                        "start",
                        self.belief,
                        "started the long job (stream open)",
                        kind,
                        task_id=self.task_id,
                    )
                elif kind == "status_update":
                    self.tl.step("stream", self.belief, "stream frame", kind)
                if self.belief.terminal:
                    break
        except Exception as exc:
            self.tl.step("stream", self.belief, "stream failed", _err(exc))
        finally:
            self.stream_open = False
            self.started.set()
        if not self.belief.terminal:
            self.tl.step(
                "stream",
                self.belief,
                "stream closed before a terminal state: keep waiting (the card says streaming)",
                f"{frames} frames",
            )

    async def start_polling(self, client: Client) -> None:
        request = self._message(f"long job {self.args.job_seconds:g}", follow_up=False)
        async for event in client.send_message(request):
            self._from_event(event, "SendMessage")
        self.tl.step("start", self.belief, "started the long job (polling)", task_id=self.task_id)
        self.started.set()

    async def get_task(self, client: Client, why: str) -> None:
        try:
            task = await client.get_task(GetTaskRequest(id=self.task_id, history_length=0))
        except Exception as exc:
            if _gone(exc):
                self.learn_gone("GetTask", exc)
            else:
                self.tl.step("poll", self.belief, f"GetTask failed ({why})", _err(exc))
            return
        before = self.belief.state
        self._from_task(task, "GetTask")
        self.tl.step("poll", self.belief, f"GetTask ({why})", f"{before} -> {self.belief.state}")

    async def poller(self, client: Client) -> None:
        while not self.belief.terminal:
            await asyncio.sleep(self.args.poll_interval)
            if self.belief.terminal:
                return
            await self.get_task(client, "over-poll" if self.args.over_poll else "poll")

    async def follow_up(self, client: Client) -> None:
        request = self._message("any progress? add the Q3 numbers please", follow_up=True)
        self.tl.step("follow_up", self.belief, "sends a follow-up message to the task")
        try:
            async for event in client.send_message(request):
                self._from_event(event, "follow-up response")
        except Exception as exc:
            if _gone(exc):
                self.learn_gone("follow-up", exc)
            else:
                self.tl.step("follow_up", self.belief, "follow-up failed", _err(exc))
            return
        self.tl.step("follow_up", self.belief, "follow-up accepted")

    async def cancel(self, client: Client, why: str) -> None:
        self.tl.step("cancel", self.belief, f"cancel the task ({why})")
        try:
            task = await client.cancel_task(CancelTaskRequest(id=self.task_id))
        except Exception as exc:
            if _gone(exc):
                self.learn_gone("CancelTask", exc)
            else:
                self.tl.step("cancel", self.belief, "cancel failed", _err(exc))
            return
        self._from_task(task, "CancelTask")
        self.tl.step("cancel", self.belief, "cancel answered")

    def wait_decision(self) -> None:
        """Waiting on the task assumes it is live: say so with the plain OpenTelemetry API."""
        attributes: dict[str, str | bool] = {
            "otel_a2a.liveness.decision": True,
            "a2a.task.id": self.task_id,
            "otel_a2a.agent.url": self.agent_url,
            "otel_a2a.decision.assumed_state": "working",
        }
        with self.tracer.start_as_current_span("orchestrator wait_on_task", attributes=attributes):
            self.tl.step("wait", self.belief, "keep waiting on the task (assume it is live)")

    # -- main loop ----------------------------------------------------------------------------
    async def run(self) -> int:
        args = self.args
        timeout = httpx.Timeout(connect=5.0, read=None, write=10.0, pool=None)
        async with httpx.AsyncClient(timeout=timeout) as http:
            cards = CardCache(http, args.agent, args.card_ttl, self.tl)
            card = await cards.get(self.belief)
            bindings = [args.binding]
            # a gRPC interface URL is a bare host:port target: the agent is the card's URL
            self.agent_url = next(
                (
                    i.url
                    for i in card.supported_interfaces
                    if i.protocol_binding == args.binding != "GRPC"
                ),
                args.agent,
            )
            factory = None
            if args.binding == "GRPC":
                import grpc.aio  # only when asked: the HTTP bindings need no grpcio

                factory = grpc.aio.insecure_channel
            streaming = await create_client(
                card,
                client_config=ClientConfig(
                    streaming=True,
                    supported_protocol_bindings=bindings,
                    httpx_client=http,
                    grpc_channel_factory=factory,
                ),
            )
            unary = await create_client(
                card,
                client_config=ClientConfig(
                    streaming=False,
                    polling=True,
                    supported_protocol_bindings=bindings,
                    httpx_client=http,
                    grpc_channel_factory=factory,
                ),
            )
            background: list[asyncio.Task[None]] = []
            try:
                if args.streaming:
                    background.append(asyncio.create_task(self.consume_stream(streaming)))
                    await asyncio.wait_for(self.started.wait(), timeout=30)
                else:
                    await self.start_polling(unary)
                if not self.task_id:
                    self.tl.step("error", self.belief, "the job did not start")
                    return 1
                if args.over_poll or not args.streaming:
                    background.append(asyncio.create_task(self.poller(unary)))
                await self.ticks(cards, unary)
            finally:
                for task in background:
                    task.cancel()
                for task in background:
                    with contextlib.suppress(BaseException):
                        await task
                await streaming.close()
                await unary.close()
        return 0

    async def ticks(self, cards: CardCache, client: Client) -> None:
        args = self.args
        origin = time.monotonic()
        tick = 0
        while True:
            tick += 1
            await asyncio.sleep(max(0.0, origin + tick * args.tick - time.monotonic()))
            if self.belief.terminal:
                self.tl.step("done", self.belief, f"the task ended ({self.belief.source})")
                return
            if time.monotonic() - origin >= args.timeout:
                self.tl.step(
                    "timeout",
                    self.belief,
                    f"gave up after {args.timeout:g} s (the baseline's own timeout)",
                )
                await self.get_task(client, "after the timeout")
                if not self.belief.terminal:
                    await self.cancel(client, "gave up")
                self.tl.step("done", self.belief, "stopped after the timeout")
                return
            await cards.get(self.belief)
            if tick == args.follow_up_tick:
                await self.follow_up(client)
            elif tick == args.cancel_tick:
                await self.cancel(client, "no longer needed")
            else:
                self.wait_decision()
            if self.belief.terminal:
                self.tl.step("done", self.belief, f"the task ended ({self.belief.source})")
                return


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="otel-a2a-orchestrator", description=(__doc__ or "").split("\n", 1)[0]
    )
    p.add_argument("--agent", required=True, help="base URL of the agent (the gateway)")
    p.add_argument("--binding", choices=["JSONRPC", "HTTP+JSON", "GRPC"], default="JSONRPC")
    p.add_argument("--streaming", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--card-ttl", type=float, default=300.0, help="card cache TTL, s")
    p.add_argument("--tick", type=float, default=60.0, help="seconds between decisions")
    p.add_argument("--timeout", type=float, default=300.0, help="give-up timeout (baseline), s")
    p.add_argument("--poll-interval", type=float, default=15.0, help="GetTask polling period, s")
    p.add_argument("--over-poll", action="store_true", help="GetTask even while streaming")
    p.add_argument("--follow-up-tick", type=int, default=1, help="tick of the follow-up (0: none)")
    p.add_argument("--cancel-tick", type=int, default=0, help="tick of the cancel (0: none)")
    p.add_argument("--job-seconds", type=float, default=600.0, help="length of the job asked")
    p.add_argument("--timeline", type=argparse.FileType("w"), default=None)
    p.add_argument("--hold", action="store_true", help="after the last step wait for stdin EOF")
    return p.parse_args(argv)


def _hold() -> None:
    """Keep serving /metrics until the parent closes stdin (at most 60 s)."""
    done = threading.Event()

    def wait_eof() -> None:
        with contextlib.suppress(Exception):
            sys.stdin.read()
        done.set()

    threading.Thread(target=wait_eof, daemon=True).start()
    done.wait(timeout=60)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tl = Timeline(args.timeline or sys.stdout)
    orchestrator = Orchestrator(args, tl)

    async def runner() -> int:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, task.cancel)
        return await orchestrator.run()

    try:
        code = asyncio.run(runner())
    except (asyncio.CancelledError, KeyboardInterrupt):
        tl.step("stopped", orchestrator.belief, "stopped by a signal")
        return 130
    except Exception as exc:
        tl.step("error", orchestrator.belief, "orchestrator failed", _err(exc))
        code = 1
    tl.step("exit", orchestrator.belief, "finished", code=code)
    if args.hold:
        _hold()
    return code


if __name__ == "__main__":
    sys.exit(main())
