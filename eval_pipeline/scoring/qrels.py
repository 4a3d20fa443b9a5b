"""Qrels (docs/metrics.md#qrels-pooling): case seeds, a retrieved-doc pool, frozen versioned grades, a judging queue.

Precedence when freezing: a human judgment beats a model pre-grade (`source: model:<judge_version>`), which beats a
seed. Several judgments of one pair at the same tier (two annotators disagreeing) resolve to the majority grade, a
tie to the lower of the tied grades: a doc counts as relevant only when most judges say so. Such pairs are flagged
`conflict` and keep every annotator, so a reviewer can settle them with one more judgment.
"""

from __future__ import annotations

import hashlib

import polars as pl

from eval_pipeline.contracts.policy import SEED_GRADE
from eval_pipeline.trec.ranking import first_occurrences, ranked_entries, retrieval_rounds

QRELS_SCHEMA: dict[str, pl.DataType] = {
    "query_id": pl.String,
    "doc_id": pl.String,
    "grade": pl.Int64,
    "source": pl.String,
    "annotator": pl.String,
}
# SEED_GRADE (2) is defined with the contracts: the policy's grade scale must hold it (RetrievalPolicy).
# Unlabelled variants still pool; they are named so pooled_from stays a readable "run_id:variant".
UNLABELLED_VARIANT = "unlabelled"


def seed_qrels(cases: pl.DataFrame, lane: str = "rag") -> pl.DataFrame:
    """Each `lane` case's required_doc_ids at grade 2, source `seed`: query_id, doc_id, grade, source, annotator
    (null)."""
    return (
        cases.filter(pl.col("lanes").list.contains(lane))
        .select(pl.col("case_id").alias("query_id"), pl.col("required_doc_ids").alias("doc_id"))
        .explode("doc_id")
        .drop_nulls("doc_id")
        .unique(["query_id", "doc_id"])
        .select(
            "query_id",
            "doc_id",
            pl.lit(SEED_GRADE, dtype=pl.Int64).alias("grade"),
            pl.lit("seed").alias("source"),
            pl.lit(None, dtype=pl.String).alias("annotator"),
        )
        .sort("query_id", "doc_id")
    )


def pool(traces: pl.DataFrame, depth: int) -> pl.DataFrame:
    """The pool: per trace and variant the first `depth` distinct docs of its hits, unioned; query_id, doc_id,
    pooled_from (sorted "run_id:variant")."""
    if depth < 1:
        raise ValueError(f"pool depth must be at least 1, got {depth}")
    indexed = traces.with_row_index("_tid")
    rounds = retrieval_rounds(indexed.select("_tid", "retrieval")).with_columns(
        pl.col("variant").fill_null(UNLABELLED_VARIANT)
    )
    # Each (trace, variant) ranks on its own: its hits over its rounds, first occurrence wins.
    per_variant = first_occurrences(ranked_entries(rounds, "hits"), key=("_tid", "variant"))
    keys = indexed.select("_tid", "run_id", pl.col("case_id").alias("query_id"))
    # One row per (pair, run, variant) first, in order, so each pair's pooled_from is already unique and sorted.
    return (
        per_variant.filter(pl.col("rank") <= depth)
        .join(keys, on="_tid", how="inner")
        .select("query_id", "doc_id", source=pl.concat_str("run_id", pl.lit(":"), "variant"))
        .unique()
        .sort("query_id", "doc_id", "source")
        .group_by("query_id", "doc_id", maintain_order=True)
        .agg(pooled_from=pl.col("source"))
    )


def _tier(source: pl.Expr) -> pl.Expr:
    """Precedence of a grade's source: human 2, model:<version> 1, seed 0."""
    return pl.when(source == "seed").then(0).when(source.str.starts_with("model:")).then(1).otherwise(2)


def freeze_qrels(
    seeds: pl.DataFrame, judgments: pl.DataFrame, model_grades: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The frozen qrels: one grade per (query, doc) by precedence human > model > seed, with `conflict` and
    `qrels_version`."""
    parts = [seeds, judgments] + ([model_grades] if model_grades is not None else [])
    rows = pl.concat(
        [
            p.select(
                pl.col("query_id").cast(pl.String),
                pl.col("doc_id").cast(pl.String),
                pl.col("grade").cast(pl.Int64),
                (pl.col("source") if "source" in p.columns else pl.lit("human"))
                .cast(pl.String)
                .fill_null("human")
                .alias("source"),
                (pl.col("annotator") if "annotator" in p.columns else pl.lit(None)).cast(pl.String).alias("annotator"),
            )
            for p in parts
        ]
    ).with_columns(_tier=_tier(pl.col("source")))
    pair = ["query_id", "doc_id"]
    # Most pairs have one grade only (a seed nobody judged): it is chosen as it stands, without the votes below.
    several = rows.select(pl.struct(pair).is_duplicated()).to_series()
    alone = rows.filter(~several).select(
        *pair,
        "grade",
        "source",
        conflict=pl.lit(False),
        # as the votes below would have it: their annotators are joined back on the pair, which a null key never
        # matches (validated judgments and seeds have none)
        annotator=pl.when(
            (pl.col("annotator") != "") & pl.col("query_id").is_not_null() & pl.col("doc_id").is_not_null()
        ).then(pl.col("annotator")),
    )
    rows = rows.filter(several)
    top = rows.filter(pl.col("_tier") == pl.col("_tier").max().over(pair))
    votes = top.group_by(*pair, "grade").agg(_votes=pl.len(), source=pl.col("source").unique().sort().str.join(","))
    chosen = (
        votes.sort([*pair, "_votes", "grade"], descending=[False, False, True, False])
        .group_by(pair, maintain_order=True)
        .agg(pl.col("grade").first(), pl.col("source").first(), conflict=pl.len() > 1)
    )
    annotators = top.group_by(pair).agg(annotator=pl.col("annotator").drop_nulls().unique().sort().str.join(","))
    chosen = pl.concat(
        [
            alone,
            chosen.join(annotators, on=pair, how="left").with_columns(
                annotator=pl.when(pl.col("annotator") != "").then(pl.col("annotator"))
            ),
        ],
        how="vertical_relaxed",
    ).sort(pair)
    return chosen.with_columns(qrels_version=pl.lit(qrels_version(chosen))).select(
        *QRELS_SCHEMA, "conflict", "qrels_version"
    )


def qrels_version(frame: pl.DataFrame) -> str:
    """Content hash of the (query_id, doc_id, grade) set: independent of row order and of sources and annotators."""
    lines = (
        frame.select(
            pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), pl.col("grade").cast(pl.Int64)
        )
        .unique()
        .sort("query_id", "doc_id", "grade")
        .select(pl.concat_str(pl.col("query_id"), pl.col("doc_id"), pl.col("grade").cast(pl.String), separator="\t"))
        .to_series()
    )
    digest = hashlib.sha256(lines.str.join("\n").item().encode())
    return "qrels-" + digest.hexdigest()[:16]


def judging_queue(pooled: pl.DataFrame, qrels: pl.DataFrame) -> pl.DataFrame:
    """Pooled (query, doc) pairs with no grade in the frozen qrels: query_id, doc_id, pooled_from."""
    return (
        pooled.join(qrels.select("query_id", "doc_id"), on=["query_id", "doc_id"], how="anti")
        .select("query_id", "doc_id", "pooled_from")
        .sort("query_id", "doc_id")
    )
