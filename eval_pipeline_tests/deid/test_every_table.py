"""Issue 34: personal data in the inputs no privacy check covered reaches no table or report; pseudonymised ids join.

The inputs are corpus text and family, qrels annotator, case fields, run.yaml, ids and reject rows; none of their
personal data reaches a warehouse table, report, case page or event log, and pseudonymised ids still join.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline_tests.fixtures.sample_runs import edit_jsonl, rename_in_inputs, run_planted_copy

pytestmark = pytest.mark.slow

CASES = Path("cases") / "golden-2026.03"
DOC = "policy/refunds-2025"


def _mail(where: str) -> str:
    return f"{where}.leak@example.com"


# One distinct planted value per place, so a leak names the place it came from.
PLANTED = {place: _mail(place) for place in (
    "corpustext", "corpusfamily", "annotator", "casetag", "casemilestone", "casesource", "candidate", "model",
    "traceid", "docid", "toolname", "variant", "rejectcase", "rejectfile", "caseid",
)}  # fmt: skip
PHONE = "+44 20 7946 0958"
PLANTED_DOC = f"policy/{PLANTED['docid']}"


def _plant(root: Path) -> None:
    """Every planted value into a copy of the sample; the doc id renamed in every file that names it."""
    rename_in_inputs(root, DOC, PLANTED_DOC)

    def corpus(record):
        if record["doc_id"] == PLANTED_DOC:
            record["text"] += f" Escalations go to {PLANTED['corpustext']} or {PHONE}."
        if record["doc_id"] == "policy/refunds-2024":
            record["family"] = PLANTED["corpusfamily"]

    edit_jsonl(root / "corpus" / "kb-2026-03" / "docs.jsonl", corpus)
    first = [True]

    def qrels(record):
        if first[0]:
            record["annotator"], first[0] = PLANTED["annotator"], False

    edit_jsonl(root / "labels" / "qrels" / "human-2026-03.jsonl", qrels)
    case = yaml.safe_load((root / CASES / "agent-001.yaml").read_text())
    case["tags"][PLANTED["casetag"]] = "yes"
    name = next(iter(case["milestones"]))
    case["milestones"][PLANTED["casemilestone"]] = case["milestones"].pop(name)
    (root / CASES / "agent-001.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    # a case file whose name holds an address, and a broken case whose id holds one (a reject row)
    shutil.copy(root / CASES / "rag-002.yaml", root / CASES / f"{PLANTED['casesource']}.yaml")
    (root / CASES / "rag-002.yaml").unlink()
    (root / CASES / "broken.yaml").write_text(f"case_id: {PLANTED['caseid']}\ncase_revision: x\n")
    manifest = yaml.safe_load((root / "traces" / "cand-42" / "run.yaml").read_text())
    manifest["candidate"]["system"] = PLANTED["candidate"]
    manifest["model"] = f"gpt-4.1 for {PLANTED['model']}"
    (root / "traces" / "cand-42" / "run.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))

    def rag(record):
        if record["trace_id"] == "cand-42:rag-003#1":
            record["trace_id"] = f"cand-42:rag-003:{PLANTED['traceid']}#1"
            record["retrieval"][0]["variant"] = PLANTED["variant"]

    edit_jsonl(root / "traces" / "cand-42" / "rag.jsonl", rag)

    def agent(record):
        if record["trace_id"] == "cand-42:agent-002#1":
            step = next(s for s in record["steps"] if s.get("kind") == "tool_call")
            step["tool"] = PLANTED["toolname"]

    edit_jsonl(root / "traces" / "cand-42" / "agent.jsonl", agent)
    with (root / "traces" / "cand-42" / "agent.jsonl").open("a") as out:
        out.write(
            json.dumps({"trace_id": "cand-42:x#1", "case_id": PLANTED["rejectcase"], "attempt": 1, "status": "ok"})
            + "\n"
        )
    (root / "traces" / "cand-42" / f"{PLANTED['rejectfile']}.jsonl").write_text("not json\n")


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    run = run_planted_copy(tmp_path_factory, "every_table", _plant)
    return {**run, "warehouse": Warehouse.at(run["warehouse"]), "root": run["warehouse"]}


LEAK = re.compile("|".join(re.escape(v) for v in (*PLANTED.values(), PHONE, "leak@example")))


def _leaks(text: str) -> set[str]:
    return set(LEAK.findall(text))


def test_the_run_scores_and_the_restricted_copies_hold_the_planted_values(planted_run):
    assert planted_run["code"] == 0
    raw = planted_run["warehouse"].read("traces", "cand-42", restricted=True)
    assert _leaks(json.dumps(raw.to_dicts(), default=str)) >= {
        PLANTED["traceid"],
        PLANTED["toolname"],
        PLANTED["docid"],
    }


def test_no_planted_value_reaches_any_table_report_case_page_or_event_log(planted_run):
    warehouse = planted_run["warehouse"]
    tables = sorted(p.name for p in planted_run["root"].iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert {
        "qrels",
        "trace_rejects",
        "run_manifest",
        "retrieval_scores",
        "tool_scores",
        "deid_corpus",
        "tools",
        "input_rejects",
        "judging_queue",
        "gate_results",
    } <= set(tables)
    # the raw corpus is kept in the restricted area only, like the raw traces and cases
    assert "corpus" not in tables and warehouse.read("corpus", "cand-42", restricted=True).height > 0
    leaked = {}
    for table in tables:
        for run in ("base-41", "cand-42"):
            frame = warehouse.read(table, run)
            if frame is not None and (found := _leaks(json.dumps(frame.to_dicts(), default=str, ensure_ascii=False))):
                leaked[f"{table}/{run}"] = sorted(found)
    assert leaked == {}
    files = [p for p in planted_run["reports"].rglob("*") if p.is_file()]
    assert len([p for p in files if p.parent.name == "cases"]) >= 3
    assert any(p.name == "index.html" for p in files)
    assert {
        str(p.relative_to(planted_run["reports"])): sorted(_leaks(p.read_text()))
        for p in files
        if _leaks(p.read_text()) or _leaks(str(p))
    } == {}
    instance = planted_run["instance"]
    events = [str(e) for r in instance.get_runs() for e in instance.all_logs(r.run_id)]
    assert [event[:300] for event in events if _leaks(event)] == []


def test_the_rejects_name_the_reason_with_tokens_and_the_pseudonymised_ids_still_join(planted_run):
    warehouse = planted_run["warehouse"]
    rejects = warehouse.read("trace_rejects", "cand-42")
    unknown = rejects.filter(pl.col("reason").str.starts_with("unknown case_id '<EMAIL_"))
    assert (
        unknown.height == 1 and unknown["case_id"][0].startswith("<EMAIL_") and unknown["trace_id"][0] == "cand-42:x#1"
    )
    assert rejects.filter(pl.col("source_file").str.contains("<EMAIL_")).height == 1
    assert rejects.filter(pl.col("case_id").str.contains("<EMAIL_", literal=True)).height == 2
    corpus_docs = set(warehouse.read("deid_corpus", "cand-42")["doc_id"].to_list())
    [token_doc] = [d for d in corpus_docs if d.startswith("policy/<EMAIL_")]
    qrels = warehouse.read("qrels", "cand-42")
    assert qrels.filter(pl.col("doc_id") == token_doc).height >= 3
    hits = warehouse.read("deid_traces", "cand-42").select(pl.col("retrieval").explode().struct.field("hits"))
    assert token_doc in set(hits["hits"].explode().struct.field("doc_id").to_list())
    scores = warehouse.read("retrieval_scores", "cand-42").filter(pl.col("case_id") == "rag-001")
    # rag-001 requires the planted doc: its qrels seed joins the hits, so the trace is judged, not "no relevant doc"
    assert scores.height >= 1 and scores["judged_at_10"].drop_nulls().min() > 0
    manifest = warehouse.read("run_manifest", "cand-42").row(0, named=True)
    assert manifest["candidate"].startswith("<EMAIL_") and manifest["model"].startswith("gpt-4.1 for <EMAIL_")
