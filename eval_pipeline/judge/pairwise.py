"""Pairwise preference from claim verdicts: the answer whose claims the evidence supports better wins."""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import Judge
from eval_pipeline.judge.claim_text import claims_of_texts


def prefer_by_claims(judge: Judge, requests: pl.DataFrame) -> pl.DataFrame:
    """RAW_PAIR_RESULT_SCHEMA rows: higher supported share wins, then fewer contradictions, then more supported
    claims."""
    sides = pl.concat(
        [
            requests.select("request_key", "evidence", pl.lit(side).alias("side"), pl.col(column).alias("answer"))
            for side, column in (("A", "answer_a"), ("B", "answer_b"))
        ]
    )
    claims = claims_of_texts(sides, ["request_key", "side"], "answer")
    claim_requests = claims.join(sides.select("request_key", "side", "evidence"), on=["request_key", "side"]).select(
        pl.format("{}\x1f{}\x1f{}", "request_key", "side", "claim_index").alias("claim_key"),
        "request_key",
        "side",
        "claim",
        "evidence",
    )
    verdicts = judge.judge_claims(
        claim_requests.rename({"claim_key": "request_key", "request_key": "pair_key"}).select(
            "request_key", "claim", "evidence"
        )
    )
    per_side = (
        claim_requests.join(verdicts.select(pl.col("request_key").alias("claim_key"), "verdict"), on="claim_key")
        .group_by("request_key", "side")
        .agg(
            n=pl.len(),
            supported=(pl.col("verdict") == "SUPPORTED").sum(),
            contradicted=(pl.col("verdict") == "CONTRADICTED").sum(),
        )
    )
    score = requests.select("request_key")
    for side in ("A", "B"):
        s = side.lower()
        score = score.join(
            per_side.filter(pl.col("side") == side).select(
                "request_key",
                pl.col("n").alias(f"n_{s}"),
                pl.col("supported").alias(f"sup_{s}"),
                pl.col("contradicted").alias(f"con_{s}"),
            ),
            on="request_key",
            how="left",
        )
    score = score.with_columns(pl.col(r"^(n|sup|con)_[ab]$").fill_null(0).cast(pl.Int64))
    # Supported shares compared exactly by cross-multiplying (an answer without claims counts as 1/1).
    share = {
        s: (
            pl.when(pl.col(f"n_{s}") == 0).then(1).otherwise(pl.col(f"sup_{s}")),
            pl.when(pl.col(f"n_{s}") == 0).then(1).otherwise(pl.col(f"n_{s}")),
        )
        for s in "ab"
    }
    comparisons = [
        share["a"][0] * share["b"][1] - share["b"][0] * share["a"][1],
        pl.col("con_b") - pl.col("con_a"),
        pl.col("sup_a") - pl.col("sup_b"),
    ]
    preference = pl.when(comparisons[0] > 0).then(pl.lit("A")).when(comparisons[0] < 0).then(pl.lit("B"))
    for comparison in comparisons[1:]:
        preference = preference.when(comparison > 0).then(pl.lit("A")).when(comparison < 0).then(pl.lit("B"))
    return score.select(
        "request_key",
        preference.otherwise(pl.lit("tie")).alias("preference"),
        pl.lit("ok").alias("status"),
        pl.format(
            "A: {}/{} supported, {} contradicted; B: {}/{} supported, {} contradicted",
            "sup_a",
            "n_a",
            "con_a",
            "sup_b",
            "n_b",
            "con_b",
        ).alias("reason"),
        pl.lit(0.0).alias("cost_usd"),
        pl.lit(False).alias("cached"),
    )
