"""The sections both lane reports share: summary, failure Pareto, failed, incomplete and quarantined cases, rejects."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting import charts
from eval_pipeline.reporting.lane_data import LINKS, LaneData
from eval_pipeline.reporting.render import Section
from eval_pipeline.scoring.attribution import pareto


def summary_section(data: LaneData) -> Section:
    lane = data.outcomes.filter(pl.col("lane") == data.lane)
    counts = {k: lane.filter(pl.col("outcome") == k).height for k in ("pass", "fail", "incomplete", "not_applicable")}
    versions = {
        k: data.manifest.get(k)
        for k in (
            "candidate",
            "model",
            "prompt_version",
            "index_version",
            "dataset_version",
            "corpus_version",
            "environment_version",
            "mode",
        )
    }
    # an importer writes the version "none" where the source has no corpus: said in words, not as a value
    lines = [
        f"- run `{data.run_id}`: "
        + ", ".join(
            f"{k} `{v}`" if v != "none" else f"no {k.removesuffix('_version')}" for k, v in versions.items() if v
        ),
        f"- traces in this lane: {lane.height} — passed {counts['pass']}, failed {counts['fail']}, "
        f"incomplete {counts['incomplete']} (owner: harness), not applicable {counts['not_applicable']}",
    ]
    if data.rejects is not None:
        lines.append(f"- rejected input lines (whole run): {data.rejects.height}")
    if data.lane == "rag":
        lines.append(
            "- lanes are never blended: this report covers retrieval, context, grounding, citations and answers only"
        )
    else:
        lines.append(
            "- lanes are never blended: this report covers tool calls, verified world state, recovery and "
            "reliability only"
        )
    return Section("Summary", lines)


def pareto_sections(data: LaneData) -> list[Section]:
    ranked = pareto(data.rollup)
    total = int(data.rollup["failures"].sum()) if data.rollup.height else 0
    lane_failures = int(data.rollup["lane_failures"].max()) if data.rollup.height else 0
    baseline = None
    if data.baseline_rollup is not None and data.baseline_rollup.height:
        before = dict(data.baseline_rollup.select("stage", "failures").iter_rows())
        baseline = [float(before.get(stage) or 0) for stage in ranked["stage"].to_list()]
    chart = charts.bar_chart(
        f"{data.lane}: failures by first failing stage",
        ranked["stage"].to_list(),
        [float(v) for v in ranked["failures"].to_list()],
        ranked["cumulative_share"].to_list(),
        baseline=baseline,
    )
    lines = [
        f"- stage counts sum to {total}; the lane has {lane_failures} failed traces"
        + (" ✔" if total == lane_failures else " ✘ (mismatch)")
    ]
    table = data.rollup.select("stage", "failures", "share", "hazards", "owner")
    sections = [
        Section(
            "First failing stage (Pareto)",
            lines,
            ranked.select("stage", "failures", "share", "cumulative_share", "owner"),
            chart,
        ),
        Section("All stages", [], table, level=3),
    ]
    return sections


def failures_section(data: LaneData) -> Section:
    """Failed traces grouped per case: attempts failed of attempts made, the first failing stages and their reasons."""
    lane = data.outcomes.filter(pl.col("lane") == data.lane)
    failed = lane.filter(pl.col("outcome") == "fail")
    attempts = lane.group_by("case_id").agg(pl.len().alias("attempts"))
    grouped = (
        failed.sort("trace_id")
        .group_by("case_id", maintain_order=True)
        .agg(
            pl.len().alias("failed"),
            pl.col("first_failing_stage").unique(maintain_order=True).alias("first_failing_stages"),
            pl.col("owner").unique(maintain_order=True).alias("owners"),
            pl.col("hazard").drop_nulls().first(),
            pl.col("reason").unique(maintain_order=True).alias("reasons"),
        )
        .join(attempts, on="case_id", how="left")
        .with_columns(pl.format("{} of {}", "failed", "attempts").alias("attempts_failed"))
        .sort(pl.col("hazard").is_null(), pl.col("first_failing_stages").list.first(), "case_id")
        .select("case_id", "attempts_failed", "first_failing_stages", "owners", "hazard", "reasons")
    )
    lines = [
        f"- {failed.height} failed traces in {grouped.height} cases; identical reasons of a case's attempts shown once"
    ]
    return Section(f"Failed cases ({grouped.height})", lines, grouped, links=LINKS)


def incomplete_section(data: LaneData) -> Section:
    incomplete = (
        data.outcomes.filter((pl.col("lane") == data.lane) & (pl.col("outcome") == "incomplete"))
        .sort("trace_id")
        .select("trace_id", "case_id", "owner", "reason")
    )
    lines = ["- an evaluation that could not complete is never a zero, a pass, or dropped: it is counted here"]
    return Section(f"Incomplete ({incomplete.height}, owner: harness)", lines, incomplete, links=LINKS)


def quarantine_section(data: LaneData) -> Section:
    frame = data.quarantine if data.quarantine is not None else pl.DataFrame()
    lines = ["- flaky cases (both passed and failed across identical attempts) stop gating and are always listed"]
    return Section(
        f"Quarantine ({frame.height} flaky cases)",
        lines,
        frame.sort("case_id").select([c for c in ("case_id", "reason", "flipped_trace_ids") if c in frame.columns])
        if frame.height
        else frame,
    )


def rejects_sections(data: LaneData) -> list[Section]:
    if data.rejects is None:
        return [Section("Rejected input lines", ["- no reject table"])]
    by_reason = (
        data.rejects.with_columns(pl.col("reason").str.replace_all(r"'[^']*'", "'…'"))
        .group_by("input_kind", "reason")
        .len()
        .sort(["len", "reason", "input_kind"], descending=[True, False, False])
        .rename({"len": "lines"})
    )
    detail = data.rejects.select("input_kind", "source_file", "line", "reason").sort(
        "source_file", "line", "input_kind", "reason"
    )
    return [
        Section(
            f"Rejected input lines ({data.rejects.height})",
            ["- nothing is dropped silently: every rejected line, with its reason"],
            by_reason,
        ),
        Section("Each rejected line", [], detail, level=3),
    ]
