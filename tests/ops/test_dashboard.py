"""The Grafana dashboard: valid against Grafana's own JSON schemas, and every panel query
parses (promtool, offline) and returns data from a real Prometheus scraping a real metrics
endpoint. No Grafana server runs on our machines, so nothing here renders the dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError, best_match

from tests.ops.conftest import DASHBOARD, HEARTBEAT, OpsStack
from tests.support.instrumented_run import AGENTS, MOCK_AGENT, PYTHON_AGENT
from tests.support.prom import finite_values, run_promtool

REPO = Path(__file__).resolve().parents[2]
# vendored from grafana/grafana-foundation-sdk's jsonschema/ (provenance in its README)
SCHEMA_DIR = REPO / "tests" / "fixtures" / "grafana"
PROM_UID = "otel-a2a-prometheus"
# Grafana's built-in and dashboard variables, as a user with "All" agents would see them;
# the windows hold the whole test session (a test may run minutes after the incident: over a
# 1m window its rates are 0 and the quantiles NaN).
SUBSTITUTIONS = {
    "$__rate_interval": "1h",
    "$__interval": "1h",
    "$__range": "1h",
    "$agent": ".*",
    "$heartbeat": "30",
}


def _dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _queries() -> list[tuple[str, str]]:
    """(id, expr) of every panel target, ids like 'Panel title/A'."""
    return [
        (f"{p['title']}/{t['refId']}", t["expr"])
        for p in _panels(_dashboard())
        for t in p.get("targets", [])
    ]


def substitute(expr: str, **overrides: str) -> str:
    subs = {**SUBSTITUTIONS, **{f"${k}": v for k, v in overrides.items()}}
    for var in sorted(subs, key=len, reverse=True):  # $__rate_interval before $__range
        expr = expr.replace(var, subs[var])
    assert "$" not in expr, f"unsubstituted variable in {expr!r}"
    return expr


def _errors(schema: dict[str, Any], instance: Any, where: str) -> list[str]:
    """Readable schema errors: for anyOf(Panel, RowPanel) report the best Panel error."""
    out = []
    for err in Draft7Validator(schema).iter_errors(instance):
        chosen: ValidationError = err
        if err.context:
            first_branch = [e for e in err.context if e.relative_schema_path[0] == 0]
            chosen = best_match(first_branch or err.context) or err
        path = "/".join(str(p) for p in chosen.absolute_path)
        out.append(f"{where}{path} -> {chosen.message}")
    return out


def _load_schema(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text())
    return doc


def _sub_schema(name: str, definition: str) -> dict[str, Any]:
    doc = _load_schema(name)
    return {"$ref": f"#/definitions/{definition}", "definitions": doc["definitions"]}


def test_dashboard_matches_grafana_schema() -> None:
    errors = _errors(_load_schema("dashboard.jsonschema.json"), _dashboard(), "")
    assert not errors, "\n".join(errors)


def test_panel_options_and_targets_match_plugin_schemas() -> None:
    """The dashboard schema leaves options/targets free; the plugin schemas do not."""
    options = {
        "timeseries": _sub_schema("timeseries.jsonschema.json", "Options"),
        "stat": _sub_schema("stat.jsonschema.json", "Options"),
    }
    custom = _sub_schema("timeseries.jsonschema.json", "FieldConfig")
    query = _load_schema("prometheus.jsonschema.json")
    errors: list[str] = []
    for p in _panels(_dashboard()):
        if p["type"] == "row":
            continue
        where = f"panel {p['title']!r}: "
        assert p["type"] in options, f"{where}unexpected panel type {p['type']}"
        errors += _errors(options[p["type"]], p["options"], where + "options/")
        if p["type"] == "timeseries":
            errors += _errors(custom, p["fieldConfig"]["defaults"]["custom"], where + "custom/")
        for t in p["targets"]:
            errors += _errors(query, t, f"{where}target {t['refId']}/")
    assert not errors, "\n".join(errors)


def test_schema_errors_are_reported_readably() -> None:
    """A broken copy yields messages that name the path and the problem."""
    broken = _dashboard()
    broken["__inputs"] = []
    del broken["templating"]
    broken["panels"][1]["gridPos"]["w"] = "12"
    broken["panels"][2]["colour"] = "red"
    errors = _errors(_load_schema("dashboard.jsonschema.json"), broken, "")
    text = "\n".join(errors)
    assert "'templating' is a required property" in text
    assert "'__inputs' was unexpected" in text
    assert "panels/1/gridPos/w -> '12' is not of type 'integer'" in text
    assert "'colour' was unexpected" in text


def test_dashboard_content() -> None:
    dash = _dashboard()
    exprs = " ".join(e for _, e in _queries())
    for metric in (
        "otel_a2a_divergence_total",
        "otel_a2a_liveness_decisions_total",
        "otel_a2a_observation_age_seconds_bucket",
        "otel_a2a_task_stale",
        "otel_a2a_card_etag_changes_total",
        "otel_a2a_task_get_redundant_total",
        "otel_a2a_task_tracked",
        "otel_a2a_task_evicted_total",
        "otel_a2a_instrumentation_errors_total",
        "otel_a2a_divergence_resolutions_total",
        "otel_a2a_divergence_unresolved",
    ):
        assert metric in exprs, metric
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.95," in exprs
    assert "sum by (otel_a2a_divergence_reason, otel_a2a_agent_name)" in exprs
    assert "sum by (otel_a2a_decision_outcome)" in exprs
    # the splits confirmed beside the rule violations (the divergences) they resolve
    assert "sum by (otel_a2a_divergence_outcome, otel_a2a_divergence_reason)" in exprs
    titles = [p["title"] for p in dash["panels"]]
    assert titles.index("Divergences resolved: confirmed vs refuted") == (
        titles.index("Divergences by reason and agent") + 2
    )
    assert "sum by (otel_a2a_task_state_class)" in exprs
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    agent = variables["agent"]
    assert agent["type"] == "query"
    # agents with only observation-side divergences or only stale tasks must be listed too
    assert agent["query"] == (
        'label_values({__name__=~"otel_a2a_liveness_decisions_total|otel_a2a_divergence_total'
        '|otel_a2a_task_stale"}, otel_a2a_agent_name)'
    )
    assert agent["includeAll"] is True and agent["datasource"]["uid"] == PROM_UID
    assert variables["jaeger_url"]["type"] in {"textbox", "constant"}
    links = [link for link in dash["links"] if link["type"] == "link"]
    assert len(links) == 1 and links[0]["url"].startswith("${jaeger_url}/search?")
    assert "otel_a2a.divergence" in links[0]["url"].replace("%22", '"').replace("%3A", ":")
    # every panel and target uses the provisioned Prometheus datasource
    for p in _panels(dash):
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": PROM_UID}, p["title"]
            for t in p["targets"]:
                assert t["datasource"]["uid"] == PROM_UID
    # panels filterable by agent do filter by it
    for pid, expr in _queries():
        if "otel_a2a_agent_name" in expr and "label_values" not in expr:
            assert 'otel_a2a_agent_name=~"$agent"' in expr, pid
    ids = [p["id"] for p in _panels(dash)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"


def _recording_rules(exprs: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "groups": [
            {
                "name": "dashboard-queries",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": substitute(e)}
                    for i, (_, e) in enumerate(exprs)
                ],
            }
        ]
    }


@pytest.mark.prometheus
def test_every_query_parses_offline(tmp_path: Path) -> None:
    exprs = _queries()
    path = tmp_path / "dashboard-queries.rules.yaml"
    path.write_text(yaml.safe_dump(_recording_rules(exprs), sort_keys=False))
    res = run_promtool("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout


@pytest.mark.prometheus
def test_offline_parse_catches_a_broken_query(tmp_path: Path) -> None:
    exprs = [
        *_queries(),
        ("broken", "sum by (otel_a2a_agent_name (rate(otel_a2a_divergence_total[1m]))"),
    ]
    path = tmp_path / "broken.rules.yaml"
    path.write_text(yaml.safe_dump(_recording_rules(exprs), sort_keys=False))
    res = run_promtool("check", "rules", str(path))
    assert res.returncode != 0
    assert "parse error" in res.stdout + res.stderr


@pytest.mark.parametrize(("expr"), [e for _, e in _queries()], ids=[i for i, _ in _queries()])
def test_query_returns_data_from_real_prometheus(incident_scraped: OpsStack, expr: str) -> None:
    prom = incident_scraped.prometheus
    result = prom.wait_for(
        substitute(expr),
        lambda r: bool(finite_values(r)),
        timeout=15,
        what=f"finite data for {expr!r}",
    )
    assert finite_values(result)


def test_agent_variable_values_from_real_prometheus(incident_scraped: OpsStack) -> None:
    """The card names of the agents the run talked to (the peers' and the mock's), asked the
    way Grafana asks for the dashboard's own ``label_values(<selector>, otel_a2a_agent_name)``."""
    query = _dashboard()["templating"]["list"][0]["query"]
    selector, _, label = query.removeprefix("label_values(").removesuffix(")").rpartition(", ")
    values = incident_scraped.prometheus.api(f"label/{label}/values", [("match[]", selector)])
    assert sorted(values) == sorted(AGENTS)


