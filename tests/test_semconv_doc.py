"""docs/semantic-conventions.md against the code, both ways, so the two cannot drift.

Every name in ``otel_a2a/semconv.py`` is documented in the right table, and every name the page
documents exists. The value tables match the enums they describe, the ``error.type`` values
match the ones the package counts, and the metric kinds and units are those the SDK exports.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

from opentelemetry.metrics import Counter, Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum
from opentelemetry.sdk.metrics.export import Histogram as HistogramData

from otel_a2a import semconv as sc
from otel_a2a.detect import Detector, DivergenceReason
from otel_a2a.detect.resolutions import Outcome
from otel_a2a.instrumentation.metrics import A2AMetrics
from otel_a2a.protocol.model import Operation
from otel_a2a.protocol.states import StateClass, TaskState, semconv_state
from tests.detect.helpers import make_obs

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "semantic-conventions.md"
PACKAGE = REPO / "otel_a2a"

# constants of semconv.py that are values or the scope, not attribute names
VALUES = {
    "SCOPE",
    "SCHEMA_URL",
    "OP_DECISION",
    "OP_UNKNOWN",
    "OP_PUSH",
    "OTHER",
    "ERROR_TYPE_OTHER",
    "CAUSE_NOT_RUN_HERE",
    "CAUSE_EXECUTION_ENDED",
}
# attributes only events or metrics carry
NOT_ON_SPANS = {
    sc.DIVERGENCE_REASON,
    sc.OBSERVATION_AGE,
    sc.CARD_ETAG_OBSERVED,
    sc.TASK_STATE_CLASS,
    sc.DECISION_OUTCOME,
    sc.TASK_ID_REQUESTED,
    sc.AGENT_LABEL,
    sc.PUSH_OUTCOME,
    sc.DIVERGENCE_OUTCOME,
    sc.DIVERGENCE_AGE,
    sc.SERVICE_LABEL,
}
# names of the general OpenTelemetry conventions (the rest is the A2A convention's or ours)
OTEL_GENERAL = {
    sc.ERROR_TYPE,
    sc.HTTP_STATUS_CODE,
    sc.RPC_RESPONSE_STATUS_CODE,
    sc.SERVER_ADDRESS,
    sc.SERVER_PORT,
}
# a dotted name in backticks that looks like one of ours: it must exist
DOTTED = re.compile(r"`((?:a2a|otel_a2a|gen_ai|rpc|http|error|server)\.[a-z_.]+)`")
TICKED = re.compile(r"`([^`]+)`")


def _constants() -> dict[str, str]:
    return {k: v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str)}


CONSTANTS = _constants()
METRICS = {v for k, v in CONSTANTS.items() if k.startswith("M_")}
EVENTS = {v for k, v in CONSTANTS.items() if k.startswith("EVENT_")}
ATTRIBUTES = {
    v for k, v in CONSTANTS.items() if k not in VALUES and not k.startswith(("M_", "EVENT_"))
}


def _sections(text: str) -> dict[str, list[str]]:
    """Lines under each heading (the heading text without its #s and backticks)."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.lstrip("#").strip().replace("`", "")
            assert current not in out, f"heading {current!r} twice"
            out[current] = []
        else:
            out.setdefault(current, []).append(line)
    return out


SECTIONS = _sections(PAGE.read_text())


def rows(heading: str) -> list[list[str]]:
    """The cells of the table under ``heading``, header and separator rows left out."""
    assert heading in SECTIONS, f"docs/semantic-conventions.md has no section {heading!r}"
    table = [line for line in SECTIONS[heading] if line.startswith("|")]
    assert len(table) > 2, f"no table under {heading!r}"
    return [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]


def names(heading: str, column: int = 0) -> list[str]:
    """The backticked names in one column of the table under ``heading``."""
    return [n for cells in rows(heading) for n in TICKED.findall(cells[column])]


def _once(found: list[str]) -> set[str]:
    assert len(found) == len(set(found)), f"documented twice: {found}"
    return set(found)


def test_every_metric_is_documented_and_every_documented_metric_exists() -> None:
    assert _once(names("Metrics")) == METRICS


def test_every_event_is_documented_and_every_documented_event_exists() -> None:
    assert _once(names("Events")) == EVENTS


def test_every_attribute_is_documented_and_every_documented_attribute_exists() -> None:
    span = _once(names("Span attributes"))
    event = _once(names("otel_a2a.divergence event attributes"))
    on_events = set(names("Events", 2))
    on_metrics = set(names("Metrics", 3))
    assert span | event | on_events | on_metrics == ATTRIBUTES
    assert span == ATTRIBUTES - NOT_ON_SPANS


def test_each_attribute_names_its_source() -> None:
    """The source column: otel-a2a's own names are exactly those under ``otel_a2a.``; the
    general conventions' are the ones listed above; the rest is the A2A convention's."""
    for cells in rows("Span attributes"):
        (name,) = TICKED.findall(cells[0])
        if name.startswith("otel_a2a."):
            expected = "otel-a2a"
        elif name in OTEL_GENERAL:
            expected = "OTel"
        else:
            expected = "A2A"
        assert cells[1] == expected, name


def test_the_convention_commit_read_is_named() -> None:
    table = json.loads((REPO / "tests/fixtures/semconv/a2a-client-span.json").read_text())
    assert table["source"]["commit"] in PAGE.read_text()
    assert f"`{sc.SCHEMA_URL}`" in PAGE.read_text()


def test_every_dotted_name_on_the_page_exists() -> None:
    """Prose included: a misspelt or retired name anywhere on the page fails."""
    text = PAGE.read_text()
    unknown = set(DOTTED.findall(text)) - ATTRIBUTES - METRICS - EVENTS
    assert not unknown


def test_values_the_code_uses_are_documented() -> None:
    text = PAGE.read_text()
    for name in VALUES:
        assert f"`{CONSTANTS[name]}`" in text, name
    buckets = ", ".join(f"{b:g}" for b in sc.AGE_BUCKETS)
    assert f"`{buckets}`" in text
    assert f"capped at {sc.MAX_AGENT_NAMES} distinct values" in text
    assert f"take {sc.MAX_AGENT_NAMES // 2} of those at most" in text


def test_operation_values_match_the_enum() -> None:
    expected = {op.value for op in Operation} | {sc.OP_DECISION, sc.OP_UNKNOWN, sc.OP_PUSH}
    assert _once(names("a2a.method.name")) == expected


def test_reason_values_match_the_enum() -> None:
    assert _once(names("otel_a2a.divergence.reason")) == {r.value for r in DivergenceReason}


def test_outcome_values_match_the_enum_and_the_unresolved_bound_is_stated() -> None:
    assert _once(names("otel_a2a.divergence.outcome")) == {o.value for o in Outcome}
    assert f"over {sc.UNRESOLVED_AFTER:g} s" in PAGE.read_text()


def test_state_values_and_their_classes_match_the_enums() -> None:
    table = {TICKED.findall(c[0])[0]: c[1] for c in rows("a2a.task.state")}
    assert table == {semconv_state(s): s.state_class.value for s in TaskState}
    classes = {
        TICKED.findall(c[0])[0]: set(TICKED.findall(c[1]))
        for c in rows("otel_a2a.task.state.class")
    }
    assert classes == {
        cls.value: {semconv_state(s) for s in TaskState if s.state_class is cls}
        for cls in StateClass
    }


def _counted_error_types() -> Iterator[str]:
    """What the package counts on ``otel_a2a.instrumentation.errors``: the first argument of
    ``….error(…)`` (``Runtime.error``; loggers left out) or of ``_count(…)``, and the argument
    after ``….error`` in ``functools.partial(….error, …)`` (a deferred count), each a string
    literal or a module-level string constant of the package."""
    trees = [ast.parse(path.read_text()) for path in PACKAGE.rglob("*.py")]
    constants = {
        target.id: node.value.value
        for tree in trees
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.isupper()
    }

    def value(arg: ast.expr) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        name = ast.unparse(arg).split(".")[-1]
        return constants.get(name) if isinstance(arg, ast.Name | ast.Attribute) else None

    def counts(func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute) and func.attr == "error":
            return ast.unparse(func.value).split(".")[-1] not in ("_log", "log", "logger")
        return ast.unparse(func).split(".")[-1] == "_count"

    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            if counts(node.func):
                found = value(node.args[0])
            elif ast.unparse(node.func).split(".")[-1] == "partial" and len(node.args) > 1:
                found = value(node.args[1]) if counts(node.args[0]) else None
            else:
                continue
            if found is not None:
                yield found


def test_error_type_values_match_what_the_package_counts() -> None:
    documented = _once(names("error.type on otel_a2a.instrumentation.errors"))
    assert documented == set(_counted_error_types())


def _export() -> tuple[dict[str, tuple[str, str]], set[str]]:
    """(name -> (unit, data type), synchronous instrument names) from a real SDK export with
    every instrument holding a value, the observable ones included."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    detector = Detector()
    detector.ledger.observe(make_obs(at=time.monotonic() - 3600))  # stale at any heartbeat
    # unresolved for an hour
    detector.resolutions.open("t", DivergenceReason.NO_OBSERVATION, True, time.monotonic() - 3600)
    metrics = A2AMetrics(detector, provider, lambda: metrics)
    try:
        metrics.divergence.add(1, {})
        metrics.decisions.add(1, {})
        metrics.observation_age.record(1.0, {})
        metrics.etag_changes.add(1, {})
        metrics.errors.add(1, {})
        metrics.resolutions.add(1, {})
        metrics.unfinished.add(1, {})
        metrics.push_deliveries.add(1, {})
        metrics.redundant.add("agent")
        data = reader.get_metrics_data()
    finally:
        provider.shutdown()
    assert data is not None
    found = {
        m.name: (m.unit, type(m.data).__name__)
        for rm in data.resource_metrics
        for scope in rm.scope_metrics
        if scope.scope.name == sc.SCOPE
        for m in scope.metrics
    }
    synchronous = {v.name for v in vars(metrics).values() if isinstance(v, (Counter, Histogram))}
    return found, synchronous


KINDS = {
    "counter": (Sum.__name__, True),
    "histogram": (HistogramData.__name__, True),
    "observable counter": (Sum.__name__, False),
    "observable gauge": (Gauge.__name__, False),
}


def test_metric_kinds_and_units_are_what_the_sdk_exports() -> None:
    found, synchronous = _export()
    documented = {}
    for cells in rows("Metrics"):
        (name,) = TICKED.findall(cells[0])
        (unit,) = TICKED.findall(cells[2])
        data_type, sync = KINDS[cells[1]]
        documented[name] = (unit, data_type, sync)
    assert documented == {
        name: (unit, data_type, name in synchronous) for name, (unit, data_type) in found.items()
    }
