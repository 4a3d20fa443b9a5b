"""Agent lane: tool calls scored from structured steps, and outcomes from the verified final state."""

from eval_pipeline.defs.agent.assets import defs

__all__ = ["defs"]
