"""Shared builders for the detect tests."""

from __future__ import annotations

from otel_a2a.detect.ledger import Observation
from otel_a2a.protocol.model import CardInfo, Interface
from otel_a2a.protocol.states import TaskState


def make_card(
    etag: str = '"v1"',
    *,
    name: str | None = "worker",
    interfaces: tuple[str, ...] = (),
    heartbeat: float | None = None,
    heartbeat_source: str | None = None,
) -> CardInfo:
    return CardInfo(
        etag=etag,
        etag_source="header",
        name=name,
        version="1.0.0",
        streaming=True,
        interfaces=tuple(Interface(url, "JSONRPC", "1.0") for url in interfaces),
        heartbeat=heartbeat,
        heartbeat_source=heartbeat_source if heartbeat is not None else None,
        max_age=None,
        protocol_versions=("1.0",),
    )


def make_obs(
    task_id: str = "t1",
    state: TaskState = TaskState.WORKING,
    *,
    at: float = 100.0,
    etag: str | None = '"v1"',
    agent: str = "http://worker:9001",
    raw: str | None = None,
    exact: bool = True,
    source: str = "GetTask",
) -> Observation:
    spelled = raw if raw is not None else "TASK_STATE_" + state.name
    return Observation(task_id, agent, state, spelled, exact, at, etag, source)
