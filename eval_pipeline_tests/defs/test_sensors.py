"""Sensors: a new trace folder adds a partition and requests its run.

A qrels or corpus bump re-scores only what it affects.
"""

import datetime
import json
import shutil

import dagster as dg
import pytest

from eval_pipeline.defs.automation.sensors import nightly_full_suite, rescore_on_version_bump
from eval_pipeline.defs.ingestion.sensors import new_trace_batches
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.fingerprints import run_fingerprints
from eval_pipeline.io.storage import open_location

NOT_RETRIEVAL = {
    "answer_scores",
    "tool_scores",
    "outcome_scores",
    "claims",
    "grounding_scores",
    "agent/agent_stage_results",
    "agent/agent_report",
    "deid_traces",
    "traces",
}


@pytest.fixture()
def data(tmp_path, sample_data):
    root = tmp_path / "data"
    shutil.copytree(sample_data, root, ignore=shutil.ignore_patterns("warehouse", "reports"))
    return root


def test_new_batches_become_partitions_and_run_requests(data):
    instance = dg.DagsterInstance.ephemeral()
    context = dg.build_sensor_context(instance=instance, resources={"eval_config": EvalConfig(data_root=str(data))})
    result = new_trace_batches(context)
    assert sorted(r.partition_key for r in result.run_requests) == ["base-41", "cand-42"]
    assert sorted(result.dynamic_partitions_requests[0].partition_keys) == ["base-41", "cand-42"]
    instance.add_dynamic_partitions("evaluation_runs", ["base-41", "cand-42"])
    again = new_trace_batches(
        dg.build_sensor_context(instance=instance, resources={"eval_config": EvalConfig(data_root=str(data))})
    )
    assert again.run_requests == [] and "no new trace batch" in again.skip_reason.skip_message


def _tick(instance, data, cursor=None):
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"eval_config": EvalConfig(data_root=str(data))}
    )
    return rescore_on_version_bump(context)


def test_a_judgment_change_rescores_only_the_affected_runs_and_only_retrieval_downstream(data):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41", "cand-42"])
    first = _tick(instance, data)
    assert first.run_requests == [] and json.loads(first.cursor).keys() == {"base-41", "cand-42"}
    label_file = sorted((data / "labels" / "qrels").glob("*.jsonl"))[0]
    with label_file.open("a") as handle:
        handle.write(
            json.dumps(
                {"query_id": "rag-001", "doc_id": "billing/faq", "grade": 2, "source": "human", "annotator": "t"}
            )
            + "\n"
        )
    second = _tick(instance, data, first.cursor)
    assert sorted(r.partition_key for r in second.run_requests) == ["base-41", "cand-42"]
    selected = {k.to_user_string() for k in second.run_requests[0].asset_selection}
    assert {
        "qrels",
        "judging_queue",
        "retrieval_scores",
        "context_scores",
        "rag/rag_stage_results",
        "rag/rag_report",
        "gate_results",
    } <= selected
    assert not selected & NOT_RETRIEVAL
    third = _tick(instance, data, second.cursor)
    assert third.run_requests == []
    # the same change seen again (a reset cursor) gives the same run key: idempotent
    assert second.run_requests[0].run_key == _tick(instance, data, first.cursor).run_requests[0].run_key


def test_a_new_corpus_version_rescores_that_run_only(data):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41", "cand-42"])
    first = _tick(instance, data)
    manifest = data / "traces" / "cand-42" / "run.yaml"
    corpus = next((data / "corpus").iterdir())
    shutil.copytree(corpus, data / "corpus" / "kb-next")
    manifest.write_text(manifest.read_text().replace(f"corpus_version: {corpus.name}", "corpus_version: kb-next"))
    assert run_fingerprints(open_location(data), ["cand-42"])["cand-42"]["corpus_version"] == "kb-next"
    second = _tick(instance, data, first.cursor)
    assert [r.partition_key for r in second.run_requests] == ["cand-42"]
    selected = {k.to_user_string() for k in second.run_requests[0].asset_selection}
    assert {"run_manifest", "corpus", "deid_corpus", "retrieval_scores"} <= selected
    assert not selected & {"answer_scores", "tool_scores", "outcome_scores", "agent/agent_report"}


