"""Answer correctness (docs/metrics.md#answer): expected strings, exact match and token F1, refusal both ways.

Inline `[doc:…]` markers are removed from the answer first. `contains_all`: every expected string is in the
answer, both lower-cased with white space folded (null when the case lists none). `exact_match` and `token_f1`
use SQuAD's normalization (lower case, ASCII punctuation removed, articles a/an/the removed, white space
folded) against `reference_answer` (null without one); F1 over token multisets, and when either side has no
token, 1.0 if both are empty else 0.0 (as SQuAD v2). `refused`: `answer.refused` is true or the answer holds
a refusal phrase.
Stage: a refusal case passes when the answer refuses; any other case fails when it refuses; otherwise it
passes when `contains_all` holds (if the case lists strings), else when `token_f1` ≥ the threshold (with
only a reference answer); with neither, not_applicable.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.claim_text import refusal_expr
from eval_pipeline.judge.text import normalize_ws, strip_doc_markers
from eval_pipeline.scoring.claims import unanswered
from eval_pipeline.scoring.common import (
    KEY_COLUMNS,
    harness_incomplete,
    harness_reason,
    lane_traces,
)
from eval_pipeline.settings import ScoringSettings

ANSWER_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "contains_all": pl.Boolean,
    "missing_expected": pl.List(pl.String),
    "exact_match": pl.Boolean,
    "token_f1": pl.Float64,
    "refused": pl.Boolean,
    "expect_refusal": pl.Boolean,
    "answer_correct": pl.Boolean,
    "status": pl.String,
    "reason": pl.String,
    "answer_stage": pl.String,
    "answer_reason": pl.String,
}

_PUNCTUATION = r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]"""


def squad_normalize(text: pl.Expr) -> pl.Expr:
    """SQuAD answer normalization: lower case, punctuation and articles removed, white space folded."""
    lowered = text.str.to_lowercase().str.replace_all(_PUNCTUATION, "")
    return normalize_ws(lowered.str.replace_all(r"\b(?:a|an|the)\b", " "))


