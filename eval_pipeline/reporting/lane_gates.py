"""A lane's gates in its report: verdict banner, failed high-criticality cases, each gate beside the report's mean."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting.gate_report import UNITS_LINE, blocking_table, gate_table, release_verdict
from eval_pipeline.reporting.lane_data import LINKS, LaneData, scored_mean
from eval_pipeline.reporting.lane_sections import failures_section
from eval_pipeline.reporting.render import Section, Verdict

# where a lane report's own mean of a gated metric comes from (per trace or per case, every complete one)
OWN_MEANS = {
    "recall_at_10": ("retrieval_scores", "recall_at_10"),
    "grounding_rate": ("grounding_scores", "grounding_rate"),
    "args_valid_rate": ("tool_scores", "args_valid_rate"),
}


def lane_verdict(data: LaneData) -> Verdict | None:
    """The banner of a lane report: this lane's gates, and where the whole release decision is."""
    if data.gates is None or data.gates.height == 0:
        return None
    verdict = release_verdict(data.gates, data.run_id, data.gates["baseline_run_id"][0])
    label = "RAG lane" if data.lane == "rag" else "Agent lane"
    details = [
        *high_criticality_banner(data),
        *verdict.details,
        "- the release decision over every gate, both lanes and `no_new_failures` included: [gate report](gate.html)",
    ]
    decision, _, rest = verdict.headline.partition(": ")
    headline = f"{decision}: {label} gates — {rest}" if rest and decision.startswith("Release") else verdict.headline
    return Verdict(status=verdict.status, headline=headline, details=details)


def _failed_high_criticality(data: LaneData) -> pl.DataFrame:
    """The failed-cases table (failures_section) narrowed to the cases of high criticality."""
    table = failures_section(data).table
    if data.cases is None or "criticality" not in data.cases.columns:
        return table.head(0)
    high = data.cases.filter(pl.col("criticality") == "high").select("case_id")
    return table.join(high, on="case_id", how="semi", maintain_order="left")


def high_criticality_banner(data: LaneData) -> list[str]:
    """The banner line naming every failed high-criticality case of the lane, when there is one."""
    failed = _failed_high_criticality(data)
    if failed.height == 0:
        return []
    return [
        f"- failed high-criticality cases ({failed.height}): "
        + ", ".join(
            f"{row['case_id']} ({', '.join(s for s in row['first_failing_stages'] if s)}, {row['attempts_failed']})"
            for row in failed.iter_rows(named=True)
        )
    ]


def failed_high_criticality_section(data: LaneData) -> Section:
    """Every failed case of high criticality by name, with its first failing stages and attempts: read before any
    mean."""
    failed = _failed_high_criticality(data)
    if data.cases is None:
        return Section("Failed high-criticality cases", ["- the run's cases were not available: criticality unknown"])
    n_high = (
        data.outcomes.filter(pl.col("lane") == data.lane)
        .join(data.cases.filter(pl.col("criticality") == "high").select("case_id"), on="case_id", how="semi")["case_id"]
        .n_unique()
    )
    lines = [
        f"- {failed.height} of {n_high} high-criticality case(s) of this lane failed; each is listed here by name, "
        "whatever the means below say"
    ]
    return Section(
        f"Failed high-criticality cases ({failed.height})",
        lines,
        failed.select("case_id", "attempts_failed", "first_failing_stages", "owners", "reasons"),
        links=LINKS,
    )


def gated_section(data: LaneData) -> list[Section]:
    """This lane's gates exactly as the gate computes them: same values, units, cases compared and exclusions."""
    if data.gates is None or data.gates.height == 0:
        return []
    lines = [UNITS_LINE]
    for row in data.gates.iter_rows(named=True):
        if row.get("segment"):
            lines.extend(_segment_line(data, row))
            continue
        own = _own_mean(data, row["metric"])
        if row["candidate_value"] is None or own is None:
            continue
        excluded = ", ".join(row["excluded_cases"] or []) or "none"
        lines.append(
            f"- {row['gate']}: the gate compares {row['n_cases']} cases complete in both runs (excluded: "
            f"{excluded}): candidate {row['candidate_value']:.4f}; this report's mean over every complete "
            f"{own[1]} of the run is {own[0]:.4f}"
        )
    sections = [Section("Release gates of this lane", lines, gate_table(data.gates))]
    blocking = blocking_table(data.gates)
    if blocking.height:
        sections.append(
            Section(f"Cases that block this lane's gates ({blocking.height})", [], blocking, level=3, links=LINKS)
        )
    return sections


def _segment_line(data: LaneData, row: dict) -> list[str]:
    """A segmented gate's scope: its slice, the cases compared against min_cases, and the slice's own pass@1 beside."""
    if row["candidate_value"] is None:
        return []
    excluded = ", ".join(row["excluded_cases"] or []) or "none"
    own = ""
    if row["metric"] == "pass_at_1" and data.slices is not None and data.slices.height:
        found = data.slices.filter(pl.col("slice") == row["segment"])
        if found.height and found["pass_at_1"][0] is not None:
            own = (
                f"; this report's mean over the slice's {found['pass_at_1_cases'][0]} complete case(s) is "
                f"{found['pass_at_1'][0]:.4f}"
            )
    return [
        f"- {row['gate']}: on slice `{row['segment']}` the gate compares {row['n_cases']} cases complete in both runs "
        f"(min_cases {row['min_cases']}; excluded: {excluded}): candidate {row['candidate_value']:.4f}{own}"
    ]


def _own_mean(data: LaneData, metric: str) -> tuple[float, str] | None:
    if metric == "pass_at_1" and data.reliability is not None and "pass_at_1" in data.reliability.columns:
        value = data.reliability["pass_at_1"].drop_nulls().mean()
        return (value, "case") if value is not None else None
    table, column = OWN_MEANS.get(metric, (None, None))
    value = scored_mean(data.tables.get(table), column) if table else None
    return (value, "trace") if value is not None else None
