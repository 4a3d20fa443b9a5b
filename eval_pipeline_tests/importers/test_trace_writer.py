"""The writer every trace importer shares: document ids, golden-case matching, attempts by start time, cases from the
source's gold, the corpus version it writes (never overwriting one), and rejects with reasons."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from eval_pipeline.importers import ImportRun, Matching
from eval_pipeline.importers.attempts import import_attempts
from eval_pipeline.importers.common import ImporterError
from eval_pipeline.importers.doc_ids import digest_id
from eval_pipeline.importers.source import SourceAttempt, SourceDoc, SourceRound, Unreadable
from eval_pipeline_tests.importers.fixtures.importing import written_traces

WINDOW = "Annual plans can be refunded within 30 days."
OTHER = "Invoices are issued on the first day."
SOURCE = [Path("traces.json")]


def golden_root(tmp_path: Path) -> Path:
    """A data root with two golden RAG cases and a corpus of two documents."""
    (tmp_path / "cases" / "gold").mkdir(parents=True)
    for case_id, question, doc in (
        ("refund-window", "How long is the refund window?", "kb/refunds"),
        ("invoices", "When are invoices issued?", "kb/invoices"),
    ):
        (tmp_path / "cases" / "gold" / f"{case_id}.yaml").write_text(
            yaml.safe_dump(
                {"case_id": case_id, "case_revision": 3, "lanes": ["rag"], "input": question, "required_doc_ids": [doc]}
            )
        )
    (tmp_path / "corpus" / "kb").mkdir(parents=True)
    (tmp_path / "corpus" / "kb" / "docs.jsonl").write_text(
        json.dumps({"doc_id": "kb/refunds", "text": WINDOW})
        + "\n"
        + json.dumps({"doc_id": "kb/invoices", "text": OTHER})
        + "\n"
    )
    return tmp_path


def attempt(
    record: int, question: str, *docs: SourceDoc, started: int | None = None, key: str | None = None
) -> SourceAttempt:
    return SourceAttempt(
        "traces.json",
        record,
        started_ns=started,
        case_key=key,
        input=question,
        rounds=[SourceRound(hits=list(docs), query=question)],
        answer="30 days.",
        prompt="Context:\n" + "\n".join(d.text or "" for d in docs) + "\nQuestion",
    )


def test_document_ids_follow_the_rules_in_order_and_new_texts_make_a_new_corpus_version(tmp_path):
    root = golden_root(tmp_path)
    docs = (
        SourceDoc(id="kb/invoices", text=OTHER, score=0.9),  # the source's id
        SourceDoc(text="Team plans renew monthly.", metadata={"source": "kb/plans.md"}),  # a metadata key
        SourceDoc(text=WINDOW, score=0.5),  # the corpus text
        SourceDoc(text="Gift cards never expire."),
    )  # a digest
    summary = import_attempts(
        "otlp",
        SOURCE,
        [attempt(1, "How long is the refund window?", *docs)],
        ImportRun(run_id="r1", data_root=root, dataset_version="gold", corpus_version="kb"),
    )
    assert summary.traces == 1 and summary.rejects == []
    gift = "doc-" + hashlib.sha256(b"Gift cards never expire.").hexdigest()[:16]
    assert digest_id("Gift cards never expire.") == gift
    (trace,) = written_traces(root, "r1")
    assert trace["retrieval"][0]["hits"] == [
        {"doc_id": "kb/invoices", "score": 0.9},
        {"doc_id": "kb/plans.md", "score": None},
        {"doc_id": "kb/refunds", "score": 0.5},
        {"doc_id": gift, "score": None},
    ]
    # every retrieved text is in the prompt: all four reached the model
    assert [c["doc_id"] for c in trace["context"]] == ["kb/invoices", "kb/plans.md", "kb/refunds", gift]
    # the given version is kept as it is; the new one holds it and the two texts it lacks
    assert summary.corpus_version == "kb-r1"
    assert len((root / "corpus" / "kb" / "docs.jsonl").read_text().splitlines()) == 2
    new = [json.loads(line) for line in (root / "corpus" / "kb-r1" / "docs.jsonl").read_text().splitlines()]
    assert [d["doc_id"] for d in new] == ["kb/refunds", "kb/invoices", "kb/plans.md", gift]
    assert yaml.safe_load((root / "traces" / "r1" / "run.yaml").read_text())["corpus_version"] == "kb-r1"
    assert "document ids: 1 by content digest, 1 by matching text, 1 by metadata key, 1 by source id" in summary.notes


def test_golden_cases_meet_traces_by_key_then_input_attempts_in_start_order_and_strangers_are_rejects(tmp_path):
    root = golden_root(tmp_path)
    refund = SourceDoc(text=WINDOW)
    attempts = [
        attempt(1, "How long is the refund window?", refund, started=300),
        attempt(2, "A question about something else entirely", refund, key="invoices", started=100),  # by key
        attempt(3, "How long is the refund window?", refund, started=200),
        attempt(4, "Nobody asked this", refund),
        attempt(5, "Nor this", refund, key="no-such-case"),
        Unreadable("traces.json", 6, "invalid JSON: unexpected end"),
    ]
    attempts[2].answer = "record 3"
    summary = import_attempts(
        "otlp", SOURCE, attempts, ImportRun(run_id="r1", data_root=root, dataset_version="gold", corpus_version="kb")
    )
    traces = {t["trace_id"]: t for t in written_traces(root, "r1")}
    assert sorted(traces) == ["r1:invoices#1", "r1:refund-window#1", "r1:refund-window#2"]
    # record 3 started first (200 < 300): attempt 1; the golden case's revision is kept
    assert traces["r1:refund-window#1"]["answer"]["text"] == "record 3"
    assert {tid: t["attempt"] for tid, t in traces.items()} == {
        "r1:invoices#1": 1,
        "r1:refund-window#1": 1,
        "r1:refund-window#2": 2,
    }
    assert {t["case_revision"] for t in traces.values()} == {3}
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (4, "it has no case_id, and no case has its input text (17 characters)"),
        (5, "its case_id 'no-such-case' is no case of the dataset, and no case has its input text (8 characters)"),
        (6, "invalid JSON: unexpected end"),
    ]
    assert summary.cases == 0 and not (root / "cases" / "gold" / "q-").exists()
    rejects = json.loads((root / "traces" / "r1" / "import_rejects.json").read_text())
    assert [r["line"] for r in rejects] == [4, 5, 6]


def test_without_golden_cases_the_source_gold_becomes_cases_and_a_rag_trace_without_gold_is_rejected_up_front(tmp_path):
    with_gold = attempt(1, "How long is the refund window?", SourceDoc(text=WINDOW))
    with_gold.reference_docs, with_gold.reference_answer = [SourceDoc(text=WINDOW)], "30 days"
    agent = SourceAttempt(
        "traces.json",
        2,
        messages=[
            {"role": "user", "content": "Where is order 7?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "get_order", "arguments": '{"order_id": "7"}'}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
            {"role": "assistant", "content": "It has shipped."},
        ],
        reference_tool_calls=[{"name": "get_order", "args": {"order_id": "7"}}],
        tool_match="strict_order",
        key="order-7",
        case_key="order-7",
    )
    no_gold = attempt(3, "What is the weather?", SourceDoc(text=OTHER))
    summary = import_attempts("ragas", SOURCE, [with_gold, agent, no_gold], ImportRun(run_id="r2", data_root=tmp_path))
    question_id = "q-" + hashlib.sha1(b"How long is the refund window?").hexdigest()[:10]
    cases = {p.stem: yaml.safe_load(p.read_text()) for p in (tmp_path / "cases" / "ragas-traces").glob("*.yaml")}
    assert cases[question_id]["lanes"] == ["rag"]
    assert cases[question_id]["required_doc_ids"] == [
        digest_id(WINDOW)
    ]  # the reference text lines up with the retrieved one
    assert cases[question_id]["reference_answer"] == "30 days"
    assert cases["order-7"]["lanes"] == ["agent"] and cases["order-7"]["tool_match"] == "strict_order"
    assert cases["order-7"]["reference_tool_calls"] == [{"name": "get_order", "args": {"order_id": "7"}}]
    steps = {t["case_id"]: t["steps"] for t in written_traces(tmp_path, "r2")}["order-7"]
    assert [(s["kind"], s.get("tool"), s.get("status")) for s in steps] == [
        ("user", None, None),
        ("tool_call", "get_order", "ok"),
        ("finish", None, None),
    ]
    assert [(r["line"], r["reason"].split(":")[0]) for r in summary.rejects] == [
        (3, "no golden case and no reference documents")
    ]
    assert summary.corpus_version == "r2-docs"
    # the rejected trace's document is not in the new corpus version
    written = [
        json.loads(line)["doc_id"] for line in (tmp_path / "corpus" / "r2-docs" / "docs.jsonl").read_text().splitlines()
    ]
    assert written == [digest_id(WINDOW)]
    assert (
        "no golden cases under cases/ragas-traces: wrote 2 cases from the source's own gold (1 rag, 1 agent)"
        in summary.notes
    )


def test_an_existing_run_or_derived_corpus_version_is_never_overwritten_without_force(tmp_path):
    root = golden_root(tmp_path)
    run = ImportRun(run_id="r1", data_root=root, dataset_version="gold", corpus_version="kb")
    new_text = attempt(1, "How long is the refund window?", SourceDoc(text="A text the corpus lacks."))
    import_attempts("otlp", SOURCE, [new_text], run)
    with pytest.raises(ImporterError, match="run 'r1' already exists"):
        import_attempts("otlp", SOURCE, [new_text], run)
    (root / "traces" / "r1" / "run.yaml").unlink()
    with pytest.raises(ImporterError, match="corpus version kb-r1 already exists"):
        import_attempts("otlp", SOURCE, [new_text], run)
    summary = import_attempts("otlp", SOURCE, [new_text], ImportRun(**{**run.__dict__, "overwrite": True}))
    assert summary.traces == 1


def test_defects_and_error_status_make_an_incomplete_trace_never_a_dropped_one(tmp_path):
    root = golden_root(tmp_path)
    failed = attempt(1, "How long is the refund window?", SourceDoc(text=WINDOW))
    failed.status, failed.error = "error", "upstream timeout"
    broken = attempt(2, "When are invoices issued?", SourceDoc(text=OTHER))
    broken.messages = [{"role": "tool", "tool_call_id": "nope", "content": "x"}]
    summary = import_attempts(
        "otlp",
        SOURCE,
        [failed, broken],
        ImportRun(run_id="r1", data_root=root, dataset_version="gold", corpus_version="kb"),
        Matching(),
    )
    assert summary.traces == 2
    assert sorted((row["trace_id"], row["reason"]) for row in summary.incomplete) == [
        (
            "r1:invoices#1",
            "import: message 1: tool message answers tool_call_id 'nope', which no earlier call has open",
        ),
        ("r1:refund-window#1", "upstream timeout"),
    ]


def test_a_hit_given_by_id_alone_reached_the_model_when_its_corpus_text_is_in_the_prompt(tmp_path):
    """GenAI retrieval documents may carry only an id and a score: the corpus version's text decides the context."""
    root = golden_root(tmp_path)
    source = SourceAttempt(
        "traces.json",
        1,
        input="How long is the refund window?",
        answer="30 days.",
        rounds=[SourceRound(hits=[SourceDoc(id="kb/refunds", score=0.8), SourceDoc(id="kb/invoices", score=0.2)])],
        prompt=f"Context:\n{WINDOW}\nQuestion: How long is the refund window?",
    )
    summary = import_attempts(
        "otlp", SOURCE, [source], ImportRun(run_id="r1", data_root=root, dataset_version="gold", corpus_version="kb")
    )
    (trace,) = written_traces(root, "r1")
    assert trace["context"] == [{"doc_id": "kb/refunds", "text": WINDOW, "tokens": None}]
    assert summary.corpus_version == "kb"  # nothing new: the corpus version is used as it is


