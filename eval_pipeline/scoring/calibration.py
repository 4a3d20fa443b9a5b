"""Judge calibration against human grounding labels, and the review queue for a judge that may not gate.

Claim-level labels match judged claims by trace_id and claim text (inline markers removed, lower case, white
space folded, trailing punctuation dropped); the first judged claim with that text wins, and a label repeated
for the same claim or answer counts once (labels that disagree: the least supportive one, CONTRADICTED before
NOT_IN_EVIDENCE before SUPPORTED, not grounded before grounded, whatever order the files came in).
Answer-level labels compare `answer_grounded` with the judge's reading of the answer: grounded when every claim
is SUPPORTED (an answer without claims is grounded, as its grounding stage passes, whichever way it arrives:
n_claims 0 in grounding_scores or in an answer verdict; one with an incomplete claim is left out and counted in
n_judge_incomplete). Statistics treat the human label as the truth.
κ is Cohen's kappa (null when undefined: both sides used one and the same category); its 95% interval is the
percentile bootstrap (numpy default_rng(seed), resampling label pairs with replacement, undefined replicates
skipped, linear-interpolated 2.5th and 97.5th percentiles); `calibrate` hands it the pairs ordered by trace_id
and matched claim text, so the same labels and verdicts give the same interval whatever order they arrive in.
Self-consistency: a judge that is not deterministic is asked again, without caches, on a seeded sample of its
verdicts; the share that changed is its flip rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.judge.base import VERDICTS, Judge
from eval_pipeline.judge.text import normalize_ws, strip_doc_markers
from eval_pipeline.scoring.agreement import balanced_accuracy, bootstrap_kappa_ci, cohen_kappa, confusion_matrix
from eval_pipeline.settings import ScoringSettings

CALIBRATION_SCHEMA: dict[str, pl.DataType] = {
    "judge_version": pl.String,
    "level": pl.String,
    "n": pl.Int64,
    "agreement": pl.Float64,
    "cohen_kappa": pl.Float64,
    "kappa_ci_low": pl.Float64,
    "kappa_ci_high": pl.Float64,
    "balanced_accuracy": pl.Float64,
    "confusion": pl.String,
    "may_gate": pl.Boolean,
    "n_unmatched_labels": pl.Int64,
    "n_judge_incomplete": pl.Int64,
    "min_kappa": pl.Float64,
    "min_n": pl.Int64,
    "self_consistency_n": pl.Int64,
    "self_consistency_flip_rate": pl.Float64,
    "self_consistency_note": pl.String,
}

REVIEW_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "stage": pl.String,
    "why": pl.String,
    "judge_version": pl.String,
    "grounding_rate": pl.Float64,
    "detail": pl.String,
}

ANSWER_LABELS = ("grounded", "not_grounded")


def match_text(claim: pl.Expr) -> pl.Expr:
    """The form claims are matched in: markers removed, lower case, white space folded, end punctuation dropped."""
    return normalize_ws(strip_doc_markers(claim).str.to_lowercase()).str.replace(r"[\s.!?;:,]+$", "")


def _statistics(
    judge_version: str,
    level: str,
    human: list[Any],
    judged: list[Any],
    labels: Sequence[Any],
    settings: ScoringSettings,
    n_unmatched: int,
    n_incomplete: int,
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    kappa = cohen_kappa(human, judged)
    low, high = bootstrap_kappa_ci(human, judged, n_boot=n_boot, seed=seed)
    n = len(human)
    return {
        "judge_version": judge_version,
        "level": level,
        "n": n,
        "agreement": sum(h == j for h, j in zip(human, judged, strict=True)) / n if n else None,
        "cohen_kappa": kappa,
        "kappa_ci_low": low,
        "kappa_ci_high": high,
        "balanced_accuracy": balanced_accuracy(human, judged),
        "confusion": canonical_json(confusion_matrix(human, judged, labels)),
        "may_gate": kappa is not None and kappa >= settings.min_kappa and n >= settings.min_n,
        "n_unmatched_labels": n_unmatched,
        "n_judge_incomplete": n_incomplete,
        "min_kappa": settings.min_kappa,
        "min_n": settings.min_n,
        "self_consistency_n": None,
        "self_consistency_flip_rate": None,
        "self_consistency_note": "not measured",
    }


def _answer_labels(grounded: pl.Series) -> list[str]:
    return [ANSWER_LABELS[0] if value else ANSWER_LABELS[1] for value in grounded.to_list()]


def _without_claims() -> pl.Expr:
    return pl.col("n_claims").fill_null(-1) == 0


def given_answers(judged_answers: pl.DataFrame) -> pl.DataFrame:
    """Answer verdicts given as such, with an answer that states no claim (n_claims 0) grounded at support 1.0.

    That is how the pipeline reads it (grounding_rate 1.0, the stage passes), whatever a tool's stricter `grounded`
    said, so `calibrate` and judge_calibration pair the same labels with the same verdicts.
    """
    if "n_claims" not in judged_answers.columns:
        return judged_answers
    return judged_answers.with_columns(
        judge_grounded=pl.when(_without_claims()).then(True).otherwise(pl.col("judge_grounded")),
        score=pl.when(_without_claims()).then(1.0).otherwise(pl.col("score")),
    )


def _judge_answers(
    judged_claims: pl.DataFrame, grounding_scores: pl.DataFrame | None, judged_answers: pl.DataFrame | None = None
) -> pl.DataFrame:
    """judge_version, trace_id, judge_grounded (null when a claim is incomplete) for every judged answer.

    `judged_answers` (answer-level verdicts given as such) win over what the claims say.
    """
    from_claims = judged_claims.group_by("judge_version", "trace_id").agg(
        judge_grounded=pl.when((pl.col("status") != "ok").any())
        .then(None)
        .otherwise((pl.col("verdict") == "SUPPORTED").all())
    )
    if judged_answers is not None and judged_answers.height:
        given = (
            given_answers(judged_answers)
            .select("judge_version", "trace_id", "judge_grounded")
            .unique(["judge_version", "trace_id"], keep="first")
        )
        from_claims = pl.concat([given, from_claims.join(given, on=["judge_version", "trace_id"], how="anti")])
    if grounding_scores is None:
        return from_claims
    without_claims = grounding_scores.filter(
        (pl.col("n_claims") == 0) & (pl.col("grounding_stage") != "incomplete") & pl.col("judge_version").is_not_null()
    ).select("judge_version", "trace_id", pl.lit(True).alias("judge_grounded"))
    return pl.concat([from_claims, without_claims.join(from_claims, on=["judge_version", "trace_id"], how="anti")])


def _labels_by_level(labels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(claim labels with _match, answer labels): one label per claim and per answer, independent of input order."""
    claim_labels = (
        labels.filter(pl.col("claim").is_not_null() & pl.col("verdict").is_not_null())
        .with_columns(_match=match_text(pl.col("claim")))
        # Verdict names sort least supportive first, and false before true: a disagreement resolves the same way in
        # every input order.
        .sort("trace_id", "_match", "verdict")
        .unique(["trace_id", "_match"], keep="first", maintain_order=True)
    )
    answer_labels = (
        labels.filter(pl.col("answer_grounded").is_not_null())
        .sort("trace_id", "answer_grounded")
        .unique("trace_id", keep="first", maintain_order=True)
    )
    return claim_labels, answer_labels


