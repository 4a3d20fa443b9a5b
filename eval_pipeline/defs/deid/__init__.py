"""De-identification: every scorer and the judge read only these assets; raw data stays in the restricted area."""

from eval_pipeline.defs.deid.assets import defs

__all__ = ["defs"]
