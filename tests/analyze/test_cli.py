"""``otel-a2a analyze FILE…``: report, ``--json`` and exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from otel_a2a.cli import main
from tests.analyze.samples import request, span

GATEWAY = request(
    "gateway",
    span("t1", "TASK_STATE_FAILED", 0, 10, span_id="cccccccccccccccc", parent="bbbbbbbbbbbbbbbb"),
    span("t2", "TASK_STATE_WORKING", 0, 10, span_id="dddddddddddddddd"),
)
ORCHESTRATOR = request(
    "orchestrator",
    span("t1", "TASK_STATE_WORKING", 0, 20, span_id="aaaaaaaaaaaaaaaa"),
    span("t2", "Working", 2, 8, span_id="eeeeeeeeeeeeeeee"),
)


def _write(path: Path, *docs: object, junk: str = "") -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs) + junk)
    return str(path)


def test_findings_exit_1_with_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(tmp_path / "gateway.json", GATEWAY)
    b = _write(tmp_path / "orchestrator.json", ORCHESTRATOR, junk="{broken\n")
    assert main(["analyze", a, b]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("task t1: cross_runtime_conflict: gateway failed")
    assert "orchestrator working ('TASK_STATE_WORKING'" in lines[0]
    assert lines[1].startswith("task t2: renormalized_state: gateway working")
    assert "'Working'" in lines[1]
    assert "skipped 1 unreadable line" in captured.err
    assert (
        "4 spans, 4 task beliefs, 2 tasks, 2 findings (0 more dropped by the bounds), "
        "1 malformed line(s) or span(s)" in captured.err
    )


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "all.json", GATEWAY, ORCHESTRATOR)
    assert main(["analyze", "--json", path]) == 1
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["reason"] for f in found] == ["cross_runtime_conflict", "renormalized_state"]
    conflict = found[0]
    assert conflict["task_id"] == "t1"
    assert conflict["services"] == ["gateway", "orchestrator"]
    assert conflict["a"]["state"] == "failed" and conflict["b"]["state_raw"] == "TASK_STATE_WORKING"
    assert conflict["a"]["start"].endswith("Z") and conflict["a"]["span_id"] == "cccccccccccccccc"


def test_no_finding_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "one.json", GATEWAY)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert main(["analyze", path, str(empty)]) == 0
    assert capsys.readouterr().out == ""


def test_unreadable_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    garbage = tmp_path / "garbage.json"
    garbage.write_text("hello\nworld\n")
    assert main(["analyze", str(garbage)]) == 2
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00junk")
    assert main(["analyze", str(binary)]) == 2
    # findings in a good file still print, but the exit code says an input was unreadable
    good = _write(tmp_path / "good.json", GATEWAY, ORCHESTRATOR)
    assert main(["analyze", good, str(garbage)]) == 2
    assert "cross_runtime_conflict" in capsys.readouterr().out


def test_a_metrics_export_is_not_a_clean_trace_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = _write(tmp_path / "metrics.json", {"resourceMetrics": []})
    assert main(["analyze", metrics]) == 2
    assert "no trace spans in it" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--max-tasks", "0", "must be an integer >= 1"),
        ("--max-tasks", "many", "must be an integer >= 1"),
        ("--grace", "inf", "must be a number of seconds >= 0"),
        ("--grace", "-1", "must be a number of seconds >= 0"),
    ],
)
def test_bad_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, says: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["analyze", option, value, str(tmp_path)])
    assert exc.value.code == 2
    assert f"argument {option}: {value!r}: {says}" in capsys.readouterr().err


def test_files_as_users_have_them_gzip_bom_pretty_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The collector's ``compression: gzip``, an editor's byte-order mark, ``jq .`` output:
    each read like the plain line format (two findings between the two services)."""
    zipped = tmp_path / "gateway.jsonl.gz"
    zipped.write_bytes(gzip.compress(json.dumps(GATEWAY).encode() + b"\n"))
    bom = tmp_path / "orchestrator.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(ORCHESTRATOR).encode() + b"\n")
    pretty = tmp_path / "orchestrator.json"
    pretty.write_text(json.dumps(ORCHESTRATOR, indent=2))
    for second in (bom, pretty):
        assert main(["analyze", str(zipped), str(second)]) == 1
        captured = capsys.readouterr()
        assert len(captured.out.splitlines()) == 2
        assert "0 malformed" in captured.err
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(zipped.read_bytes()[:-8])
    corrupt = tmp_path / "corrupt.jsonl.gz"
    data = zipped.read_bytes()
    corrupt.write_bytes(data[:12] + bytes(b ^ 0xFF for b in data[12:40]) + data[40:])
    for bad in (cut, corrupt):
        assert main(["analyze", str(bad)]) == 2
        assert "cannot read" in capsys.readouterr().err


def test_span_times_as_json_numbers_and_spans_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``1.7e18`` is an integral JSON number (read); a span with no start time is malformed
    (counted, not dropped silently)."""
    doc = json.loads(json.dumps(GATEWAY))
    first, second = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    first["startTimeUnixNano"] = float(first["startTimeUnixNano"])
    del second["startTimeUnixNano"]
    assert main(["analyze", _write(tmp_path / "f.jsonl", doc)]) == 0
    err = capsys.readouterr().err
    assert "2 spans, 1 task beliefs" in err and "1 malformed" in err


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """``otel-a2a analyze … | head -1``."""
    ids = [f"{i:016x}" for i in range(1, 3001)]  # 3,000 conflicts: more than a pipe holds
    gateway = request(
        "gateway", *(span(f"t{i}", "TASK_STATE_FAILED", 0, 10, span_id=i) for i in ids)
    )
    orchestrator = request(
        "orchestrator", *(span(f"t{i}", "TASK_STATE_WORKING", 0, 20, span_id=i) for i in ids)
    )
    a = _write(tmp_path / "gateway.json", gateway)
    b = _write(tmp_path / "orchestrator.json", orchestrator)
    script = (
        "import sys; from otel_a2a.cli import main; sys.stdout.close = lambda: None; "
        f"sys.exit(main(['analyze', {a!r}, {b!r}]))"
    )
    reader = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.readline()
    reader.stdout.close()  # as `head -1` does
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err
