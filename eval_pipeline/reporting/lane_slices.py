"""A lane report's slices (docs/slices.md): per dimension, each value's pass rate, pass@1 and first failing stage."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting.gate_report import CASE_PAGE
from eval_pipeline.reporting.lane_data import LaneData
from eval_pipeline.reporting.render import Section

SLICE_ROWS_SHOWN = 40
# A value's failed cases in its row: at 100k traces one value held 10,820 of them (a 400 KB table cell, most linking a
# page that was never written: pages go to the first cases by priority). The first ones by case id; all in slice_rollup.
SLICE_CASES_SHOWN = 20
SLICE_COLUMNS = {
    "value": "value",
    "n_cases": "cases",
    "n_traces": "traces",
    "traces_failed": "failed",
    "traces_incomplete": "incomplete",
    "pass_rate": "pass_rate",
    "pass_at_1": "pass_at_1",
    "top_failing_stage": "top_first_failing_stage",
    "failed_case_ids": "failed_cases",
}


def slice_note(lane: str) -> str:
    """Why a slice's pass_rate and pass_at_1 differ."""
    if lane == "agent":
        return (
            "- pass_rate counts a trace passed only when every stage passed; pass_at_1 counts an attempt a success "
            "when its verified outcome passed (process stages such as tool order or arguments aside), per case and "
            "then averaged: a slice whose attempts reach the right world state the wrong way reads pass_at_1 above "
            "pass_rate"
        )
    return (
        "- pass_rate counts a trace passed when every stage passed; pass_at_1 counts the same, per case and then "
        "averaged, so the two differ when the slice's cases have different numbers of attempts"
    )


def slices_sections(data: LaneData) -> list[Section]:
    """Per slice dimension (criticality, tool risk, each tag, corpus family): each value's cases, pass rate, pass@1 and
    top first failing stage."""
    if data.slices is None or data.slices.height == 0:
        return [Section("Slices", ["- no slice: the lane has no trace of a case with a slice"])]
    lines = [
        "- case results by decision slice (docs/slices.md), never only the suite mean: pass rate over the complete "
        "traces of the slice (incomplete ones counted apart), pass@1 the mean over its cases, and where its failures "
        "start first",
        slice_note(data.lane),
        "- a case may be in several values of one dimension (several corpus families) and in no tag slice",
    ]
    sections = [Section("Slices", lines)]
    for dimension in data.slices["dimension"].unique(maintain_order=True).to_list():
        rows = data.slices.filter(pl.col("dimension") == dimension)
        more = []
        if rows.height > SLICE_ROWS_SHOWN:
            # thousands of corpus families would bury the report: the worst slices, the rest in slice_rollup
            more = [
                f"- the {SLICE_ROWS_SHOWN} of {rows.height} values with the lowest pass rate; every value is in "
                f"the table `slice_rollup`"
            ]
            rows = rows.sort(pl.col("pass_rate").fill_null(2.0), "value").head(SLICE_ROWS_SHOWN)
        if (rows["failed_case_ids"].list.len() > SLICE_CASES_SHOWN).any():
            more.append(
                f"- failed_cases: the first {SLICE_CASES_SHOWN} of a value's failed cases by case id; every one is in "
                f"the table `slice_rollup`, and `eval-pipeline show` tells any case's story"
            )
            rows = rows.with_columns(pl.col("failed_case_ids").list.head(SLICE_CASES_SHOWN))
        table = rows.select([pl.col(c).alias(name) for c, name in SLICE_COLUMNS.items()])
        sections.append(Section(f"By {dimension}", more, table, level=3, links={"failed_cases": CASE_PAGE}))
    return sections
