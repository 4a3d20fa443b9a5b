"""context_scores (SPEC §5 "Context assembly", §11): recall, precision, tokens and the stage after retrieval."""

from __future__ import annotations

import pytest

from eval_pipeline.scoring.context import score_context
from eval_pipeline.scoring.retrieval import score_retrieval
from eval_pipeline.settings import ScoringSettings


def chunk(doc_id: str, tokens: int | None) -> dict:
    return {"doc_id": doc_id, "text": f"text of {doc_id}", **({"tokens": tokens} if tokens is not None else {})}


@pytest.fixture
def context_scores(rag):
    cases = [rag.case("c1", ["r1", "r2"]), rag.case("refuse", [], expect_refusal=True)]
    top = [rag.round("q", ["r1", "x"])]
    traces = [
        rag.trace("reached", "c1", top, context=[chunk("r1", 100), chunk("o", 50), chunk("z", 20)]),
        rag.trace("dropped", "c1", top, context=[chunk("x", 10)]),
        rag.trace("retrieval-failed", "c1", [rag.round("q", ["x"])], context=[chunk("r2", 5)]),
        rag.trace("no-tokens", "c1", top, context=[chunk("r1", 10), chunk("r1", None)]),
        rag.trace("empty", "c1", top, context=[]),
        rag.trace("unlogged", "c1", top),
        rag.trace("harness", "c1", top, status="timeout", context=[chunk("r1", 1)]),
        rag.trace("no-retrieval", "c1", None, context=[chunk("r1", 1)]),
        rag.trace("refusal", "refuse", [rag.round("q", ["o"])], context=[chunk("o", 7), chunk("x", 3)]),
    ]
    judgments = [
        {"query_id": "c1", "doc_id": "o", "grade": 1},
        {"query_id": "c1", "doc_id": "z", "grade": 0},
        {"query_id": "refuse", "doc_id": "o", "grade": 1},
    ]
    cases_frame, traces_frame, corpus, qrels = rag.frames(cases, traces, judgments=judgments)
    settings = ScoringSettings()
    retrieval = score_retrieval(traces_frame, cases_frame, qrels, corpus, settings)
    return score_context(traces_frame, cases_frame, qrels, retrieval, settings)


def test_one_row_per_rag_trace(context_scores):
    assert context_scores.height == 9
    assert context_scores.get_column("qrels_version").n_unique() == 1


def test_relevant_doc_reached_the_context(rag, context_scores):
    row = rag.row(context_scores, "reached")
    # r1 of the two relevant docs is in the context: recall 1/2; r1 (grade 2) and o (grade 1) of 3 chunks: 2/3.
    assert (row["context_recall"], row["context_precision"], row["context_tokens"]) == (0.5, pytest.approx(2 / 3), 170)
    assert (row["status"], row["context_assembly_stage"], row["context_assembly_reason"]) == ("scored", "pass", None)
    assert row["relevant_in_context"] == ["r1"] and row["n_chunks"] == 3


def test_retrieved_but_never_reached_fails_here(rag, context_scores):
    row = rag.row(context_scores, "dropped")
    assert (row["context_recall"], row["context_precision"], row["context_tokens"]) == (0.0, 0.0, 10)
    assert row["context_assembly_stage"] == "fail"
    assert row["context_assembly_reason"] == "relevant docs in the top 10 never reached the context: r1"
    empty = rag.row(context_scores, "empty")
    # An empty context: nothing reached it, no chunk to take a precision of, zero tokens.
    assert (
        empty["context_assembly_stage"],
        empty["context_precision"],
        empty["context_tokens"],
        empty["n_chunks"],
    ) == ("fail", None, 0, 0)


def test_stage_applies_only_after_a_retrieval_pass(rag, context_scores):
    row = rag.row(context_scores, "retrieval-failed")
    assert row["context_assembly_stage"] == "not_applicable"
    assert (
        row["context_assembly_reason"] == "retrieval stage fail: the context stage applies only after a retrieval pass"
    )
    # The metrics are still measured: r2 reached the context although retrieval did not rank it.
    assert (row["status"], row["context_recall"]) == ("scored", 0.5)
    refusal = rag.row(context_scores, "refusal")
    assert (refusal["context_assembly_stage"], refusal["context_recall"], refusal["context_precision"]) == (
        "not_applicable",
        None,
        0.5,
    )


def test_missing_token_counts_make_the_total_null(rag, context_scores):
    row = rag.row(context_scores, "no-tokens")
    assert (row["context_tokens"], row["chunks_without_tokens"], row["n_chunks"], row["context_precision"]) == (
        None,
        1,
        2,
        1.0,
    )
    assert row["context_assembly_stage"] == "pass"


def test_incomplete_rows_say_why(rag, context_scores):
    unlogged = rag.row(context_scores, "unlogged")
    assert (unlogged["status"], unlogged["context_assembly_stage"]) == ("incomplete", "incomplete")
    assert (
        unlogged["reason"]
        == unlogged["context_assembly_reason"]
        == "context not logged: the trace has no context field"
    )
    harness = rag.row(context_scores, "harness")
    assert (harness["status"], harness["reason"], harness["context_recall"]) == (
        "incomplete",
        "harness status timeout: no error message",
        None,
    )
    no_retrieval = rag.row(context_scores, "no-retrieval")
    assert no_retrieval["context_assembly_stage"] == "incomplete"
    assert (
        no_retrieval["context_assembly_reason"]
        == "retrieval stage incomplete: retrieval not logged: the trace has no retrieval field"
    )
