"""The ``otel-a2a`` command (docs/configuration.md lists every flag).

    otel-a2a check-card URL
    otel-a2a analyze FILE... [--json] [--grace S] [--max-tasks N] [--html FILE [--task ID]...]
                     [--default-heartbeat S] [--heartbeat-overrides H=S,...] [--hold S]
    otel-a2a detector [--host H] [--port P] [--metrics-port P] [--ui-port P] [--ui-host H]
                      [--dump FILE] [--json]
                      [--grace S] [--max-tasks N] [--max-body-bytes N] [--body-timeout S]
                      [--backlog N] [--default-heartbeat S] [--heartbeat-overrides H=S,...]
                      [--hold S]

Each subcommand registers itself through one ``_add_<name>`` function below that builds its
parser and sets ``handler``. The seeded-incident demo is not a subcommand: it runs from the
source tree (``python -m demo``, ``make demo``); ``otel-a2a demo`` only says so.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otel_a2a.analyze.correlate import Correlator
    from otel_a2a.analyze.fleet import FleetJudge, FleetJudgeOptions

Handler = Callable[[argparse.Namespace], int]


NO_DEMO = (
    "otel-a2a demo: the demo runs from the source tree: `make demo` (or `python -m demo`) "
    "in a clone of the otel-a2a repository"
)


def _missing(command: str, *modules: str) -> bool:
    """Whether ``command`` lacks one of ``modules`` (the ``cli`` extra): then says how to get
    it in one line, instead of a traceback."""
    from importlib.util import find_spec

    absent = [m for m in modules if find_spec(m) is None]
    if absent:
        print(
            f"otel-a2a {command}: needs {', '.join(absent)}: pip install 'otel-a2a[cli]'",
            file=sys.stderr,
        )
    return bool(absent)


def _no_demo(args: argparse.Namespace) -> int:
    print(NO_DEMO, file=sys.stderr)
    return 2


def _number(
    convert: Callable[[str], float], ok: Callable[[float], bool], what: str
) -> Callable[[str], float]:
    """An argparse ``type`` that accepts finite numbers for which ``ok`` holds, else says
    ``what`` they must be (never a traceback, never ``inf``/``nan``)."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {what}")
        return value

    return parse


_positive = _number(float, lambda v: v > 0, "a number of seconds > 0")
_non_negative = _number(float, lambda v: v >= 0, "a number of seconds >= 0")
_count = _number(int, lambda v: v >= 1, "an integer >= 1")
_port = _number(int, lambda v: 0 <= v <= 65535, "an integer 0-65535 (0: any free port)")


def _heartbeat_overrides(text: str) -> dict[str, float]:
    """``host[:port]=seconds,…`` as ``OTEL_A2A_HEARTBEAT_OVERRIDES`` reads it; a bad entry is
    a usage error naming it."""
    from otel_a2a.instrumentation.config import _bad_override

    out: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        why = _bad_override(item)
        if why is not None:
            raise argparse.ArgumentTypeError(f"entry {item!r}: {why}")
        host, _, seconds = item.rpartition("=")
        out[host.strip().lower()] = float(seconds)
    return out


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # no options to know: whatever follows `demo` (`--variant ...` too) is taken as a
    # positional, so that the answer is where to find the demo, not a usage error
    p = sub.add_parser(
        "demo", help="where the seeded-incident demo is", description=NO_DEMO, prefix_chars="\0"
    )
    p.add_argument("args", nargs="*")
    p.set_defaults(handler=_no_demo)


def _run_check_card(args: argparse.Namespace) -> int:
    if _missing("check-card", "httpx", "anyio"):
        return 2
    from otel_a2a.check_card import check_card, render

    report = check_card(args.url)
    print(render(report))
    return report.exit_code


def _add_check_card(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check-card",
        help="fetch an agent card and report etag, caching, heartbeat and spec problems",
        description=(
            "Fetch URL (an agent base URL or the card URL itself), revalidate it with "
            "If-None-Match and report version, interfaces, etag, caching headers, heartbeat "
            "source and spec problems. Exit code 0: no errors; 1: errors; 2: no usable card."
        ),
    )
    p.add_argument("url")
    p.set_defaults(handler=_run_check_card)


def _add_correlation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object per finding")
    p.add_argument(
        "--grace",
        type=_non_negative,
        default=1.0,
        help="seconds a superseded streamed state may linger at the next hop before it "
        "counts as a conflict (propagation delay; default 1)",
    )
    p.add_argument(
        "--max-tasks",
        type=_count,
        default=10_000,
        help="tasks kept in memory, least recently seen evicted first (default 10000)",
    )


def _add_judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--default-heartbeat",
        type=_positive,
        default=30.0,
        help="seconds an active task may go unobserved before a decision on it is a "
        "heartbeat_gap, for agents whose card spans give none (OTEL_A2A_DEFAULT_HEARTBEAT's "
        "meaning; default 30)",
    )
    p.add_argument(
        "--heartbeat-overrides",
        type=_heartbeat_overrides,
        default={},
        metavar="HOST[:PORT]=S,...",
        help="heartbeats per agent host, over what card spans say "
        "(OTEL_A2A_HEARTBEAT_OVERRIDES's syntax and meaning)",
    )
    p.add_argument(
        "--hold",
        type=_non_negative,
        default=2.0,
        help="seconds each span's decisions and observations wait after arriving, so that "
        "late spans are judged in span-time order (default 2)",
    )


def _judge_options(args: argparse.Namespace) -> FleetJudgeOptions:
    from otel_a2a.analyze.fleet import FleetJudgeOptions

    return FleetJudgeOptions(args.default_heartbeat, args.heartbeat_overrides, args.hold)


