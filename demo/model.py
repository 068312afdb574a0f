"""What a demo run is asked to do and what it found: plain data that the run (``scenario``),
the checks (``evaluation``) and the report (``rendering``) share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from otel_a2a.protocol import parse_timestamp

if TYPE_CHECKING:  # the CLI builds the demo's parser from here: no prometheus_client import
    from prometheus_client.samples import Sample

VARIANTS = ("restart", "spelling", "both", "healthy", "forget", "redeploy", "follow-up")
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
GATEWAYS = ("python", "go")  # the keys of processes.GATEWAYS (the CLI does not import it)
WORKER_NAMES = ("node", "jvm", "python")  # the keys of processes.WORKERS
RESPELLING = frozenset({"spelling", "both"})  # the gateway re-spells task states
GRPC_GATEWAYS = frozenset({"go"})  # the gateways that serve gRPC (a2a-go's server transport)
# the variants that restart the worker: what the first decision after it must raise
EXPECTED_AFTER_RESTART: dict[str, frozenset[str]] = {
    "restart": frozenset({"heartbeat_gap", "terminal_state"}),
    "both": frozenset({"heartbeat_gap", "terminal_state"}),
    "forget": frozenset({"heartbeat_gap", "terminal_state", "task_lost"}),
    "redeploy": frozenset({"etag_changed"}),
    "follow-up": frozenset({"heartbeat_gap", "terminal_state"}),
}
RESTARTING = frozenset(EXPECTED_AFTER_RESTART)
# the variants whose follow-up comes after the restart (the worker restarts once the job runs):
# the gateway routes it to the task the worker rehydrated, a decision of the gateway's own
LATE_FOLLOW_UP = frozenset({"follow-up"})
# The workers that keep an in-flight task "working" across a restart on the same store, with
# nothing running it (a2a-sdk's DatabaseTaskStore), where the Node and JVM ones fail it: they
# never answer a terminal state for it, and otel-a2a on the worker reports it unfinished.
KEEPS_WORKING = frozenset({"python"})
# The workers instrumented by otel-a2a (``OTEL_A2A_ENABLED=true``): their findings are read too.
OBSERVED_WORKERS = frozenset({"python"})


def expected_after_restart(variant: str, worker: str, streaming: bool) -> frozenset[str]:
    """What the first decision after the restart may raise with this worker behind: no
    ``terminal_state`` from a worker that never says the task ended, and nothing at all when
    the orchestrator polls it: its fresh answers say ``working``, so only the worker's own side
    can tell (empty: no decision after the restart may diverge)."""
    expected = EXPECTED_AFTER_RESTART[variant]
    if worker not in KEEPS_WORKING:
        return expected
    if not streaming and variant in ("restart", "both"):
        return frozenset()
    return expected - {"terminal_state"}


@dataclass(frozen=True)
class Timings:
    """Seconds. ``scaled`` (default) keeps a run under 30 s; ``real`` uses the seed's values."""

    heartbeat: float
    card_ttl: float
    tick: float
    timeout: float
    poll_interval: float
    export_interval: float
    job_seconds: float

    @classmethod
    def scaled(cls, heartbeat: float = 1.5) -> Timings:
        tick = 2 * heartbeat
        return cls(
            heartbeat=heartbeat,
            card_ttl=round(0.8 * tick, 3),
            tick=tick,
            timeout=4 * tick,
            poll_interval=round(heartbeat / 3, 3),
            export_interval=1.0,
            job_seconds=600.0,
        )

    @classmethod
    def real(cls) -> Timings:
        return cls(
            heartbeat=30.0,
            card_ttl=300.0,
            tick=60.0,
            timeout=360.0,
            poll_interval=10.0,
            export_interval=5.0,
            job_seconds=3600.0,
        )


@dataclass(frozen=True)
class ScenarioConfig:
    variant: str = "restart"
    binding: str = "JSONRPC"
    streaming: bool = True
    timings: Timings = field(default_factory=Timings.scaled)
    keep_dir: bool = False
    worker: str = "node"  # a key of processes.WORKERS
    gateway: str = "python"  # a key of processes.GATEWAYS


