"""A new trace batch folder becomes a partition and is evaluated."""

import dagster as dg

from eval_pipeline.defs.jobs import EVALUATE_RUN_JOB, evaluate_run
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io import loaders


@dg.sensor(
    name="new_trace_batches",
    minimum_interval_seconds=30,
    target=evaluate_run,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def new_trace_batches(context: dg.SensorEvaluationContext, eval_config: EvalConfig) -> dg.SensorResult:
    """Adds a partition for each new data/traces/<run_id>/ folder with a run.yaml and requests its evaluation."""
    known = set(context.instance.get_dynamic_partitions(runs_partitions.name))
    found = loaders.list_runs(eval_config.location())
    new = [run for run in found if run not in known]
    if not new:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no new trace batch ({len(found)} known runs)"))
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=run, run_key=f"new-batch:{run}", job_name=EVALUATE_RUN_JOB) for run in new
        ],
        dynamic_partitions_requests=[runs_partitions.build_add_request(new)],
    )


defs = dg.Definitions(sensors=[new_trace_batches])
