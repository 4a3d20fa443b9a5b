"""The command-line summary printed after `eval-pipeline run`.

Per run and lane: counts, top stage, gate, report paths.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting.gate_report import not_gated_reason


def _lane_lines(warehouse: Warehouse, run_id: str) -> list[str]:
    rollup = warehouse.read("attribution_rollup", run_id)
    if rollup is None or rollup.height == 0:
        return ["  (no attribution: a lane did not reach its report)"]
    lines = [f"  {'lane':<6} {'traces':>7} {'passed':>7} {'failed':>7} {'incomplete':>10}  top first failing stage"]
    for lane in sorted(rollup["lane"].unique().to_list()):
        rows = rollup.filter(pl.col("lane") == lane).sort(["failures", "stage_order"], descending=[True, False])
        first = rows.row(0, named=True)
        top = f"{first['stage']} ({first['failures']}/{first['lane_failures']})" if first["failures"] else "-"
        lines.append(
            f"  {lane:<6} {first['lane_traces']:>7} {first['lane_passed']:>7} {first['lane_failures']:>7} "
            f"{first['lane_incomplete']:>10}  {top}"
        )
    return lines


def failed_high_criticality_line(warehouse: Warehouse, run_id: str) -> str | None:
    """The failed cases of high criticality of a run by name, with lane, first failing stages and failed attempts."""
    slices = warehouse.read("slice_rollup", run_id, columns=["lane", "slice", "failed_case_ids"])
    if slices is None:
        return None
    high = (
        slices.filter(pl.col("slice") == "criticality=high")
        .select("lane", pl.col("failed_case_ids").alias("case_id"))
        .explode("case_id")
        .drop_nulls()
    )
    if high.height == 0:
        return "  failed high-criticality cases: none"
    attribution = warehouse.read("attribution", run_id, columns=["lane", "case_id", "outcome", "first_failing_stage"])
    failed = (
        attribution.filter(pl.col("outcome") == "fail")
        if attribution is not None
        else pl.DataFrame(schema={"lane": pl.String, "case_id": pl.String, "first_failing_stage": pl.String})
    )
    stages = (
        high.join(failed, on=["lane", "case_id"], how="left")
        .group_by("case_id", "lane", maintain_order=True)
        .agg(
            pl.col("first_failing_stage").drop_nulls().unique().sort().alias("stages"),
            pl.col("first_failing_stage").drop_nulls().len().alias("attempts"),
        )
        .sort("case_id", "lane")
    )
    named = [
        f"{row['case_id']} [{row['lane']}: {', '.join(row['stages']) or 'failed'}, {row['attempts']} failed attempt(s)]"
        for row in stages.iter_rows(named=True)
    ]
    return f"  failed high-criticality cases ({stages['case_id'].n_unique()}): " + ", ".join(named)


def print_summary(config, run_ids: list[str], out) -> None:
    """Print the summary of each run from the warehouse tables."""
    warehouse = config.warehouse()
    reports = config.reports()
    for run_id in run_ids:
        print(f"\n== run {run_id}", file=out)
        # a failed critical case is named before any count or rate
        high = failed_high_criticality_line(warehouse, run_id)
        if high:
            print(high, file=out)
        rejects = warehouse.read("trace_rejects", run_id)
        if rejects is not None:
            print(f"  rejected input lines: {rejects.height}", file=out)
        for line in _lane_lines(warehouse, run_id):
            print(line, file=out)
        gates = warehouse.read("gate_results", run_id)
        if gates is not None and gates.height:
            statuses = gates.group_by("status").len().sort("status")
            text = ", ".join(f"{s}: {n}" for s, n in statuses.iter_rows())
            baseline, not_gated = gates["baseline_run_id"][0], not_gated_reason(gates)
            against = (
                f"vs baseline {baseline}" if baseline else f"not gated ({not_gated})" if not_gated else "vs no baseline"
            )
            print(f"  gates {against}: {text}", file=out)
        for name in reports.files(run_id):
            print(f"  report: {reports.uri_of(run_id, name)}", file=out)
