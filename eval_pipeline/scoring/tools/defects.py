"""Harness defects that make a trace incomplete: dispatch records differing from the evaluated calls, nameless calls."""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.tools.frames import T, call_key_expr


def harness_defects(steps: pl.DataFrame, calls: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(T, adapter_divergence): the first difference between dispatch records and evaluated calls; (T, malformed)."""
    evaluated = pl.col("kind") == "tool_call"
    dispatched = pl.col("dispatched_tool").is_not_null()
    difference = (
        pl.when(evaluated & ~dispatched)
        .then(pl.format("step {}: evaluated call {} has no dispatch record", pl.col("index"), call_key_expr()))
        .when(~evaluated & dispatched)
        .then(
            pl.format(
                "step {}: dispatched {} was not evaluated as a tool call",
                pl.col("index"),
                call_key_expr("dispatched_tool", "dispatched_args_json"),
            )
        )
        .when(evaluated & pl.col("tool").ne_missing(pl.col("dispatched_tool")))
        .then(
            pl.format(
                "step {}: dispatched {}, evaluated {}", pl.col("index"), pl.col("dispatched_tool"), pl.col("tool")
            )
        )
        .when(evaluated & (pl.col("args_json").fill_null("{}") != pl.col("dispatched_args_json").fill_null("{}")))
        .then(
            pl.format(
                "step {}: {} dispatched with {}, evaluated with {}",
                pl.col("index"),
                pl.col("tool"),
                pl.col("dispatched_args_json").fill_null("{}"),
                pl.col("args_json").fill_null("{}"),
            )
        )
    )
    # only a trace that logs dispatch records can diverge from them
    divergence = (
        steps.filter(dispatched.any().over(T))
        # row by row before grouping: the texts are built in one pass, not group by group
        .select(T, "step_pos", _difference=difference, _dispatched=dispatched, _evaluated=evaluated)
        .sort(T, "step_pos")
        .group_by(T)
        .agg(
            first=pl.col("_difference").drop_nulls().first(),
            n_dispatched=pl.col("_dispatched").sum(),
            n_evaluated=pl.col("_evaluated").sum(),
        )
        .filter(pl.col("first").is_not_null())
        .select(
            T,
            adapter_divergence=pl.format(
                "{} (dispatched {} calls, evaluated {})", "first", "n_dispatched", "n_evaluated"
            ),
        )
    )
    malformed = (
        calls.filter(pl.col("tool").is_null())
        .group_by(T)
        .agg(pl.col("index").min())
        .select(T, malformed=pl.format("step {}: tool_call without a tool name", pl.col("index")))
    )
    return divergence, malformed
