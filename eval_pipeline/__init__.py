"""eval_pipeline: stage-by-stage batch evaluation of RAG assistants and tool-using agents on Dagster.

The public entry points are the command line (`eval_pipeline.cli.main`, installed as `eval-pipeline`), the Dagster
code location (`eval_pipeline.definitions.defs`) and the runner that materializes a run (`eval_pipeline.runner`).
"""

__all__ = ["cli", "definitions", "runner"]
