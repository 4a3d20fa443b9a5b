"""Grounding: each claim judged against the context the answer was given, then a grounding rate per trace.

`grounding_rate` = supported claims / claims; 1.0 for an answer without claims; null when the judge could not
finish any claim of the trace (an incomplete judgment is never counted as unsupported) or the trace is
incomplete. An answered trace that logged no context is incomplete with reason `no_context_logged`
(docs/metrics.md#grounding): there is nothing to ground against, which says nothing about the answer. The stage
passes when the rate reaches
`settings.grounding_threshold` (1.0: every claim supported). `n_triangulated`: supported claims that two or more
independent document families support (docs/evidence_diversity.md); null when the claims carry no family counts or a
supported claim's count is unknown.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.claims import NO_CONTEXT_LOGGED, no_context_logged, unanswered
from eval_pipeline.scoring.common import (
    KEY_COLUMNS,
    harness_incomplete,
    harness_reason,
    lane_traces,
)
from eval_pipeline.settings import ScoringSettings

GROUNDING_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "n_claims": pl.Int64,
    "n_supported": pl.Int64,
    "n_triangulated": pl.Int64,
    "n_contradicted": pl.Int64,
    "n_not_in_evidence": pl.Int64,
    "n_incomplete": pl.Int64,
    "grounding_rate": pl.Float64,
    "judge_version": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "grounding_stage": pl.String,
    "grounding_reason": pl.String,
}


def score_grounding(
    judged_claims: pl.DataFrame,
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    settings: ScoringSettings,
    judge_version: str | None = None,
) -> pl.DataFrame:
    """`grounding_scores`: one row per rag-lane trace (GROUNDING_SCHEMA), by trace id; judge_version fills traces
    without claims."""
    # In claim order, so the first unsupported claim named in a reason is the same in every run.
    counts = (
        judged_claims.sort("run_id", "trace_id", "claim_index")
        .group_by("run_id", "trace_id")
        .agg(
            n_claims=pl.len(),
            n_supported=(pl.col("verdict") == "SUPPORTED").sum(),
            n_contradicted=(pl.col("verdict") == "CONTRADICTED").sum(),
            n_not_in_evidence=(pl.col("verdict") == "NOT_IN_EVIDENCE").sum(),
            n_incomplete=(pl.col("status") != "ok").sum(),
            judge_version=pl.col("judge_version").drop_nulls().first(),
            _incomplete_reason=pl.col("reason").filter(pl.col("status") != "ok").first(),
            _first_unsupported=pl.format("claim {} {}: {}", "claim_index", "verdict", "claim")
            .filter(pl.col("verdict") != "SUPPORTED")
            .first(),
            _triangulated=_triangulated_count(judged_claims),
        )
    )
    versions = (
        judged_claims["judge_version"].drop_nulls().unique().to_list()
        if "judge_version" in judged_claims.columns
        else []
    )
    fallback_version = judge_version if judge_version is not None else (versions[0] if len(versions) == 1 else None)
    rows = (
        lane_traces(traces, cases, "rag")
        .select(
            *KEY_COLUMNS,
            "status",
            "error",
            "has_answer",
            "answer_text",
            "answer_refused",
            no_context_logged().alias("_no_context"),
        )
        .join(counts, on=["run_id", "trace_id"], how="left")
        .with_columns(
            pl.col("n_claims", "n_supported", "n_contradicted", "n_not_in_evidence", "n_incomplete")
            .fill_null(0)
            .cast(pl.Int64),
            pl.col("judge_version").fill_null(pl.lit(fallback_version, pl.String)),
            # a trace without claims has none triangulated
            n_triangulated=pl.when(pl.col("n_claims").fill_null(0) == 0)
            .then(pl.lit(0, pl.Int64))
            .otherwise(pl.col("_triangulated")),
        )
    )
    rate = pl.when(pl.col("n_claims") == 0).then(1.0).otherwise(pl.col("n_supported") / pl.col("n_claims"))
    stage = (
        pl.when(harness_incomplete())
        .then(pl.lit("incomplete"))
        .when(unanswered())
        .then(pl.lit("incomplete"))
        .when(pl.col("_no_context"))
        .then(pl.lit("incomplete"))
        .when(pl.col("n_incomplete") > 0)
        .then(pl.lit("incomplete"))
        .when(rate >= settings.grounding_threshold)
        .then(pl.lit("pass"))
        .otherwise(pl.lit("fail"))
    )
    reason = (
        pl.when(harness_incomplete())
        .then(harness_reason())
        .when(unanswered())
        .then(pl.lit("trace has no answer"))
        .when(pl.col("_no_context"))
        .then(pl.lit(NO_CONTEXT_LOGGED))
        .when(pl.col("n_incomplete") > 0)
        .then(pl.format("judge could not finish {} of {} claims: {}", "n_incomplete", "n_claims", "_incomplete_reason"))
        .when(rate >= settings.grounding_threshold)
        .then(None)
        .otherwise(
            pl.format(
                "grounding_rate {} < threshold {}: {} contradicted, {} not in evidence (first: {})",
                rate.round(4),
                pl.lit(settings.grounding_threshold),
                "n_contradicted",
                "n_not_in_evidence",
                "_first_unsupported",
            )
        )
    )
    return (
        rows.with_columns(grounding_stage=stage, grounding_reason=reason)
        .with_columns(
            grounding_rate=pl.when(pl.col("grounding_stage") == "incomplete").then(None).otherwise(rate),
            status=pl.when(pl.col("grounding_stage") == "incomplete")
            .then(pl.lit("incomplete"))
            .otherwise(pl.lit("scored")),
            reason=pl.when(pl.col("grounding_stage") == "incomplete").then(pl.col("grounding_reason")),
        )
        .select(list(GROUNDING_SCHEMA))
        .cast(GROUNDING_SCHEMA)
        .sort("run_id", "trace_id")
    )


def _triangulated_count(judged_claims: pl.DataFrame) -> pl.Expr:
    """Per trace: supported claims with triangulated true; null when a supported claim's count is unknown."""
    if "triangulated" not in judged_claims.columns:
        return pl.lit(None, pl.Int64)
    supported = pl.col("verdict") == "SUPPORTED"
    return pl.when(pl.col("triangulated").filter(supported).null_count() == 0).then(
        pl.col("triangulated").filter(supported).sum().cast(pl.Int64)
    )
