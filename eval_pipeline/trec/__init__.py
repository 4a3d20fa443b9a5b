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
from eval_pipeline.trec.measure_args import parse_measures
from eval_pipeline.trec.measures import NICKNAMES, TABLE, Measure
from eval_pipeline.trec.printing import format_results
from eval_pipeline.trec.ranking import (
    discount_expr,
    first_occurrences,
    gain_expr,
    judged_stats,
    ranked_entries,
    ranked_hits,
    retrieval_rounds,
)
from eval_pipeline.trec.trec_eval import evaluate

__all__ = [
    "NICKNAMES",
    "TABLE",
    "Measure",
    "discount_expr",
    "evaluate",
    "first_occurrences",
    "format_results",
    "gain_expr",
    "judged_stats",
    "parse_measures",
    "ranked_entries",
    "ranked_hits",
    "read_trec_qrels",
    "read_trec_run",
    "read_trec_zscores",
    "retrieval_rounds",
    "run_frame_from_traces",
    "write_run_frame",
    "write_trec_qrels",
    "write_trec_run",
    "write_trec_runs",
]
