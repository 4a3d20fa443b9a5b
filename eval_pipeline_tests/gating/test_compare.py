"""The gating use case decides what a run is compared with, and says why when it cannot compare."""

from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.gating import baseline_or_reason, comparable_baseline, compare
from eval_pipeline.gating.facts import manifest_from_warehouse, run_facts, scored_runs
from eval_pipeline.io.policy import load_gate_policy
from eval_pipeline.io.storage import open_location
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.scoring.gate_facts import RunFacts

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def policy():
    return load_gate_policy(open_location(str(REPO_ROOT / "data")))


@pytest.fixture
def warehouse(tmp_path) -> Warehouse:
    warehouse = Warehouse.at(str(tmp_path / "wh"))
    for run, dataset, created in (("base-1", "ds-1", "2026-01-01"), ("other-2", "ds-2", "2026-01-02")):
        warehouse.write_partition(
            "run_manifest", pl.DataFrame({"run_id": [run], "dataset_version": [dataset], "created_at": [created]}), run
        )
    warehouse.write_partition("deid_cases", pl.DataFrame({"case_id": ["c1"], "multi_hop": [False]}), "base-1")
    return warehouse


def _candidate(**manifest) -> RunFacts:
    return RunFacts(
        run_id="cand-3",
        manifest={"run_id": "cand-3", "dataset_version": "ds-1", **manifest},
        cases=pl.DataFrame({"case_id": ["c1"], "multi_hop": [False]}),
    )


def test_the_baseline_and_why_there_is_none(policy, warehouse):
    assert baseline_or_reason(
        {"run_id": "cand-3", "dataset_version": "ds-1", "baseline_run_id": "base-1"}, policy, warehouse
    ) == ("base-1", None)
    assert baseline_or_reason({"run_id": "base-1", "baseline_run_id": "base-1"}, policy, warehouse) == (
        None,
        "this run is the baseline",
    )
    assert baseline_or_reason({"run_id": "cand-3", "baseline_run_id": "never-9"}, policy, warehouse) == (
        None,
        "baseline run never-9 has not been scored",
    )
    assert baseline_or_reason(
        {"run_id": "cand-3", "dataset_version": "ds-1", "baseline_run_id": "other-2"}, policy, warehouse
    ) == (
        None,
        "baseline run other-2 is of dataset ds-2, this run of ds-1: runs of different datasets are not compared",
    )
    reason = baseline_or_reason(
        {"run_id": "cand-3", "mode": "exploratory", "baseline_run_id": "base-1"}, policy, warehouse
    )[1]
    assert reason.startswith("exploratory run (mode: exploratory): not gated")
    assert (
        comparable_baseline(
            {"run_id": "cand-3", "dataset_version": "ds-1", "baseline_run_id": "other-2"}, policy, warehouse
        )
        is None
    )


def test_compare_without_a_usable_baseline_leaves_every_gate_undecided_with_the_reason(policy, warehouse):
    n_gates = len(policy.gates)
    cases = {
        None: ("incomplete", "no baseline: set baseline_run_id in policy/gates.yaml or pass --baseline"),
        "cand-3": ("not_applicable", "this run is the baseline: not gated against itself"),
        "never-9": ("incomplete", "baseline run never-9 has not been scored"),
    }
    for baseline, (status, reason) in cases.items():
        results = compare(policy, _candidate(), baseline, warehouse)
        assert results.height == n_gates
        assert results["status"].unique().to_list() == [status]
        assert results["reason"].unique().to_list() == [reason]
        # a run is never gated against itself: its rows name no baseline
        assert results["baseline_run_id"].unique().to_list() == [None if baseline == "cand-3" else baseline]
    exploratory = compare(policy, _candidate(mode="exploratory"), "base-1", warehouse)
    assert exploratory["status"].unique().to_list() == ["not_applicable"]


def test_run_facts_read_only_the_tables_asked_for(warehouse):
    facts = run_facts(warehouse, "base-1")
    assert facts.manifest["dataset_version"] == "ds-1" and facts.cases["case_id"].to_list() == ["c1"]
    assert facts.outcomes is None and facts.missing == ["stage_results"]
    limited = run_facts(warehouse, "base-1", tables={"stage_results"})
    assert limited.cases.height == 0 and limited.missing == ["stage_results", "deid_cases"]
    assert run_facts(warehouse, "never-9") is None
    assert manifest_from_warehouse(warehouse, "never-9") is None
    assert scored_runs(warehouse)["run_id"].to_list() == ["other-2", "base-1"]
