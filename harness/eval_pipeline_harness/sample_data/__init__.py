"""Deterministic sample data of docs/inputs.md.

The committed demo suite with planted failures, and large synthetic batches.
"""

from eval_pipeline_harness.sample_data.generator import build_sample, planted, write_sample

__all__ = ["build_sample", "planted", "write_sample"]