def _token_counts(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """_row, token, occurrence (1-based per token), so a join on all three intersects token multisets."""
    return (
        frame.select("_row", squad_normalize(pl.col(column)).str.split(" ").alias("token"))
        .explode("token", keep_nulls=False, empty_as_null=False)
        .filter(pl.col("token") != "")
        .with_columns(occurrence=pl.int_range(1, pl.len() + 1).over("_row", "token"))
    )


def _token_f1(frame: pl.DataFrame) -> pl.DataFrame:
    """_row → token_f1 of `_answer` against `reference_answer` (rows with a reference only)."""
    scoped = frame.filter(pl.col("reference_answer").is_not_null()).select("_row", "_answer", "reference_answer")
    predicted, gold = _token_counts(scoped, "_answer"), _token_counts(scoped, "reference_answer")
    common = predicted.join(gold, on=["_row", "token", "occurrence"]).group_by("_row").len("n_common")
    sizes = (
        scoped.select("_row")
        .join(predicted.group_by("_row").len("n_pred"), on="_row", how="left")
        .join(gold.group_by("_row").len("n_gold"), on="_row", how="left")
    )
    counts = sizes.join(common, on="_row", how="left").with_columns(pl.col("n_pred", "n_gold", "n_common").fill_null(0))
    precision = pl.col("n_common") / pl.col("n_pred")
    recall = pl.col("n_common") / pl.col("n_gold")
    return counts.select(
        "_row",
        token_f1=pl.when((pl.col("n_pred") == 0) | (pl.col("n_gold") == 0))
        .then((pl.col("n_pred") == pl.col("n_gold")).cast(pl.Float64))
        .when(pl.col("n_common") == 0)
        .then(0.0)
        .otherwise(2 * precision * recall / (precision + recall)),
    )


def _contains_all(frame: pl.DataFrame) -> pl.DataFrame:
    """_row → contains_all and missing_expected (rows whose case lists expected strings only)."""
    folded = normalize_ws(pl.col("_answer").str.to_lowercase())
    expected = (
        frame.filter(pl.col("expected_answer_contains").list.len() > 0)
        .select("_row", folded.alias("_folded"), pl.col("expected_answer_contains").alias("expected"))
        .explode("expected")
        .with_columns(
            _found=pl.col("_folded").str.contains(normalize_ws(pl.col("expected").str.to_lowercase()), literal=True)
        )
    )
    return expected.group_by("_row").agg(
        contains_all=pl.col("_found").all(),
        missing_expected=pl.col("expected").filter(~pl.col("_found")),
    )


def hazard_unsupported_correct(retrieval_stage: pl.Expr, answer_stage: pl.Expr) -> pl.Expr:
    """The `unsupported_correct` hazard: retrieval failed and the answer stage passed."""
    return (retrieval_stage == "fail") & (answer_stage == "pass")


def score_answers(traces: pl.DataFrame, cases: pl.DataFrame, settings: ScoringSettings) -> pl.DataFrame:
    """`answer_scores`: one row per rag-lane trace (ANSWER_SCHEMA)."""
    rows = (
        lane_traces(traces, cases, "rag")
        .select(
            *KEY_COLUMNS,
            "status",
            "error",
            "has_answer",
            "answer_text",
            "answer_refused",
            "expected_answer_contains",
            "reference_answer",
            "expect_refusal",
        )
        .with_row_index("_row")
        .with_columns(
            _answer=strip_doc_markers(pl.col("answer_text").fill_null("")),
            expected_answer_contains=pl.col("expected_answer_contains").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            expect_refusal=pl.col("expect_refusal").fill_null(False),
        )
    )
    rows = rows.join(_contains_all(rows), on="_row", how="left").join(_token_f1(rows), on="_row", how="left")
    rows = rows.with_columns(
        exact_match=pl.when(pl.col("reference_answer").is_not_null()).then(
            squad_normalize(pl.col("_answer")) == squad_normalize(pl.col("reference_answer"))
        ),
        refused=pl.col("answer_refused").fill_null(False) | refusal_expr(pl.col("_answer"), settings.refusal_phrases),
    )
    has_expected = pl.col("expected_answer_contains").list.len() > 0
    has_reference = pl.col("reference_answer").is_not_null()
    stage = (
        pl.when(harness_incomplete())
        .then(pl.lit("incomplete"))
        .when(unanswered())
        .then(pl.lit("incomplete"))
        .when(pl.col("expect_refusal"))
        .then(pl.when(pl.col("refused")).then(pl.lit("pass")).otherwise(pl.lit("fail")))
        .when(pl.col("refused"))
        .then(pl.lit("fail"))
        .when(has_expected)
        .then(pl.when(pl.col("contains_all")).then(pl.lit("pass")).otherwise(pl.lit("fail")))
        .when(has_reference)
        .then(pl.when(pl.col("token_f1") >= settings.token_f1_threshold).then(pl.lit("pass")).otherwise(pl.lit("fail")))
        .otherwise(pl.lit("not_applicable"))
    )
    reason = (
        pl.when(harness_incomplete())
        .then(harness_reason())
        .when(unanswered())
        .then(pl.lit("trace has no answer"))
        .when(pl.col("expect_refusal"))
        .then(pl.when(pl.col("refused")).then(None).otherwise(pl.lit("expected a refusal; the answer did not refuse")))
        .when(pl.col("refused"))
        .then(pl.lit("the answer refused"))
        .when(has_expected)
        .then(
            pl.when(pl.col("contains_all"))
            .then(None)
            .otherwise(pl.format("answer lacks expected: {}", pl.col("missing_expected").list.join(" | ")))
        )
        .when(has_reference)
        .then(
            pl.when(pl.col("token_f1") >= settings.token_f1_threshold)
            .then(None)
            .otherwise(
                pl.format(
                    "token_f1 {} < threshold {}", pl.col("token_f1").round(4), pl.lit(settings.token_f1_threshold)
                )
            )
        )
        .otherwise(pl.lit("the case has no expected strings, reference answer or refusal expectation"))
    )
    return (
        rows.with_columns(answer_stage=stage, answer_reason=reason)
        .with_columns(
            # An incomplete trace has no answer to measure: its metrics are null, never a quality zero.
            pl.when(pl.col("answer_stage") != "incomplete").then(pl.col(c)).alias(c)
            for c in ("contains_all", "missing_expected", "exact_match", "token_f1", "refused")
        )
        .with_columns(
            answer_correct=pl.when(pl.col("answer_stage").is_in(["pass", "fail"])).then(
                pl.col("answer_stage") == "pass"
            ),
            status=pl.col("answer_stage").replace({"pass": "scored", "fail": "scored"}),
            reason=pl.when(~pl.col("answer_stage").is_in(["pass", "fail"])).then(pl.col("answer_reason")),
        )
        .select(list(ANSWER_SCHEMA))
        .cast(ANSWER_SCHEMA)
        .sort("run_id", "trace_id")
    )
