"""The gate_results table: its schema, the statuses and unit of a row, and the verdict of a whole table."""

from __future__ import annotations

import polars as pl

from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.scoring.slices import segment_key

PASS, FAIL, INCOMPLETE, INCOMPARABLE, NOT_GATING = "pass", "fail", "incomplete", "incomparable", "not_gating"
# a segmented gate whose slice holds fewer complete cases than min_cases: undecided, never a pass (docs/slices.md)
INSUFFICIENT = "insufficient"
NOT_APPLICABLE = "not_applicable"
EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED = 0, 1, 2
DEFAULT_OWNERS = {"rag": "retrieval and generation", "agent": "agent", "all": "release"}
COUNT_METRICS = ("policy_violations", "no_new_failures", "evidence_ignored")
# Rate metrics are fractions in [0, 1]; their delta and threshold are in points (value × 100).
UNIT_FRACTION, UNIT_CASES = "fraction", "cases"

GATE_RESULTS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "gate": pl.String,
    "lane": pl.String,
    "metric": pl.String,
    "baseline_run_id": pl.String,
    "baseline_value": pl.Float64,
    "candidate_value": pl.Float64,
    "delta": pl.Float64,
    "threshold": pl.Float64,
    "status": pl.String,
    "blocking_cases": pl.List(pl.String),
    "owner": pl.String,
    "reason": pl.String,
    "n_cases": pl.Int64,
    "excluded_cases": pl.List(pl.String),
    "beside": pl.String,
    "unit": pl.String,
    "blocking_details": pl.List(pl.String),
    "segment": pl.String,
    "min_cases": pl.Int64,
}


def unit_of(metric: str) -> str:
    """`cases` for a count gate, `fraction` for a rate gate (its delta and threshold in points)."""
    return UNIT_CASES if metric in COUNT_METRICS else UNIT_FRACTION


def undecided_gates(
    policy: GatePolicy, candidate_run_id: str, baseline_run_id: str | None, status: str, reason: str
) -> pl.DataFrame:
    """gate_results where no comparison could run (no baseline, the run is its own baseline, tables missing)."""
    rows = [
        {
            "run_id": candidate_run_id,
            "gate": g.name,
            "lane": g.lane,
            "metric": g.metric,
            "baseline_run_id": baseline_run_id,
            "status": status,
            "blocking_cases": [],
            "owner": g.owner or DEFAULT_OWNERS[g.lane],
            "reason": reason,
            "excluded_cases": [],
            "unit": unit_of(g.metric),
            "blocking_details": [],
            "segment": segment_key(g.segment),
            "min_cases": (g.min_cases or policy.min_cases) if g.segment else None,
        }
        for g in policy.gates
    ]
    return pl.DataFrame(rows, schema=GATE_RESULTS_SCHEMA)


def exit_code(gate_results: pl.DataFrame) -> int:
    """0 when every gate passes (not_gating included), 1 when one fails, 2 when one is incomplete, incomparable or
    insufficient."""
    statuses = set(gate_results["status"].to_list())
    if FAIL in statuses:
        return EXIT_FAIL
    if statuses & {INCOMPLETE, INCOMPARABLE, INSUFFICIENT, "not_applicable"} or not statuses:
        return EXIT_UNDECIDED
    return EXIT_PASS


def overall_status(gate_results: pl.DataFrame) -> str:
    """pass, fail or undecided for the whole gate table."""
    return {EXIT_PASS: PASS, EXIT_FAIL: FAIL, EXIT_UNDECIDED: INCOMPLETE}[exit_code(gate_results)]
