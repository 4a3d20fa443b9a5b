"""Reliability over repeated attempts in a lane report: pass@1 and pass^k per case, beside process-stage failures."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting import charts
from eval_pipeline.reporting.lane_data import LaneData
from eval_pipeline.reporting.render import Section
from eval_pipeline.reporting.values import format_number

PROCESS_FAILED = "failed_process_stage"
RELIABILITY_NOTE = (
    "- pass@1 and pass^k count an attempt a success when its verified outcome (the world state) passed, "
    "not every stage: `failed_process_stage` counts the attempts that failed a process stage (policy, tool "
    "selection, arguments, order, loop, recovery), so a case may read pass@1 1.0000 and still fail every "
    "attempt in Failed cases"
)


def process_failures(stage_results: pl.DataFrame | None, lane: str) -> pl.DataFrame | None:
    """Per case, the attempts (traces) that failed a stage other than the verified outcome; None without stage
    results."""
    needed = {"case_id", "trace_id", "lane", "stage", "status"}
    if stage_results is None or not needed <= set(stage_results.columns):
        return None
    failed = (
        stage_results.filter((pl.col("lane") == lane) & (pl.col("stage") != "outcome") & (pl.col("status") == "fail"))
        .group_by("case_id")
        .agg(pl.col("trace_id").n_unique().cast(pl.Int64).alias(PROCESS_FAILED))
    )
    return failed


def reliability_section(data: LaneData) -> Section:
    """pass@1 and pass^k per case, beside the attempts that failed a process stage (which pass@1 does not count)."""
    reliability = data.reliability
    ks = sorted((c for c in reliability.columns if c.startswith("pass_hat_")), key=lambda c: int(c.rsplit("_", 1)[1]))
    curve = [reliability[c].drop_nulls().mean() for c in ks]
    lines = [
        f"- pass@1 {format_number(reliability['pass_at_1'].drop_nulls().mean())}; "
        + ", ".join(f"pass^{c.rsplit('_', 1)[1]} {format_number(v)}" for c, v in zip(ks, curve, strict=True))
    ]
    failed = process_failures(data.stage_results, data.lane) if data.lane == "agent" else None
    if failed is not None:
        # a display column only: the stored reliability table keeps its columns and numbers
        reliability = reliability.join(failed, on="case_id", how="left", maintain_order="left").with_columns(
            pl.col(PROCESS_FAILED).fill_null(0)
        )
        lines.append(RELIABILITY_NOTE)
    columns = [
        c
        for c in ("case_id", "n_attempts", "n_incomplete", "n_success", PROCESS_FAILED, "pass_at_1", *ks, "flaky")
        if c in reliability.columns
    ]
    return Section(
        "Reliability over repeated attempts",
        lines,
        reliability.sort("case_id").select(columns),
        charts.line_chart("pass^k (all k attempts succeed)", [c.rsplit("_", 1)[1] for c in ks], curve),
    )
