"""The claims step run again on the warehouse it wrote gives the rows of the fresh run.

Reused verdicts keep what was recorded when they were made, and `cached` does not flip because they came from
judge_verdicts this time.
"""

from __future__ import annotations

import shutil

import dagster as dg
import pytest

from eval_pipeline.defs.build import EVALUATE_RUN_JOB, build_definitions
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline_tests.fixtures.warehouse_compare import table_differences

RUNS = ("base-41", "cand-42")
TABLES = [("claims", False), ("judge_verdicts", False), ("judge_family_verdicts", False)]
CLAIMS_STEP = [dg.AssetKey(name) for name in ("claims", "citation_scores", "judge_verdicts", "judge_family_verdicts")]


@pytest.fixture(scope="module")
def rerun(scored, tmp_path_factory):
    """The fresh sample warehouse copied, and both runs' claims step materialized again on it, in run order."""
    root = tmp_path_factory.mktemp("rerun-claims") / "warehouse"
    shutil.copytree(scored["warehouse"].root, root)
    config = EvalConfig(
        data_root=str(scored["data"]),
        warehouse_root=str(root),
        reports_root=str(root.parent / "reports"),
        deid_demo=True,
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", list(RUNS))
    job = build_definitions(config).resolve_job_def(EVALUATE_RUN_JOB)
    metadata = {}
    for run_id in RUNS:
        result = job.execute_in_process(
            partition_key=run_id, instance=instance, raise_on_error=False, asset_selection=CLAIMS_STEP
        )
        assert result.success, run_id
        [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("claims")]
        metadata[run_id] = event.materialization.metadata
    return {"warehouse": Warehouse.at(root), "metadata": metadata}


def test_a_rerun_on_the_same_warehouse_writes_the_fresh_runs_rows(scored, rerun):
    fresh = scored["warehouse"]
    for table, _ in TABLES:
        assert fresh.read(table, "base-41").height > 0, table
    assert table_differences(fresh, rerun["warehouse"], TABLES, RUNS) == []


def test_the_rerun_judged_nothing_and_its_reuse_is_in_the_metadata(scored, rerun):
    for run_id in RUNS:
        meta = rerun["metadata"][run_id]
        assert meta["judge_calls"].value == 0 and meta["family_judge_calls"].value == 0, run_id
        assert meta["judge_reused"].value == fresh_distinct_claims(scored["warehouse"], run_id), run_id
        # no call was made, so the run spent nothing (no judge_cost_usd), whatever the reused rows recorded
        assert "judge_cost_usd" not in meta and "family_judge_cost_usd" not in meta, run_id
    claims = rerun["warehouse"].read("claims", "cand-42")
    assert claims["input_tokens"].null_count() == claims.height and claims["latency_ms"].null_count() == claims.height
    # a claim repeating an identical request of its run is `cached`, in the fresh run as in the rerun
    assert claims["cached"].sum() == scored["warehouse"].read("claims", "cand-42")["cached"].sum()


def fresh_distinct_claims(warehouse: Warehouse, run_id: str) -> int:
    """Completed verdicts a run's claims rest on, once per digest: what a rerun reuses."""
    return warehouse.read("judge_verdicts", run_id).height
