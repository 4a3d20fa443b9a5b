"""Ingestion: the run manifest, raw lines into the restricted area, validated traces, cases, corpus, tools, rejects."""

import dagster as dg

from eval_pipeline.defs.ingestion import assets, sensors

defs = dg.Definitions.merge(assets.defs, sensors.defs)

__all__ = ["defs"]
