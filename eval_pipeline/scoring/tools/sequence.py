"""Call-order facts of each trace: dependency events, the first break of path order, and loops."""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.tools.frames import T, per_trace_list


def call_order(calls: pl.DataFrame, base: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(T, order_violations): dependency events; (T, path_order_break): the first call matched out of path order."""
    first_pos = calls.group_by(T, "tool").agg(first=pl.col("pos").min())
    edges = (
        base.select(T, "dependencies")
        .explode("dependencies", keep_nulls=False)
        .with_columns(
            edge_idx=pl.int_range(pl.len()).over(T),
            a=pl.col("dependencies").list.get(0),
            b=pl.col("dependencies").list.get(1),
        )
    )
    events = (
        edges.join(first_pos.rename({"tool": "b", "first": "first_b"}), on=[T, "b"])
        .join(first_pos.rename({"tool": "a", "first": "first_a"}), on=[T, "a"], how="left")
        .filter(pl.col("first_a").is_null() | (pl.col("first_a") > pl.col("first_b")))
        .with_columns(event=pl.format("{}->{}", pl.col("a"), pl.col("b")))
    )
    inversions = (
        calls.select(T, "key", "ref_pos")
        .filter(pl.col("ref_pos").is_not_null())
        .with_columns(prev_max=pl.col("ref_pos").cum_max().shift(1).over(T))
        .filter(pl.col("ref_pos") < pl.col("prev_max"))
        .unique(T, keep="first", maintain_order=True)
        .select(
            T,
            path_order_break=pl.format(
                "{} (path call {}) came after path call {}",
                pl.col("key"),
                pl.col("ref_pos") + 1,
                pl.col("prev_max") + 1,
            ),
        )
    )
    return per_trace_list(events, "event", "edge_idx", "order_violations"), inversions


def loop_calls(calls: pl.DataFrame, threshold: int) -> pl.DataFrame:
    """(T, loop_calls): keys called `threshold` times or more, in order of first call."""
    loops = (
        calls.group_by(T, "key")
        .agg(n=pl.len(), first=pl.col("pos").min())
        .filter(pl.col("n") >= threshold)
        .with_columns(loop=pl.format("{} x{}", pl.col("key"), pl.col("n")))
    )
    return per_trace_list(loops, "loop", "first", "loop_calls")