def calibrate(
    judged_claims: pl.DataFrame,
    labels: pl.DataFrame,
    settings: ScoringSettings,
    grounding_scores: pl.DataFrame | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    judged_answers: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """`judge_calibration`: one row per (judge_version, level) (CALIBRATION_SCHEMA).

    A claim row for every judge version in `judged_claims` that has claims; an answer row where answer-level labels
    exist. `grounding_scores` (optional) lets answers without claims count as judged grounded; `judged_answers`
    (judge_version, trace_id, judge_grounded[, n_claims]) are answer-level verdicts given directly, read by
    `given_answers`.
    """
    claim_labels, answer_labels = _labels_by_level(labels)
    judged = (
        judged_claims.with_columns(_match=match_text(pl.col("claim")))
        .sort("claim_index")
        .unique(["judge_version", "trace_id", "_match"], keep="first", maintain_order=True)
    )
    answers = _judge_answers(judged_claims, grounding_scores, judged_answers)
    rows = []
    claim_versions = set(judged_claims["judge_version"].drop_nulls().to_list())
    versions = claim_versions | (
        set(judged_answers["judge_version"].drop_nulls().to_list()) if judged_answers is not None else set()
    )
    for version in sorted(versions):
        matched = claim_labels.join(
            judged.filter(pl.col("judge_version") == version), on=["trace_id", "_match"], suffix="_judge"
        )
        # A total order before the seeded bootstrap: a join's row order is not part of its result.
        complete = matched.filter(pl.col("status") == "ok").sort("trace_id", "_match")
        if version in claim_versions or claim_labels.height:
            rows.append(
                _statistics(
                    version,
                    "claim",
                    complete["verdict"].to_list(),
                    complete["verdict_judge"].to_list(),
                    VERDICTS,
                    settings,
                    claim_labels.height - matched.height,
                    matched.height - complete.height,
                    n_boot,
                    seed,
                )
            )
        if answer_labels.is_empty():
            continue
        labelled_answers = answer_labels.join(answers.filter(pl.col("judge_version") == version), on="trace_id")
        done = labelled_answers.filter(pl.col("judge_grounded").is_not_null()).sort("trace_id")
        rows.append(
            _statistics(
                version,
                "answer",
                _answer_labels(done["answer_grounded"]),
                _answer_labels(done["judge_grounded"]),
                ANSWER_LABELS,
                settings,
                answer_labels.height - labelled_answers.height,
                labelled_answers.height - done.height,
                n_boot,
                seed,
            )
        )
    return pl.DataFrame(rows, schema=CALIBRATION_SCHEMA)


DETERMINISTIC_NOTE = (
    "deterministic judge: the same claim and evidence always get the same verdict (flip rate 0 by construction)"
)


def self_consistency(
    judge: Judge, judged_claims: pl.DataFrame, requests: pl.DataFrame, sample: int = 50, seed: int = 0
) -> dict[str, Any]:
    """Flip rate of a judge asked again, without its caches, on a seeded sample of its completed verdicts.

    `judged_claims` carry request_key, verdict and status; `requests` are their judge requests (REQUEST_SCHEMA).
    A deterministic judge is not asked: its flip rate is 0 by construction, and the note says so.
    """
    if judge.deterministic:
        return {"self_consistency_n": 0, "self_consistency_flip_rate": 0.0, "self_consistency_note": DETERMINISTIC_NOTE}
    done = judged_claims.filter(pl.col("status") == "ok").select("request_key", "verdict").sort("request_key")
    if done.is_empty() or sample < 1:
        return {
            "self_consistency_n": 0,
            "self_consistency_flip_rate": None,
            "self_consistency_note": "no completed verdict to ask again",
        }
    picked = done.sample(n=min(sample, done.height), seed=seed)
    again = judge.uncached().judge_claims(requests.join(picked.select("request_key"), on="request_key"))
    both = picked.join(
        again.filter(pl.col("status") == "ok").select("request_key", pl.col("verdict").alias("again")), on="request_key"
    )
    if both.is_empty():
        return {
            "self_consistency_n": 0,
            "self_consistency_flip_rate": None,
            "self_consistency_note": f"{picked.height} claims asked again, none completed",
        }
    flips = both.filter(pl.col("verdict") != pl.col("again")).height
    return {
        "self_consistency_n": both.height,
        "self_consistency_flip_rate": flips / both.height,
        "self_consistency_note": (
            f"{flips} of {both.height} claims (seeded sample, seed {seed}) changed verdict when asked again"
        ),
    }


def with_self_consistency(calibration: pl.DataFrame, judge_version: str, consistency: dict[str, Any]) -> pl.DataFrame:
    """The calibration rows of `judge_version` with the self-consistency columns set."""
    mine = pl.col("judge_version") == judge_version
    return calibration.with_columns(
        *(
            pl.when(mine).then(pl.lit(value, dtype=CALIBRATION_SCHEMA[name])).otherwise(pl.col(name)).alias(name)
            for name, value in consistency.items()
        )
    )


def labelled_scores(
    judged_claims: pl.DataFrame, judged_answers: pl.DataFrame, labels: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """(support scores, human grounded) of every labelled claim and answer that has a score, for fitting thresholds.

    A claim label matches a claim as in `calibrate` (truth: verdict SUPPORTED); an answer label takes the answer's own
    score when given, else its lowest claim score (truth: answer_grounded). Incomplete verdicts are left out.
    """
    claim_labels, answer_labels = _labels_by_level(labels)
    complete = judged_claims.filter(pl.col("status") == "ok")
    claims = complete.with_columns(_match=match_text(pl.col("claim"))).unique(
        ["trace_id", "_match"], keep="first", maintain_order=True
    )
    # Sorted by key, so the bootstrap resamples the same rows in every run.
    by_claim = (
        claim_labels.join(claims.select("trace_id", "_match", "score"), on=["trace_id", "_match"])
        .sort("trace_id", "_match")
        .select("score", (pl.col("verdict") == "SUPPORTED").alias("truth"))
    )
    answer_scores = (
        given_answers(judged_answers)
        .filter(pl.col("score").is_not_null())
        .select("trace_id", "score")
        .unique("trace_id", keep="first")
    )
    incomplete = judged_claims.filter(pl.col("status") != "ok").select("trace_id").unique()
    from_claims = (
        complete.join(incomplete, on="trace_id", how="anti")
        .group_by("trace_id")
        .agg(pl.col("score").min(), _null=pl.col("score").is_null().any())
    )
    if from_claims["_null"].any():
        raise ValueError("claim verdicts without a score: only the local and model judges' verdicts can be fitted")
    scored = pl.concat(
        [answer_scores, from_claims.select("trace_id", "score").join(answer_scores, on="trace_id", how="anti")]
    )
    by_answer = (
        answer_labels.join(scored, on="trace_id")
        .sort("trace_id")
        .select("score", pl.col("answer_grounded").alias("truth"))
    )
    both = pl.concat([by_claim, by_answer])
    if both["score"].null_count():
        raise ValueError("verdicts without a score: only the local and model judges' verdicts can be fitted")
    if both.is_empty():
        raise ValueError("no label matches a scored verdict (labels match verdicts by id and claim text)")
    return both["score"].to_numpy(), both["truth"].to_numpy()


def judge_may_gate(calibration: pl.DataFrame, judge_version: str, level: str = "claim") -> bool:
    """Whether the calibration lets this judge version gate (false when it has no calibration row)."""
    row = calibration.filter((pl.col("judge_version") == judge_version) & (pl.col("level") == level))
    return bool(row.height and row["may_gate"][0])


def review_queue(
    grounding_scores: pl.DataFrame, judged_claims: pl.DataFrame, calibration: pl.DataFrame, level: str = "claim"
) -> pl.DataFrame:
    """Grounding failures judged by a version that may not gate (REVIEW_SCHEMA), with the claims to check."""
    gating = calibration.filter(pl.col("level") == level).select(
        "judge_version", "may_gate", "cohen_kappa", "n", "min_kappa", "min_n"
    )
    failures = grounding_scores.filter(pl.col("grounding_stage") == "fail").join(gating, on="judge_version", how="left")
    queued = failures.filter(~pl.col("may_gate").fill_null(False))
    unsupported = (
        judged_claims.filter(pl.col("verdict") != "SUPPORTED")
        .sort("claim_index")
        .group_by("run_id", "trace_id")
        .agg(detail=pl.format("claim {} {}: {}", "claim_index", "verdict", "claim").str.join(" | "))
    )
    why = (
        pl.when(pl.col("n").is_null())
        .then(
            pl.format(
                "grounding failed (rate {}); judge {} has no calibration against human labels",
                pl.col("grounding_rate").round(4),
                pl.col("judge_version").fill_null("(unknown)"),
            )
        )
        .otherwise(
            pl.format(
                "grounding failed (rate {}); judge {} may not gate: kappa {} (needs {}), n {} (needs {})",
                pl.col("grounding_rate").round(4),
                "judge_version",
                pl.col("cohen_kappa").round(4).cast(pl.String).fill_null("undefined"),
                "min_kappa",
                "n",
                "min_n",
            )
        )
    )
    return (
        queued.join(unsupported, on=["run_id", "trace_id"], how="left")
        .with_columns(stage=pl.lit("grounding"), why=why)
        .select(list(REVIEW_SCHEMA))
        .cast(REVIEW_SCHEMA)
        .sort("run_id", "trace_id")
    )
