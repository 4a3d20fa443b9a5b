"""The sample suite materialized with the multiprocess executor on a Dagster instance held by a real PostgreSQL."""

import io
import shutil
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

RUNS = ["base-41", "cand-42"]


@pytest.fixture
def postgres_instance(postgres_server, tmp_path, monkeypatch):
    """A DagsterInstance configured by the committed deploy/postgres/dagster.yaml, pointed at the test server."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    for name, value in postgres_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    yield instance
    instance.dispose()


def test_sample_suite_on_postgres_with_the_multiprocess_executor(
    postgres_server, postgres_instance, sample_inputs, tmp_path
):
    instance = postgres_instance
    storages = {type(s).__name__ for s in (instance.run_storage, instance.event_log_storage, instance.schedule_storage)}
    assert storages == {"PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"}

    summary = io.StringIO()
    code = run_pipeline(
        data=str(sample_inputs),
        warehouse=str(tmp_path / "warehouse"),
        reports=str(tmp_path / "reports"),
        deid_demo=True,
        quiet=True,
        instance=instance,
        stream=summary,
        executor="multiprocess",
        max_concurrent=2,
    )
    assert code == 0, summary.getvalue()

    runs = instance.get_runs(filters=dg.RunsFilter(job_name="evaluate_run"))
    assert sorted(run.tags["dagster/partition"] for run in runs) == RUNS
    # the candidate's release is blocked, as planted: a result of a completed evaluation, so both runs succeed
    assert {run.tags["dagster/partition"]: run.status for run in runs} == {
        "base-41": dg.DagsterRunStatus.SUCCESS,
        "cand-42": dg.DagsterRunStatus.SUCCESS,
    }
    assert "release blocked for cand-42" in summary.getvalue()
    assert sorted(instance.get_dynamic_partitions("evaluation_runs")) == RUNS
    for key in (
        dg.AssetKey("retrieval_scores"),
        dg.AssetKey("deid_traces"),
        dg.AssetKey(["agent", "agent_report"]),
        dg.AssetKey(["rag", "rag_stage_results"]),
    ):
        records = instance.fetch_materializations(key, limit=10).records
        assert sorted(record.partition_key for record in records) == RUNS, key

    # The same facts read straight from PostgreSQL: the instance really lives there.
    with postgres_server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT status, count(*) FROM runs WHERE pipeline_name = 'evaluate_run' GROUP BY status ORDER BY status"
        )
        assert cursor.fetchall() == [("SUCCESS", 2)]
        cursor.execute(
            "SELECT partition, count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
            "AND asset_key = %s GROUP BY partition ORDER BY partition",
            ('["retrieval_scores"]',),
        )
        assert cursor.fetchall() == [("base-41", 1), ("cand-42", 1)]
        # Only the multiprocess executor launches a worker per step; every step of both runs had one.
        cursor.execute(
            "SELECT count(DISTINCT run_id), count(*) FROM event_logs WHERE dagster_event_type = 'STEP_WORKER_STARTING'"
        )
        worker_runs, workers = cursor.fetchone()
        # every step ended, and succeeded (the release check of cand-42 failed without stopping anything)
        cursor.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type IN ('STEP_SUCCESS', 'STEP_FAILURE')")
        assert (worker_runs, workers) == (2, cursor.fetchone()[0])

    warehouse = Warehouse.at(tmp_path / "warehouse")
    # 136 valid traces per run: base-41 = 84 agent + 52 rag lines; cand-42 = 84 + 49 + 10 resubmitted lines, of which
    # line 2 is blank and 6 are rejected (data/README.md), so 143 - 1 - 6 = 136.
    for run_id in RUNS:
        assert warehouse.read("deid_traces", run_id).height == 136, run_id
    assert warehouse.read("trace_rejects", "cand-42").height == 6
    # Both lanes of the shared table survived the lane writes, one row per (trace, stage): agent lane 28 cases x 3
    # attempts = 84 traces x 7 stages; rag lane 52 rag.jsonl traces + 3 cases in both lanes x 3 attempts = 61 x 5.
    assert warehouse.read("stage_results", "base-41", within={"lane": "agent"}).height == 84 * 7
    assert warehouse.read("stage_results", "base-41", within={"lane": "rag"}).height == 61 * 5
