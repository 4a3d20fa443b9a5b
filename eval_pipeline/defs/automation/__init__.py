"""Sensors and schedules: re-score on a qrels or corpus bump, re-gate when a baseline catches up, the nightly suite."""

from eval_pipeline.defs.automation.sensors import defs

__all__ = ["defs"]
