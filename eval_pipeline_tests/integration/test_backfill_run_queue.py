"""A backfill of four trace batches launched through the GraphQL API the UI uses, run by the daemon's queued run
coordinator with a limit of two runs at once on a PostgreSQL instance; a failing partition does not stop the others."""

import json
import shutil
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline_harness.loopback_services import background, free_port
from eval_pipeline_tests.integration.conftest import started

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCATION = {"repositoryLocationName": "eval_pipeline.definitions", "repositoryName": "__repository__"}
HEALTHY = ["batch-a", "batch-b", "batch-c"]
BROKEN = "batch-d"
LIMIT = 2

pytestmark = pytest.mark.integration

ADD_PARTITION = """
mutation ($name: String!, $key: String!, $repo: RepositorySelector!) {
  addDynamicPartition(partitionsDefName: $name, partitionKey: $key, repositorySelector: $repo) {
    __typename ... on AddDynamicPartitionSuccess { partitionKey } ... on Error { message }
  }
}"""
SENSOR_STATE = """
query ($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) { __typename ... on Sensor { sensorState { id status } } \
... on Error { message } }
}"""
STOP_SENSOR = """
mutation ($id: String!) { stopSensor(id: $id) { __typename \
... on StopSensorMutationResult { instigationState { status } }
  ... on Error { message } } }"""
LAUNCH_BACKFILL = """
mutation ($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename ... on LaunchBackfillSuccess { backfillId } ... on Error { message }
  }
}"""
BACKFILL_STATUS = """
query ($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename \
... on PartitionBackfill { status numPartitions }
  ... on Error { message } } }"""


