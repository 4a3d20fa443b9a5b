"""Release gates against the baseline, the pairwise comparison, the gate report and the case pages."""

from eval_pipeline.defs.gates.assets import defs

__all__ = ["defs"]
