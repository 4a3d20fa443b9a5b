"""Named jobs: what the sensors, the schedule and `eval-pipeline run` launch, so every graph run has a job name."""

import dagster as dg

EVALUATE_RUN_JOB = "evaluate_run"

# Partitioned by run, as its assets are (an asset job takes its partitions from them). No executor of its own: the code
# location binds one (eval_pipeline/definitions.py in-process, deploy/ the Kubernetes or Celery step executors), and
# `eval-pipeline run` chooses in-process or multiprocess per command.
evaluate_run = dg.define_asset_job(
    EVALUATE_RUN_JOB,
    selection=dg.AssetSelection.all(),
    description="Materialize every table, check and report of one evaluation run (one partition); the re-score sensor "
    "runs it on the subset a qrels or corpus bump affects.",
)

# The local code location's executor: one process for every step of a run, as `eval-pipeline run` does by default.
# The multiprocess executor starts a Python process per step, each importing dagster, polars and Great Expectations
# again, which made a sensor-started run of the sample take minutes instead of seconds.
LOCAL_EXECUTOR = dg.in_process_executor
