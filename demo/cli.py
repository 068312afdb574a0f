"""``python -m demo``: the seeded incident's options and handler (run from the source tree; the
installed ``otel-a2a`` command only points here)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from demo.model import (
    BINDINGS,
    GATEWAYS,
    VARIANTS,
    WORKER_NAMES,
    ScenarioConfig,
    Timings,
    not_applicable,
)

DESCRIPTION = (
    "Start a worker (Node @a2a-js/sdk, the A2A Java SDK with --worker jvm, or a2a-sdk in "
    "Python with --worker python, itself instrumented by OTEL_A2A_ENABLED=true; durable "
    "task store), a gateway (Python, or Go on a2a-go with --gateway go) and a "
    "Python a2a-sdk orchestrator instrumented only by OTEL_A2A_ENABLED=true, play the "
    "chosen fault, and print the timeline, the summary and the checks. Exit code 0 when "
    "the detector behaved as specified. Spans go to the console (and to OTLP when "
    "OTEL_EXPORTER_OTLP_ENDPOINT is set); metrics are served for Prometheus."
)


PROG = "python -m demo"


def _seconds(text: str) -> float:
    """A finite number of seconds > 0, else a one-line usage error (never ``inf``/``nan``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number of seconds > 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default="restart",
        help="restart: worker restarted mid-task; forget: it comes back with an empty store; "
        "spelling: the gateway spells states 'Working'; both: restart + spelling; redeploy: "
        "the card changes; follow-up: restart, then the follow-up goes through the gateway to the "
        "rehydrated task; healthy: no fault (default: restart)",
    )
    p.add_argument(
        "--binding",
        choices=BINDINGS,
        default="JSONRPC",
        help="the orchestrator's binding (default: JSONRPC); GRPC needs --gateway go, which "
        "translates it to JSON-RPC for the worker, and excludes the spelling and both variants",
    )
    p.add_argument(
        "--gateway",
        choices=GATEWAYS,
        default="python",
        help="python: Starlette + httpx (default); go: on the official Go SDK a2a-go, "
        "built by `make go-gateway` into .tools/bin",
    )
    p.add_argument(
        "--worker",
        choices=WORKER_NAMES,
        default="node",
        help="node: @a2a-js/sdk (default); jvm: the A2A Java SDK (`make jvm` builds it); "
        "python: a2a-sdk with a SQLite task store, instrumented by OTEL_A2A_ENABLED=true: "
        "it reports the task it brings back unfinished after a restart",
    )
    p.add_argument(
        "--streaming",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stream the job (default) or poll it with GetTask",
    )
    p.add_argument(
        "--real-timings",
        action="store_true",
        help="the seed's values: heartbeat 30 s, card TTL 300 s (a run takes minutes)",
    )
    p.add_argument(
        "--heartbeat",
        type=_seconds,
        default=1.5,
        help="scaled-down heartbeat in seconds (default 1.5; decisions every 2 heartbeats)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary folder and say where")
    p.add_argument(
        "--html", metavar="FILE", help="write the run's timeline page to FILE and say where"
    )
    p.add_argument("--quiet", action="store_true", help="no live progress, only the report")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reason = not_applicable(args.variant, args.binding, args.gateway)
    if reason is not None:
        print(f"{PROG}: error: {reason}", file=sys.stderr)
        return 2
    # imported once the options are known good, so that --help and a refusal stay quick
    from demo.scenario import main as play

    timings = Timings.real() if args.real_timings else Timings.scaled(args.heartbeat)
    config = ScenarioConfig(
        variant=args.variant,
        binding=args.binding,
        streaming=args.streaming,
        timings=timings,
        keep_dir=args.keep,
        gateway=args.gateway,
        worker=args.worker,
    )
    try:
        return play(config, quiet=args.quiet, html=args.html)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
