"""Retrieval lane: frozen qrels, the judging queue, retrieval and context-assembly scores."""

from eval_pipeline.defs.retrieval.assets import defs

__all__ = ["defs"]
