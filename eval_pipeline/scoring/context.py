"""Context assembly stage (docs/metrics.md#context-assembly): did the relevant docs retrieval found reach the model?

A chunk logged without a token count makes `context_tokens` null (a partial sum would understate the context and
look like a real number); `chunks_without_tokens` says how many chunks lacked it. An empty context has 0 tokens.
Evidence diversity (docs/evidence_diversity.md): `context_families` and `context_sources` count the independent
document families and source systems of the chunks, `redundant_chunk_share` the chunks beyond the first of each family.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.common import harness_incomplete, harness_reason
from eval_pipeline.scoring.diversity import distinct_families, distinct_sources, doc_families, with_families
from eval_pipeline.scoring.retrieval import frozen_version, rag_inputs, stage_rules
from eval_pipeline.settings import ScoringSettings

# docs/metrics.md#context-assembly: a chunk is on topic when its doc has grade >= 1, whatever the relevance threshold.
ON_TOPIC_GRADE = 1
CONTEXT_COLUMNS = (
    "run_id",
    "trace_id",
    "case_id",
    "attempt",
    "dataset_version",
    "qrels_version",
    "context_recall",
    "context_precision",
    "context_tokens",
    "n_chunks",
    "chunks_without_tokens",
    "relevant_in_context",
    "context_families",
    "context_sources",
    "redundant_chunk_share",
    "status",
    "reason",
    "context_assembly_stage",
    "context_assembly_reason",
)


def score_context(
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    qrels: pl.DataFrame,
    retrieval_scores: pl.DataFrame,
    settings: ScoringSettings | None = None,
    corpus: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """context_scores: one row per rag-lane trace with context_recall, context_precision, context_tokens, evidence
    diversity (families of the `corpus`; without one every doc is its own family) and the stage."""
    settings, grades, lane = rag_inputs(traces, cases, qrels, settings)
    chunks = (
        lane.select("_tid", "case_id", "context", pl.int_ranges(0, pl.col("context").list.len()).alias("_pos"))
        .filter(pl.col("context").list.len() > 0)
        .explode(["context", "_pos"])
        .unnest("context")
        .join(grades, on=["case_id", "doc_id"], how="left")
        .pipe(with_families, doc_families(corpus))
    )
    per_trace = chunks.group_by("_tid").agg(
        n_chunks=pl.len().cast(pl.Int64),
        _on_topic=(pl.col("grade") >= ON_TOPIC_GRADE).fill_null(False).sum(),
        _tokens=pl.col("tokens").sum(),
        chunks_without_tokens=pl.col("tokens").null_count().cast(pl.Int64),
        relevant_in_context=pl.col("doc_id").filter(pl.col("grade") >= settings.relevance_threshold).unique().sort(),
        _docs=pl.col("doc_id").unique(),
        _families=distinct_families(),
        _sources=distinct_sources(),
    )
    n_relevant = grades.group_by("case_id").agg(n_relevant=(pl.col("grade") >= settings.relevance_threshold).sum())
    stages = retrieval_scores.select(
        "run_id", "trace_id", "retrieval_stage", "retrieval_reason", "relevant_in_top_k", "k"
    )
    frame = (
        lane.join(per_trace, on="_tid", how="left")
        .join(n_relevant, on="case_id", how="left")
        .join(stages, on=["run_id", "trace_id"], how="left")
        .with_columns(
            _logged=pl.col("context").is_not_null(),
            n_chunks=pl.when(pl.col("context").is_not_null()).then(pl.col("n_chunks").fill_null(0)),
            chunks_without_tokens=pl.when(pl.col("context").is_not_null()).then(
                pl.col("chunks_without_tokens").fill_null(0)
            ),
            relevant_in_context=pl.when(pl.col("context").is_not_null()).then(
                pl.col("relevant_in_context").fill_null(pl.lit([], dtype=pl.List(pl.String)))
            ),
            _reached=pl.col("relevant_in_top_k").list.set_intersection(
                pl.col("_docs").fill_null(pl.lit([], dtype=pl.List(pl.String)))
            ),
        )
    )
    return (
        frame.with_columns(_metric_columns())
        .with_columns(_stage_columns())
        .with_columns(pl.lit(frozen_version(qrels)).alias("qrels_version"))
        .select(CONTEXT_COLUMNS)
        .sort("run_id", "trace_id")
    )


def _metric_columns() -> list[pl.Expr]:
    """context_recall (null without relevant docs), context_precision and redundant_chunk_share (null without chunks),
    context_tokens (null if a count is missing), context_families, context_sources (null when no doc names one)."""
    usable = pl.col("_logged") & ~harness_incomplete()
    n_rel = pl.col("n_relevant").fill_null(0)
    return [
        pl.when(usable & (n_rel > 0)).then(pl.col("relevant_in_context").list.len() / n_rel).alias("context_recall"),
        pl.when(usable & (pl.col("n_chunks") > 0))
        .then(pl.col("_on_topic") / pl.col("n_chunks"))
        .alias("context_precision"),
        pl.when(usable & (pl.col("chunks_without_tokens") == 0))
        .then(pl.col("_tokens").fill_null(0).cast(pl.Int64))
        .alias("context_tokens"),
        pl.when(usable).then(pl.col("_families").fill_null(0)).alias("context_families"),
        pl.when(usable & (pl.col("_sources") > 0)).then(pl.col("_sources")).alias("context_sources"),
        pl.when(usable & (pl.col("n_chunks") > 0))
        .then((pl.col("n_chunks") - pl.col("_families")) / pl.col("n_chunks"))
        .alias("redundant_chunk_share"),
    ]


def _stage_columns() -> list[pl.Expr]:
    """Row status and the context_assembly stage: it applies only when retrieval passed."""
    harness = harness_incomplete()
    retrieval = pl.col("retrieval_stage")
    reached = pl.col("_reached").list.len() > 0
    not_logged = "context not logged: the trace has no context field"
    stage, stage_reason = stage_rules(
        [
            (harness, "incomplete", harness_reason()),
            (retrieval.is_null(), "incomplete", "no retrieval_scores row for this trace"),
            (
                retrieval == "incomplete",
                "incomplete",
                pl.concat_str(pl.lit("retrieval stage incomplete: "), pl.col("retrieval_reason")),
            ),
            (
                retrieval != "pass",
                "not_applicable",
                pl.concat_str(
                    pl.lit("retrieval stage "),
                    retrieval,
                    pl.lit(": the context stage applies only after a retrieval pass"),
                ),
            ),
            (~pl.col("_logged"), "incomplete", not_logged),
            (reached, "pass", None),
        ],
        otherwise=(
            "fail",
            pl.format(
                "relevant docs in the top {} never reached the context: {}",
                pl.col("k"),
                pl.col("relevant_in_top_k").list.join(", "),
            ),
        ),
    )
    status = pl.when(harness | ~pl.col("_logged")).then(pl.lit("incomplete")).otherwise(pl.lit("scored"))
    row_reason = pl.when(harness).then(harness_reason()).when(~pl.col("_logged")).then(pl.lit(not_logged))
    return [
        stage.alias("context_assembly_stage"),
        stage_reason.alias("context_assembly_reason"),
        status.alias("status"),
        row_reason.alias("reason"),
    ]