def test_runs_not_yet_known_are_left_to_the_new_batch_sensor(data):
    instance = dg.DagsterInstance.ephemeral()
    first = _tick(instance, data)
    assert first.run_requests == [] and json.loads(first.cursor) == {}


def test_rescore_and_nightly_runs_are_runs_of_the_named_job(data):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41", "cand-42"])
    first = _tick(instance, data)
    label_file = sorted((data / "labels" / "qrels").glob("*.jsonl"))[0]
    with label_file.open("a") as handle:
        handle.write(
            json.dumps(
                {"query_id": "rag-001", "doc_id": "billing/faq", "grade": 2, "source": "human", "annotator": "t"}
            )
            + "\n"
        )
    requests = _tick(instance, data, first.cursor).run_requests
    # the named job, narrowed per request to what the bump affects
    assert requests and {r.job_name for r in requests} == {"evaluate_run"}
    assert all(0 < len(r.asset_selection) for r in requests)
    # a schedule context needs a persistent instance
    with dg.instance_for_test() as persistent:
        persistent.add_dynamic_partitions("evaluation_runs", ["cand-42", "base-41"])
        night = datetime.datetime(2026, 3, 2, 2, 0)
        with dg.build_schedule_context(instance=persistent, scheduled_execution_time=night) as context:
            nightly = nightly_full_suite(context)
    assert [(r.job_name, r.partition_key, r.asset_selection) for r in nightly] == [
        ("evaluate_run", "base-41", None),
        ("evaluate_run", "cand-42", None),
    ]


def test_a_run_whose_baseline_caught_up_with_its_qrels_is_regated(data, tmp_path):
    import polars as pl

    from eval_pipeline.io.warehouse import Warehouse

    warehouse_root = tmp_path / "wh"
    warehouse = Warehouse.at(warehouse_root)
    # cand-42 was gated while base-41 still had the old judgments; base-41 has since been re-scored with q2
    warehouse.write_partition(
        "gate_results",
        pl.DataFrame(
            {
                "gate": ["retrieval_recall_at_10", "agent_pass_at_1"],
                "baseline_run_id": ["base-41", "base-41"],
                "status": ["incomparable", "pass"],
                "reason": [
                    "qrels versions differ: baseline base-41 was scored with q1, candidate cand-42 with q2: …",
                    None,
                ],
            }
        ),
        "cand-42",
    )
    for run_id, version in (("base-41", "q2"), ("cand-42", "q2")):
        warehouse.write_partition("qrels", pl.DataFrame({"query_id": ["rag-001"], "qrels_version": [version]}), run_id)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41", "cand-42"])
    config = EvalConfig(data_root=str(data), warehouse_root=str(warehouse_root))
    first = rescore_on_version_bump(dg.build_sensor_context(instance=instance, resources={"eval_config": config}))
    assert [(r.partition_key, r.job_name, r.run_key) for r in first.run_requests] == [
        ("cand-42", "evaluate_run", "regate:cand-42:base-41:q2")
    ]
    selected = {k.to_user_string() for k in first.run_requests[0].asset_selection}
    assert {"gate_results", "gate_report", "case_pages", "rag/rag_report", "agent/agent_report"} <= selected
    assert not selected & {"retrieval_scores", "qrels", "claims", "tool_scores"}
    # while the baseline still has other judgments, nothing is requested
    warehouse.write_partition("qrels", pl.DataFrame({"query_id": ["rag-001"], "qrels_version": ["q1"]}), "base-41")
    later = rescore_on_version_bump(
        dg.build_sensor_context(instance=instance, cursor=first.cursor, resources={"eval_config": config})
    )
    assert later.run_requests == []