def test_agent_variable_filters(incident_scraped: OpsStack) -> None:
    expr = next(e for i, e in _queries() if i.startswith("Divergences by reason"))
    result = incident_scraped.prometheus.query(substitute(expr, agent=MOCK_AGENT))
    assert result and {s["metric"]["otel_a2a_agent_name"] for s in result} == {MOCK_AGENT}
    reasons = {s["metric"]["otel_a2a_divergence_reason"] for s in result}
    assert reasons == {
        "task_lost",
        "terminal_regression",
        "non_canonical_state",
        "unknown_state",
        "etag_changed",
    }


def test_observation_age_quantiles_are_plausible(incident_scraped: OpsStack) -> None:
    """During the incident the peers' decisions came after a heartbeat gap (ages just over
    the heartbeat), the mock's right after a poll (ages of milliseconds)."""
    prom = incident_scraped.prometheus
    exprs = [e for i, e in _queries() if i.startswith("Observation age")]
    p50 = finite_values(prom.query(substitute(exprs[0], agent=PYTHON_AGENT)))
    p95 = finite_values(prom.query(substitute(exprs[1], agent=PYTHON_AGENT)))
    assert p50 and p95
    assert HEARTBEAT < p50[0] <= p95[0]  # no bound above: a slow machine decides later
    mock_p95 = finite_values(prom.query(substitute(exprs[1], agent=MOCK_AGENT)))
    assert mock_p95 and 0 < mock_p95[0] < HEARTBEAT
    assert re.search(r"vector\(\$heartbeat\)", exprs[2])


