"""The `tool_scores` table: per-trace metrics from the intermediate frames, and the agent stages with their reasons."""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.common import harness_reason
from eval_pipeline.scoring.tools.arguments import call_verdicts
from eval_pipeline.scoring.tools.defects import harness_defects
from eval_pipeline.scoring.tools.diffs import tool_call_diffs
from eval_pipeline.scoring.tools.faults import fault_facts
from eval_pipeline.scoring.tools.frames import STR_LIST, T, lane_frames, tool_registry
from eval_pipeline.scoring.tools.paths import match_paths
from eval_pipeline.scoring.tools.policy import policy_violations
from eval_pipeline.scoring.tools.sequence import call_order, loop_calls
from eval_pipeline.settings import ScoringSettings

MAX_LISTED = 3  # how many offending calls a stage reason names before summarising the rest as a count

TOOL_SCORES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "tool_match": pl.String,
    "matched_path": pl.String,
    "n_calls": pl.Int64,
    "n_path_calls": pl.Int64,
    "tool_call_precision": pl.Float64,
    "tool_call_recall": pl.Float64,
    "tool_call_f1": pl.Float64,
    "missing_calls": STR_LIST,
    "unexpected_calls": STR_LIST,
    "strict_order_accuracy": pl.Float64,
    "args_valid_rate": pl.Float64,
    "invalid_calls": STR_LIST,
    "order_violations": STR_LIST,
    "unnecessary_call_rate": pl.Float64,
    "loop_detected": pl.Boolean,
    "loop_calls": STR_LIST,
    "policy_violation": pl.Boolean,
    "policy_violations": STR_LIST,
    "adapter_divergence": pl.String,
    "fault_call_index": pl.Int64,
    "unsafe_actions": STR_LIST,
    "escalated_after_fault": pl.Boolean,
    "status": pl.String,
    "reason": pl.String,
    "policy_stage": pl.String,
    "policy_reason": pl.String,
    "tool_selection_stage": pl.String,
    "tool_selection_reason": pl.String,
    "tool_arguments_stage": pl.String,
    "tool_arguments_reason": pl.String,
    "tool_order_stage": pl.String,
    "tool_order_reason": pl.String,
    "loop_stage": pl.String,
    "loop_reason": pl.String,
}

# Metric columns nulled on incomplete rows: a harness or adapter defect must not read as an agent score.
_METRICS = (
    "tool_call_precision",
    "tool_call_recall",
    "tool_call_f1",
    "missing_calls",
    "unexpected_calls",
    "strict_order_accuracy",
    "args_valid_rate",
    "invalid_calls",
    "order_violations",
    "unnecessary_call_rate",
    "loop_detected",
    "loop_calls",
    "policy_violation",
    "policy_violations",
    "fault_call_index",
    "unsafe_actions",
    "escalated_after_fault",
)


def _listing(items: pl.Expr) -> pl.Expr:
    """`a; b; c (+N more)` of a list column, naming at most MAX_LISTED entries."""
    head = items.list.head(MAX_LISTED).list.join("; ")
    extra = items.list.len().cast(pl.Int64) - MAX_LISTED
    return pl.when(extra > 0).then(pl.format("{} (+{} more)", head, extra)).otherwise(head)


def _analyse(
    traces: pl.DataFrame, cases: pl.DataFrame, tools: pl.DataFrame, settings: ScoringSettings
) -> dict[str, pl.DataFrame]:
    """Every intermediate frame tool_scores and tool_call_diffs are built from."""
    base, steps, calls = lane_frames(traces, cases, tools)
    calls, ref_t, best = match_paths(base, calls, cases)
    calls = call_verdicts(calls, ref_t, tools)
    order_events, inversions = call_order(calls, base)
    divergence, malformed = harness_defects(steps, calls)
    return {
        "tools": tools,
        "base": base,
        "calls": calls,
        "ref_t": ref_t,
        "best": best,
        "violations": policy_violations(calls, base),
        "order_events": order_events,
        "inversions": inversions,
        "loops": loop_calls(calls, settings.loop_threshold),
        "faults": fault_facts(calls, base),
        "divergence": divergence,
        "malformed": malformed,
    }


