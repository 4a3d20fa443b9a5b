"""Repeated runs (docs/metrics.md#reliability): pass@1, τ-bench's pass^k, flaky cases and their quarantine.

For a case with n complete attempts and c successes: pass_at_1 = c/n and pass_hat_k = C(c,k)/C(n,k), the
chance that k attempts drawn without replacement all succeed. An attempt whose success is null (its lane
was incomplete) is left out of n: `n_attempts` counts every attempt, `n_complete` is n, `n_incomplete` the rest.
"""

from __future__ import annotations

from math import comb
from typing import Any

import polars as pl

KEYS = ("run_id", "case_id")


def pass_hat_column(k: int) -> str:
    """Name of the pass^k column."""
    return f"pass_hat_{k}"


def reliability(success: pl.DataFrame) -> pl.DataFrame:
    """Per (run, case): n_attempts, n_complete, n_incomplete, n_success, pass_at_1, pass_hat_1..N, flaky."""
    counts = (
        success.group_by(*KEYS)
        .agg(
            n_attempts=pl.len().cast(pl.Int64),
            n_complete=pl.col("success").is_not_null().sum().cast(pl.Int64),
            n_incomplete=pl.col("success").is_null().sum().cast(pl.Int64),
            n_success=pl.col("success").fill_null(False).sum().cast(pl.Int64),
        )
        .sort(*KEYS)
    )
    # pass_hat_1 always exists, even when every attempt of the run was incomplete
    largest = max(int(counts["n_complete"].max() or 0), 1)
    pairs = counts.select("n_complete", "n_success").unique()
    # C(c,k)/C(n,k) exactly for each distinct (n, c); there are few, so Python's exact integers cost nothing
    table = pl.DataFrame(
        {
            "n_complete": pairs["n_complete"],
            "n_success": pairs["n_success"],
            **{
                pass_hat_column(k): pl.Series(
                    [comb(c, k) / comb(n, k) if k <= n else None for n, c in pairs.iter_rows()], dtype=pl.Float64
                )
                for k in range(1, largest + 1)
            },
        }
    )
    n = pl.col("n_complete")
    return (
        counts.join(table, on=["n_complete", "n_success"], how="left")
        .with_columns(
            pass_at_1=pl.when(n > 0).then(pl.col("n_success") / n),
            flaky=(pl.col("n_success") > 0) & (pl.col("n_success") < n),
        )
        .select(
            *KEYS,
            "n_attempts",
            "n_complete",
            "n_incomplete",
            "n_success",
            "pass_at_1",
            *(pass_hat_column(k) for k in range(1, largest + 1)),
            "flaky",
        )
        .sort(*KEYS)
    )


def suite_reliability(reliability_frame: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per run: means over cases of pass_at_1 and every pass_hat_k (over the cases with n_complete ≥ k), and case
    counts."""
    hats = [c for c in reliability_frame.columns if c.startswith("pass_hat_")]
    summary: dict[str, dict[str, Any]] = {}
    for run_id, frame in reliability_frame.group_by("run_id", maintain_order=True):
        scored = frame.filter(pl.col("n_complete") > 0)
        summary[run_id[0]] = {
            "n_cases": frame.height,
            "n_cases_scored": scored.height,
            "n_flaky": int(frame["flaky"].sum()),
            "n_incomplete_attempts": int(frame["n_incomplete"].sum()),
            "pass_at_1": scored["pass_at_1"].mean(),
            **{hat: scored[hat].mean() for hat in hats},
        }
    return summary


def quarantine(reliability_frame: pl.DataFrame, success: pl.DataFrame) -> pl.DataFrame:
    """Flaky cases with the trace ids that flipped: the attempts on the minority side (every attempt on a tie)."""
    flaky = reliability_frame.filter(pl.col("flaky")).select(*KEYS, "n_complete", "n_success")
    attempts = (
        success.filter(pl.col("success").is_not_null())
        .join(flaky.select(*KEYS), on=list(KEYS))
        .sort(*KEYS, "attempt", "trace_id")
    )
    sides = attempts.group_by(*KEYS, maintain_order=True).agg(
        passed_trace_ids=pl.col("trace_id").filter(pl.col("success")),
        failed_trace_ids=pl.col("trace_id").filter(~pl.col("success")),
        all_trace_ids=pl.col("trace_id"),
    )
    passes, fails = pl.col("passed_trace_ids").list.len(), pl.col("failed_trace_ids").list.len()
    return (
        flaky.join(sides, on=list(KEYS), how="left")
        .with_columns(
            flipped_trace_ids=pl.when(passes < fails)
            .then(pl.col("passed_trace_ids"))
            .when(fails < passes)
            .then(pl.col("failed_trace_ids"))
            .otherwise(pl.col("all_trace_ids")),
            reason=pl.format("flaky: {} of {} complete attempts succeeded", pl.col("n_success"), pl.col("n_complete")),
        )
        .select(*KEYS, "reason", "flipped_trace_ids", "passed_trace_ids", "failed_trace_ids", "n_complete", "n_success")
        .sort(*KEYS)
    )
