"""The gating use case: a candidate run against its baseline, as the gate asset, the lane reports and
`eval-pipeline gate` compute it."""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

from eval_pipeline.gating.facts import manifest_from_warehouse, run_facts
from eval_pipeline.scoring.gate_facts import RunFacts, baseline_of, not_gated_reason
from eval_pipeline.scoring.gate_table import INCOMPLETE, NOT_APPLICABLE, undecided_gates
from eval_pipeline.scoring.gates import evaluate_gates


def compare(
    policy,
    candidate: RunFacts,
    baseline_run_id: str | None,
    warehouse,
    tables: Collection[str] | None = None,
) -> pl.DataFrame:
    """gate_results of a candidate against a baseline run read from the warehouse (only `tables` of it, when given)."""
    not_gated = not_gated_reason(candidate.manifest)
    if not_gated:
        return undecided_gates(policy, candidate.run_id, None, NOT_APPLICABLE, not_gated)
    if not baseline_run_id:
        return undecided_gates(
            policy,
            candidate.run_id,
            None,
            INCOMPLETE,
            "no baseline: set baseline_run_id in policy/gates.yaml or pass --baseline",
        )
    if baseline_run_id == candidate.run_id:
        # never gated against itself: the rows name no baseline, so no report reads "base-41 against base-41"
        return undecided_gates(
            policy, candidate.run_id, None, "not_applicable", "this run is the baseline: not gated against itself"
        )
    baseline = run_facts(warehouse, baseline_run_id, tables)
    if baseline is None or baseline.outcomes is None:
        return undecided_gates(
            policy,
            candidate.run_id,
            baseline_run_id,
            INCOMPLETE,
            f"baseline run {baseline_run_id} has not been scored",
        )
    return evaluate_gates(policy, candidate, baseline)


def baseline_or_reason(manifest: dict, policy, warehouse) -> tuple[str | None, str | None]:
    """(the run's baseline, None) when it is gated, another run, scored and of the same dataset; else
    (None, why not)."""
    baseline = baseline_of(manifest, policy)
    not_gated = not_gated_reason(manifest)
    if not_gated:
        return None, not_gated
    if not baseline:
        return None, "no baseline named (baseline_run_id in run.yaml or policy/gates.yaml)"
    if baseline == manifest["run_id"]:
        return None, "this run is the baseline"
    scored = manifest_from_warehouse(warehouse, baseline)
    if scored is None:
        return None, f"baseline run {baseline} has not been scored"
    if scored.get("dataset_version") != manifest.get("dataset_version"):
        return None, (
            f"baseline run {baseline} is of dataset {scored.get('dataset_version')}, this run of "
            f"{manifest.get('dataset_version')}: runs of different datasets are not compared"
        )
    return baseline, None


def comparable_baseline(manifest: dict, policy, warehouse) -> str | None:
    """The run's baseline when it can be compared with the run, else None."""
    return baseline_or_reason(manifest, policy, warehouse)[0]


__all__ = ["baseline_or_reason", "comparable_baseline", "compare"]
