"""Dagster entry point: `dagster dev` and `eval-pipeline ui` load `defs` from here."""

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.jobs import LOCAL_EXECUTOR

defs = build_definitions(executor=LOCAL_EXECUTOR)
