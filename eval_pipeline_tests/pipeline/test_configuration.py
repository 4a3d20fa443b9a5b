"""A run is configured by its run config (no environment), judge_verdicts is an asset, and reads of the baseline are recorded."""

import json

import dagster as dg

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.resources import EvalConfig, JudgeConfig
from eval_pipeline.runner import evaluate_run_job, resources_run_config

RUNS = ["base-41", "cand-42"]


def _materializations(instance, key: str) -> dict[str, dg.AssetMaterialization]:
    records = instance.fetch_materializations(dg.AssetKey.from_user_string(key), limit=100).records
    return {r.partition_key: r.asset_materialization for r in records}


def test_every_dagster_run_carries_its_resources_in_the_run_config(scored):
    instance = scored["instance"]
    runs = instance.get_runs(filters=dg.RunsFilter(job_name="evaluate_run"))
    assert sorted(run.tags["dagster/partition"] for run in runs) == RUNS
    for run in runs:
        resources = run.run_config["resources"]
        assert resources["eval_config"]["config"]["data_root"] == str(scored["data"])
        assert resources["warehouse_io"]["config"]["warehouse_root"] == scored["warehouse"].root
        assert resources["eval_config"]["config"]["deid_demo"] is True
        assert resources["judge"]["config"]["backend"] == "local"


def test_judge_verdicts_is_an_asset_of_each_run_holding_every_verdict_its_claims_rest_on(scored):
    graph = build_definitions(EvalConfig()).resolve_asset_graph()
    verdicts_key = dg.AssetKey("judge_verdicts")
    assert verdicts_key in graph.get_all_asset_keys()
    assert graph.get(verdicts_key).parent_keys == graph.get(dg.AssetKey("claims")).parent_keys

    materialized = _materializations(scored["instance"], "judge_verdicts")
    assert sorted(materialized) == RUNS
    claims = _materializations(scored["instance"], "claims")
    warehouse = scored["warehouse"]
    for run in RUNS:
        stored = warehouse.read("judge_verdicts", run)
        metadata = materialized[run].metadata
        assert stored.height == metadata["dagster/row_count"].value == metadata["verdicts"].value > 0
        assert stored.select("digest_a", "digest_b").is_unique().all()
        # what the judge answered here is what the claims step counted as calls; the rest was reused
        assert metadata["judged_here"].value == claims[run].metadata["judge_calls"].value
        assert stored.height == metadata["judged_here"].value + claims[run].metadata["judge_reused"].value
    # base-41 was judged first: all its verdicts are its own; the candidate reused those of the claims it shares
    assert materialized["base-41"].metadata["judged_here"].value == materialized["base-41"].metadata["verdicts"].value
    assert claims["cand-42"].metadata["judge_reused"].value > 0


def test_reads_of_the_baseline_are_recorded_on_the_materialization(scored):
    gates = _materializations(scored["instance"], "gate_results")
    assert gates["base-41"].metadata["other_runs_read"].value == "none"
    read = gates["cand-42"].metadata["other_runs_read"].value.split(", ")
    assert {"run_manifest[base-41]", "stage_results[base-41]", "retrieval_scores[base-41]", "tool_scores[base-41]"} <= set(read)
    agent_report = _materializations(scored["instance"], "agent/agent_report")["cand-42"].metadata["other_runs_read"].value
    assert "stage_results[base-41]" in agent_report and "retrieval_scores" not in agent_report


def test_a_run_config_alone_configures_a_step_and_keeps_the_key_out_of_the_run_record(scored, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_DEID_KEY", "k" * 24)
    config = EvalConfig(data_root=str(scored["data"]), warehouse_root=str(tmp_path / "warehouse"),
                        reports_root=str(tmp_path / "reports"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41"])
    result = evaluate_run_job().execute_in_process(
        partition_key="base-41", instance=instance, run_config=resources_run_config(config, JudgeConfig()),
        asset_selection=[dg.AssetKey("run_manifest")])
    assert result.success
    manifest = scored["warehouse"].__class__.at(str(tmp_path / "warehouse")).read("run_manifest", "base-41")
    assert manifest["run_id"].to_list() == ["base-41"]
    stored = instance.get_run_by_id(result.run_id).run_config
    assert stored["resources"]["eval_config"]["config"]["deid_key"] == {"env": "EVAL_PIPELINE_DEID_KEY"}
    assert "k" * 24 not in json.dumps(stored)