def graphql(port: int, query: str, variables: dict) -> dict:
    """POST one GraphQL operation to the webserver; its data (errors fail the test)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        method="POST",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        body = json.loads(response.read())
    assert "errors" not in body, body["errors"]
    return body["data"]


def batches(sample_inputs: Path, root: Path) -> Path:
    """Inputs with four trace batches: three copies of base-41 and one whose manifest cannot be read."""
    data = root / "data"
    shutil.copytree(sample_inputs, data, ignore=shutil.ignore_patterns("traces"))
    # No baseline, so no batch's gates wait on another batch of the same backfill.
    policy = yaml.safe_load((data / "policy" / "gates.yaml").read_text())
    policy.pop("baseline_run_id")
    (data / "policy" / "gates.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    for run_id in [*HEALTHY, BROKEN]:
        shutil.copytree(sample_inputs / "traces" / "base-41", data / "traces" / run_id)
        manifest = (data / "traces" / run_id / "run.yaml").read_text().replace("run_id: base-41", f"run_id: {run_id}")
        (data / "traces" / run_id / "run.yaml").write_text(manifest)
    (data / "traces" / BROKEN / "run.yaml").write_text(f"run_id: {BROKEN}\nmode: [gate\n")
    return data


def most_at_once(records: list) -> int:
    """The largest number of runs that were running at the same moment, from their start and end times."""
    edges = sorted(
        [(r.start_time, 1) for r in records] + [(r.end_time, -1) for r in records], key=lambda e: (e[0], e[1])
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_a_backfill_of_four_batches_runs_two_at_a_time_and_survives_a_failing_partition(
    postgres_server, sample_inputs, tmp_path, monkeypatch
):
    database = postgres_server.new_database("backfill_run_queue")
    for name, value in database.env().items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance_config = yaml.safe_load((REPO_ROOT / "deploy" / "postgres" / "dagster.yaml").read_text())
    instance_config["concurrency"]["runs"]["max_concurrent_runs"] = LIMIT
    (home / "dagster.yaml").write_text(yaml.safe_dump(instance_config))
    data = batches(sample_inputs, tmp_path)
    env = {
        "DAGSTER_HOME": str(home),
        **database.env(),
        "EVAL_PIPELINE_DATA": str(data),
        "EVAL_PIPELINE_WAREHOUSE": str(tmp_path / "warehouse"),
        "EVAL_PIPELINE_REPORTS": str(tmp_path / "reports"),
        "EVAL_PIPELINE_DEID_DEMO": "1",
    }
    port = free_port()
    webserver = ["dagster-webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    with started(background(webserver, env, REPO_ROOT, tmp_path / "webserver.log", port=port)):
        # As in the UI: the sensors that would evaluate new batches on their own are turned off first, the batches
        # are added as partitions, and one backfill is launched over them.
        for sensor in ("new_trace_batches", "rescore_on_version_bump"):
            state = graphql(port, SENSOR_STATE, {"selector": {**LOCATION, "sensorName": sensor}})["sensorOrError"]
            assert state["__typename"] == "Sensor", state
            stopped = graphql(port, STOP_SENSOR, {"id": state["sensorState"]["id"]})["stopSensor"]
            assert stopped["instigationState"]["status"] == "STOPPED", stopped
        for run_id in [*HEALTHY, BROKEN]:
            added = graphql(port, ADD_PARTITION, {"name": "evaluation_runs", "key": run_id, "repo": LOCATION})
            assert added["addDynamicPartition"] == {"__typename": "AddDynamicPartitionSuccess", "partitionKey": run_id}
        params = {
            "selector": {"partitionSetName": "evaluate_run_partition_set", "repositorySelector": LOCATION},
            "partitionNames": [*HEALTHY, BROKEN],
        }
        launched = graphql(port, LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        backfill_id = launched["backfillId"]

        with started(
            background(["dagster-daemon", "run", "-w", "workspace.yaml"], env, REPO_ROOT, tmp_path / "daemon.log")
        ):
            instance = dg.DagsterInstance.from_config(str(home))
            deadline = time.monotonic() + 540
            while True:
                records = instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
                status = graphql(port, BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]
                # the backfill daemon closes the backfill on its next pass after the last run ended
                if (
                    len(records) == 4
                    and all(r.dagster_run.is_finished for r in records)
                    and status["status"] not in ("REQUESTED", "FAILING", "CANCELING")
                ):
                    break
                assert time.monotonic() < deadline, (
                    "backfill not finished: "
                    f"{[(r.dagster_run.tags.get('dagster/partition'), r.dagster_run.status) for r in records]}\n"
                    + (tmp_path / "daemon.log").read_text(errors="replace")[-3000:]
                )
                time.sleep(2)

    by_partition = {r.dagster_run.tags["dagster/partition"]: r for r in records}
    assert {key: r.dagster_run.status for key, r in by_partition.items()} == {
        **{run_id: dg.DagsterRunStatus.SUCCESS for run_id in HEALTHY},
        BROKEN: dg.DagsterRunStatus.FAILURE,
    }
    assert status == {"__typename": "PartitionBackfill", "status": "COMPLETED_FAILED", "numPartitions": 4}
    # Every run went through the queue, and never more than the limit ran at once; the limit was reached.
    launched_at = {}
    for record in records:
        events = {
            e.dagster_event.event_type: e.timestamp
            for e in instance.all_logs(
                record.dagster_run.run_id, of_type={dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_STARTING}
            )
        }
        assert set(events) == {dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_STARTING}
        launched_at[record.dagster_run.run_id] = events[dg.DagsterEventType.RUN_STARTING]
    assert most_at_once(records) == LIMIT
    # the runs past the limit waited in the queue until a running one ended
    waited = [r for r in records if any(o.end_time <= launched_at[r.dagster_run.run_id] for o in records if o is not r)]
    assert len(waited) >= len(records) - LIMIT
    # The broken batch failed on its manifest; the others wrote their tables.
    failures = instance.all_logs(by_partition[BROKEN].dagster_run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    messages = [f"{e.step_key}: {e.dagster_event.event_specific_data.error.message}" for e in failures]
    assert messages and all("run.yaml" in m for m in messages), messages
    warehouse = Warehouse.at(tmp_path / "warehouse")
    for run_id in HEALTHY:
        assert warehouse.read("deid_traces", run_id).height == 136, run_id
    assert warehouse.read("deid_traces", BROKEN).height == 0
    instance.dispose()
