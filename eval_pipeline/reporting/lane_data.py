"""What a lane report reads (`LaneData`), and the means and metric tables its sections take over the lane's tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from eval_pipeline.reporting.gate_report import CASE_PAGE


@dataclass
class LaneData:
    """Every table a lane report reads; None when the lane has no such table."""

    lane: str
    run_id: str
    manifest: dict
    stage_results: pl.DataFrame
    outcomes: pl.DataFrame
    rollup: pl.DataFrame
    rejects: pl.DataFrame | None = None
    reliability: pl.DataFrame | None = None
    quarantine: pl.DataFrame | None = None
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    baseline_run_id: str | None = None
    baseline_outcomes: pl.DataFrame | None = None
    baseline_rollup: pl.DataFrame | None = None
    # why there is no baseline comparison (exploratory run, another dataset, not scored)
    baseline_note: str | None = None
    # this lane's gates, computed as the gate asset computes them (gate_results rows)
    gates: pl.DataFrame | None = None
    # the run's cases (criticality, tags) and this lane's slice_rollup (docs/slices.md)
    cases: pl.DataFrame | None = None
    slices: pl.DataFrame | None = None


# a report table's case_id cells link to the case's page
LINKS = {"case_id": CASE_PAGE}


def scored_mean(frame: pl.DataFrame | None, column: str) -> float | None:
    """The mean of `column` over the scored rows of a lane table (booleans as 0 and 1); None without a value."""
    if frame is None or column not in frame.columns:
        return None
    scored = frame.filter(pl.col("status") == "scored") if "status" in frame.columns else frame
    values = scored[column].drop_nulls()
    if values.dtype == pl.Boolean:
        values = values.cast(pl.Float64)
    return values.mean() if len(values) else None


def incomplete_lines(frame: pl.DataFrame | None, stage: str) -> list[str]:
    """One line counting the traces whose `stage` is incomplete, by reason: kept apart from every mean, never a zero."""
    if frame is None or f"{stage}_stage" not in frame.columns:
        return []
    reasons = (
        frame.filter(pl.col(f"{stage}_stage") == "incomplete")
        .group_by(f"{stage}_reason")
        .len()
        .sort(["len", f"{stage}_reason"], descending=[True, False], nulls_last=True)
    )
    if reasons.height == 0:
        return [f"- incomplete {stage}: 0 traces"]
    detail = "; ".join(f"{reason or 'no reason given'}: {n}" for reason, n in reasons.iter_rows())
    return [
        f"- incomplete {stage}: {int(reasons['len'].sum())} of {frame.height} traces, left out of the means ({detail})"
    ]


def metric_table(frame: pl.DataFrame | None, columns: list[str]) -> pl.DataFrame:
    """One row per metric column of a lane table: its mean over the scored rows, and how many rows it is over."""
    # scored_traces counts the rows each mean is taken over: incomplete traces are in neither.
    scored = frame.filter(pl.col("status") == "scored") if frame is not None and "status" in frame.columns else frame
    rows = [
        {"metric": c, "mean": scored_mean(frame, c), "scored_traces": scored.filter(pl.col(c).is_not_null()).height}
        for c in columns
        if frame is not None and c in frame.columns
    ]
    return pl.DataFrame(rows, schema={"metric": pl.String, "mean": pl.Float64, "scored_traces": pl.Int64})
