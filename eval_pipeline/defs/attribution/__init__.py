"""Per lane: stage results, first-failing-stage attribution, rollup, reliability, quarantine and the lane report."""

from eval_pipeline.defs.attribution.assets import defs

__all__ = ["defs"]
