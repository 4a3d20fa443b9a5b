"""Automation: the nightly full suite, and re-scoring exactly what a qrels or corpus bump affects."""

import json

import dagster as dg
import polars as pl

from eval_pipeline.defs.domains import all_assets
from eval_pipeline.defs.jobs import EVALUATE_RUN_JOB, evaluate_run
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.resources import EvalConfig, lane_key
from eval_pipeline.io.fingerprints import changed_runs, run_fingerprints

NIGHTLY_CRON = "0 2 * * *"

# A judgment change touches the qrels and everything computed from them, nothing else.
QRELS_RESCORE = dg.AssetSelection.assets("qrels", "judging_queue").downstream()
# A new corpus version reloads the corpus and re-scores what reads it (retrieval, citations) and their dependents.
CORPUS_RESCORE = (
    dg.AssetSelection.assets("run_manifest", "corpus") | dg.AssetSelection.assets("deid_corpus").downstream()
)
# A baseline re-scored with the candidate's judgments makes the candidate's recall gate comparable again: its gates
# and the reports that show them are computed anew, nothing else.
GATES_REFRESH = dg.AssetSelection.assets("gate_results").downstream() | dg.AssetSelection.assets(
    lane_key("rag", "report"), lane_key("agent", "report")
)
QRELS_MISMATCH = "qrels versions differ"


@dg.schedule(
    cron_schedule=NIGHTLY_CRON,
    target=evaluate_run,
    name="nightly_full_suite",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Every night: re-materialize every table, check and report of every known run.",
)
def nightly_full_suite(context: dg.ScheduleEvaluationContext):
    """One run request per known evaluation run, keyed by night so a retried tick does not duplicate it."""
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    runs = context.instance.get_dynamic_partitions(runs_partitions.name)
    if not runs:
        return dg.SkipReason("no evaluation run known yet; the new_trace_batches sensor adds them")
    return [
        dg.RunRequest(partition_key=run, run_key=f"nightly:{night}:{run}", job_name=EVALUATE_RUN_JOB)
        for run in sorted(runs)
    ]


def rescore_requests(previous: dict, current: dict, known_runs: set[str]) -> list[dg.RunRequest]:
    """Run requests of the evaluate_run job, on the affected assets only, for the known runs whose qrels judgments or
    corpus version changed."""
    requests = []
    for run_id, what in sorted(changed_runs(previous, current).items()):
        if run_id not in known_runs:
            continue
        selection = CORPUS_RESCORE if "corpus_version" in what else QRELS_RESCORE
        fingerprint = current[run_id]
        requests.append(
            dg.RunRequest(
                job_name=EVALUATE_RUN_JOB,
                partition_key=run_id,
                asset_selection=list(selection.resolve(all_assets())),
                run_key=f"rescore:{run_id}:{fingerprint['qrels']}:{fingerprint['corpus_version']}",
                tags={"eval_pipeline/rescore": ",".join(sorted(what))},
            )
        )
    return requests


def stale_gates(warehouse) -> list[tuple[str, str, str]]:
    """(run, baseline, qrels version) of runs whose recall gate was incomparable for a qrels mismatch that is gone."""
    gates = warehouse.read("gate_results", columns=["run_id", "baseline_run_id", "status", "reason"])
    qrels = warehouse.read("qrels", columns=["run_id", "qrels_version"])
    if gates is None or qrels is None:
        return []
    incomparable = gates.filter((pl.col("status") == "incomparable") & pl.col("reason").str.starts_with(QRELS_MISMATCH))
    versions = dict(qrels.unique().sort("run_id").iter_rows())
    stale = []
    for run_id, baseline in incomparable.select("run_id", "baseline_run_id").unique().sort("run_id").iter_rows():
        if baseline and versions.get(run_id) is not None and versions.get(run_id) == versions.get(baseline):
            stale.append((run_id, baseline, versions[run_id]))
    return stale


def regate_requests(stale: list[tuple[str, str, str]], known_runs: set[str], rescored: set[str]) -> list[dg.RunRequest]:
    """Run requests that recompute the gates (and the reports showing them) of runs whose baseline caught up."""
    selection = list(GATES_REFRESH.resolve(all_assets()))
    return [
        dg.RunRequest(
            job_name=EVALUATE_RUN_JOB,
            partition_key=run_id,
            asset_selection=selection,
            run_key=f"regate:{run_id}:{baseline}:{version}",
            tags={"eval_pipeline/rescore": "baseline"},
        )
        for run_id, baseline, version in stale
        if run_id in known_runs and run_id not in rescored
    ]


# The job holds every asset; each run request narrows it to what the bump affects, so no second job is needed.
@dg.sensor(
    name="rescore_on_version_bump",
    minimum_interval_seconds=60,
    target=evaluate_run,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def rescore_on_version_bump(context: dg.SensorEvaluationContext, eval_config: EvalConfig) -> dg.SensorResult:
    """When qrels judgments of a run's cases change, or its manifest points to a new corpus version, re-score that run
    only (its baseline, of the same cases, too); once a baseline is re-scored, re-gate the runs compared against it."""
    known = set(context.instance.get_dynamic_partitions(runs_partitions.name))
    current = run_fingerprints(eval_config.location(), sorted(known))
    previous = json.loads(context.cursor) if context.cursor else {}
    requests = rescore_requests(previous, current, known)
    # a run re-scored now has its gates recomputed in that run; another whose baseline caught up is re-gated
    requests += regate_requests(stale_gates(eval_config.warehouse()), known, {r.partition_key for r in requests})
    cursor = json.dumps(current, sort_keys=True)
    if not requests:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(f"no qrels or corpus change in {len(current)} runs"), cursor=cursor
        )
    return dg.SensorResult(run_requests=requests, cursor=cursor)


defs = dg.Definitions(schedules=[nightly_full_suite], sensors=[rescore_on_version_bump])
