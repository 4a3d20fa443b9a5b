"""Release gates (docs/gates.md): candidate vs baseline, each gate on its own, never averaged.

This module decides one gate (a segmented gate on the candidate's slice) and every gate of a policy. The rules of
each kind of gate are in gate_counts and gate_rates, the table and its verdict in gate_table, and what the gates
read about a run in gate_facts.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.contracts.policy import DEFAULT_MIN_CASES, GatePolicy, GateSpec
from eval_pipeline.scoring.gate_counts import evidence_ignored_gate, no_new_failures_gate, policy_gate
from eval_pipeline.scoring.gate_facts import RunFacts, comparability, judge_may_gate, qrels_mismatch, restrict
from eval_pipeline.scoring.gate_rates import regression_gate
from eval_pipeline.scoring.gate_table import (
    DEFAULT_OWNERS,
    GATE_RESULTS_SCHEMA,
    INCOMPARABLE,
    INCOMPLETE,
    INSUFFICIENT,
    NOT_GATING,
    unit_of,
)
from eval_pipeline.scoring.slices import segment_key, slice_cases


def _flaky_cases(facts: RunFacts) -> set[str]:
    flaky = set()
    if facts.reliability is not None and facts.reliability.height:
        flaky |= set(facts.reliability.filter(pl.col("flaky").fill_null(False))["case_id"].to_list())
    if facts.quarantine is not None and facts.quarantine.height:
        flaky |= set(facts.quarantine["case_id"].to_list())
    return flaky


def _multi_hop(facts: RunFacts) -> set[str]:
    return set(facts.cases.filter(pl.col("multi_hop").fill_null(False))["case_id"].to_list())


def evaluate_gate(
    spec: GateSpec, candidate: RunFacts, baseline: RunFacts, may_gate: bool | None, min_cases: int = DEFAULT_MIN_CASES
) -> dict:
    """One gate_results row (`min_cases`: the policy's, for a segmented gate that sets none)."""
    if spec.segment:
        return _segmented_gate(spec, candidate, baseline, may_gate, spec.min_cases or min_cases)
    row = _undecided_row(spec, candidate, baseline)
    reason = _incomparable_reason(spec, candidate, baseline)
    if reason is not None:
        return {**row, "status": INCOMPARABLE, "reason": reason}
    excluded = _excluded_cases(spec, candidate, baseline)
    if spec.metric == "policy_violations":
        return policy_gate(spec, row, candidate, baseline, excluded)
    if spec.metric == "no_new_failures":
        return no_new_failures_gate(spec, row, candidate, baseline, excluded)
    if spec.metric == "evidence_ignored":
        return evidence_ignored_gate(spec, row, candidate, baseline, excluded)
    return regression_gate(spec, row, candidate, baseline, excluded, may_gate)


def _segmented_gate(
    spec: GateSpec, candidate: RunFacts, baseline: RunFacts, may_gate: bool | None, min_cases: int
) -> dict:
    """The gate on the candidate's slice only: both runs restricted to its cases, the same rules; fewer complete cases
    than min_cases make it insufficient, whatever the values say."""
    where = {"segment": segment_key(spec.segment), "min_cases": min_cases}
    if candidate.slices is None:
        return {
            **_undecided_row(spec, candidate, baseline),
            **where,
            "status": INCOMPLETE,
            "reason": (
                f"slice {where['segment']}: the candidate's slice membership is missing "
                "(deid_cases, deid_corpus, tools)"
            ),
        }
    # the candidate's membership for both runs: the same cases are compared even if a tag or family moved
    members = slice_cases(candidate.slices, spec.segment)
    whole = spec.model_copy(update={"segment": None, "min_cases": None})
    row = {**evaluate_gate(whole, restrict(candidate, members), restrict(baseline, members), may_gate), **where}
    if row["status"] in (INCOMPARABLE, NOT_GATING):
        return row
    # an empty slice compares nothing; otherwise n_cases is null only when a table is missing (incomplete stays)
    n = row["n_cases"] if row["n_cases"] is not None else (0 if not members else None)
    if n is None or n >= min_cases:
        return row
    said = f"{row['status']}: {row['reason']}" if row["reason"] else row["status"]
    return {
        **row,
        "status": INSUFFICIENT,
        "n_cases": n,
        "reason": (
            f"slice {where['segment']} has {n} complete case(s), fewer than min_cases {min_cases}: not decided "
            f"(on these cases the gate says {said})"
        ),
    }


def _undecided_row(spec: GateSpec, candidate: RunFacts, baseline: RunFacts) -> dict:
    """The gate's row before it is decided: which gate, runs and owner, with no values and no status."""
    return {
        "unit": unit_of(spec.metric),
        "blocking_details": [],
        "run_id": candidate.run_id,
        "gate": spec.name,
        "lane": spec.lane,
        "metric": spec.metric,
        "baseline_run_id": baseline.run_id,
        "baseline_value": None,
        "candidate_value": None,
        "delta": None,
        "threshold": None,
        "status": None,
        "blocking_cases": [],
        "owner": spec.owner or DEFAULT_OWNERS[spec.lane],
        "reason": None,
        "n_cases": None,
        "excluded_cases": [],
        "beside": None,
        "segment": None,
        "min_cases": None,
    }


def _incomparable_reason(spec: GateSpec, candidate: RunFacts, baseline: RunFacts) -> str | None:
    """Why this gate cannot compare the two runs (see comparability; recall also needs one qrels version), or None."""
    reason = comparability(candidate, baseline)
    if reason is None and spec.metric == "recall_at_10" and candidate.qrels_version != baseline.qrels_version:
        reason = qrels_mismatch(candidate, baseline)
    return reason


def _excluded_cases(spec: GateSpec, candidate: RunFacts, baseline: RunFacts) -> set[str]:
    """Cases the gate leaves out: flaky or quarantined in either run, and the candidate's multi-hop cases when
    excluded."""
    excluded = _flaky_cases(candidate) | _flaky_cases(baseline)
    if "multi_hop" in spec.exclude:
        excluded |= _multi_hop(candidate)
    return excluded


def evaluate_gates(policy: GatePolicy, candidate: RunFacts, baseline: RunFacts) -> pl.DataFrame:
    """gate_results for a candidate against a baseline: one row per gate of the policy."""
    may_gate = judge_may_gate(candidate.calibration)
    rows = [evaluate_gate(spec, candidate, baseline, may_gate, policy.min_cases) for spec in policy.gates]
    return pl.DataFrame(rows, schema=GATE_RESULTS_SCHEMA)
