"""Decision slices in the reports, on hand-built tables: every failed high-criticality case named first (lane report,
banner, index, summary), the Slices section per dimension, and segmented gates in the gate table, verdict, JSON and
JUnit."""

import io
import json
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting.gate_report import (
    exit_meaning,
    gate_json,
    gate_junit,
    gate_table,
    gate_text_table,
    release_verdict,
    verdict_status,
)
from eval_pipeline.reporting.index import index_markdown
from eval_pipeline.reporting.lane_agent import agent_sections
from eval_pipeline.reporting.lane_data import LaneData
from eval_pipeline.reporting.lane_gates import lane_verdict
from eval_pipeline.reporting.render import render_markdown
from eval_pipeline.reporting.summary import print_summary
from eval_pipeline.scoring.attribution import OUTCOME_SCHEMA
from eval_pipeline.scoring.gate_table import GATE_RESULTS_SCHEMA
from eval_pipeline.scoring.slices import SLICE_ROLLUP_SCHEMA

OUTCOMES = pl.DataFrame(
    [
        {
            "trace_id": f"c:{case}#{n}",
            "case_id": case,
            "attempt": n,
            "lane": "agent",
            "outcome": outcome,
            "first_failing_stage": stage,
            "owner": stage,
            "reason": reason,
        }
        for case, n, outcome, stage, reason in (
            ("n1", 1, "fail", "tool_arguments", "amount 89, expected 10"),
            ("h1", 1, "fail", "policy", "close_account is forbidden"),
            ("h1", 2, "pass", None, None),
            ("h2", 1, "pass", None, None),
        )
    ],
    schema=OUTCOME_SCHEMA,
)
CASES = pl.DataFrame({"case_id": ["n1", "h1", "h2"], "criticality": ["normal", "high", "high"]})
ROLLUP = pl.DataFrame(
    {
        "lane": ["agent"] * 2,
        "stage": ["policy", "tool_arguments"],
        "stage_order": [0, 2],
        "failures": [1, 1],
        "share": [0.5, 0.5],
        "hazards": [0, 0],
        "owner": ["policy", "tools"],
        "lane_failures": [2, 2],
    }
)


def _slice(dimension, value, n_cases, pass_rate, pass_at_1, failed, top) -> dict:
    return {
        "lane": "agent",
        "dimension": dimension,
        "value": value,
        "slice": f"{dimension}={value}",
        "n_cases": n_cases,
        "n_traces": n_cases,
        "traces_passed": 1,
        "traces_failed": len(failed),
        "traces_incomplete": 0,
        "traces_not_applicable": 0,
        "pass_rate": pass_rate,
        "pass_at_1": pass_at_1,
        "pass_at_1_cases": n_cases,
        "failed_case_ids": failed,
        "top_failing_stage": top,
    }


SLICES = pl.DataFrame(
    [
        _slice("criticality", "high", 2, 2 / 3, 0.75, ["h1"], "policy"),
        _slice("criticality", "normal", 1, 0.0, 0.0, ["n1"], "tool_arguments"),
        _slice("tags.intent", "refund", 2, 0.5, 0.5, ["h1", "n1"], "policy"),
    ],
    schema=SLICE_ROLLUP_SCHEMA,
)
GATE = {
    "run_id": "c",
    "gate": "pass1",
    "lane": "agent",
    "metric": "pass_at_1",
    "baseline_run_id": "b",
    "baseline_value": 1.0,
    "candidate_value": 0.5,
    "delta": -50.0,
    "threshold": 5.0,
    "status": "fail",
    "blocking_cases": ["h1"],
    "owner": "agent",
    "reason": "pass_at_1 dropped 50.00 points (allowed 5)",
    "n_cases": 8,
    "excluded_cases": [],
    "beside": None,
    "unit": "fraction",
    "blocking_details": ["h1: pass_at_1 1.0000 → 0.5000"],
    "segment": None,
    "min_cases": None,
}
INSUFFICIENT = {
    **GATE,
    "gate": "pass1_high",
    "status": "insufficient",
    "segment": "criticality=high",
    "min_cases": 5,
    "n_cases": 2,
    "blocking_details": [],
    "reason": "slice criticality=high has 2 complete case(s), fewer than min_cases 5: not decided",
}


def _data(**changes) -> LaneData:
    return LaneData(
        **{
            "lane": "agent",
            "run_id": "c",
            "manifest": {"mode": "gate"},
            "stage_results": pl.DataFrame(),
            "outcomes": OUTCOMES,
            "rollup": ROLLUP,
            "cases": CASES,
            "slices": SLICES,
            **changes,
        }
    )


