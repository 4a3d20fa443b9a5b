"""Agent-lane frames every tool-call measure reads: traces with their case contract, steps, calls and the registry."""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.common import lane_traces

T = "_t"  # row id of an agent-lane trace inside one scoring call

STR_LIST = pl.List(pl.String)


def call_key_expr(name: str = "tool", args: str = "args_json") -> pl.Expr:
    """The canonical call key `name(args)` of frames.call_key, as an expression."""
    return pl.format("{}({})", pl.col(name), pl.col(args).fill_null("{}"))


def per_trace_list(frame: pl.DataFrame, value: str, order: str, name: str) -> pl.DataFrame:
    """(T, name): the values of each trace collected as a list in `order`."""
    return frame.sort(T, order).group_by(T, maintain_order=True).agg(pl.col(value).alias(name))


def tool_registry(tools: pl.DataFrame) -> pl.DataFrame:
    """One row per tool name: read_only, its JSON Schema text and its value rules."""
    return tools.select("name", "read_only", "args_schema_json", "value_rules_json").unique(
        "name", keep="first", maintain_order=True
    )


def lane_frames(traces: pl.DataFrame, cases: pl.DataFrame, tools: pl.DataFrame) -> tuple[pl.DataFrame, ...]:
    """(base, steps, calls): agent-lane traces with their case contract, every step, and the tool calls in order."""
    # only the columns scoring reads travel through the join: traces carry heavy RAG columns too
    base = (
        lane_traces(
            traces.select("run_id", "trace_id", "case_id", "attempt", "status", "error", "steps"),
            cases.select(
                "case_id",
                "lanes",
                "tool_match",
                "dependencies",
                "allowed_tools",
                "forbidden_tools",
                "scope_json",
                "fault_kind",
                "fault_tool",
                "unsafe_after_fault",
                "escalation_tools",
                pl.col("value_rules_json").alias("case_rules_json"),
            ),
            "agent",
        )
        .drop("lanes")
        .with_row_index(T)
    )
    steps = (
        base.select(T, "steps")
        .explode("steps", keep_nulls=False)
        .with_columns(step_pos=pl.int_range(pl.len(), dtype=pl.Int64).over(T))
        .unnest("steps")
    )
    calls = (
        steps.filter(pl.col("kind") == "tool_call")
        .with_columns(
            pos=pl.int_range(pl.len(), dtype=pl.Int64).over(T),
            key=call_key_expr(),
            args_json=pl.col("args_json").fill_null("{}"),
        )
        .join(base.select(T, "case_id", "case_rules_json"), on=T, how="left")
        .join(
            tool_registry(tools).select(
                "name", "read_only", pl.col("value_rules_json").alias("tool_rules_json"), in_registry=pl.lit(True)
            ),
            left_on="tool",
            right_on="name",
            how="left",
        )
        .with_columns(
            read_only=pl.col("read_only").fill_null(False),
            # with an empty registry nothing is known, so nothing is an unknown tool
            unknown_tool=pl.col("in_registry").is_null() & pl.lit(tools.height > 0),
        )
        .drop("in_registry")
        .sort(T, "pos")
    )
    return base, steps, calls
