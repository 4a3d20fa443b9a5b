"""The `tool_call_diffs` table, and how a call's arguments differ from its closest reference call."""

from __future__ import annotations

from typing import Any

import polars as pl

from eval_pipeline.contracts.frames import canonical_json, parse_json
from eval_pipeline.scoring.tools.frames import T

TOOL_CALL_DIFFS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "matched_path": pl.String,
    "position": pl.Int64,
    "actual_index": pl.Int64,
    "expected_index": pl.Int64,
    "expected_call": pl.String,
    "actual_call": pl.String,
    "actual_status": pl.String,
    "match": pl.String,
}


def with_argument_diffs(calls: pl.DataFrame, ref_t: pl.DataFrame, mismatch: pl.Expr) -> pl.DataFrame:
    """Calls with `args_diff`: for a path call whose arguments match no reference call, the fields that differ from the
    closest one."""
    wrong = calls.filter(mismatch).select(T, "pos", "tool", "args_json")
    if wrong.height == 0:
        return calls.with_columns(args_diff=pl.lit(None, dtype=pl.String))
    # only the path calls of the tools called wrongly: a list per (trace, tool) of the whole run is costly
    references = (
        ref_t.join(wrong.select(T, "tool").unique(), left_on=[T, "ref_tool"], right_on=[T, "tool"], how="semi")
        .group_by(T, "ref_tool")
        .agg(pl.col("ref_args_json").unique().sort())
    )
    wrong = wrong.join(references, left_on=[T, "tool"], right_on=[T, "ref_tool"], how="left")
    # few distinct (arguments, references) pairs even in large runs: one diff per distinct pair
    distinct = wrong.select("args_json", "ref_args_json").unique()
    diffs = pl.DataFrame(
        {
            "args_json": distinct["args_json"],
            "ref_args_json": distinct["ref_args_json"],
            "args_diff": [_closest_diff(args, refs or []) for args, refs in distinct.iter_rows()],
        },
        schema={"args_json": pl.String, "ref_args_json": pl.List(pl.String), "args_diff": pl.String},
    )
    wrong = wrong.join(diffs, on=["args_json", "ref_args_json"], how="left", nulls_equal=True).select(
        T, "pos", "args_diff"
    )
    return calls.join(wrong, on=[T, "pos"], how="left")


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path → leaf value of a JSON value (list items by index)."""
    if isinstance(value, dict) and value:
        return {k: v for name, inner in value.items() for k, v in _leaves(inner, f"{prefix}{name}.").items()}
    if isinstance(value, list) and value:
        return {k: v for i, inner in enumerate(value) for k, v in _leaves(inner, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def _closest_diff(args_json: str, reference_jsons: list[str]) -> str | None:
    """`: amount 89, expected 79; reason missing` against the reference call with the fewest differing fields."""
    try:
        actual = _leaves(parse_json(args_json))
        references = [_leaves(parse_json(r)) for r in reference_jsons]
    except (TypeError, ValueError):
        return None
    best: list[str] | None = None
    for expected in references:
        parts = []
        for path in sorted(set(actual) | set(expected)):
            if path not in actual:
                parts.append(f"{path} missing, expected {canonical_json(expected[path])}")
            elif path not in expected:
                parts.append(f"{path} {canonical_json(actual[path])} not expected")
            elif canonical_json(actual[path]) != canonical_json(expected[path]):
                parts.append(f"{path} {canonical_json(actual[path])}, expected {canonical_json(expected[path])}")
        if parts and (best is None or len(parts) < len(best)):
            best = parts
    return f": {'; '.join(best)}" if best else None


def tool_call_diffs(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """tool_call_diffs: each actual call in order (same, args_differ, unexpected), then the path calls never made."""
    calls, ref_t, best = parts["calls"], parts["ref_t"], parts["best"]
    unmatched = calls.filter(pl.col("ref_pos").is_null()).with_columns(rank=pl.int_range(pl.len()).over(T, "tool"))
    missing = ref_t.filter(pl.col("matched_pos").is_null()).with_columns(
        rank=pl.int_range(pl.len()).over(T, "ref_tool")
    )
    paired = unmatched.join(
        missing.select(T, "rank", tool="ref_tool", paired_pos="ref_pos", paired_key="ref_key"),
        on=[T, "tool", "rank"],
        how="left",
    )
    # a call matched through accepted values or value rules may differ from the path call's canonical args
    matched_rows = (
        calls.filter(pl.col("ref_pos").is_not_null())
        .join(ref_t.select(T, "ref_pos", "ref_key"), on=[T, "ref_pos"], how="left")
        .select(
            T,
            "pos",
            "ref_pos",
            pl.col("ref_key").alias("expected_call"),
            pl.col("key").alias("actual_call"),
            pl.col("status").alias("actual_status"),
            pl.lit("same").alias("match"),
        )
    )
    unmatched_rows = paired.select(
        T,
        "pos",
        pl.col("paired_pos").alias("ref_pos"),
        pl.col("paired_key").alias("expected_call"),
        pl.col("key").alias("actual_call"),
        pl.col("status").alias("actual_status"),
        pl.when(pl.col("paired_pos").is_not_null())
        .then(pl.lit("args_differ"))
        .otherwise(pl.lit("unexpected"))
        .alias("match"),
    )
    used = paired.filter(pl.col("paired_pos").is_not_null()).select(T, pl.col("paired_pos").alias("ref_pos"))
    missing_rows = missing.join(used, on=[T, "ref_pos"], how="anti").select(
        T,
        pl.lit(None, dtype=pl.Int64).alias("pos"),
        "ref_pos",
        pl.col("ref_key").alias("expected_call"),
        pl.lit(None, dtype=pl.String).alias("actual_call"),
        pl.lit(None, dtype=pl.String).alias("actual_status"),
        pl.lit("missing").alias("match"),
    )
    rows = pl.concat([matched_rows, unmatched_rows, missing_rows], how="vertical_relaxed")
    keys = (
        parts["base"]
        .select(T, "run_id", "trace_id", "case_id", "attempt")
        .join(best.select(T, "matched_path"), on=T, how="left")
    )
    return (
        rows.with_columns(group=pl.col("pos").is_null(), order=pl.coalesce("pos", "ref_pos"))
        .sort(T, "group", "order")
        .with_columns(position=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(T))
        .join(keys, on=T, how="left")
        .with_columns(actual_index=pl.col("pos") + 1, expected_index=pl.col("ref_pos") + 1)
        .select(*(pl.col(c).cast(dtype) for c, dtype in TOOL_CALL_DIFFS_SCHEMA.items()))
        .sort("run_id", "case_id", "attempt", "trace_id", "position")
    )
