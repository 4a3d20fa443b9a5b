"""The retrieval scores a run already has, where a qrels change is all that changed since: the re-score after a
judgment then scores only the traces of the cases whose grades changed (scoring.retrieval.rescore_retrieval).

Beside each retrieval_scores materialization the asset records what it computed from: a fingerprint of the traces,
cases, corpus, settings and code version, the qrels version and the version of the qrels table it read, and the
content hash of the rows it wrote. The next time, with the same fingerprint, the run's rows still hashing as written
and that version of the qrels table still readable and holding that qrels version, those rows and those qrels are the
earlier scores. Anything else (a changed input, setting or code version, a table rewritten since, old versions
vacuumed) scores every trace again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg
import polars as pl
from deltalake.exceptions import DeltaError

from eval_pipeline.defs.resources import OtherRuns
from eval_pipeline.defs.reuse import as_written, inputs_fingerprint, last_record
from eval_pipeline.scoring.retrieval import frozen_version

__all__ = ["EARLIER_METADATA_KEY", "Earlier", "earlier_scores", "fingerprint", "record"]

# Materialization metadata of retrieval_scores: what its rows were computed from.
EARLIER_METADATA_KEY = "eval_pipeline/scored_from"
_TABLE = "retrieval_scores"


@dataclass(frozen=True)
class Earlier:
    """A run's retrieval scores as last written, and the qrels they were scored against."""

    scores: pl.DataFrame
    qrels: pl.DataFrame


def fingerprint(code_version: str, settings: Any, run_id: str, inputs: dict[str, pl.DataFrame]) -> str:
    """What the scores depend on apart from the qrels: the input frames, the settings and the code version."""
    found = inputs_fingerprint(_TABLE, [code_version, repr(settings)], run_id, inputs)
    if found is None:  # every input of retrieval_scores is a frame
        raise TypeError("retrieval_scores reads frames only")
    return found


def record(
    inputs: str, qrels: pl.DataFrame, other_runs: OtherRuns, columns: list[str], rows_hash: str
) -> dict[str, Any]:
    """The metadata entry of a retrieval_scores materialization: its inputs' fingerprint, the qrels it read (their
    version, and the qrels table's version now, which holds them), the columns and content hash of its rows (its
    data version)."""
    return {
        EARLIER_METADATA_KEY: dg.MetadataValue.json(
            {
                "fingerprint": inputs,
                "qrels_version": frozen_version(qrels),
                "qrels_table_version": other_runs.warehouse.version("qrels"),
                "columns": columns,
                "rows_hash": rows_hash,
            }
        )
    }


def earlier_scores(context: dg.AssetExecutionContext, other_runs: OtherRuns, inputs: str) -> Earlier | None:
    """The run's retrieval scores and their qrels, when the last materialization recorded `inputs` and the warehouse
    still holds what it wrote and read; None otherwise."""
    run_id = context.partition_key
    found = last_record(context.instance, dg.AssetKey(_TABLE), run_id, EARLIER_METADATA_KEY)
    if found is None or found[2].get("fingerprint") != inputs:
        return None
    recorded = found[2]
    scores = as_written(other_runs.read(_TABLE, run_id), recorded["columns"], recorded["rows_hash"])
    if scores is None:
        return None
    try:
        qrels = other_runs.read("qrels", run_id, version=recorded["qrels_table_version"])
    except (OSError, DeltaError, pl.exceptions.PolarsError):  # that version's files removed since (a vacuum)
        return None
    if qrels is None or qrels.is_empty() or frozen_version(qrels) != recorded["qrels_version"]:
        return None
    return Earlier(scores=scores, qrels=qrels)
