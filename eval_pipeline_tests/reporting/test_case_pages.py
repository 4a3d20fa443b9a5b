"""Case pages from a small warehouse in a temporary folder: which cases get a page and in what order, each run's tables
read for the cases shown, one HTML page per known case, and the baseline beside it."""

from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting.case_pages import case_ids_worth_a_page, read_case_tables, write_case_pages

STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop", "recovery", "outcome")


def _stage_rows(run: str, case: str, failing: str | None) -> pl.DataFrame:
    trace = f"{run}:{case}#1"
    return pl.DataFrame(
        {
            "trace_id": [trace] * len(STAGES),
            "case_id": [case] * len(STAGES),
            "attempt": [1] * len(STAGES),
            "lane": ["agent"] * len(STAGES),
            "stage": list(STAGES),
            "stage_order": list(range(len(STAGES))),
            "status": ["fail" if s == failing else "pass" for s in STAGES],
            "reason": [f"{s} failed" if s == failing else None for s in STAGES],
        }
    )


def write_warehouse_run(warehouse: Warehouse, run: str, failing: dict[str, str | None]) -> None:
    cases = list(failing)
    warehouse.write_partition("run_manifest", pl.DataFrame({"candidate": [f"assistant@{run}"], "mode": ["gate"]}), run)
    warehouse.write_partition(
        "deid_cases",
        pl.DataFrame(
            {
                "case_id": cases,
                "lanes": [["agent"]] * len(cases),
                "input": [f"task {c}" for c in cases],
                "criticality": ["high"] * len(cases),
                "case_revision": [1] * len(cases),
            }
        ),
        run,
    )
    warehouse.write_partition(
        "deid_traces",
        pl.DataFrame(
            {
                "trace_id": [f"{run}:{c}#1" for c in cases],
                "case_id": cases,
                "attempt": [1] * len(cases),
                "status": ["ok"] * len(cases),
                "answer_text": [f"done {c}" for c in cases],
            }
        ),
        run,
    )
    warehouse.write_partition("stage_results", pl.concat([_stage_rows(run, c, s) for c, s in failing.items()]), run)
    warehouse.write_partition(
        "tool_scores",
        pl.DataFrame(
            {
                "trace_id": [f"{run}:{c}#1" for c in cases],
                "case_id": cases,
                "args_valid_rate": [0.5 if failing[c] else 1.0 for c in cases],
            }
        ),
        run,
    )


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    warehouse = Warehouse.at(tmp_path / "warehouse")
    write_warehouse_run(warehouse, "r1", {"a1": "tool_arguments", "a2": None, "a3": "outcome"})
    write_warehouse_run(warehouse, "r0", {"a1": None, "a2": None})
    gates = pl.DataFrame(
        {
            "gate": ["tool_args"],
            "status": ["fail"],
            "owner": ["agent"],
            "reason": ["args valid dropped"],
            "metric": ["args_valid_rate"],
            "baseline_run_id": ["r0"],
            "baseline_value": [1.0],
            "candidate_value": [0.5],
            "blocking_cases": [["a1"]],
            "excluded_cases": [[]],
        },
        schema_overrides={"excluded_cases": pl.List(pl.String)},
    )
    warehouse.write_partition("gate_results", gates, "r1")
    return warehouse


def test_case_ids_worth_a_page_by_priority():
    gates = pl.DataFrame({"status": ["fail", "pass", "fail"], "blocking_cases": [["c9", "c2"], ["c7"], ["c2", None]]})
    rag = pl.DataFrame({"case_id": ["c5", "c1", "c2", "c8"], "outcome": ["fail", "fail", "fail", "incomplete"]})
    agent = pl.DataFrame({"case_id": ["a4", "a3"], "outcome": ["fail", "incomplete"]})
    review = pl.DataFrame({"case_id": ["c6", None, "c1"]})
    cases = pl.DataFrame({"case_id": ["c5", "a4", "c6"], "criticality": ["high", "low", "high"]})
    # blocking, then failed and high, then other failed, then review queue, then incomplete; each group sorted
    assert case_ids_worth_a_page(gates, [rag, None, agent], review, cases=cases) == [
        "c2",
        "c9",
        "c5",
        "a4",
        "c1",
        "c6",
        "a3",
        "c8",
    ]
    assert case_ids_worth_a_page(gates, rag, None, limit=3) == ["c2", "c9", "c1"]
    assert case_ids_worth_a_page(None, None, None) == []
    assert case_ids_worth_a_page(gates, rag, review, limit=-1) == []


def test_read_case_tables_of_some_cases(warehouse):
    tables = read_case_tables(warehouse, "r1", ["a3", "a3"], relevance_threshold=3)
    assert tables.run_id == "r1" and tables.relevance_threshold == 3
    assert tables.manifest["candidate"] == "assistant@r1"
    assert sorted(tables.frames) == ["deid_cases", "deid_traces", "gate_results", "stage_results", "tool_scores"]
    assert tables.frame("deid_cases")["case_id"].to_list() == ["a3"]
    assert tables.frame("stage_results").height == len(STAGES)
    # a whole-run table is read whole
    assert tables.frame("gate_results")["gate"].to_list() == ["tool_args"]
    assert read_case_tables(warehouse, "r1").frame("deid_cases").height == 3
    assert read_case_tables(warehouse, "r1").relevance_threshold == 2
    assert read_case_tables(warehouse, "never-scored") is None


