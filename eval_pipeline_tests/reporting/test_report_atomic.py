"""Issue 34: report files are written under temporary names and moved into place only after their privacy check
passes; a failing check leaves no file (neither the temporary one nor an older copy) and names file and type only."""

from __future__ import annotations

import json
import os

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.gates.assets import gate_report
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.storage import OutsideRootError, open_location
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
    assert _all_files(tmp_path) == ["r1/.published.json", "r1/rag.html", "r1/rag.md"]
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


def _count_scanned(monkeypatch) -> list[int]:
    """How many files each publish() call hands to the scanner."""
    import eval_pipeline.reporting.publish as publishing

    counts: list[int] = []
    scan = publishing.scan_documents

    def counting(documents, table, *args, **kwargs):
        counts.append(len(documents))
        return scan(documents, table, *args, **kwargs)

    monkeypatch.setattr(publishing, "scan_documents", counting)
    return counts


def test_a_text_that_passed_is_not_scanned_or_written_again_and_a_changed_one_is(tmp_path, monkeypatch):
    """A re-score rewrites a run's pages, most byte for byte as they were: only the changed ones are scanned and
    written; the check still speaks for every file of the set."""
    location = open_location(tmp_path)
    counts = _count_scanned(monkeypatch)
    pages = [ReportFile(("r1", "cases", f"c{i}.html"), f"<p>case {i}</p>") for i in range(3)]
    assert publish(location, pages, "case_pages").passed
    written = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "r1" / "cases").glob("*.html")}
    again = [pages[0], pages[1], ReportFile(("r1", "cases", "c2.html"), "<p>case 2, retrieval now failed</p>")]
    verdict = publish(location, again, "case_pages")
    assert verdict.passed and counts == [3, 1]
    assert verdict.description == "0 personal data finding(s) in 3 report file(s)"
    assert verdict.metadata["files"] == 3 and verdict.metadata["passed_before"] == 2
    assert verdict.uris == [f"{tmp_path}/r1/cases/c{i}.html" for i in range(3)]
    after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "r1" / "cases").glob("*.html")}
    assert after["c0.html"] == written["c0.html"] and after["c1.html"] == written["c1.html"]
    assert (tmp_path / "r1" / "cases" / "c2.html").read_text() == "<p>case 2, retrieval now failed</p>"


def test_a_file_changed_on_disk_is_written_again_and_another_scanner_scans_everything(tmp_path, monkeypatch):
    import eval_pipeline.reporting.publish as publishing

    location = open_location(tmp_path)
    counts = _count_scanned(monkeypatch)
    pages = [ReportFile(("r1", f"p{i}.md"), f"page {i}\n") for i in range(2)]
    assert publish(location, pages, "rag_report").passed
    (tmp_path / "r1" / "p0.md").write_text(f"edited by hand: {MAIL}\n")
    assert publish(location, pages, "rag_report").passed and counts == [2, 0]
    # the text is known to be clean, but the bytes in place are not that text: they are replaced
    assert (tmp_path / "r1" / "p0.md").read_text() == "page 0\n"
    # a ledger of another scanner (an upgraded detector, another library version) vouches for nothing
    ledger = tmp_path / "r1" / publishing.LEDGER
    written = json.loads(ledger.read_text())
    assert written["scanner"] == publishing.LEDGER_SCANNER and sorted(written["files"]) == ["p0.md", "p1.md"]
    ledger.write_text(json.dumps({**written, "scanner": "another scanner"}))
    assert publish(location, pages, "rag_report").passed and counts == [2, 0, 2]
    assert json.loads(ledger.read_text())["scanner"] == publishing.LEDGER_SCANNER


def test_a_fifo_or_a_link_in_place_of_a_page_is_never_read(tmp_path):
    """What stands where a page was published is read back only when it is a regular file: opening a FIFO would wait
    for a writer forever, a link would be followed."""
    location = open_location(tmp_path)
    page = ReportFile(("r1", "p0.md"), "page 0\n")
    assert publish(location, [page], "rag_report").passed
    (tmp_path / "r1" / "p0.md").unlink()
    os.mkfifo(tmp_path / "r1" / "p0.md")
    assert publish(location, [page], "rag_report").passed
    assert (tmp_path / "r1" / "p0.md").read_text() == "page 0\n"


def test_a_ledger_lists_only_texts_that_passed(tmp_path, monkeypatch):
    """A text that fails is never listed, so a later set holding it is scanned (and fails) again; the failed set's
    names leave the ledger with their files."""
    location = open_location(tmp_path)
    counts = _count_scanned(monkeypatch)
    clean = ReportFile(("r1", "rag.md"), "# fine\n")
    leaking = ReportFile(("r1", "rag.html"), f"<p>{MAIL}</p>")
    assert publish(location, [clean], "rag_report").passed
    for _ in range(2):
        verdict = publish(location, [clean, leaking], "rag_report")
        assert not verdict.passed and verdict.metadata["where"] == "rag_report.r1/rag.html: EMAIL ×1"
    assert counts == [1, 1, 2] and _all_files(tmp_path) == []
    # a ledger that cannot be read vouches for nothing either
    assert publish(location, [clean], "rag_report").passed
    (tmp_path / "r1" / ".published.json").write_text("{not json")
    assert publish(location, [clean], "rag_report").passed and counts == [1, 1, 2, 1, 1]


def test_a_link_in_place_of_a_page_is_replaced_not_read_and_one_out_of_the_root_is_refused(tmp_path):
    reports = tmp_path / "reports"
    location = open_location(reports)
    page = ReportFile(("r1", "p0.md"), "page 0\n")
    assert publish(location, [page], "rag_report").passed
    inside = reports / "r1" / "notes.md"
    inside.write_text("page 0\n")
    (reports / "r1" / "p0.md").unlink()
    (reports / "r1" / "p0.md").symlink_to(inside)
    assert publish(location, [page], "rag_report").passed
    assert not (reports / "r1" / "p0.md").is_symlink() and (reports / "r1" / "p0.md").read_text() == "page 0\n"
    outside = tmp_path / "outside.txt"
    outside.write_text("page 0\n")
    (reports / "r1" / "p0.md").unlink()
    (reports / "r1" / "p0.md").symlink_to(outside)
    with pytest.raises(OutsideRootError):
        publish(location, [page], "rag_report")
    assert outside.read_text() == "page 0\n"