def test_the_lane_report_names_failed_high_criticality_cases_before_any_mean():
    sections = agent_sections(_data(gates=pl.DataFrame([GATE], schema=GATE_RESULTS_SCHEMA)))
    first = sections[0]
    assert first.title == "Failed high-criticality cases (1)"
    assert first.lines == [
        "- 1 of 2 high-criticality case(s) of this lane failed; each is listed here by name, whatever the "
        "means below say"
    ]
    assert first.table.rows() == [("h1", "1 of 2", ["policy"], ["policy"], ["close_account is forbidden"])]
    assert first.links == {"case_id": "cases/{value}.html"}
    markdown = render_markdown(
        "Agent", sections, lane_verdict(_data(gates=pl.DataFrame([GATE], schema=GATE_RESULTS_SCHEMA)))
    )
    # the banner names it too, above the gate values
    assert markdown.index("failed high-criticality cases (1): h1 (policy, 1 of 2)") < markdown.index("1.0000 → 0.5000")
    assert markdown.index("Failed high-criticality cases (1)") < markdown.index("## Summary")


def test_no_failed_high_criticality_case_says_so():
    section = agent_sections(_data(outcomes=OUTCOMES.filter(pl.col("case_id") != "h1")))[0]
    assert (section.title, section.table.height) == ("Failed high-criticality cases (0)", 0)
    assert section.lines[0].startswith("- 0 of 1 high-criticality case(s)")
    assert agent_sections(_data(cases=None))[0].lines == ["- the run's cases were not available: criticality unknown"]


def test_the_slices_section_has_one_table_per_dimension():
    by_title = {s.title: s for s in agent_sections(_data())}
    criticality = by_title["By criticality"]
    assert criticality.table.columns == [
        "value",
        "cases",
        "traces",
        "failed",
        "incomplete",
        "pass_rate",
        "pass_at_1",
        "top_first_failing_stage",
        "failed_cases",
    ]
    assert criticality.table.select("value", "cases", "pass_rate", "pass_at_1", "top_first_failing_stage").rows() == [
        ("high", 2, 2 / 3, 0.75, "policy"),
        ("normal", 1, 0.0, 0.0, "tool_arguments"),
    ]
    assert by_title["By tags.intent"].table["failed_cases"].to_list() == [["h1", "n1"]]
    assert criticality.links == {"failed_cases": "cases/{value}.html"}
    assert [s.title for s in agent_sections(_data(slices=None)) if s.title.startswith("Slices")] == ["Slices"]


def test_segmented_gates_in_the_gate_table_verdict_and_text():
    frame = pl.DataFrame([GATE, INSUFFICIENT], schema=GATE_RESULTS_SCHEMA)
    table = gate_table(frame)
    assert {"gate", "lane", "metric", "segment", "min_cases"} <= set(table.columns)
    assert table.columns.index("segment") < table.columns.index("excluded")
    assert table.select("gate", "segment", "min_cases", "status").rows() == [
        ("pass1", None, None, "fail"),
        ("pass1_high", "criticality=high", 5, "insufficient"),
    ]
    # a policy without segmented gates keeps its columns
    assert "segment" not in gate_table(pl.DataFrame([GATE], schema=GATE_RESULTS_SCHEMA)).columns
    verdict = release_verdict(frame, "c", "b")
    assert verdict.details[1].startswith("- **pass1_high** on slice `criticality=high` insufficient (owner agent)")
    text = gate_text_table(frame)
    assert "  pass1_high               slice criticality=high: 2 case(s), min_cases 5" in text.splitlines()


def test_an_insufficient_gate_is_undecided_exit_2():
    frame = pl.DataFrame([{**GATE, "status": "pass", "blocking_cases": []}, INSUFFICIENT], schema=GATE_RESULTS_SCHEMA)
    assert verdict_status(frame) == "undecided"
    assert (
        exit_meaning(frame)
        == "undecided: a gate is incomplete, incomparable or insufficient (too few cases in its slice)"
    )
    assert release_verdict(frame, "c", "b").headline == (
        "Release undecided: 1 of 2 gates incomplete, incomparable or insufficient — `c` against `b`"
    )
    document = json.loads(gate_json(frame, "c", "b", 1))
    assert (document["verdict"], document["exit_code"]) == ("undecided", 2)
    high = document["gates"][1]
    assert (high["segment"], high["min_cases"], high["status"], high["n_cases"]) == (
        "criticality=high",
        5,
        "insufficient",
        2,
    )
    assert (document["gates"][0]["segment"], document["gates"][0]["min_cases"]) == (None, None)
    suite = ET.fromstring(gate_junit(frame, "c", "b").split("\n", 1)[1]).find("testsuite")
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    case = suite.findall("testcase")[1]
    assert case.find("error").attrib == {"message": INSUFFICIENT["reason"], "type": "insufficient"}
    assert case.find("system-out").text.endswith(", slice criticality=high (2 cases, min_cases 5)")