def test_write_case_pages_one_page_per_known_case(warehouse, tmp_path):
    reports = tmp_path / "reports"
    written = write_case_pages(warehouse, str(reports), "r1", ["a3", "a1", "zz", "a3"], baseline_run_id="r0")
    # an unknown case gets no page; a repeated one a single page, in the order given
    assert written == [f"{reports}/r1/cases/a3.html", f"{reports}/r1/cases/a1.html"]
    assert sorted(p.name for p in (reports / "r1" / "cases").iterdir()) == [".published.json", "a1.html", "a3.html"]
    a1 = Path(written[1]).read_text()
    assert "<title>Case a1 — run r1</title>" in a1
    assert (
        "<li>blocks gate tool_args (fail, owner agent, against r0): args valid dropped; this case: args_valid_rate "
        "1.0000 → 0.5000</li>"
    ) in a1
    assert "<h2>Against baseline r0</h2>" in a1
    assert "<li>r1:a1#1 agent: FAIL at tool_arguments (owner: agent tool calling (argument construction))</li>" in a1
    a3 = Path(written[0]).read_text()
    # a3 is not in the baseline run
    assert "<h2>Against baseline r0</h2>\n<ul><li>the case is not in that run</li></ul>" in a3


def test_write_case_pages_limit_and_runs_without_a_baseline(warehouse, tmp_path):
    reports = tmp_path / "reports"
    assert write_case_pages(warehouse, reports, "r1", ["a2", "a1"], limit=1) == [f"{reports}/r1/cases/a2.html"]
    page = (reports / "r1" / "cases" / "a2.html").read_text()
    assert "Against baseline" not in page
    # the run as its own baseline is no comparison
    write_case_pages(warehouse, reports, "r1", ["a1"], baseline_run_id="r1")
    assert "Against baseline" not in (reports / "r1" / "cases" / "a1.html").read_text()
    assert write_case_pages(warehouse, reports, "r1", []) == []


def test_write_case_pages_of_a_run_never_scored(warehouse, tmp_path):
    with pytest.raises(LookupError, match="run 'r7' has not been scored in"):
        write_case_pages(warehouse, tmp_path / "reports", "r7", ["a1"])


def test_a_page_whose_source_is_unchanged_is_taken_as_it_stands_and_a_changed_one_rendered(
    warehouse, tmp_path, monkeypatch
):
    """A re-score changes a few cases: only their pages are rendered again. A stamp no page shows (qrels_version) is
    not part of a page's source; a row of the case is."""
    import eval_pipeline.reporting.case_pages as case_pages

    rendered: list[str] = []
    build = case_pages.build_story

    def counting(tables, case_id):
        rendered.append(case_id)
        return build(tables, case_id)

    monkeypatch.setattr(case_pages, "build_story", counting)
    tool_scores = warehouse.read("tool_scores", "r1")
    warehouse.write_partition("tool_scores", tool_scores.with_columns(qrels_version=pl.lit("q1")), "r1")
    reports = tmp_path / "reports"
    first = write_case_pages(warehouse, str(reports), "r1", ["a3", "a1"], baseline_run_id="r0")
    pages = {p: Path(p).read_text() for p in first}
    assert set(rendered) == {"a1", "a3"}

    rendered.clear()
    warehouse.write_partition("tool_scores", tool_scores.with_columns(qrels_version=pl.lit("q2")), "r1")
    assert write_case_pages(warehouse, str(reports), "r1", ["a3", "a1"], baseline_run_id="r0") == first
    assert rendered == [] and {p: Path(p).read_text() for p in first} == pages

    # a1's tool scores change: a1 is rendered again, a3 is not
    changed = tool_scores.with_columns(
        pl.when(pl.col("case_id") == "a1")
        .then(pl.lit(0.25))
        .otherwise(pl.col("args_valid_rate"))
        .alias("args_valid_rate")
    )
    warehouse.write_partition("tool_scores", changed, "r1")
    assert write_case_pages(warehouse, str(reports), "r1", ["a3", "a1"], baseline_run_id="r0") == first
    assert set(rendered) == {"a1"} and "0.2500" in Path(first[1]).read_text()
    assert Path(first[0]).read_text() == pages[first[0]]

    # against another baseline every page is rendered again
    rendered.clear()
    write_case_pages(warehouse, str(reports), "r1", ["a3", "a1"])
    assert set(rendered) == {"a1", "a3"}


def test_a_page_edited_on_disk_is_rendered_again(warehouse, tmp_path, monkeypatch):
    import eval_pipeline.reporting.case_pages as case_pages

    reports = tmp_path / "reports"
    [page] = write_case_pages(warehouse, str(reports), "r1", ["a1"])
    text = Path(page).read_text()
    Path(page).write_text(text.replace("Case a1", "Case a1 (edited)"))
    rendered: list[str] = []
    build = case_pages.build_story
    monkeypatch.setattr(
        case_pages, "build_story", lambda tables, case_id: rendered.append(case_id) or build(tables, case_id)
    )
    assert write_case_pages(warehouse, str(reports), "r1", ["a1"]) == [page]
    assert rendered == ["a1"] and Path(page).read_text() == text


def test_a_page_source_tells_minus_zero_from_zero_as_the_page_does():
    """Polars' row hash takes -0.0 for 0.0, a page prints `-0.0000`: the source must change with it."""
    from eval_pipeline.reporting.case_pages import page_sources
    from eval_pipeline.reporting.case_story import CaseTables

    def tables(rate: float) -> CaseTables:
        scores = pl.DataFrame({"case_id": ["a1", "a2"], "grounding_rate": [rate, 0.5]})
        return CaseTables(run_id="r1", manifest={"candidate": "c"}, frames={"grounding_scores": scores})

    zero, minus_zero = page_sources(tables(0.0), None, ["a1", "a2"]), page_sources(tables(-0.0), None, ["a1", "a2"])
    assert zero["a1"] != minus_zero["a1"] and zero["a2"] == minus_zero["a2"]
    assert page_sources(tables(0.0), None, ["a1", "a2"]) == zero
