"""The domains that own assets, in the order of the graph; the sensors resolve their selections against them."""

import dagster as dg

from eval_pipeline.defs import agent, attribution, deid, gates, generation, ingestion, retrieval

ASSET_DOMAINS = (ingestion, deid, retrieval, generation, agent, attribution, gates)


def all_assets() -> list[dg.AssetsDefinition]:
    """Every asset of every domain."""
    return [asset for domain in ASSET_DOMAINS for asset in (domain.defs.assets or [])]
