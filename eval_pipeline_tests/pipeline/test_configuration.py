"""A run is configured by its run config (no environment); judge_verdicts is an asset; baseline reads are recorded."""

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
    assert gates["base-41"].metadata["other_runs_read"].value == "no other run"
    read = gates["cand-42"].metadata["other_runs_read"].value.split(", ")
    assert {
        "run_manifest[base-41]",
        "stage_results[base-41]",
        "retrieval_scores[base-41]",
        "tool_scores[base-41]",
    } <= set(read)
    agent_report = (
        _materializations(scored["instance"], "agent/agent_report")["cand-42"].metadata["other_runs_read"].value
    )
    assert "stage_results[base-41]" in agent_report and "retrieval_scores" not in agent_report


def test_a_run_config_alone_configures_a_step_and_keeps_the_key_out_of_the_run_record(scored, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_DEID_KEY", "k" * 24)
    config = EvalConfig(
        data_root=str(scored["data"]),
        warehouse_root=str(tmp_path / "warehouse"),
        reports_root=str(tmp_path / "reports"),
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41"])
    result = evaluate_run_job().execute_in_process(
        partition_key="base-41",
        instance=instance,
        run_config=resources_run_config(config, JudgeConfig()),
        asset_selection=[dg.AssetKey("run_manifest")],
    )
    assert result.success
    manifest = scored["warehouse"].__class__.at(str(tmp_path / "warehouse")).read("run_manifest", "base-41")
    assert manifest["run_id"].to_list() == ["base-41"]
    stored = instance.get_run_by_id(result.run_id).run_config
    # the key is read where the step runs; a run record never holds it
    assert "deid_key" not in stored["resources"]["eval_config"]["config"]
    assert "k" * 24 not in json.dumps(stored)
    assert EvalConfig.from_environment().run_config()["deid_key"] == {"env": "EVAL_PIPELINE_DEID_KEY"}


def test_without_reuse_no_verdict_is_stored_and_the_claims_step_still_succeeds(scored, tmp_path):
    import shutil

    warehouse_root = tmp_path / "warehouse"
    shutil.copytree(scored["warehouse"].root, warehouse_root)
    config = EvalConfig(
        data_root=str(scored["data"]),
        warehouse_root=str(warehouse_root),
        reports_root=str(tmp_path / "reports"),
        deid_demo=True,
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41"])
    job = build_definitions(config, JudgeConfig(reuse_verdicts=False)).resolve_job_def("evaluate_run")
    result = job.execute_in_process(
        partition_key="base-41",
        instance=instance,
        raise_on_error=False,
        asset_selection=[dg.AssetKey(k) for k in ("claims", "citation_scores", "judge_verdicts")],
    )
    assert result.success
    keys = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert keys == {"claims", "citation_scores"}
    [claims] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("claims")]
    assert claims.materialization.metadata["judge_reused"].value == 0


def test_the_verdicts_pass_their_table_checks(scored):
    records = scored["instance"].event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("judge_verdicts"), "value_ranges"), limit=10
    )
    assert len(records) == 2 and all(r.status.value == "SUCCEEDED" for r in records)


def test_every_table_the_case_pages_declare_is_an_asset():
    from eval_pipeline.defs.gates.assets import case_page_sources

    graph = build_definitions(EvalConfig()).resolve_asset_graph()
    materializable = {key for key in graph.get_all_asset_keys() if graph.get(key).is_materializable}
    assert set(case_page_sources()) <= materializable