def test_documents_known_by_id_alone_without_a_corpus_are_named_in_the_summary(tmp_path):
    root = golden_root(tmp_path)
    source = SourceAttempt(
        "traces.json",
        1,
        input="How long is the refund window?",
        answer="30 days.",
        rounds=[SourceRound(hits=[SourceDoc(id="kb/refunds", score=0.8), SourceDoc(id="kb/elsewhere")])],
    )
    stranger = attempt(
        2, "Who are you?", SourceDoc(text="Gift cards never expire.")
    )  # rejected: its document is forgotten
    summary = import_attempts(
        "otlp", SOURCE, [source, stranger], ImportRun(run_id="r1", data_root=root, dataset_version="gold")
    )
    assert summary.traces == 1 and len(summary.rejects) == 1
    assert not any("0 by" in note or "corpus:" in note for note in summary.notes), summary.notes
    assert (
        "2 retrieved documents have no text in the source or the corpus version (kb/elsewhere, kb/refunds): import "
        "with --corpus-version naming the corpus that holds them, or context and grounding cannot read them"
    ) in summary.notes
    assert "document ids: 2 by source id" in summary.notes


def test_without_golden_cases_a_failed_attempt_of_a_case_another_attempt_states_is_written_as_incomplete(tmp_path):
    """Attempts of one case: a timed-out one before the one whose gold states the case, and one after it; a lone
    failed attempt of another case states nothing and is a reject with its reason."""

    def timed_out(record: int, started: int, key: str) -> SourceAttempt:
        return SourceAttempt(
            "traces.json", record, started_ns=started, case_key=key, status="timeout", error="harness timeout"
        )

    stated = attempt(2, "How long is the refund window?", SourceDoc(text=WINDOW), started=20, key="c1")
    stated.reference_docs = [SourceDoc(text=WINDOW)]
    source = [timed_out(1, 10, "c1"), stated, timed_out(3, 30, "c1"), timed_out(4, 40, "lonely")]
    summary = import_attempts("ragas", SOURCE, source, ImportRun(run_id="r3", data_root=tmp_path))
    assert (summary.cases, summary.traces) == (1, 3)
    assert [(t["trace_id"], t["status"]) for t in written_traces(tmp_path, "r3")] == [
        ("r3:c1#1", "timeout"),
        ("r3:c1#2", "ok"),
        ("r3:c1#3", "timeout"),
    ]
    assert [(r["line"], r["case_id"], r["reason"]) for r in summary.rejects] == [
        (4, "lonely", "no golden case and nothing to score: no retrieval, answer, tool call or reference")
    ]
    alone = import_attempts(
        "ragas", SOURCE, [timed_out(1, 10, "lonely")], ImportRun(run_id="r3b", data_root=tmp_path / "alone")
    )
    assert alone.traces == 0 and alone.notes == [
        "no golden cases under cases/ragas-traces, and no record states a case of its own",
        "nothing written: no record could be imported",
    ]


