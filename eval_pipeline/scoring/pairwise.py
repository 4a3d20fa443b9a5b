"""Pairwise comparison of baseline and candidate answers to the same case, judged twice with positions swapped.

Pairs are the traces of both runs with the same (case_id, attempt). Order 1 shows the baseline as A and the
candidate as B; order 2 the reverse. A win counts only when both orders prefer the same answer; when they
disagree the pair is a tie and is not position-consistent. The judge sees the question, both answers and the
union of both contexts (each answer was given its own). A pair with a harness-incomplete trace, or whose
judge call did not complete, is incomplete: not a tie, and left out of every rate.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, Judge

PAIRWISE_SCHEMA: dict[str, pl.DataType] = {
    "case_id": pl.String,
    "attempt": pl.Int64,
    "baseline_trace_id": pl.String,
    "candidate_trace_id": pl.String,
    "order1_preference": pl.String,
    "order2_preference": pl.String,
    "outcome": pl.String,
    "position_consistent": pl.Boolean,
    "status": pl.String,
    "reason": pl.String,
    "judge_version": pl.String,
}

_PAIR = ["case_id", "attempt"]


def _side(traces: pl.DataFrame, name: str) -> pl.DataFrame:
    return traces.select(
        *_PAIR,
        pl.col("trace_id").alias(f"{name}_trace_id"),
        pl.col("input").alias(f"{name}_input"),
        pl.col("answer_text").fill_null("").alias(f"{name}_answer"),
        pl.col("context").alias(f"{name}_context"),
        pl.col("status").is_in(["error", "timeout"]).alias(f"{name}_incomplete"),
    )


def _union_evidence(pairs: pl.DataFrame) -> pl.DataFrame:
    """case_id, attempt, evidence: both contexts' chunks, distinct by (doc_id, text), baseline's first."""
    chunks = pl.concat(
        [
            pairs.select(*_PAIR, pl.col(f"{side}_context").alias("chunk")).explode(
                "chunk", keep_nulls=False, empty_as_null=False
            )
            for side in ("baseline", "candidate")
        ]
    ).select(
        *_PAIR, pl.struct(pl.col("chunk").struct.field("doc_id"), pl.col("chunk").struct.field("text")).alias("chunk")
    )
    return (
        chunks.unique(maintain_order=True).group_by(_PAIR, maintain_order=True).agg(pl.col("chunk").alias("evidence"))
    )


def pairwise_compare(
    baseline: pl.DataFrame, candidate: pl.DataFrame, judge: Judge
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """(per-pair frame PAIRWISE_SCHEMA, summary: n_pairs, n_complete, candidate_wins, baseline_wins, ties,
    n_incomplete, candidate_win_rate, baseline_win_rate, tie_rate, position_consistency_rate, judge_version)."""
    pairs = _side(baseline, "baseline").join(_side(candidate, "candidate"), on=_PAIR)
    pairs = pairs.join(_union_evidence(pairs), on=_PAIR, how="left").with_columns(
        pl.col("evidence").fill_null(pl.lit([], dtype=EVIDENCE)).cast(EVIDENCE)
    )
    live = pairs.filter(~pl.col("baseline_incomplete") & ~pl.col("candidate_incomplete"))
    key = pl.concat_str([pl.col("case_id"), pl.col("attempt").cast(pl.String)], separator="\x1f")
    requests = pl.concat(
        [
            live.select(
                pl.concat_str([key, pl.lit(str(order))], separator="\x1f").alias("request_key"),
                pl.coalesce("baseline_input", "candidate_input").alias("question"),
                pl.col(first).alias("answer_a"),
                pl.col(second).alias("answer_b"),
                "evidence",
            )
            for order, first, second in (
                (1, "baseline_answer", "candidate_answer"),
                (2, "candidate_answer", "baseline_answer"),
            )
        ]
    )
    results = judge.judge_pairs(requests).with_columns(
        _key=pl.col("request_key").str.replace(r"\x1f\d$", ""),
        _order=pl.col("request_key").str.slice(-1).cast(pl.Int64),
    )
    pairs = pairs.with_columns(_key=key)
    for order, sides in ((1, {"A": "baseline", "B": "candidate"}), (2, {"A": "candidate", "B": "baseline"})):
        picked = results.filter(pl.col("_order") == order).select(
            "_key",
            pl.col("preference")
            .replace_strict({**sides, "tie": "tie"}, default=None)
            .alias(f"order{order}_preference"),
            pl.col("reason").alias(f"_reason{order}"),
            pl.col("status").alias(f"_status{order}"),
        )
        pairs = pairs.join(picked, on="_key", how="left")
    done = ((pl.col("_status1") == "ok") & (pl.col("_status2") == "ok")).fill_null(False)
    agree = pl.col("order1_preference") == pl.col("order2_preference")
    harness = pl.col("baseline_incomplete") | pl.col("candidate_incomplete")
    per_pair = (
        pairs.with_columns(
            outcome=pl.when(~done)
            .then(None)
            .when(agree & (pl.col("order1_preference") != "tie"))
            .then(pl.format("{}_win", "order1_preference"))
            .otherwise(pl.lit("tie")),
            position_consistent=pl.when(done).then(agree),
            status=pl.when(done).then(pl.lit("scored")).otherwise(pl.lit("incomplete")),
            reason=pl.when(harness)
            .then(pl.lit("a trace of the pair has harness status error or timeout"))
            .when(pl.col("_status1") != "ok")
            .then(pl.format("judge did not finish order 1: {}", "_reason1"))
            .when(pl.col("_status2") != "ok")
            .then(pl.format("judge did not finish order 2: {}", "_reason2"))
            .when(~agree)
            .then(pl.lit("the two orders disagree: counted as a tie")),
            judge_version=pl.lit(judge.version),
        )
        .select(list(PAIRWISE_SCHEMA))
        .cast(PAIRWISE_SCHEMA)
        .sort("case_id", "attempt", "baseline_trace_id", "candidate_trace_id")
    )
    return per_pair, _summary(per_pair, judge.version)


def _summary(per_pair: pl.DataFrame, judge_version: str) -> dict[str, Any]:
    complete = per_pair.filter(pl.col("status") == "scored")
    n = complete.height
    counts = {
        name: complete.filter(pl.col("outcome") == name).height for name in ("candidate_win", "baseline_win", "tie")
    }

    def share(count: int) -> float | None:
        return count / n if n else None

    return {
        "n_pairs": per_pair.height,
        "n_complete": n,
        "n_incomplete": per_pair.height - n,
        "candidate_wins": counts["candidate_win"],
        "baseline_wins": counts["baseline_win"],
        "ties": counts["tie"],
        "candidate_win_rate": share(counts["candidate_win"]),
        "baseline_win_rate": share(counts["baseline_win"]),
        "tie_rate": share(counts["tie"]),
        "position_consistency_rate": share(complete.filter(pl.col("position_consistent")).height),
        "judge_version": judge_version,
    }
