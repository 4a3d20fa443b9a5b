"""Sensors: a new trace folder adds a partition and requests its run; a qrels or corpus bump re-scores only what it affects."""

import json
import shutil

import dagster as dg
import pytest

from eval_pipeline.defs.automation import rescore_on_version_bump
from eval_pipeline.defs.ingestion import new_trace_batches
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io.fingerprints import run_fingerprints
from eval_pipeline.io.storage import open_location

NOT_RETRIEVAL = {"answer_scores", "tool_scores", "outcome_scores", "claims", "grounding_scores", "agent/agent_stage_results",
                 "agent/agent_report", "deid_traces", "traces"}


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
    again = new_trace_batches(dg.build_sensor_context(instance=instance, resources={"eval_config": EvalConfig(data_root=str(data))}))
    assert again.run_requests == [] and "no new trace batch" in again.skip_reason.skip_message


def _tick(instance, data, cursor=None):
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"eval_config": EvalConfig(data_root=str(data))})
    return rescore_on_version_bump(context)


def test_a_judgment_change_rescores_only_the_affected_runs_and_only_retrieval_downstream(data):
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["base-41", "cand-42"])
    first = _tick(instance, data)
    assert first.run_requests == [] and json.loads(first.cursor).keys() == {"base-41", "cand-42"}
    label_file = sorted((data / "labels" / "qrels").glob("*.jsonl"))[0]
    with label_file.open("a") as handle:
        handle.write(json.dumps({"query_id": "rag-001", "doc_id": "billing/faq", "grade": 2, "source": "human", "annotator": "t"}) + "\n")
    second = _tick(instance, data, first.cursor)
    assert sorted(r.partition_key for r in second.run_requests) == ["base-41", "cand-42"]
    selected = {k.to_user_string() for k in second.run_requests[0].asset_selection}
    assert {"qrels", "judging_queue", "retrieval_scores", "context_scores", "rag/rag_stage_results", "rag/rag_report", "gate_results"} <= selected
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
