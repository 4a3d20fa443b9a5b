"""Agent lane: tool calls scored from structured steps, and outcomes from the verified final state."""

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import RETRIEVAL_COLUMNS, TEXT_COLUMNS, EvalConfig, traces_without
from eval_pipeline.defs.run_assets import expected_traces, manifest_of, run_table, run_tables, table_out
from eval_pipeline.quality import tables
from eval_pipeline.reporting.render import markdown_table
from eval_pipeline.scoring import outcome as outcome_scoring
from eval_pipeline.scoring import tools as tool_scoring

GROUP = "agent"
TOOLS_CODE_VERSION = "tools-1"
OUTCOME_CODE_VERSION = "outcome-1"


@run_tables(
    GROUP,
    TOOLS_CODE_VERSION,
    outs={
        "tool_scores": table_out(
            description="Tool-call precision/recall/F1, order, arguments, loops, policy and adapter divergence "
            "per trace."
        ),
        "tool_call_diffs": table_out(description="Expected and actual calls side by side, per trace and position."),
    },
    check_specs=checks.specs("tool_scores", tables.TOOL_SCORES),
    ins={"deid_traces": traces_without(TEXT_COLUMNS, RETRIEVAL_COLUMNS)},
)
def scored_tool_calls(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
    tools: pl.DataFrame,
):
    """Score each trajectory's structured tool calls against the case's reference path (never its prose)."""
    manifest = manifest_of(run_manifest)
    scores, diffs = tool_scoring.score_tools(deid_traces, deid_cases, tools, eval_config.settings(manifest))
    scores = with_versions(scores, manifest, TOOLS_CODE_VERSION)
    diffs = with_versions(diffs, manifest, TOOLS_CODE_VERSION)
    scored = scores.filter(pl.col("status") == "scored")
    yield materialized(
        scores,
        asset_key="tool_scores",
        versions=manifest,
        headline={
            "mean_tool_call_f1": scored["tool_call_f1"].drop_nulls().mean(),
            "mean_args_valid_rate": scored["args_valid_rate"].drop_nulls().mean(),
            "policy_violations": scores.filter(pl.col("policy_violation").fill_null(False)).height,
        },
        check_results=checks.results(
            "tool_scores", tables.TOOL_SCORES, scores, expected_traces(deid_traces, deid_cases, "agent")
        ),
    )
    yield materialized(diffs, asset_key="tool_call_diffs", versions=manifest, headline={"rows": diffs.height})


@run_table(
    GROUP,
    OUTCOME_CODE_VERSION,
    check_specs=checks.specs("outcome_scores", tables.OUTCOME_SCORES),
    ins={"deid_traces": traces_without(TEXT_COLUMNS, RETRIEVAL_COLUMNS)},
)
def outcome_scores(
    context: dg.AssetExecutionContext,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
    tool_scores: pl.DataFrame,
):
    """Named milestones over the final state, success, and the outcome of injected faults."""
    manifest = manifest_of(run_manifest)
    scores = with_versions(
        outcome_scoring.score_outcomes(deid_traces, deid_cases, tool_scores), manifest, OUTCOME_CODE_VERSION
    )
    faults = outcome_scoring.fault_rates(scores)
    efficiency = outcome_scoring.efficiency(scores)
    scored = scores.filter(pl.col("status") == "scored")
    return materialized(
        scores,
        versions=manifest,
        headline={"success_rate": scored["success"].cast(pl.Float64).mean() if scored.height else None},
        extra={
            "fault_rates": dg.MetadataValue.md(markdown_table(faults)),
            "efficiency": dg.MetadataValue.md(markdown_table(efficiency)),
        },
        check_results=checks.results(
            "outcome_scores", tables.OUTCOME_SCORES, scores, expected_traces(deid_traces, deid_cases, "agent")
        ),
    )


defs = dg.Definitions(assets=[scored_tool_calls, outcome_scores])
