"""Automation: the nightly full suite, and re-scoring exactly what a qrels or corpus bump affects."""

import json

import dagster as dg

from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.fingerprints import changed_runs, run_fingerprints

NIGHTLY_CRON = "0 2 * * *"

# A judgment change touches the qrels and everything computed from them, nothing else.
QRELS_RESCORE = dg.AssetSelection.assets("qrels", "judging_queue").downstream()
# A new corpus version reloads the corpus and re-scores what reads it (retrieval, citations) and their dependents.
CORPUS_RESCORE = dg.AssetSelection.assets("run_manifest", "corpus") | dg.AssetSelection.assets("deid_corpus").downstream()


@dg.schedule(cron_schedule=NIGHTLY_CRON, target=dg.AssetSelection.all(), name="nightly_full_suite",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Every night: re-materialize every table, check and report of every known run.")
def nightly_full_suite(context: dg.ScheduleEvaluationContext):
    """One run request per known evaluation run, keyed by night so a retried tick does not duplicate it."""
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    runs = context.instance.get_dynamic_partitions(runs_partitions.name)
    if not runs:
        return dg.SkipReason("no evaluation run known yet; the new_trace_batches sensor adds them")
    return [dg.RunRequest(partition_key=run, run_key=f"nightly:{night}:{run}") for run in sorted(runs)]


def rescore_requests(previous: dict, current: dict, known_runs: set[str]) -> list[dg.RunRequest]:
    """Run requests for the known runs whose qrels judgments or corpus version changed."""
    requests = []
    for run_id, what in sorted(changed_runs(previous, current).items()):
        if run_id not in known_runs:
            continue
        selection = CORPUS_RESCORE if "corpus_version" in what else QRELS_RESCORE
        fingerprint = current[run_id]
        requests.append(
            dg.RunRequest(
                partition_key=run_id,
                asset_selection=list(selection.resolve(_asset_graph())),
                run_key=f"rescore:{run_id}:{fingerprint['qrels']}:{fingerprint['corpus_version']}",
                tags={"eval_pipeline/rescore": ",".join(sorted(what))},
            )
        )
    return requests


def _asset_graph():
    from eval_pipeline.defs.build import DOMAINS

    return [asset for domain in DOMAINS for asset in (domain.defs.assets or [])]


@dg.sensor(name="rescore_on_version_bump", minimum_interval_seconds=60, target=QRELS_RESCORE | CORPUS_RESCORE,
           default_status=dg.DefaultSensorStatus.RUNNING)
def rescore_on_version_bump(context: dg.SensorEvaluationContext, eval_config: EvalConfig) -> dg.SensorResult:
    """When qrels judgments of a run's cases change, or its manifest points to a new corpus version, re-score that run only."""
    known = set(context.instance.get_dynamic_partitions(runs_partitions.name))
    current = run_fingerprints(eval_config.location(), sorted(known))
    previous = json.loads(context.cursor) if context.cursor else {}
    requests = rescore_requests(previous, current, known)
    cursor = json.dumps(current, sort_keys=True)
    if not requests:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no qrels or corpus change in {len(current)} runs"), cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)


defs = dg.Definitions(schedules=[nightly_full_suite], sensors=[rescore_on_version_bump])
