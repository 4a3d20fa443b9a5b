"""File names derived from ids stay within the file-system limit (255 bytes, with room for a temporary name beside):
a long case id gets a cut name with a hash suffix, the same for its page and every link to it; short ids keep theirs."""

import hashlib
import re
from urllib.parse import quote

import polars as pl
import pytest

from eval_pipeline.contracts.identifiers import ID_FILE_NAME_MAX_BYTES, bounded_file_name
from eval_pipeline.importers.common import RunFiles, write_run
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting.case_pages import write_case_pages
from eval_pipeline.reporting.case_story import case_page_name
from eval_pipeline.reporting.gate_report import CASE_PAGE
from eval_pipeline.reporting.render import Section, href, render_html
from eval_pipeline_tests.reporting.test_case_pages import write_warehouse_run

LONG = "agent-" + "x" * 300
LONG_ACCENTED = "cas-" + "é" * 100  # 4 + 600 bytes once percent-encoded


def test_short_names_are_kept_and_long_ones_cut_with_a_hash_of_the_whole_name():
    assert bounded_file_name("a%2Fb.html") == "a%2Fb.html"
    name = quote(LONG, safe="") + ".html"
    digest = hashlib.sha256(name.encode()).hexdigest()[:24]
    bounded = bounded_file_name(name)
    assert len(bounded.encode()) == ID_FILE_NAME_MAX_BYTES
    assert bounded == name[: ID_FILE_NAME_MAX_BYTES - 30] + "~" + digest + ".html"
    # stable, and two ids that share their first 200 bytes get two names
    assert bounded_file_name(name) == bounded
    assert bounded_file_name(quote(LONG + "y", safe="") + ".html") != bounded
    # the escapes of a character are never cut apart
    accented = bounded_file_name(quote(LONG_ACCENTED, safe="") + ".html")
    assert len(accented.encode()) <= ID_FILE_NAME_MAX_BYTES and accented.endswith(".html")
    assert re.fullmatch(r"cas-(%C3%A9)+~[0-9a-f]{24}\.html", accented)
    # a name without an extension is cut the same way
    assert len(bounded_file_name("z" * 400).encode()) == ID_FILE_NAME_MAX_BYTES == 200


@pytest.mark.parametrize("case_id", [LONG, LONG_ACCENTED])
def test_a_case_page_of_a_long_case_id_is_written_and_linked_under_the_same_name(tmp_path, case_id):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    write_warehouse_run(warehouse, "r1", {case_id: "tool_arguments", "a2": None})
    reports = tmp_path / "reports"
    written = write_case_pages(warehouse, str(reports), "r1", [case_id, "a2"])
    name = case_page_name(case_id)
    assert len(name.encode()) <= ID_FILE_NAME_MAX_BYTES
    assert written == [f"{reports}/r1/cases/{name}", f"{reports}/r1/cases/a2.html"]
    assert sorted(p.name for p in (reports / "r1" / "cases").iterdir()) == sorted([name, "a2.html", ".published.json"])
    # the links of the lane and gate reports, and of the index, name the same file
    assert href(CASE_PAGE, case_id) == f"cases/{name}"
    assert href("{run_id}/cases/{value}.html", case_id, {"run_id": "r1"}) == f"r1/cases/{name}"
    html = render_html(
        "Lane", [Section("Failed", [], pl.DataFrame({"case_id": [case_id]}), links={"case_id": CASE_PAGE})]
    )
    assert f'href="cases/{name}"' in html


def test_an_imported_case_with_a_long_id_is_written_under_a_bounded_name(tmp_path):
    case = {"case_id": LONG, "lanes": ["agent"], "input": "do it"}
    manifest = {
        "run_id": "r1",
        "candidate": "bot",
        "corpus_version": "kb",
        "dataset_version": "ds",
        "environment_version": "env",
        "mode": "gate",
    }
    trace = {"trace_id": "t1", "case_id": LONG, "attempt": 1, "status": "ok"}
    files = RunFiles(
        manifest=manifest,
        registry={"environment_version": "env", "tools": []},
        cases=[case],
        traces=[trace],
        trace_file="batch.jsonl",
        rejects=[],
    )
    written = write_run(tmp_path, files)
    names = [p.name for p in (tmp_path / "cases" / "ds").iterdir()]
    assert names == [bounded_file_name(f"{LONG}.yaml")] and len(names[0].encode()) == ID_FILE_NAME_MAX_BYTES
    assert f"cases/ds/{names[0]}" in written
