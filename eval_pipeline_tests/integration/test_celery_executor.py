"""The sample suite through dagster-celery's executor: Redis broker, two Celery workers, instance in PostgreSQL,
inputs, warehouse and reports on S3 (moto), every server on loopback; the tables equal the in-process run's."""

import collections
import io
import os
import shutil
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.steps import STEPS
from eval_pipeline.io.storage import storage_options_from_env
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import CELERY_CONFIG_SOURCE, celery_execution, run_pipeline
from eval_pipeline_harness.loopback_services import celery_workers
from eval_pipeline_tests.fixtures.warehouse_compare import local_tables, table_differences
from eval_pipeline_tests.integration.conftest import started
from eval_pipeline_tests.integration.test_s3_warehouse import keys, upload

REPO_ROOT = Path(__file__).resolve().parents[2]
CELERY_YAML = REPO_ROOT / "deploy" / "celery" / "celery.yaml"
RUNS = ["base-41", "cand-42"]
WORKERS = ["evalworker1", "evalworker2"]

pytestmark = pytest.mark.integration


def celery_steps(instance: dg.DagsterInstance, dagster_run_id: str) -> dict[str, str]:
    """step key -> the Celery worker that executed it, from the executor's engine events in the run's event log."""
    placed = {}
    for entry in instance.all_logs(dagster_run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        metadata = entry.dagster_event.event_specific_data.metadata
        if "Celery worker" in metadata:
            assert entry.step_key not in placed, f"step {entry.step_key} executed twice"
            placed[entry.step_key] = metadata["Celery worker"].value
    return placed


@pytest.fixture
def celery_cluster(postgres_server, redis_server, s3_env, tmp_path, monkeypatch):
    """DAGSTER_HOME on the PostgreSQL instance, the broker variables set, and two workers listening on Redis."""
    pytest.importorskip(
        "dagster_celery", reason="dagster-celery is not installed (pip install 'eval-pipeline[celery]')"
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "deploy" / "postgres" / "dagster.yaml", home / "dagster.yaml")
    database = postgres_server.new_database("celery_executor")
    env = {"DAGSTER_HOME": str(home), **database.env(), **redis_server.celery_env(), **s3_env.env()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # Dagster creates its tables once, here, before three processes (two workers and this one) open the instance.
    instance = dg.DagsterInstance.get()
    # Workers must hold every step a run sends them: they only listen once their instance and Celery app are loaded.
    with started(celery_workers(WORKERS, env, CELERY_YAML, tmp_path)) as workers:
        yield instance, workers
    instance.dispose()


def test_the_celery_run_config_is_the_workers_configuration(monkeypatch):
    pytest.importorskip(
        "dagster_celery", reason="dagster-celery is not installed (pip install 'eval-pipeline[celery]')"
    )
    import yaml

    monkeypatch.setenv("DAGSTER_CELERY_BROKER_URL", "redis://broker:6379/0")
    monkeypatch.setenv("DAGSTER_CELERY_BACKEND_URL", "redis://broker:6379/1")
    # `eval-pipeline run --executor celery` sends steps with the settings the workers start with
    assert celery_execution() == yaml.safe_load(CELERY_YAML.read_text())["execution"]
    assert celery_execution()["config"]["config_source"] == CELERY_CONFIG_SOURCE


def test_the_sample_suite_runs_on_two_celery_workers_and_writes_the_in_process_tables(
    celery_cluster, scored, bucket, s3_env, sample_inputs
):
    instance, workers = celery_cluster
    client = s3_env.client()
    assert upload(client, sample_inputs, bucket, "data") > 0
    summary = io.StringIO()
    code = run_pipeline(
        data=f"s3://{bucket}/data",
        warehouse=f"s3://{bucket}/warehouse",
        reports=f"s3://{bucket}/reports",
        deid_demo=True,
        quiet=True,
        instance=instance,
        stream=summary,
        executor="celery",
    )
    assert code == 0, summary.getvalue()
    assert "release blocked for cand-42" in summary.getvalue()

    runs = {
        run.tags["dagster/partition"]: run for run in instance.get_runs(filters=dg.RunsFilter(job_name="evaluate_run"))
    }
    assert {key: run.status for key, run in runs.items()} == {
        "base-41": dg.DagsterRunStatus.SUCCESS,
        "cand-42": dg.DagsterRunStatus.SUCCESS,
    }
    hostnames = {worker.hostname for worker in workers}
    load = collections.Counter()
    for run in runs.values():
        assert run.run_config["execution"]["config"]["broker"] == {"env": "DAGSTER_CELERY_BROKER_URL"}
        placed = celery_steps(instance, run.run_id)
        ended = {
            entry.step_key
            for entry in instance.all_logs(
                run.run_id, of_type={dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
            )
        }
        # every step of the run went through a worker, none ran in this process
        assert set(placed) == ended == {step for step, _, _ in STEPS}, run.tags["dagster/partition"]
        assert set(placed.values()) <= hostnames
        load.update(placed.values())
    # both workers took steps: the work was divided, not just queued to one
    assert set(load) == hostnames and min(load.values()) >= 2, load

    # Every table of both runs holds the rows of the in-process run of the same inputs, row for row. Not in the same
    # order: both lanes write their own rows of the shared tables (attribution, stage_results …), and a table lists
    # them in commit order, which is whichever lane's worker finished first.
    tables = local_tables(scored["warehouse"])
    assert len(tables) > 30
    on_s3 = Warehouse.at(f"s3://{bucket}/warehouse", storage_options_from_env(os.environ))
    assert table_differences(scored["warehouse"], on_s3, tables, RUNS, ordered=False) == []
    # and no table exists only on the Celery side
    written = {
        key.split("/_delta_log/")[0].split("/")[-1]
        for key in keys(client, bucket, "warehouse/")
        if "/_delta_log/" in key
    }
    assert written == {table for table, _ in tables}
    assert keys(client, bucket, "reports/cand-42/gate.md")
