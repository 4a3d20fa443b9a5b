"""The evaluation-run partitions shared by every asset."""

import dagster as dg

RUNS_PARTITIONS_NAME = "evaluation_runs"
runs_partitions = dg.DynamicPartitionsDefinition(name=RUNS_PARTITIONS_NAME)
