"""A killed `eval-pipeline run` does not leave its Dagster run STARTED: the next command marks it failed."""

import io
import os
import subprocess
import sys
import time

import dagster as dg
import pytest

from eval_pipeline.run_records import RUNNER_PID_TAG, fail_abandoned_runs
from eval_pipeline.runner import run_pipeline

pytestmark = pytest.mark.slow

INSTANCE_YAML = "storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\ntelemetry:\n  enabled: false\n"


def _started_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
    return [record.dagster_run for record in records]


def test_a_killed_run_is_marked_failed_when_the_next_run_starts(sample_copy, tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    command = [
        sys.executable,
        "-m",
        "eval_pipeline.cli",
        "run",
        "--data",
        str(sample_copy),
        "--run",
        "base-41",
        "--warehouse",
        str(tmp_path / "wh"),
        "--reports",
        str(tmp_path / "rp"),
        "--deid-demo",
        "--quiet",
    ]
    process = subprocess.Popen(command, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    instance = dg.DagsterInstance.get()
    try:
        deadline = time.monotonic() + 240
        while not _started_runs(instance) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        started = _started_runs(instance)
        assert started, "the command never started a Dagster run"
    finally:
        process.kill()
        process.wait(timeout=60)
    abandoned = started[0]
    assert abandoned.tags[RUNNER_PID_TAG] == str(process.pid)
    assert instance.get_run_by_id(abandoned.run_id).status == dg.DagsterRunStatus.STARTED

    code = run_pipeline(
        data=str(sample_copy),
        run_ids=["base-41"],
        warehouse=str(tmp_path / "wh2"),
        reports=str(tmp_path / "rp2"),
        deid_demo=True,
        quiet=True,
        instance=instance,
        stream=io.StringIO(),
    )
    assert code == 0
    assert instance.get_run_by_id(abandoned.run_id).status == dg.DagsterRunStatus.FAILURE
    assert fail_abandoned_runs(instance) == []  # once only; the run just finished is not touched
