"""The summary printed after a run, from a small warehouse in a temporary folder: rejected lines, per-lane counts with
the top first failing stage, the gate statuses and the report paths."""

import io

import polars as pl
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting.summary import print_summary

ROLLUP_SCHEMA = {
    "lane": pl.String,
    "stage": pl.String,
    "stage_order": pl.Int64,
    "failures": pl.Int64,
    "share": pl.Float64,
    "lane_failures": pl.Int64,
    "lane_incomplete": pl.Int64,
    "lane_passed": pl.Int64,
    "lane_traces": pl.Int64,
}


class Reports:
    """The report files of each run, as the run's report location lists them."""

    def __init__(self, files: dict[str, list[str]]) -> None:
        self._files = files

    def files(self, run_id: str) -> list[str]:
        return self._files.get(run_id, [])

    def uri_of(self, run_id: str, name: str) -> str:
        return f"/srv/reports/{run_id}/{name}"


class Config:
    def __init__(self, warehouse: Warehouse, reports: Reports) -> None:
        self._warehouse, self._reports = warehouse, reports

    def warehouse(self) -> Warehouse:
        return self._warehouse

    def reports(self) -> Reports:
        return self._reports


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    warehouse = Warehouse.at(tmp_path / "warehouse")
    # rag: 10 traces, 6 passed, 3 failed, 1 incomplete; three stages tie at 1 failure: the earliest is the top one
    rollup = pl.DataFrame(
        [
            ("rag", "retrieval", 0, 1, 1 / 3, 3, 1, 6, 10),
            ("rag", "grounding", 2, 1, 1 / 3, 3, 1, 6, 10),
            ("rag", "answer", 4, 1, 1 / 3, 3, 1, 6, 10),
            ("agent", "policy", 0, 0, None, 0, 2, 5, 7),
            ("agent", "outcome", 6, 0, None, 0, 2, 5, 7),
        ],
        schema=ROLLUP_SCHEMA,
        orient="row",
    )
    warehouse.write_partition("attribution_rollup", rollup, "r1")
    warehouse.write_partition(
        "trace_rejects", pl.DataFrame({"line": [3, 9], "reason": ["bad json", "no trace_id"]}), "r1"
    )
    gates = pl.DataFrame(
        {"gate": ["a", "b", "c", "d"], "status": ["pass", "fail", "pass", "incomplete"], "baseline_run_id": ["r0"] * 4}
    )
    warehouse.write_partition("gate_results", gates, "r1")
    # r2: no reject rows (the table exists: a count of 0), an empty gate table (no gate line), no attribution
    warehouse.write_partition("gate_results", gates.clear(), "r2")
    return warehouse


def test_summary_of_a_scored_run_and_of_a_run_without_attribution(warehouse):
    out = io.StringIO()
    print_summary(Config(warehouse, Reports({"r1": ["gate.html", "rag.html"]})), ["r1", "r2"], out)
    assert (
        out.getvalue()
        == "\n".join(
            [
                "",
                "== run r1",
                "  rejected input lines: 2",
                "  lane    traces  passed  failed incomplete  top first failing stage",
                "  agent        7       5       0          2  -",
                "  rag         10       6       3          1  retrieval (1/3)",
                "  gates vs baseline r0: fail: 1, incomplete: 1, pass: 2",
                "  report: /srv/reports/r1/gate.html",
                "  report: /srv/reports/r1/rag.html",
                "",
                "== run r2",
                "  rejected input lines: 0",
                "  (no attribution: a lane did not reach its report)",
            ]
        )
        + "\n"
    )


def test_top_stage_is_the_one_with_most_failures(warehouse):
    rollup = pl.DataFrame(
        [
            ("rag", "retrieval", 0, 1, 0.2, 5, 0, 5, 10),
            ("rag", "grounding", 2, 3, 0.6, 5, 0, 5, 10),
            ("rag", "answer", 4, 1, 0.2, 5, 0, 5, 10),
        ],
        schema=ROLLUP_SCHEMA,
        orient="row",
    )
    warehouse.write_partition("attribution_rollup", rollup, "r3")
    out = io.StringIO()
    print_summary(Config(warehouse, Reports({})), ["r3"], out)
    # trace_rejects exists as a table, so r3 gets a count of 0 rather than no line
    assert out.getvalue().splitlines() == [
        "",
        "== run r3",
        "  rejected input lines: 0",
        "  lane    traces  passed  failed incomplete  top first failing stage",
        "  rag         10       5       5          0  grounding (3/5)",
    ]


def test_empty_warehouse_prints_only_the_run_header(tmp_path):
    out = io.StringIO()
    print_summary(Config(Warehouse.at(tmp_path / "empty"), Reports({})), ["r9"], out)
    assert out.getvalue() == "\n== run r9\n  (no attribution: a lane did not reach its report)\n"


def test_a_run_without_a_baseline_says_so_not_none(tmp_path):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    gates = pl.DataFrame(
        {"gate": ["a"], "status": ["not_applicable"], "baseline_run_id": [None]},
        schema_overrides={"baseline_run_id": pl.String},
    )
    warehouse.write_partition("gate_results", gates, "r1")
    out = io.StringIO()
    print_summary(Config(warehouse, Reports({})), ["r1"], out)
    assert "  gates vs no baseline: not_applicable: 1" in out.getvalue().splitlines()
    assert "None" not in out.getvalue()


def test_a_run_that_is_its_own_baseline_says_it_is_not_gated_and_why(tmp_path):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    gates = pl.DataFrame(
        {
            "gate": ["a"],
            "status": ["not_applicable"],
            "baseline_run_id": [None],
            "reason": ["this run is the baseline: not gated against itself"],
        },
        schema_overrides={"baseline_run_id": pl.String},
    )
    warehouse.write_partition("gate_results", gates, "base-1")
    out = io.StringIO()
    print_summary(Config(warehouse, Reports({})), ["base-1"], out)
    assert (
        "  gates not gated (this run is the baseline: not gated against itself): not_applicable: 1"
        in out.getvalue().splitlines()
    )
