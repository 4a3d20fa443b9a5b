"""Claim extraction: each answer split into factual claims, with the inline `[doc:ID]` citations of each.

What counts as a claim is defined with the splitting itself, in `eval_pipeline.judge.claim_text`.
Traces whose harness status is error/timeout yield no claims: every lane of theirs is incomplete anyway.
`judge_claims` then gives each claim the judge's verdict against the context its answer was given. A trace that
logged no context (null or an empty list) is not judged: what the model saw is unknown, so its claims are
`incomplete` with reason `no_context_logged` (docs/metrics.md#grounding), never NOT_IN_EVIDENCE, and cost no judge call.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, RESULT_SCHEMA, Judge
from eval_pipeline.judge.claim_text import claims_of_texts
from eval_pipeline.scoring.common import KEY_COLUMNS, harness_incomplete
from eval_pipeline.settings import DEFAULT_REFUSAL_PHRASES

CLAIMS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "claim_index": pl.Int64,
    "claim": pl.String,
    "inline_cited_doc_ids": pl.List(pl.String),
}

JUDGED_COLUMNS: tuple[str, ...] = tuple(c for c in RESULT_SCHEMA if c != "request_key")

NO_CONTEXT_LOGGED = "no_context_logged"


def no_context_logged() -> pl.Expr:
    """True for a trace whose harness logged no context (null or an empty list)."""
    return pl.col("context").list.len().fill_null(0) == 0


def unanswered() -> pl.Expr:
    """True for a trace with no answer to score: none at all, or no text and not marked refused."""
    return ~pl.col("has_answer").fill_null(False) | (
        pl.col("answer_text").is_null() & ~pl.col("answer_refused").fill_null(False)
    )


def extract_claims(traces: pl.DataFrame, refusal_phrases: Sequence[str] = DEFAULT_REFUSAL_PHRASES) -> pl.DataFrame:
    """The `claims` rows of every answered trace (CLAIMS_SCHEMA), one per factual claim of `answer_text`."""
    answered = traces.filter(~harness_incomplete() & pl.col("answer_text").is_not_null())
    claims = claims_of_texts(answered, KEY_COLUMNS, "answer_text", refusal_phrases)
    return claims.cast(CLAIMS_SCHEMA).select(list(CLAIMS_SCHEMA))


def context_evidence(traces: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, evidence: the context chunks each answer was given, as judge evidence ({doc_id, text})."""
    chunks = (
        traces.select("run_id", "trace_id", "context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(
            "run_id",
            "trace_id",
            pl.struct(pl.col("context").struct.field("doc_id"), pl.col("context").struct.field("text")).alias("chunk"),
        )
    )
    evidence = chunks.group_by("run_id", "trace_id", maintain_order=True).agg(pl.col("chunk").alias("evidence"))
    return evidence.with_columns(pl.col("evidence").cast(EVIDENCE))


def claim_key(*columns: str) -> pl.Expr:
    """A request key joining key columns with a unit separator (never part of an id)."""
    return pl.concat_str([pl.col(c).cast(pl.String).fill_null("") for c in columns], separator="\x1f")


def grounding_requests(claims: pl.DataFrame, traces: pl.DataFrame) -> pl.DataFrame:
    """Judge requests (REQUEST_SCHEMA) for claims against their trace's context; claims of a trace without context get
    none."""
    return claims.join(context_evidence(traces), on=["run_id", "trace_id"], how="inner", maintain_order="left").select(
        claim_key("run_id", "trace_id", "claim_index").alias("request_key"),
        "claim",
        "evidence",
        claim_key("run_id", "trace_id").alias("evidence_key"),
    )


def judge_claims(claims: pl.DataFrame, traces: pl.DataFrame, judge: Judge) -> pl.DataFrame:
    """The claims with the judge's verdict against their trace's context (JUDGED_COLUMNS added; module docstring)."""
    requests = grounding_requests(claims, traces)
    results = judge.judge_claims(requests).with_columns(_asked=pl.lit(True))
    unasked = pl.col("_asked").is_null()
    return (
        claims.with_columns(claim_key("run_id", "trace_id", "claim_index").alias("request_key"))
        .join(results, on="request_key", how="left", maintain_order="left")
        .with_columns(
            status=pl.when(unasked).then(pl.lit("incomplete")).otherwise(pl.col("status")),
            reason=pl.when(unasked).then(pl.lit(NO_CONTEXT_LOGGED)).otherwise(pl.col("reason")),
            judge_version=pl.when(unasked).then(pl.lit(judge.version, pl.String)).otherwise(pl.col("judge_version")),
            judge_model=pl.when(unasked).then(pl.lit(judge.model, pl.String)).otherwise(pl.col("judge_model")),
        )
        .select(*claims.columns, *JUDGED_COLUMNS)
    )
