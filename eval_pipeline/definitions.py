"""Dagster entry point: `dagster dev` and `eval-pipeline ui` load `defs` from here."""

from eval_pipeline.defs.build import build_definitions

defs = build_definitions()
