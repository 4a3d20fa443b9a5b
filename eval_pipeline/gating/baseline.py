"""Which scored run a candidate is compared with when the user asks for the latest passing one."""

from __future__ import annotations

import polars as pl

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.scoring.gate_table import EXIT_PASS, exit_code


def choose_latest_passing(
    manifests: pl.DataFrame, gate_results: pl.DataFrame | None, candidate: str, policy_baseline: str | None
) -> str | None:
    """The newest run before the candidate, of its dataset version, whose stored gates all passed.

    Candidates for the baseline are the other runs of `manifests` (run_manifest rows) with the candidate's
    `dataset_version` and a `created_at` no later than the candidate's (a run created later cannot be what the
    candidate is released against; a run without `created_at` is not excluded on time). They are taken newest first
    (`created_at`, then run id); the first one whose gates all passed wins. The policy's baseline counts as accepted
    without looking at its gates (it is the run the team chose to release against).
    """
    mine = manifests.filter(pl.col("run_id") == candidate)
    others = manifests.filter(pl.col("run_id") != candidate)
    if mine.height:
        row = mine.row(0, named=True)
        if row.get("dataset_version") is not None and "dataset_version" in others.columns:
            others = others.filter(pl.col("dataset_version") == row["dataset_version"])
        if row.get("created_at") is not None and "created_at" in others.columns:
            others = others.filter(pl.col("created_at").is_null() | (pl.col("created_at") <= row["created_at"]))
    ordered = others.sort(["created_at", "run_id"], descending=True, nulls_last=True)
    for run_id in ordered["run_id"].to_list():
        if run_id == policy_baseline:
            return run_id
        rows = gate_results.filter(pl.col("run_id") == run_id) if gate_results is not None else None
        if rows is not None and rows.height and exit_code(rows) == EXIT_PASS:
            return run_id
    return None


def latest_passing_baseline(warehouse: Warehouse, candidate: str, policy_baseline: str | None) -> str | None:
    """`choose_latest_passing` over the warehouse's run manifests and stored gate results."""
    manifests = warehouse.read("run_manifest")
    if manifests is None:
        return None
    return choose_latest_passing(manifests, warehouse.read("gate_results"), candidate, policy_baseline)
