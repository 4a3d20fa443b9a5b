"""TREC interoperability: qrels, run and z-score files, and trec_eval 10.0's measures, computed columnar with polars."""

from eval_pipeline.trec.formats import (
    read_trec_qrels,
    read_trec_run,
    read_trec_zscores,
    run_frame_from_traces,
    write_run_frame,
    write_trec_qrels,
    write_trec_run,
    write_trec_runs,
)
from eval_pipeline.trec.trec_eval import evaluate, format_results, parse_measures

__all__ = [
    "evaluate",
    "format_results",
    "parse_measures",
    "read_trec_qrels",
    "read_trec_run",
    "read_trec_zscores",
    "run_frame_from_traces",
    "write_run_frame",
    "write_trec_qrels",
    "write_trec_run",
    "write_trec_runs",
]
