"""A qrels bump re-scores retrieval and what depends on it as new table versions.

Answer and agent tables stay as they were.
"""

import io
import json
import shutil

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.cli import main
from eval_pipeline.defs.automation.sensors import rescore_on_version_bump
from eval_pipeline.defs.build import EVALUATE_RUN_JOB, build_definitions
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline
from eval_pipeline.scoring.retrieval import RETRIEVAL_COLUMNS, score_retrieval

UNTOUCHED = ("answer_scores", "tool_scores", "outcome_scores", "claims", "deid_traces")
RESCORED = ("qrels", "retrieval_scores", "context_scores", "stage_results", "gate_results")
REUSED = ("stage_results", "attribution", "reliability", "slice_rollup")


@pytest.mark.slow
def test_qrels_bump_rescores_only_retrieval_downstream(sample_data, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(sample_data, data, ignore=shutil.ignore_patterns("warehouse", "reports"))
    instance = dg.DagsterInstance.ephemeral()
    warehouse_root = tmp_path / "wh"
    assert (
        run_pipeline(
            data=str(data),
            run_ids=["base-41"],
            warehouse=str(warehouse_root),
            reports=str(tmp_path / "rp"),
            deid_demo=True,
            quiet=True,
            instance=instance,
            stream=io.StringIO(),
        )
        == 0
    )
    warehouse = Warehouse.at(warehouse_root)
    before = {table: warehouse.version(table) for table in (*UNTOUCHED, *RESCORED)}
    recall_before = warehouse.read("retrieval_scores", "base-41").filter(pl.col("case_id") == "rag-001")[
        "recall_at_10"
    ][0]
    config = EvalConfig(
        data_root=str(data), warehouse_root=str(warehouse_root), reports_root=str(tmp_path / "rp"), deid_demo=True
    )
    first = rescore_on_version_bump(dg.build_sensor_context(instance=instance, resources={"eval_config": config}))

    # a human re-grades rag-001's required document to 1 (related): it is no longer relevant
    qrels = warehouse.read("qrels", "base-41")
    required = qrels.filter((pl.col("query_id") == "rag-001") & (pl.col("grade") == 2))["doc_id"].to_list()
    # and judges a pooled pair of another query not relevant: it leaves the judging queue
    queued = warehouse.read("judging_queue", "base-41").filter(pl.col("query_id") != "rag-001").row(0, named=True)
    with (data / "labels" / "qrels" / "regrade.jsonl").open("w") as handle:
        for doc_id in required:
            handle.write(
                json.dumps({"query_id": "rag-001", "doc_id": doc_id, "grade": 1, "source": "human", "annotator": "t"})
                + "\n"
            )
        handle.write(json.dumps({"query_id": queued["query_id"], "doc_id": queued["doc_id"], "grade": 0}) + "\n")
    tick = rescore_on_version_bump(
        dg.build_sensor_context(instance=instance, cursor=first.cursor, resources={"eval_config": config})
    )
    assert [r.partition_key for r in tick.run_requests] == ["base-41"]
    request = tick.run_requests[0]

    job = build_definitions(config).resolve_job_def(EVALUATE_RUN_JOB)
    result = job.execute_in_process(
        partition_key="base-41", instance=instance, asset_selection=request.asset_selection, raise_on_error=False
    )
    assert result.success
    after = {table: warehouse.version(table) for table in (*UNTOUCHED, *RESCORED)}
    assert {t: after[t] for t in UNTOUCHED} == {t: before[t] for t in UNTOUCHED}
    assert all(after[t] > before[t] for t in RESCORED), (before, after)
    # only the traces of the two cases whose grades changed were scored again, and the rows equal scoring them all
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any("retrieval scores kept but for the traces of the 2 cases whose qrels changed" in m for m in messages)
    stored = warehouse.read("retrieval_scores", "base-41").select(RETRIEVAL_COLUMNS)
    inputs = [warehouse.read(t, "base-41") for t in ("deid_traces", "deid_cases", "qrels", "deid_corpus")]
    assert stored.equals(score_retrieval(*inputs, config.settings({"citations": None})))
    # the queue freezes the qrels itself (beside retrieval scoring): it agrees with the qrels table all the same
    pair = (pl.col("query_id") == queued["query_id"]) & (pl.col("doc_id") == queued["doc_id"])
    judged = warehouse.read("qrels", "base-41").select("query_id", "doc_id")
    queue = warehouse.read("judging_queue", "base-41")
    assert judged.filter(pair).height == 1 and queue.filter(pair).height == 0
    assert queue.height > 0 and queue.join(judged, on=["query_id", "doc_id"], how="semi").height == 0

    rescored = warehouse.read("retrieval_scores", "base-41").filter(pl.col("case_id") == "rag-001").row(0, named=True)
    assert recall_before == 1.0 and rescored["recall_at_10"] is None and rescored["retrieval_stage"] == "not_applicable"
    old_version = warehouse.read("retrieval_scores", "base-41", version=before["retrieval_scores"])
    assert old_version.filter(pl.col("case_id") == "rag-001")["recall_at_10"][0] == 1.0
    assert old_version["qrels_version"][0] != rescored["qrels_version"]

    code = main(["compare", "retrieval_scores", "recall_at_10", "--run", "base-41", "--warehouse", str(warehouse_root)])
    out = capsys.readouterr().out
    assert code == 0 and "base-41:rag-001#1" in out and "1 changed" in out

    # A bump that changes no score (a document no trace retrieved, judged not relevant): the scores are computed
    # again with the new qrels version, and the tables that read only their scores are reused (defs.reuse).
    scores_before = warehouse.read("retrieval_scores", "base-41").drop("qrels_version")
    stages_before = {table: warehouse.version(table) for table in REUSED}
    with (data / "labels" / "qrels" / "unretrieved.jsonl").open("w") as handle:
        handle.write(
            json.dumps({"query_id": "rag-002", "doc_id": "never-retrieved", "grade": 0, "source": "human"}) + "\n"
        )
    third = job.execute_in_process(
        partition_key="base-41", instance=instance, asset_selection=request.asset_selection, raise_on_error=False
    )
    assert third.success
    assert warehouse.version("retrieval_scores") > after["retrieval_scores"]
    assert (
        warehouse.read("retrieval_scores", "base-41")
        .drop("qrels_version")
        .sort("trace_id")
        .equals(scores_before.sort("trace_id"))
    )
    assert {table: warehouse.version(table) for table in REUSED} == stages_before  # not written again
    reused = {
        event.asset_key.to_user_string(): event.materialization.metadata.get("reused_from_run")
        for event in third.get_asset_materialization_events()
    }
    assert {key for key, run in reused.items() if run is not None} == {
        "rag/rag_stage_results",
        "rag/rag_attribution",
        "rag/rag_attribution_rollup",
        "rag/rag_reliability",
        "rag/rag_quarantine",
        "rag/rag_slice_rollup",
        "rag/rag_slice_attribution_rollup",
    }
    assert reused["rag/rag_stage_results"].value == result.run_id
    checks = [c for c in third.get_asset_check_evaluations() if c.asset_key.to_user_string().startswith("rag/")]
    assert checks and all(c.passed for c in checks)

    # A bump that changes scores but no stage's verdict (a second relevant document rag-003's traces never retrieved):
    # its recall falls and its retrieval still passes. Stage results read only the verdicts: they are reused again.
    def rag_003() -> pl.DataFrame:
        scores = warehouse.read("retrieval_scores", "base-41").filter(pl.col("case_id") == "rag-003")
        return scores.sort("trace_id").select("recall_at_10", "retrieval_stage")

    before_fourth = rag_003()
    with (data / "labels" / "qrels" / "more-relevant.jsonl").open("w") as handle:
        handle.write(json.dumps({"query_id": "rag-003", "doc_id": "never-retrieved-2", "grade": 2}) + "\n")
    fourth = job.execute_in_process(
        partition_key="base-41", instance=instance, asset_selection=request.asset_selection, raise_on_error=False
    )
    assert fourth.success
    after_fourth = rag_003()
    assert set(before_fourth["retrieval_stage"]) == {"pass"} and after_fourth["retrieval_stage"].equals(
        before_fourth["retrieval_stage"]
    )
    assert (after_fourth["recall_at_10"] < before_fourth["recall_at_10"]).all()
    reused = {
        event.asset_key.to_user_string(): event.materialization.metadata.get("reused_from_run")
        for event in fourth.get_asset_materialization_events()
    }
    assert reused["rag/rag_stage_results"] is not None and reused["rag/rag_attribution"] is not None


def test_a_second_run_over_unchanged_inputs_makes_zero_judge_calls(scored, tmp_path):
    warehouse_root = tmp_path / "warehouse"
    shutil.copytree(scored["warehouse"].root, warehouse_root)
    warehouse = Warehouse.at(warehouse_root)
    before = warehouse.read("claims", "base-41").sort("trace_id", "claim_index")
    stored = warehouse.read("judge_verdicts")
    assert before.height > 0 and stored.height > 0

    config = EvalConfig(
        data_root=str(scored["data"]),
        warehouse_root=str(warehouse_root),
        reports_root=str(tmp_path / "reports"),
        deid_demo=True,
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41"])
    job = build_definitions(config).resolve_job_def(EVALUATE_RUN_JOB)
    result = job.execute_in_process(
        partition_key="base-41",
        instance=instance,
        raise_on_error=False,
        asset_selection=[dg.AssetKey("claims"), dg.AssetKey("citation_scores")],
    )
    assert result.success
    [claims_event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("claims")]
    metadata = claims_event.materialization.metadata
    assert metadata["judge_calls"].value == 0 and metadata["judge_reused"].value > 0
    # the support per document family (docs/evidence_diversity.md) is reused from judge_family_verdicts as well
    assert metadata["family_judge_calls"].value == 0 and metadata["family_judge_reused"].value > 0

    after = warehouse.read("claims", "base-41").sort("trace_id", "claim_index")
    same = [
        "trace_id",
        "claim_index",
        "claim",
        "verdict",
        "evidence_quote",
        "evidence_doc_id",
        "quote_verified",
        "status",
    ]
    assert after.select(same).equals(before.select(same))
    # reused verdicts keep what was recorded when they were made: the rows are the first run's, `cached` included
    assert after.equals(before)
    assert warehouse.read("judge_verdicts").height == stored.height
