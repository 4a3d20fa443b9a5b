"""What moved against the baseline run in a lane report: newly failing cases and the shift in the attribution mix."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting.lane_data import LINKS, LaneData
from eval_pipeline.reporting.render import Section


def baseline_sections(data: LaneData) -> list[Section]:
    if data.baseline_run_id is None or data.baseline_outcomes is None:
        return (
            [Section("Against a baseline", [f"- no baseline comparison: {data.baseline_note}"])]
            if data.baseline_note
            else []
        )
    lane = data.lane

    def case_status(outcomes: pl.DataFrame) -> pl.DataFrame:
        return (
            outcomes.filter(pl.col("lane") == lane)
            .group_by("case_id")
            .agg(
                (pl.col("outcome") == "fail").any().alias("failed"), (pl.col("outcome") == "pass").any().alias("passed")
            )
        )

    base, cand = case_status(data.baseline_outcomes), case_status(data.outcomes)
    newly = (
        base.filter(~pl.col("failed") & pl.col("passed"))
        .select("case_id")
        .join(cand.filter(pl.col("failed")).select("case_id"), on="case_id")
        .join(
            data.outcomes.filter((pl.col("lane") == lane) & (pl.col("outcome") == "fail"))
            .group_by("case_id")
            .agg(pl.col("first_failing_stage").unique().sort().alias("first_failing_stages")),
            on="case_id",
            how="left",
        )
        .sort("case_id")
    )
    shift = pl.DataFrame()
    if data.baseline_rollup is not None and data.baseline_rollup.height:
        shift = (
            data.baseline_rollup.select(
                "stage",
                "stage_order",
                pl.col("failures").alias("baseline_failures"),
                pl.col("share").alias("baseline_share"),
            )
            .join(
                data.rollup.select(
                    "stage", pl.col("failures").alias("candidate_failures"), pl.col("share").alias("candidate_share")
                ),
                on="stage",
                how="full",
                coalesce=True,
            )
            .sort("stage_order")
            .drop("stage_order")
            .with_columns(
                (pl.col("candidate_share").fill_null(0) - pl.col("baseline_share").fill_null(0)).alias("share_shift")
            )
        )
    flaky = (
        set(data.quarantine["case_id"].to_list()) if data.quarantine is not None and data.quarantine.height else set()
    )
    newly = newly.with_columns(pl.col("case_id").is_in(sorted(flaky)).alias("flaky"))
    lines = [
        f"- newly failing cases (passed in `{data.baseline_run_id}`, fail here): {newly.height}"
        + (
            f", of which flaky (quarantined, left out of the `no_new_failures` gate): {newly['flaky'].sum()}"
            if newly["flaky"].any()
            else ""
        )
    ]
    return [
        Section(f"Against baseline {data.baseline_run_id}", lines, newly, links=LINKS),
        Section(
            "Shift in the attribution mix",
            ["- share of the lane's failures per first failing stage, baseline → this run"],
            shift if shift.height else None,
            level=3,
        ),
    ]