def test_the_index_lists_failed_high_criticality_cases_before_the_runs():
    runs = pl.DataFrame({"run_id": ["r2", "r1"], "created_at": ["2026-03-02", "2026-03-01"]})
    slices = pl.DataFrame(
        {
            "run_id": ["r2", "r2", "r1", "r2"],
            "lane": ["rag", "agent", "agent", "agent"],
            "slice": ["criticality=high", "criticality=high", "criticality=high", "criticality=normal"],
            "failed_case_ids": [["rag-1"], ["agent-1", "agent-3"], [], ["agent-9"]],
        }
    )
    markdown = index_markdown(runs, pl.DataFrame(schema={"run_id": pl.String}), {}, slices)
    head, runs_part = markdown.split("## Runs", 1)
    assert "## Failed high-criticality cases (3)" in head
    rows = [line for line in head.splitlines() if line.startswith("| r2")]
    assert rows == ["| r2 | agent | agent-1, agent-3 |", "| r2 | rag | rag-1 |"]
    # a normal-criticality failure is not listed; without slice_rollup there is no such section
    assert "agent-9" not in markdown
    assert "Failed high-criticality" not in index_markdown(runs, pl.DataFrame(schema={"run_id": pl.String}), {})


class _Reports:
    def files(self, run_id):
        return []


class _Config:
    def __init__(self, warehouse):
        self._warehouse = warehouse

    def warehouse(self):
        return self._warehouse

    def reports(self):
        return _Reports()


def test_the_summary_names_failed_high_criticality_cases_first(tmp_path):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    warehouse.write_partition("slice_rollup", SLICES.with_columns(pl.lit("r1").alias("run_id")), "r1")
    attribution = pl.DataFrame(
        {
            "lane": ["agent", "agent", "agent"],
            "case_id": ["h1", "n1", "h1"],
            "outcome": ["fail", "fail", "incomplete"],
            "first_failing_stage": ["policy", "tool_arguments", None],
        }
    )
    warehouse.write_partition("attribution", attribution, "r1")
    out = io.StringIO()
    print_summary(_Config(warehouse), ["r1"], out)
    lines = out.getvalue().splitlines()
    assert lines[1:3] == ["== run r1", "  failed high-criticality cases (1): h1 [agent: policy, 1 failed attempt(s)]"]


def test_a_segmented_gate_s_scope_is_its_slice_beside_the_slice_s_own_mean():
    from eval_pipeline.reporting.lane_gates import gated_section

    segmented = {
        **GATE,
        "gate": "pass1_high",
        "segment": "criticality=high",
        "min_cases": 2,
        "n_cases": 2,
        "excluded_cases": ["h9"],
    }
    section = gated_section(
        _data(gates=pl.DataFrame([segmented, INSUFFICIENT | {"candidate_value": None}], schema=GATE_RESULTS_SCHEMA))
    )[0]
    # the slice's pass@1 in this lane (0.75 over 2 cases), never the suite's mean
    assert section.lines[1:] == [
        "- pass1_high: on slice `criticality=high` the gate compares 2 cases complete in both runs "
        "(min_cases 2; excluded: h9): candidate 0.5000; this report's mean over the slice's 2 "
        "complete case(s) is 0.7500"
    ]


def test_a_dimension_with_many_values_shows_the_worst_forty():
    many = pl.DataFrame(
        [_slice("corpus_family", f"kb/f-{i:03d}", 1, (i % 50) / 50, None, [], None) for i in range(100)],
        schema=SLICE_ROLLUP_SCHEMA,
    )
    section = {s.title: s for s in agent_sections(_data(slices=many))}["By corpus_family"]
    assert section.lines == [
        "- the 40 of 100 values with the lowest pass rate; every value is in the table `slice_rollup`"
    ]
    # pass rates 0.0 (f-000, f-050), 0.02 (f-001, f-051) … 0.38 (f-019, f-069): 20 rates × 2 families
    assert section.table.height == 40 and section.table["pass_rate"].max() == pytest.approx(0.38)
    assert section.table["value"].to_list()[:3] == ["kb/f-000", "kb/f-050", "kb/f-001"]


def test_a_value_with_many_failed_cases_lists_the_first_ones_and_says_where_the_rest_are():
    """At 100k traces one value held 10,820 failed cases: its row lists the first 20 by case id, and the section says
    every one is in slice_rollup."""
    failed = [f"c{i:03d}" for i in range(25)]
    many = pl.DataFrame(
        [
            _slice("criticality", "normal", 25, 0.0, 0.0, failed, "policy"),
            _slice("criticality", "high", 1, 0.0, 0.0, ["h1"], "policy"),
        ],
        schema=SLICE_ROLLUP_SCHEMA,
    )
    criticality = {s.title: s for s in agent_sections(_data(slices=many))}["By criticality"]
    assert criticality.table["failed_cases"].to_list() == [failed[:20], ["h1"]]
    assert criticality.lines == [
        "- failed_cases: the first 20 of a value's failed cases by case id; every one is in the table `slice_rollup`, "
        "and `eval-pipeline show` tells any case's story"
    ]
    # a dimension whose values all fit says nothing of the kind
    assert {s.title: s for s in agent_sections(_data())}["By criticality"].lines == []
