"""The agent lane report: tool calls and policy violations, verified outcome, efficiency, faults and reliability."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting.lane_baseline import baseline_sections
from eval_pipeline.reporting.lane_data import LaneData, metric_table
from eval_pipeline.reporting.lane_gates import failed_high_criticality_section, gated_section
from eval_pipeline.reporting.lane_reliability import reliability_section
from eval_pipeline.reporting.lane_sections import (
    failures_section,
    incomplete_section,
    pareto_sections,
    quarantine_section,
    rejects_sections,
    summary_section,
)
from eval_pipeline.reporting.lane_slices import slices_sections
from eval_pipeline.reporting.render import Section
from eval_pipeline.reporting.values import format_number


def agent_sections(
    data: LaneData, fault_rates: pl.DataFrame | None = None, efficiency: pl.DataFrame | None = None
) -> list[Section]:
    """Sections of the agent lane report."""
    t = data.tables
    tools, outcomes = t.get("tool_scores"), t.get("outcome_scores")
    sections = [
        failed_high_criticality_section(data),
        summary_section(data),
        *gated_section(data),
        *pareto_sections(data),
    ]
    tool_lines = []
    if tools is not None:
        violations = tools.filter(pl.col("policy_violation").fill_null(False))
        loops = tools.filter(pl.col("loop_detected").fill_null(False))
        divergent = tools.filter(pl.col("adapter_divergence").is_not_null())
        tool_lines = [
            f"- policy violations: {violations.height} trace(s); loops: {loops.height}; "
            f"adapter divergences (harness defects, incomplete): {divergent.height}"
        ]
    sections.append(
        Section(
            "Tool calls",
            tool_lines,
            metric_table(
                tools,
                [
                    "tool_call_f1",
                    "tool_call_precision",
                    "tool_call_recall",
                    "strict_order_accuracy",
                    "args_valid_rate",
                    "unnecessary_call_rate",
                ],
            ),
        )
    )
    if tools is not None:
        columns = [
            c
            for c in (
                "trace_id",
                "case_id",
                "policy_violations",
                "order_violations",
                "missing_calls",
                "unexpected_calls",
                "adapter_divergence",
            )
            if c in tools.columns
        ]
        flagged = tools.filter(
            pl.col("policy_violation").fill_null(False)
            | pl.col("adapter_divergence").is_not_null()
            | pl.col("loop_detected").fill_null(False)
        ).sort("trace_id")
        sections.append(
            Section("Policy violations, loops and adapter divergences", [], flagged.select(columns), level=3)
        )
    out_lines = []
    if outcomes is not None:
        scored = outcomes.filter(pl.col("status") == "scored")
        rate = scored["success"].cast(pl.Float64).mean() if scored.height else None
        out_lines.append(
            f"- success (verified world state, never the final message): {format_number(rate)} over "
            f"{scored.height} scored traces"
        )
        if "milestones_failed" in outcomes.columns:
            failed = (
                outcomes.select(pl.col("milestones_failed").explode().alias("milestone"))
                .drop_nulls()
                .group_by("milestone")
                .len()
                .sort(["len", "milestone"], descending=[True, False])
                .rename({"len": "failed_traces"})
            )
            sections.append(Section("Outcome", out_lines, failed))
        else:
            sections.append(Section("Outcome", out_lines))
    if efficiency is not None and efficiency.height:
        sections.append(
            Section(
                "Efficiency on successes",
                ["- cost, tokens and steps per successful attempt"],
                efficiency.drop("run_id", strict=False),
                level=3,
            )
        )
    if fault_rates is not None and fault_rates.height:
        sections.append(
            Section(
                "Injected faults",
                ["- recovery, escalation and unsafe continuation per fault kind"],
                fault_rates.drop("run_id", strict=False),
            )
        )
    if data.reliability is not None and data.reliability.height:
        sections.append(reliability_section(data))
    sections.extend([quarantine_section(data), failures_section(data), incomplete_section(data)])
    sections.extend(slices_sections(data))
    sections.extend(baseline_sections(data))
    sections.extend(rejects_sections(data))
    return sections