def _selection_counts(calls: pl.DataFrame, ref_t: pl.DataFrame, tools: pl.DataFrame) -> pl.DataFrame:
    """(T, never_called, short_called, surplus_called): non-read-only path tools called never, fewer times than the
    path holds them (`f (1 of 2 made)`), or more (`f (3 made, the path holds 2)`); read-only path tools are optional
    (docs/agent_lane.md)."""
    held = ref_t.group_by(T, tool="ref_tool").agg(held=pl.len().cast(pl.Int64), first=pl.col("ref_pos").min())
    made = calls.group_by(T, "tool").agg(made=pl.len().cast(pl.Int64))
    read_only = tool_registry(tools).select(tool="name", read_only="read_only")
    counts = (
        held.join(made, on=[T, "tool"], how="left")
        .join(read_only, on="tool", how="left")
        .with_columns(pl.col("made").fill_null(0))
        .filter(~pl.col("read_only").fill_null(False))
        .sort(T, "first")
    )
    return counts.group_by(T, maintain_order=True).agg(
        never_called=pl.col("tool").filter(pl.col("made") == 0),
        short_called=pl.format("{} ({} of {} made)", "tool", "made", "held").filter(
            (pl.col("made") > 0) & (pl.col("made") < pl.col("held"))
        ),
        surplus_called=pl.format("{} ({} made, the path holds {})", "tool", "made", "held").filter(
            pl.col("made") > pl.col("held")
        ),
    )


