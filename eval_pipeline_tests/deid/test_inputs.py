"""Issue 34: ids, side inputs, manifests and reject rows de-identified with the traces' keyed pseudonyms, so joins hold.

Ingestion alone (no scorer) writes no raw value to any table outside the restricted area.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.resources import EvalConfig, JudgeConfig
from eval_pipeline.deid import DEMO_KEY, Deidentifier
from eval_pipeline.deid.inputs import (
    CORPUS_ID_PATHS,
    REJECT_PATHS,
    TRACE_ID_PATHS,
    deidentify_leaves,
    deidentify_manifest,
    id_deidentifier,
    manifest_refusals,
)
from eval_pipeline.io.loaders import rejects_frame
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline_harness.records import corpus_frame_from_records, traces_frame_from_records
from eval_pipeline_tests.deid.conftest import trace_record

REPO_ROOT = Path(__file__).resolve().parents[2]
MAIL = "ana.ruiz@example.com"
DOC = f"kb/{MAIL}"


def _never() -> Deidentifier:
    raise AssertionError("the key was asked for although nothing holds personal data")


def test_an_id_gets_one_token_in_every_table_so_joins_hold():
    corpus = corpus_frame_from_records(
        [{"doc_id": DOC, "family": f"team {MAIL}", "text": "t"}, {"doc_id": "kb/plain", "text": "u"}],
        corpus_version="c1",
    )
    record = trace_record(1) | {"trace_id": f"r1:{MAIL}#1"}
    record["retrieval"][0]["hits"] = [{"doc_id": DOC, "score": 0.9}]
    traces = traces_frame_from_records([record], run_id="r1")
    ids = id_deidentifier(DEMO_KEY)
    out_corpus, corpus_report = deidentify_leaves(corpus, CORPUS_ID_PATHS, "corpus", ids)
    out_traces, _ = deidentify_leaves(traces, TRACE_ID_PATHS, "traces", ids)
    token_doc = out_corpus["doc_id"][0]
    assert token_doc.startswith("kb/<EMAIL_") and MAIL not in str(out_corpus.to_dicts())
    assert out_corpus["doc_id"][1] == "kb/plain" and out_corpus["text"].to_list() == ["t", "u"]
    hits = out_traces["retrieval"][0][0]["hits"]
    assert [h["doc_id"] for h in hits] == [token_doc]
    assert out_traces["trace_id"][0] == f"r1:{token_doc.removeprefix('kb/')}#1"
    # the same token under a fresh Deidentifier of the same key: ingestion, deid and qrels compute it alike
    again, _ = deidentify_leaves(corpus, CORPUS_ID_PATHS, "corpus", lambda: id_deidentifier(DEMO_KEY))
    assert again["doc_id"].to_list() == out_corpus["doc_id"].to_list()
    assert sorted(corpus_report.select("field", "entity_type", "replacements").rows()) == [
        ("doc_id", "EMAIL", 1),
        ("family", "EMAIL", 1),
    ]


def test_a_clean_input_never_asks_for_the_key():
    frame = pl.DataFrame({"reason": ["unknown case_id 'rag-9'"], "trace_id": ["r1:rag-9#1"]})
    out, report = deidentify_leaves(frame, REJECT_PATHS, "trace_rejects", _never)
    assert out.equals(frame) and report.height == 0


def test_reject_rows_keep_no_raw_value_and_the_reason_names_the_token():
    rows = [
        {
            "run_id": "r1",
            "input_kind": "trace",
            "source_file": f"traces/r1/{MAIL}.jsonl",
            "line": 3,
            "reason": f"unknown case_id '{MAIL}'",
            "trace_id": f"r1:{MAIL}#1",
            "case_id": MAIL,
        }
    ]
    out, report = deidentify_leaves(
        rejects_frame(rows), REJECT_PATHS, "trace_rejects", lambda: id_deidentifier(DEMO_KEY)
    )
    row = out.row(0, named=True)
    assert MAIL not in str(row) and row["line"] == 3
    assert row["reason"] == f"unknown case_id '{row['case_id']}'" and row["case_id"].startswith("<EMAIL_")
    assert report["replacements"].sum() == 4


def test_a_manifest_is_refused_naming_field_and_kind_and_its_free_text_is_deidentified():
    row = {
        "run_id": "r1",
        "dataset_version": f"golden {MAIL}",
        "corpus_version": "kb",
        "candidate": f"{MAIL}@2.0",
        "model": "gpt-4.1",
        "created_at": "2026-03-02T02:10:00Z",
    }
    assert manifest_refusals(row) == ["run.yaml dataset_version: contains an e-mail address"]
    assert manifest_refusals({**row, "dataset_version": "golden"}) == []
    out = deidentify_manifest(row, lambda: id_deidentifier(DEMO_KEY))
    assert out["candidate"].startswith("<EMAIL_") and out["candidate"].endswith(">@2.0")
    assert {k: out[k] for k in ("model", "created_at", "dataset_version")} == {
        "model": "gpt-4.1",
        "created_at": "2026-03-02T02:10:00Z",
        "dataset_version": f"golden {MAIL}",
    }


def _ingest(root: Path, tmp_path: Path, selection: tuple[str, ...]) -> tuple[dg.ExecuteInProcessResult, Warehouse]:
    config = EvalConfig(
        data_root=str(root),
        warehouse_root=str(tmp_path / "warehouse"),
        reports_root=str(tmp_path / "reports"),
        deid_demo=True,
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("evaluation_runs", ["cand-42"])
    job = build_definitions(config, JudgeConfig()).resolve_job_def("evaluate_run")
    result = job.execute_in_process(
        partition_key="cand-42",
        instance=instance,
        raise_on_error=False,
        asset_selection=[dg.AssetKey(k) for k in selection],
    )
    return result, Warehouse.at(tmp_path / "warehouse")


@pytest.fixture
def data_copy(tmp_path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(REPO_ROOT / "data", root, ignore=shutil.ignore_patterns("warehouse", "reports"))
    return root


def test_ingestion_alone_writes_no_raw_value_outside_the_restricted_area(data_copy, tmp_path):
    manifest = yaml.safe_load((data_copy / "traces" / "cand-42" / "run.yaml").read_text())
    manifest["model"] = f"gpt for {MAIL}"
    (data_copy / "traces" / "cand-42" / "run.yaml").write_text(yaml.safe_dump(manifest))
    with (data_copy / "corpus" / "kb-2026-03" / "docs.jsonl").open("a") as out:
        out.write(f'{{"doc_id": "{DOC}", "family": "{MAIL}", "text": "ask {MAIL}"}}\n')
    with (data_copy / "traces" / "cand-42" / "agent.jsonl").open("a") as out:
        out.write(f'{{"trace_id": "cand-42:{MAIL}#1", "case_id": "{MAIL}", "attempt": 1, "status": "ok"}}\n')
    (data_copy / "cases" / "golden-2026.03" / "broken.yaml").write_text(f"case_id: {MAIL}\ncase_revision: x\n")
    result, warehouse = _ingest(
        data_copy,
        tmp_path,
        ("run_manifest", "raw_traces", "cases", "corpus", "tools", "input_rejects", "traces", "trace_rejects"),
    )
    assert result.success
    written = {p.name for p in (tmp_path / "warehouse").iterdir() if not p.name.startswith("_")}
    assert written == {"run_manifest", "tools", "input_rejects", "trace_rejects"}
    for table in written:
        assert MAIL not in str(warehouse.read(table, "cand-42").to_dicts()), table
    assert warehouse.read("run_manifest", "cand-42")["model"][0].startswith("gpt for <EMAIL_")
    rejects = warehouse.read("trace_rejects", "cand-42").filter(pl.col("case_id").str.starts_with("<EMAIL_"))
    assert sorted(rejects["input_kind"]) == ["case", "trace"]
    [reason] = rejects.filter(pl.col("input_kind") == "trace")["reason"].to_list()
    assert reason.startswith("unknown case_id '<EMAIL_")
    assert MAIL in str(warehouse.read("corpus", "cand-42", restricted=True)["family"].to_list())
    checks = {
        (e.asset_key.to_user_string(), e.check_name): e.passed
        for e in result.get_asset_check_evaluations()
        if e.check_name == "no_personal_data"
    }
    assert checks == {(t, "no_personal_data"): True for t in written} | {("trace_rejects", "no_personal_data"): True}


def test_a_manifest_whose_dataset_version_holds_an_address_is_refused(data_copy, tmp_path):
    manifest_path = data_copy / "traces" / "cand-42" / "run.yaml"
    manifest = yaml.safe_load(manifest_path.read_text())
    folder = f"golden-{MAIL}"
    shutil.copytree(data_copy / "cases" / manifest["dataset_version"], data_copy / "cases" / folder)
    manifest_path.write_text(yaml.safe_dump({**manifest, "dataset_version": folder}))
    result, _ = _ingest(data_copy, tmp_path, ("run_manifest",))
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = str(failure.step_failure_data.user_failure_data.description)
    assert message == "run.yaml dataset_version: contains an e-mail address"
    assert not (tmp_path / "warehouse" / "run_manifest").exists()