def not_applicable(variant: str, binding: str, gateway: str) -> str | None:
    """Why a combination cannot be run (the CLI's error), or None.

    gRPC is served by the Go gateway only (a2a-go's gRPC server in front of the worker's
    JSON-RPC). TaskState is a protobuf enum there: a re-spelled state cannot be put on the
    wire (a2a-go would send TASK_STATE_UNSPECIFIED), so the respelling variants do not apply.
    """
    if binding != "GRPC":
        return None
    if gateway not in GRPC_GATEWAYS:
        return f"--binding GRPC needs --gateway go (the {gateway} gateway serves no gRPC)"
    if variant in RESPELLING:
        return (
            f"--variant {variant} does not apply over gRPC: TaskState is a protobuf enum there, "
            "so the gateway cannot re-spell it (use JSONRPC or HTTP+JSON)"
        )
    return None


@dataclass
class Check:
    """One promise of the seeded incident, checked on this run.

    ``timing`` marks a promise measured on the wall clock (how soon, not whether): the demo
    shows and counts it, the end-to-end tests leave it to ``make bench`` (``bench_incident``),
    since a loaded machine can miss it by scheduling alone.
    """

    name: str
    passed: bool
    detail: str
    timing: bool = False


@dataclass
class Divergence:
    t: float  # wall clock (epoch seconds)
    reason: str
    span: str
    operation: str
    attributes: dict[str, Any]
    span_attributes: dict[str, Any]


@dataclass(frozen=True)
class Decision:
    """A liveness decision span of the orchestrator (``otel_a2a.liveness.decision=true``)."""

    t: float  # its start, wall clock
    name: str
    reasons: tuple[str, ...]  # the divergences it raised, in order


@dataclass(frozen=True)
class Unfinished:
    """A worker's ``otel_a2a.task.unfinished`` finding (otel-a2a on the worker's side)."""

    t: float  # wall clock
    worker: str  # the start that reported it: "worker-2" is the restarted worker
    task_id: str
    state: str
    cause: str


@dataclass
class Mark:
    """Something the scenario itself did or saw (worker killed, stale gauge rose, ...)."""

    t: float
    side: str
    text: str


def total(samples: Iterable[Sample], name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


@dataclass
class ScenarioResult:
    config: ScenarioConfig
    ok: bool = False
    checks: list[Check] = field(default_factory=list)
    start: float = 0.0
    timeline: list[dict[str, Any]] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    unfinished: list[Unfinished] = field(default_factory=list)  # the workers' findings
    metrics: list[Sample] = field(default_factory=list)  # the last scrape of /metrics
    metrics_url: str = ""
    restart_at: float | None = None
    restarted_at: float | None = None
    stale_before: float | None = None  # otel_a2a_task_stale just before the restart
    stale_at: float | None = None
    detected_at: float | None = None
    baseline_at: float | None = None
    orchestrator_code: int | None = None
    workdir: str = ""
    otlp_endpoint: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)
    port_taken: bool = False  # the orchestrator's metrics port was taken before it bound it
    attempts: int = 1  # 2 when run again because of that
    page: str = ""  # where the timeline page was written (``--html``)

    def reasons(self) -> list[str]:
        return [d.reason for d in self.divergences]

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return total(self.metrics, name, **labels)

    def decisions(self, after: float | None = None) -> list[Decision]:
        """The orchestrator's liveness decisions in time order (started at or after ``after``)."""
        found = [_decision(s) for s in self.spans if _is_decision(s)]
        found.sort(key=lambda d: d.t)
        return [d for d in found if after is None or d.t >= after]


def _is_decision(span: Mapping[str, Any]) -> bool:
    return (span.get("attributes") or {}).get("otel_a2a.liveness.decision") is True


def _decision(span: Mapping[str, Any]) -> Decision:
    reasons = tuple(
        str((e.get("attributes") or {}).get("otel_a2a.divergence.reason"))
        for e in span.get("events") or []
        if e.get("name") == "otel_a2a.divergence"
    )
    t = parse_timestamp(span.get("start_time")) or 0.0
    return Decision(t, str(span.get("name")), reasons)