def test_a_bad_reference_or_gold_is_a_reject_and_nothing_is_written_when_the_run_cannot_be(tmp_path):
    """An empty reference context is a reject, not a crash; two case ids that would share a file refuse the run
    before anything (the new corpus version included) is written."""
    empty = attempt(1, "How long is the refund window?", SourceDoc(text=WINDOW), key="a b")
    empty.reference_docs = [SourceDoc(text="")]
    ok = attempt(2, "How long is the refund window?", SourceDoc(text=WINDOW), key="a b")
    ok.reference_docs = [SourceDoc(text=WINDOW)]
    clash = attempt(3, "When are invoices issued?", SourceDoc(text=OTHER), key="a-b")
    clash.reference_docs = [SourceDoc(text=OTHER)]
    with pytest.raises(ImporterError, match="would both be written to a-b.yaml"):
        import_attempts("ragas", SOURCE, [empty, ok, clash], ImportRun(run_id="r4", data_root=tmp_path))
    assert not (tmp_path / "corpus").exists() and not (tmp_path / "traces").exists()
    summary = import_attempts("ragas", SOURCE, [empty, ok], ImportRun(run_id="r4", data_root=tmp_path))
    assert summary.traces == 1
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [(1, "a document with neither an id nor text")]


def test_chunks_sharing_a_metadata_source_keep_their_own_texts_and_the_summary_says_why(tmp_path):
    """LangChain's `source` names the file every chunk came from: the second chunk's text must not be lost."""
    first = SourceDoc(text="Refunds take 14 days.", metadata={"source": "policy.pdf"})
    second = SourceDoc(text="Shipping takes 3 days.", metadata={"source": "policy.pdf"})
    traced = attempt(1, "How long is shipping?", first, second, key="c1")
    traced.reference_docs = [SourceDoc(text="Shipping takes 3 days.")]
    summary = import_attempts("ragas", SOURCE, [traced], ImportRun(run_id="r5", data_root=tmp_path))
    (trace,) = written_traces(tmp_path, "r5")
    shipping = digest_id("Shipping takes 3 days.")
    assert [h["doc_id"] for h in trace["retrieval"][0]["hits"]] == ["policy.pdf", shipping]
    case = yaml.safe_load((tmp_path / "cases" / "ragas-traces" / "c1.yaml").read_text())
    assert case["required_doc_ids"] == [shipping]  # the reference meets the retrieved chunk
    corpus = {
        json.loads(line)["doc_id"]: json.loads(line)["text"]
        for line in (tmp_path / "corpus" / "r5-docs" / "docs.jsonl").read_text().splitlines()
    }
    assert corpus == {"policy.pdf": "Refunds take 14 days.", shipping: "Shipping takes 3 days."}
    assert (
        "1 metadata values name documents with different texts (policy.pdf): those documents have ids from their "
        "text; give --doc-id-key the key that names one chunk"
    ) in summary.notes


def test_force_replaces_the_rejects_of_the_run_and_an_unknown_corpus_version_is_named(tmp_path):
    root = golden_root(tmp_path)
    run = ImportRun(run_id="r6", data_root=root, dataset_version="gold", corpus_version="kbb")
    stranger = attempt(2, "Who are you?", SourceDoc(text=OTHER))
    summary = import_attempts(
        "otlp", SOURCE, [attempt(1, "How long is the refund window?", SourceDoc(text=WINDOW)), stranger], run
    )
    assert len(summary.rejects) == 1 and (root / "traces" / "r6" / "import_rejects.json").exists()
    assert (
        "corpus: wrote corpus/kbb/docs.jsonl (corpus version kbb did not exist (versions under corpus/: kb), so it "
        "holds only 1 documents from the source)"
    ) in summary.notes
    again = import_attempts(
        "otlp",
        SOURCE,
        [attempt(1, "How long is the refund window?", SourceDoc(text=WINDOW))],
        ImportRun(**{**run.__dict__, "overwrite": True}),
    )
    assert again.rejects == [] and not (root / "traces" / "r6" / "import_rejects.json").exists()
