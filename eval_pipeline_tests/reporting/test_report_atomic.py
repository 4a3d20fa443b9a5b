"""Issue 34: report files are written under temporary names and moved into place only after their privacy check
passes; a failing check leaves no file (neither the temporary one nor an older copy) and names file and type only."""

from __future__ import annotations

import os

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.gates.assets import gate_report
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.storage import open_location
from eval_pipeline.reporting.publish import ReportFile, ReportLeakError, publish, publish_or_raise

MAIL = "maria.lopez@example.com"


def _all_files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


def test_clean_files_are_moved_into_place_and_no_temporary_name_stays(tmp_path):
    location = open_location(tmp_path)
    verdict = publish(
        location, [ReportFile(("r1", "rag.md"), "# ok\n"), ReportFile(("r1", "rag.html"), "<p>ok</p>")], "rag_report"
    )
    assert verdict.passed and verdict.metadata["findings"] == 0
    assert verdict.uris == [f"{tmp_path}/r1/rag.md", f"{tmp_path}/r1/rag.html"]
    assert _all_files(tmp_path) == ["r1/rag.html", "r1/rag.md"]
    assert (tmp_path / "r1" / "rag.md").read_text() == "# ok\n"


def test_a_leaking_file_leaves_nothing_on_disk_not_even_an_older_copy(tmp_path):
    location = open_location(tmp_path)
    assert publish(location, [ReportFile(("r1", "rag.md"), "old report\n")], "rag_report").passed
    files = [
        ReportFile(("r1", "rag.md"), f"# Report\nmail {MAIL} now\n"),
        ReportFile(("r1", "rag.html"), "<p>fine</p>"),
    ]
    verdict = publish(location, files, "rag_report")
    assert not verdict.passed and verdict.uris == []
    assert verdict.metadata["findings"] == 1 and verdict.metadata["where"] == "rag_report.r1/rag.md: EMAIL ×1"
    assert MAIL not in verdict.description and "maria" not in str(verdict.metadata)
    # neither file of the set, no temporary name, and the stale report of an earlier materialization is gone too
    assert _all_files(tmp_path) == []


def test_a_value_split_over_two_lines_is_found_and_publish_or_raise_writes_nothing(tmp_path):
    location = open_location(tmp_path)
    with pytest.raises(ReportLeakError, match=r"index\.md: PHONE") as raised:
        publish_or_raise(location, [ReportFile(("index.md",), "call +44 20\n7946 0958 today\n")], "index")
    assert "7946" not in str(raised.value)
    assert _all_files(tmp_path) == []


def test_the_gate_report_whose_check_fails_writes_no_file_and_names_table_file_and_type(scored, tmp_path):
    """The gate report asset over the sample's gate results with a planted address in a gate name: the blocking
    report_has_no_personal_data check fails naming the file and type, and neither gate file nor the index exists."""
    warehouse, run = scored["warehouse"], "cand-42"
    gate_results = warehouse.read("gate_results", run)
    assert gate_results.height > 0
    gate_results = gate_results.with_columns(pl.lit(f"refunds for {MAIL}").alias("gate"))
    reports = tmp_path / "reports"
    config = EvalConfig(data_root=str(scored["data"]), warehouse_root=str(warehouse.root), reports_root=str(reports))
    result = gate_report(
        dg.build_asset_context(partition_key=run),
        eval_config=config,
        gate_results=gate_results,
        pairwise_comparison=warehouse.read("pairwise_comparison", run),
        counterfactual_pairs=warehouse.read("counterfactual_pairs", run),
    )
    [privacy] = [r for r in result.check_results if r.check_name == "report_has_no_personal_data"]
    assert not privacy.passed
    assert "gate_report.cand-42/gate.md: EMAIL" in privacy.description and MAIL not in privacy.description
    assert not reports.exists() or _all_files(reports) == []
    assert "report" not in result.metadata and MAIL not in str(result.metadata)
