"""The domains that own assets, in the order of the graph; the sensors resolve their selections against them."""

from functools import cache

import dagster as dg

from eval_pipeline.defs import agent, attribution, deid, gates, generation, ingestion, retrieval
from eval_pipeline.defs.steps import step_assets

__all__ = ["ASSET_DOMAINS", "all_assets"]

ASSET_DOMAINS = (ingestion, deid, retrieval, generation, agent, attribution, gates)


@cache
def all_assets() -> tuple[dg.AssetsDefinition, ...]:
    """Every asset of every domain, as the steps that compute them."""
    return tuple(step_assets(ASSET_DOMAINS))