def _one(prom: Any, expr: str) -> float | None:
    values = finite_values(prom.query(expr))
    assert len(values) <= 1, (expr, values)
    return values[0] if values else None


def test_counts_in_range_include_the_first_event_of_every_series(
    incident_scraped: OpsStack,
) -> None:
    """A counter series is born at its first event, which ``increase()`` cannot see: a one-off
    incident showed "0" (green). Over a range holding the whole run, the stats must give the
    exact totals the process counted (every series here was born during the run)."""
    prom = incident_scraped.prometheus
    queries = dict(_queries())
    whole_run = {"__range": "1h"}
    divergences = _one(prom, "sum(otel_a2a_divergence_total)")
    assert divergences
    assert _one(prom, substitute(queries["Divergences in range/A"], **whole_run)) == divergences
    divergent = _one(
        prom, 'sum(otel_a2a_liveness_decisions_total{otel_a2a_decision_outcome="divergent"})'
    )
    decisions = _one(prom, "sum(otel_a2a_liveness_decisions_total)")
    assert divergent and decisions
    share = _one(prom, substitute(queries["Divergent decision share/A"], **whole_run))
    assert share == pytest.approx(divergent / decisions)
    errors = _one(prom, "sum(otel_a2a_instrumentation_errors_total)")
    assert _one(prom, substitute(queries["Instrumentation errors in range/A"], **whole_run)) == (
        errors
    )


def test_a_quiet_range_has_no_share_rather_than_nan(incident_scraped: OpsStack) -> None:
    """Decision series exist but none moved in the range: 0 / 0 must be no value (the panel
    shows its noValue), never NaN. Scrapes are 1 s apart: a 3 s range ends up quiet."""
    prom = incident_scraped.prometheus
    prom.wait_for(
        "sum(increase(otel_a2a_liveness_decisions_total[3s])) == 0",
        lambda r: bool(r),
        timeout=15,
        what="a quiet 3 s range after the incident",
    )
    expr = substitute(dict(_queries())["Divergent decision share/A"], __range="3s")
    assert prom.query(expr) == []


def _promtool_expr_test(
    tmp_path: Path, series: dict[str, str], cases: list[Any], interval: str = "15s"
) -> str:
    """Run ``promtool test rules`` with ``promql_expr_test`` cases over synthetic series
    scraped every ``interval``; returns promtool's output (asserting success)."""
    (tmp_path / "empty.rules.yaml").write_text("groups: []\n")
    doc = {
        "rule_files": ["empty.rules.yaml"],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": interval,
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": cases,
            }
        ],
    }
    path = tmp_path / "dashboard.test.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = run_promtool("test", "rules", str(path), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


