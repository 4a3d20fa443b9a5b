"""The retrieval scores a run already has (defs.retrieval.earlier): found only while what they came from holds."""

from types import SimpleNamespace

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.resources import OtherRuns
from eval_pipeline.defs.retrieval import earlier
from eval_pipeline.io.fingerprints import content_hash
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.scoring.qrels import qrels_version

RUN = "run-a"


def _qrels(*grades: int) -> pl.DataFrame:
    frame = pl.DataFrame({"query_id": ["c1"] * len(grades), "doc_id": [f"d{i}" for i in range(len(grades))]})
    frame = frame.with_columns(grade=pl.Series(grades, dtype=pl.Int64))
    return frame.with_columns(qrels_version=pl.lit(qrels_version(frame)))


def _setup(tmp_path):
    """A warehouse holding a run's qrels and retrieval scores, and an instance where their materialization recorded
    what they were computed from."""
    warehouse = Warehouse.at(tmp_path / "warehouse")
    warehouse.write_partition("qrels", _qrels(2, 1), RUN)
    scores = pl.DataFrame({"run_id": [RUN], "trace_id": ["t1"], "case_id": ["c1"], "recall_at_10": [0.5]})
    warehouse.write_partition("retrieval_scores", scores, RUN)
    other_runs = OtherRuns(warehouse=warehouse, own_run=RUN, declared=frozenset({"qrels", "retrieval_scores"}))
    stored = warehouse.read("retrieval_scores", RUN)
    metadata = earlier.record("fingerprint-1", _qrels(2, 1), other_runs, stored.columns, content_hash(stored))
    instance = dg.DagsterInstance.ephemeral()
    instance.report_runless_asset_event(
        dg.AssetMaterialization(asset_key="retrieval_scores", partition=RUN, metadata=metadata)
    )
    context = SimpleNamespace(instance=instance, partition_key=RUN)
    return warehouse, other_runs, context, stored


def test_the_scores_and_the_qrels_they_were_scored_against_are_found_while_they_hold(tmp_path):
    warehouse, other_runs, context, stored = _setup(tmp_path)
    warehouse.write_partition("qrels", _qrels(2, 1, 2), RUN)  # a judgment since: the table's next version
    found = earlier.earlier_scores(context, other_runs, "fingerprint-1")
    assert found is not None and found.scores.equals(stored)
    assert found.qrels.select("doc_id", "grade").sort("doc_id").to_dicts() == [
        {"doc_id": "d0", "grade": 2},
        {"doc_id": "d1", "grade": 1},
    ]


def test_other_inputs_or_rewritten_scores_are_not_the_earlier_scores(tmp_path):
    warehouse, other_runs, context, stored = _setup(tmp_path)
    assert earlier.earlier_scores(context, other_runs, "fingerprint-2") is None  # traces, cases, corpus or settings
    warehouse.write_partition("retrieval_scores", stored.with_columns(recall_at_10=pl.lit(1.0)), RUN)
    assert earlier.earlier_scores(context, other_runs, "fingerprint-1") is None


def test_qrels_whose_version_was_vacuumed_are_not_read(tmp_path):
    warehouse, other_runs, context, _ = _setup(tmp_path)
    older = set((tmp_path / "warehouse" / "qrels").rglob("*.parquet"))
    warehouse.write_partition("qrels", _qrels(2, 1, 2), RUN)
    for path in older:  # as a vacuum removes the files no current version needs
        path.unlink()
    with pytest.raises(Exception, match="(?i)not found|no such file"):
        warehouse.read("qrels", RUN, version=0)
    assert earlier.earlier_scores(context, other_runs, "fingerprint-1") is None  # scored again, not failed