def _per_trace_metrics(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per trace with every metric and helper column before stages are decided."""
    calls, ref_t = parts["calls"], parts["ref_t"]
    call_stats = calls.group_by(T).agg(
        n_valid=pl.col("invalid").is_null().sum(),
        n_unnecessary=pl.col("unnecessary").sum(),
        invalid_calls=pl.col("invalid").drop_nulls(),
        unexpected_calls=pl.col("key").filter(pl.col("ref_pos").is_null()),
        unknown_tools=pl.col("tool").filter(pl.col("unknown_tool")).unique(maintain_order=True),
        extra_writes=pl.col("tool")
        .filter(~pl.col("in_path") & ~pl.col("read_only") & ~pl.col("unknown_tool"))
        .unique(maintain_order=True),
    )
    ref_stats = ref_t.group_by(T).agg(missing_calls=pl.col("ref_key").filter(pl.col("matched_pos").is_null()))
    frame = (
        parts["base"]
        .join(parts["best"].drop("case_id"), on=T, how="left")
        .join(call_stats, on=T, how="left")
        .join(ref_stats, on=T, how="left")
        .join(_selection_counts(calls, ref_t, parts["tools"]), on=T, how="left")
    )
    for name in ("violations", "order_events", "inversions", "loops", "faults", "divergence", "malformed"):
        frame = frame.join(parts[name], on=T, how="left")
    empty = pl.lit([], dtype=STR_LIST)
    longest = pl.max_horizontal("n_calls", "n_ref")
    return frame.with_columns(
        *(
            pl.col(c).fill_null(empty)
            for c in (
                "invalid_calls",
                "unexpected_calls",
                "extra_writes",
                "missing_calls",
                "never_called",
                "short_called",
                "surplus_called",
                "unknown_tools",
                "policy_violations",
                "order_violations",
                "loop_calls",
            )
        ),
        strict_order_accuracy=pl.when(longest > 0).then(pl.col("same").fill_null(0) / longest),
        args_valid_rate=pl.when(pl.col("n_calls") > 0).then(pl.col("n_valid") / pl.col("n_calls")),
        unnecessary_call_rate=pl.when(pl.col("n_calls") > 0).then(pl.col("n_unnecessary") / pl.col("n_calls")),
    ).with_columns(
        unsafe_actions=pl.when(pl.col("fault_tool").is_not_null()).then(
            pl.col("unsafe_actions").fill_null(pl.lit([], dtype=STR_LIST))
        ),
        escalated_after_fault=pl.when(pl.col("fault_tool").is_not_null()).then(
            pl.col("escalated_after_fault").fill_null(False)
        ),
        loop_detected=pl.col("loop_calls").list.len() > 0,
        policy_violation=pl.col("policy_violations").list.len() > 0,
    )


def _stage(
    incomplete: pl.Expr,
    not_applicable: pl.Expr | None,
    na_reason: pl.Expr | None,
    failed: pl.Expr,
    fail_reason: pl.Expr,
    name: str,
) -> list[pl.Expr]:
    """`<name>_stage` and `<name>_reason` from the stage's conditions, checked in that order."""
    status = pl.when(incomplete).then(pl.lit("incomplete"))
    reason = pl.when(incomplete).then(pl.col("reason"))
    if not_applicable is not None:
        status = status.when(not_applicable).then(pl.lit("not_applicable"))
        reason = reason.when(not_applicable).then(na_reason)
    status = status.when(failed).then(pl.lit("fail")).otherwise(pl.lit("pass"))
    reason = reason.when(failed).then(fail_reason).otherwise(pl.lit(None, dtype=pl.String))
    return [status.alias(f"{name}_stage"), reason.alias(f"{name}_reason")]


def _joined(*parts: tuple[pl.Expr, pl.Expr]) -> pl.Expr:
    """`label: items; label: items` over the non-empty list columns given as (condition, text) pairs."""
    texts = [pl.when(cond).then(text) for cond, text in parts]
    return pl.concat_str(texts, separator="; ", ignore_nulls=True)


def score_tools(
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    tools: pl.DataFrame,
    settings: ScoringSettings | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(tool_scores, tool_call_diffs) for every trace of an agent-lane case."""
    settings = settings or ScoringSettings()
    parts = _analyse(traces, cases, tools, settings)
    frame = _per_trace_metrics(parts)

    goal_only = pl.col("tool_match") == "goal_only"
    reason = pl.coalesce(
        harness_reason(),
        pl.when(pl.col("steps").is_null()).then(pl.lit("trace has no steps: the agent lane needs the trajectory")),
        pl.col("malformed"),
        pl.format("adapter_divergence: {}", pl.col("adapter_divergence")),
    )
    frame = frame.with_columns(reason=reason).with_columns(
        status=pl.when(pl.col("reason").is_not_null()).then(pl.lit("incomplete")).otherwise(pl.lit("scored")),
    )
    incomplete = pl.col("status") == "incomplete"
    never, extra = pl.col("never_called"), pl.col("extra_writes")
    short, surplus, unknown = pl.col("short_called"), pl.col("surplus_called"), pl.col("unknown_tools")
    order_na = (pl.col("tool_match") == "unordered") & (pl.col("dependencies").list.len().fill_null(0) == 0)
    strict_break = (pl.col("tool_match") == "strict_order") & pl.col("path_order_break").is_not_null()
    events = pl.col("order_violations")
    frame = frame.with_columns(
        *_stage(
            incomplete,
            None,
            None,
            pl.col("policy_violation"),
            pl.format("policy_violation: {}", _listing(pl.col("policy_violations"))),
            "policy",
        ),
        *_stage(
            incomplete,
            goal_only,
            pl.lit("tool_match goal_only: scored on the outcome only"),
            (unknown.list.len() > 0)
            | (never.list.len() > 0)
            | (short.list.len() > 0)
            | (surplus.list.len() > 0)
            | (extra.list.len() > 0),
            _joined(
                (
                    unknown.list.len() > 0,
                    pl.format("unknown_tool: {} (not in the tool registry)", unknown.list.join(", ")),
                ),
                (never.list.len() > 0, pl.format("path tools never called: {}", never.list.join(", "))),
                (short.list.len() > 0, pl.format("path calls not made: {}", short.list.join(", "))),
                (surplus.list.len() > 0, pl.format("surplus calls: {}", surplus.list.join(", "))),
                (
                    extra.list.len() > 0,
                    pl.format("non-read-only tools outside the path called: {}", extra.list.join(", ")),
                ),
            ),
            "tool_selection",
        ),
        *_stage(
            incomplete,
            goal_only,
            pl.lit("tool_match goal_only: scored on the outcome only"),
            pl.col("invalid_calls").list.len() > 0,
            pl.format("invalid calls: {}", _listing(pl.col("invalid_calls"))),
            "tool_arguments",
        ),
        *_stage(
            incomplete,
            goal_only | order_na,
            pl.when(goal_only)
            .then(pl.lit("tool_match goal_only: scored on the outcome only"))
            .otherwise(pl.lit("tool_match unordered and no dependencies declared")),
            (events.list.len() > 0) | strict_break,
            _joined(
                (events.list.len() > 0, pl.format("dependency events: {}", events.list.join(", "))),
                (strict_break, pl.format("path order: {}", pl.col("path_order_break"))),
            ),
            "tool_order",
        ),
        *_stage(
            incomplete,
            None,
            None,
            pl.col("loop_detected"),
            pl.format("loop_detected: {}", pl.col("loop_calls").list.join("; ")),
            "loop",
        ),
    )
    frame = frame.with_columns(
        *(pl.when(incomplete).then(None).otherwise(pl.col(c)).alias(c) for c in _METRICS),
        n_path_calls=pl.col("n_ref"),
    )
    tool_scores = frame.select(*(pl.col(c).cast(dtype) for c, dtype in TOOL_SCORES_SCHEMA.items())).sort(
        "run_id", "case_id", "attempt", "trace_id"
    )
    return tool_scores, tool_call_diffs(parts)