@pytest.mark.prometheus
def test_share_is_zero_when_no_decision_diverged(tmp_path: Path) -> None:
    """Decisions taken, none divergent: the divergent series does not exist at all; the
    share must read 0 (healthy), not "no value"."""
    expr = substitute(dict(_queries())["Divergent decision share/A"], __range="5m")
    decided = (
        "otel_a2a_liveness_decisions_total"
        '{otel_a2a_agent_name="w",otel_a2a_decision_outcome="authoritative"}'
    )
    _promtool_expr_test(
        tmp_path,
        {decided: "0+1x40"},
        [{"expr": expr, "eval_time": "8m", "exp_samples": [{"labels": "{}", "value": 0}]}],
    )


@pytest.mark.prometheus
def test_one_event_is_one_bar(tmp_path: Path) -> None:
    """The bar panels count each step's own interval: one divergence shows once, at the step
    whose interval holds it, and 0 at the next (overlapping windows showed it four times)."""
    expr = substitute(
        next(e for i, e in _queries() if i.startswith("Divergences by reason")),
        __interval="1m",
    )
    labels = 'otel_a2a_agent_name="w",otel_a2a_divergence_reason="task_lost"'
    events = [
        {"labels": "{" + labels + "}", "value": 1},
    ]
    quiet = [{"labels": "{" + labels + "}", "value": 0}]
    _promtool_expr_test(
        tmp_path,
        {f'otel_a2a_divergence_total{{{labels},a2a_method_name="GetTask"}}': "_x12 1x28"},
        [
            {"expr": expr, "eval_time": "3m", "exp_samples": events},
            {"expr": expr, "eval_time": "4m", "exp_samples": quiet},
            {"expr": expr, "eval_time": "5m", "exp_samples": quiet},
        ],
    )


@pytest.mark.prometheus
def test_an_event_between_two_bars_windows_is_in_the_next_bar(tmp_path: Path) -> None:
    """``increase()`` over each step's own window sees only the samples inside it: an
    increment between the last sample of one window and the first of the next was in no
    bar. Differences of last values telescope: each event is in exactly one bar."""
    expr = substitute(
        next(e for i, e in _queries() if i.startswith("Divergences by reason")),
        __interval="30s",
    )
    labels = 'otel_a2a_agent_name="w",otel_a2a_divergence_reason="heartbeat_gap"'
    series = {f'otel_a2a_divergence_total{{{labels},a2a_method_name="SendMessage"}}': "0x6 1x20"}
    bars = [(33, 0), (63, 1), (93, 0)]
    cases = [
        {
            "expr": expr,
            "eval_time": f"{t}s",
            "exp_samples": [{"labels": "{" + labels + "}", "value": v}],
        }
        for t, v in bars
    ]
    _promtool_expr_test(tmp_path, series, cases, interval="5s")


@pytest.mark.prometheus
def test_a_quiet_series_scraped_less_often_than_a_bar_shows_no_bar(tmp_path: Path) -> None:
    """60 s scrapes under 30 s bars: a bar whose previous window holds no sample must still
    compare with the last value before it, not show the running total again."""
    expr = substitute(
        next(e for i, e in _queries() if i.startswith("Divergences by reason")),
        __interval="30s",
    )
    labels = 'otel_a2a_agent_name="w",otel_a2a_divergence_reason="heartbeat_gap"'
    series = {f'otel_a2a_divergence_total{{{labels},a2a_method_name="SendMessage"}}': "7x30"}
    quiet = [{"labels": "{" + labels + "}", "value": 0}]
    cases = [{"expr": expr, "eval_time": f"{t}s", "exp_samples": quiet} for t in (645, 675, 705)]
    _promtool_expr_test(tmp_path, series, cases, interval="60s")


@pytest.mark.prometheus
def test_a_series_born_and_gone_within_the_range_still_counts(tmp_path: Path) -> None:
    """A replaced pod's divergences happened in the range even if its series is gone now."""
    expr = substitute(dict(_queries())["Divergences in range/A"], __range="1h")
    labels = (
        'otel_a2a_agent_name="w",otel_a2a_divergence_reason="heartbeat_gap",'
        'a2a_method_name="GetTask"'
    )
    series = {
        f'otel_a2a_divergence_total{{{labels},instance="pod-1"}}': "_x8 1 3 5x4 _x40",
        f'otel_a2a_divergence_total{{{labels},instance="pod-2"}}': "_x20 1x30",
    }
    _promtool_expr_test(
        tmp_path,
        series,
        [{"expr": expr, "eval_time": "45m", "exp_samples": [{"labels": "{}", "value": 6}]}],
        interval="1m",
    )