def _judge(args: argparse.Namespace) -> FleetJudge:
    from otel_a2a.analyze.fleet import FleetJudge

    options = _judge_options(args)
    return FleetJudge(
        max_tasks=args.max_tasks,
        default_heartbeat=options.default_heartbeat,
        heartbeat_overrides=options.heartbeat_overrides,
        hold=options.hold,
    )


def _correlator(args: argparse.Namespace) -> Correlator:
    from otel_a2a.analyze.correlate import Correlator

    return Correlator(max_tasks=args.max_tasks, grace=args.grace)


def _run_analyze(args: argparse.Namespace) -> int:
    from otel_a2a.analyze import analyze_files
    from otel_a2a.analyze.timeline import TimelineBuilder

    correlator = _correlator(args)
    timeline = TimelineBuilder(tasks=args.task) if args.html else None
    code = analyze_files(
        args.files, as_json=args.json, correlator=correlator, timeline=timeline, judge=_judge(args)
    )
    if timeline is not None:
        from otel_a2a.analyze.page import render_page

        view = timeline.view()
        title = "otel-a2a timeline: " + ", ".join(os.path.basename(f) for f in args.files)
        try:
            Path(args.html).write_text(render_page(view, title=title), encoding="utf-8")
        except OSError as exc:
            print(f"otel-a2a analyze: cannot write {args.html}: {exc}", file=sys.stderr)
            return 2
        print(
            f"otel-a2a analyze: page with {len(view.tasks)} task(s) written to {args.html}",
            file=sys.stderr,
        )
    return code


def _add_analyze(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "analyze",
        help="offline cross-runtime analysis of exported spans (OTLP JSON lines)",
        description=(
            "Read spans exported as OTLP JSON, one ExportTraceServiceRequest per line (the "
            "OpenTelemetry Collector file exporter's format; '-' reads stdin), and report "
            "cross_runtime_conflict (two services held different beliefs about a task at the "
            "same time), renormalized_state (a task's state crossed hops with different "
            "wire spellings) and, for each service without otel-a2a inside, the divergences "
            "of its own decisions and observations (no_observation, heartbeat_gap, ...). "
            "Exit code 0: no finding; 1: findings; 2: unreadable input."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    _add_correlation_options(p)
    _add_judge_options(p)
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained timeline page to FILE: one lane per service for "
        "each task with a finding (docs/analyzer.md)",
    )
    p.add_argument(
        "--task",
        metavar="ID",
        action="append",
        default=[],
        help="draw this task on the --html page, finding or not (repeatable)",
    )
    p.set_defaults(handler=_run_analyze)


def _run_detector(args: argparse.Namespace) -> int:
    modules = ["h11", "google.protobuf", "opentelemetry.proto", "opentelemetry.sdk"]
    if args.metrics_port is not None:
        modules += ["opentelemetry.exporter.prometheus", "prometheus_client"]
    if _missing("detector", *modules):
        return 2
    from otel_a2a.analyze.receiver import serve

    return serve(
        host=args.host,
        port=args.port,
        metrics_port=args.metrics_port,
        dump_path=args.dump,
        as_json=args.json,
        max_memory_mb=args.max_memory_mb,
        max_body=args.max_body_bytes,
        body_timeout=args.body_timeout,
        backlog=args.backlog,
        max_tasks=args.max_tasks,
        grace=args.grace,
        ui_port=args.ui_port,
        ui_host=args.ui_host,
        judge=_judge_options(args),
    )


def _add_detector(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "detector",
        help="live OTLP/HTTP receiver doing the cross-runtime analysis",
        description=(
            "Receive OTLP/HTTP traces (POST /v1/traces, application/x-protobuf or "
            "application/json) from instrumented processes or a collector, print "
            "cross_runtime_conflict and renormalized_state findings, and the divergences of "
            "each service without otel-a2a inside judged from its spans, as they happen and "
            "count them on the otel_a2a.divergence metric (Prometheus, with --metrics-port). Stops "
            "cleanly on SIGINT/SIGTERM."
        ),
    )
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=4318, help="OTLP/HTTP port (default 4318)")
    p.add_argument(
        "--metrics-port", type=_port, default=None, help="serve Prometheus metrics on this port"
    )
    p.add_argument(
        "--dump", metavar="FILE", help="append every request as an OTLP JSON line to FILE"
    )
    p.add_argument(
        "--ui-port",
        type=_port,
        default=None,
        help="serve the live timeline page of the tasks with findings on this port (read-only)",
    )
    p.add_argument(
        "--ui-host", default="127.0.0.1", help="the timeline page's address (default 127.0.0.1)"
    )
    p.add_argument(
        "--max-memory-mb",
        type=_count,
        default=256,
        help="the detector's memory, whatever clients send, shared out between decoding a "
        "body, bodies held, task records and parent links (default 256; minimum 64)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=_count,
        default=None,
        help="largest accepted request body, after decompression (default: what the memory "
        "budget allows, a body taking up to 96 times its size while decoded; 1.1 MiB at "
        "256 MiB, at most 16 MiB)",
    )
    p.add_argument(
        "--body-timeout",
        type=_positive,
        default=30.0,
        help="seconds a request has, from its first byte, to arrive whole (head and body); "
        "answered 408 after (default 30)",
    )
    p.add_argument(
        "--backlog",
        type=_count,
        default=1024,
        help="connections the system queues before they are accepted (default 1024, capped "
        "by net.core.somaxconn)",
    )
    _add_correlation_options(p)
    _add_judge_options(p)
    p.set_defaults(handler=_run_detector)


_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    _add_demo,
    _add_check_card,
    _add_analyze,
    _add_detector,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-a2a",
        description="Detect silent task-state divergence between A2A agents (OpenTelemetry).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("otel-a2a: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `otel-a2a analyze ... | head`: the reader has what it wanted
        # Python would complain again when flushing stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
