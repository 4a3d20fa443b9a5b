"""eval_pipeline: stage-by-stage batch evaluation of RAG assistants and tool-using agents on Dagster.

The public entry points are the command line (`eval_pipeline.cli.main`, installed as `eval-pipeline`), the Dagster
code location (`eval_pipeline.definitions.defs`) and the runner that materializes a run (`eval_pipeline.runner`).
"""

from eval_pipeline.allocator import configure_polars_allocator

# Before any module of the package loads polars: its allocator reads its options once (see allocator.py).
configure_polars_allocator()

__all__ = ["cli", "definitions", "runner"]
