"""Hostile trace files through the whole graph: odd lines are rejects, the rest is scored, and a run with nothing
valid fails and says so."""

import io
import shutil

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.ingestion.assets import ANY_VALID_TRACE_CHECK
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline

HOSTILE = [
    b'"attempt": 18446744073709551616',
    b'"usage": {"cost_usd": 1e400}',
    b'"attempt": 1, "attempt": "one"',
    b'"input": NaN',
    b'"extra": ' + b"[" * 300 + b"]" * 300,
]


def _with(line: bytes, extra: bytes) -> bytes:
    return line.rstrip()[:-1] + b", " + extra + b"}"


def _run(data, tmp_path, run_id: str):
    instance = dg.DagsterInstance.ephemeral()
    summary = io.StringIO()
    code = run_pipeline(
        data=str(data),
        run_ids=[run_id],
        warehouse=str(tmp_path / "wh"),
        reports=str(tmp_path / "rp"),
        deid_demo=True,
        quiet=True,
        instance=instance,
        stream=summary,
    )
    return code, summary.getvalue(), instance, Warehouse.at(tmp_path / "wh")


@pytest.mark.slow
def test_lines_pyarrow_cannot_hold_are_rejects_and_every_other_trace_is_scored(sample_copy, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(sample_copy, data)
    rag = data / "traces" / "base-41" / "rag.jsonl"
    lines = rag.read_bytes().splitlines()
    # each hostile line is a copy of a real trace under a fresh id, so the original still counts
    hostile = [
        _with(lines[i].replace(b'"trace_id": "', b'"trace_id": "hostile-%d-' % i, 1), extra)
        for i, extra in enumerate(HOSTILE)
    ]
    rag.write_bytes(b"\xef\xbb\xbf" + b"\n".join([*lines, *hostile]) + b"\n")
    code, summary, _, warehouse = _run(data, tmp_path, "base-41")
    assert code == 0, summary
    rejects = warehouse.read("trace_rejects", "base-41").filter(pl.col("source_file") == "traces/base-41/rag.jsonl")
    assert rejects.sort("line")["line"].to_list() == list(range(len(lines) + 1, len(lines) + 1 + len(HOSTILE)))
    assert rejects.sort("line")["reason"].to_list() == [
        "integer 18446744073709551616 is outside the 64-bit range",
        "number 1e400 is beyond the range of a 64-bit float",
        "attempt: Input should be a valid integer",
        "invalid JSON: NaN is not a JSON number",
        "JSON nested deeper than 128 levels",
    ]
    traces = warehouse.read("deid_traces", "base-41").filter(pl.col("source_file") == "traces/base-41/rag.jsonl")
    assert sorted(traces["source_line"].to_list()) == list(range(1, len(lines) + 1))  # line 1 behind its BOM too
    scored = warehouse.read("stage_results", "base-41").filter(pl.col("lane") == "rag")
    assert scored.filter(pl.col("trace_id").str.starts_with("hostile")).height == 0
    assert set(traces["trace_id"]) <= set(scored["trace_id"])


def test_a_run_whose_every_line_is_rejected_fails_and_says_so(sample_copy, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(sample_copy, data)
    junk = data / "traces" / "junk-1"
    junk.mkdir()
    manifest = (data / "traces" / "base-41" / "run.yaml").read_text().replace("run_id: base-41", "run_id: junk-1")
    (junk / "run.yaml").write_text(manifest)
    (junk / "batch.jsonl").write_bytes(b'not json\n{"trace_id": "t1", "case_id": "no-such-case"}\n\n[1]\n')
    code, summary, instance, warehouse = _run(data, tmp_path, "junk-1")
    assert code == 1
    assert "junk-1" in summary and "no valid trace: 3 lines rejected, 1 blank" in summary
    assert warehouse.read("trace_rejects", "junk-1").sort("line")["reason"].to_list() == [
        "invalid JSON: Expecting value at column 1",
        "unknown case_id 'no-such-case'",
        "not a JSON object: a list",
    ]
    checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("traces"), ANY_VALID_TRACE_CHECK)]
    )
    assert next(iter(checks.values())).event.dagster_event.event_specific_data.passed is False
    stages = warehouse.read("stage_results", "junk-1")
    assert stages is None or stages.height == 0
