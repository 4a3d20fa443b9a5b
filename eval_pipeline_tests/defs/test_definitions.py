"""All definitions load: assets, checks, jobs, the schedule and the sensors, with no deprecated parameters."""

import dagster as dg

from eval_pipeline.definitions import defs
from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.jobs import LOCAL_EXECUTOR

LANE_TABLES = [
    "retrieval_scores",
    "context_scores",
    "claims",
    "grounding_scores",
    "citation_scores",
    "answer_scores",
    "tool_scores",
    "outcome_scores",
]


def test_definitions_load_with_the_whole_graph():
    dg.Definitions.validate_loadable(defs)
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    for expected in [
        "run_manifest",
        "raw_traces",
        "traces",
        "trace_rejects",
        "cases",
        "corpus",
        "deid_traces",
        "deid_cases",
        "qrels",
        "judging_queue",
        *LANE_TABLES,
        "judge_calibration",
        "review_queue",
        "tool_call_diffs",
        "rag/rag_stage_results",
        "agent/agent_stage_results",
        "rag/rag_attribution",
        "agent/agent_attribution_rollup",
        "rag/rag_reliability",
        "agent/agent_quarantine",
        "rag/rag_report",
        "agent/agent_report",
        "gate_results",
        "gate_report",
    ]:
        assert expected in keys, expected


def test_every_lane_table_has_blocking_error_checks():
    graph = defs.resolve_asset_graph()
    for table in LANE_TABLES:
        specs = [graph.get_check_spec(k) for k in graph.asset_check_keys if k.asset_key == dg.AssetKey(table)]
        names = {s.name for s in specs}
        assert {"schema", "value_ranges", "no_personal_data"} <= names, table
        assert all(s.blocking for s in specs), table


def test_scorers_carry_code_versions_and_everything_is_partitioned_by_run():
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.partitions_def is not None and node.partitions_def.name == "evaluation_runs", key
        assert node.code_version, key


def test_jobs_schedule_and_sensors():
    assert defs.resolve_job_def("evaluate_run") is not None
    assert defs.resolve_schedule_def("nightly_full_suite").cron_schedule == "0 2 * * *"
    assert {s.name for s in defs.sensors} == {"new_trace_batches", "rescore_on_version_bump"}


def test_the_schedule_and_the_rescore_sensor_target_the_named_job():
    assert defs.resolve_schedule_def("nightly_full_suite").job_name == "evaluate_run"
    assert defs.resolve_sensor_def("rescore_on_version_bump").job_name == "evaluate_run"
    job = defs.resolve_job_def("evaluate_run")
    assert job.partitions_def is not None and job.partitions_def.name == "evaluation_runs"


def test_the_local_executor_runs_every_step_in_one_process():
    local = build_definitions(executor=LOCAL_EXECUTOR)
    dg.Definitions.validate_loadable(local)
    assert LOCAL_EXECUTOR is dg.in_process_executor
    assert local.resolve_job_def("evaluate_run").executor_def is dg.in_process_executor
    # Without one, the job keeps Dagster's default, which `eval-pipeline run --executor multiprocess` configures and
    # deploy/ replaces with the Kubernetes or Celery step executor.
    assert build_definitions().resolve_job_def("evaluate_run").executor_def is dg.multi_or_in_process_executor
