"""Generation lane: claims judged against context, grounding, citations, answers, judge calibration, review queue."""

from eval_pipeline.defs.generation.assets import defs

__all__ = ["defs"]
