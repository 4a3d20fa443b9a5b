"""failure_class of failed retrievals (SPEC §11): each class, its precedence, keyword_miss confirmation, missing
candidates."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.scoring.qrels import freeze_qrels, seed_qrels
from eval_pipeline.scoring.retrieval import LITERAL_PATTERN, score_retrieval
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import (
    cases_frame_from_records,
    corpus_frame_from_records,
    judgments_frame_from_records,
    traces_frame_from_records,
)

CORPUS = [
    {"doc_id": "policy/refunds-2025", "family": "policy/refunds", "version": "2025", "current": True},
    {"doc_id": "policy/refunds-2023", "family": "policy/refunds", "version": "2023", "current": False},
    {"doc_id": "kb/unindexed", "indexed": False},
    {"doc_id": "kb/pricing"},
    {"doc_id": "kb/err-4412"},
    {"doc_id": "kb/other"},
    {"doc_id": "kb/filler"},
]


def classify(
    rag, cases: list[dict], traces: list[dict], k: int = 10, run_ids: dict[str, str] | None = None
) -> pl.DataFrame:
    """retrieval_scores of the traces (run_ids maps trace ids to another run than run-a)."""
    frames = []
    for run_id in sorted({(run_ids or {}).get(t["trace_id"], "run-a") for t in traces}):
        chosen = [t for t in traces if (run_ids or {}).get(t["trace_id"], "run-a") == run_id]
        frames.append(traces_frame_from_records(chosen, run_id=run_id))
    cases_frame = cases_frame_from_records(cases)
    qrels = freeze_qrels(seed_qrels(cases_frame), judgments_frame_from_records([]))
    return score_retrieval(
        pl.concat(frames), cases_frame, qrels, corpus_frame_from_records(CORPUS), ScoringSettings(k=k)
    )


def test_doc_missing_from_corpus_or_not_indexed(rag):
    cases = [rag.case("ghost", ["kb/ghost"]), rag.case("unindexed", ["kb/unindexed"])]
    traces = [
        rag.trace("t1", "ghost", [rag.round("q", ["kb/other"], candidates=["kb/ghost"])]),
        rag.trace("t2", "unindexed", [rag.round("q", ["kb/other"])]),
    ]
    scores = classify(rag, cases, traces)
    # Not in the manifest wins even over being a candidate (reranker_demotion comes later in the precedence).
    assert rag.row(scores, "t1")["failure_class"] == "doc_missing_from_corpus"
    assert rag.row(scores, "t2")["failure_class"] == "doc_missing_from_corpus"
    assert (
        rag.row(scores, "t1")["retrieval_reason"]
        == "no relevant doc in the top 10; failure_class doc_missing_from_corpus (kb/ghost)"
    )


def test_stale_version_outranks_or_replaces_current(rag):
    cases = [rag.case("refunds", ["policy/refunds-2025"])]
    traces = [
        # Stale above current, current pushed out of the top 1 (and a candidate: stale still wins by precedence).
        rag.trace(
            "above",
            "refunds",
            [rag.round("q", ["policy/refunds-2023", "policy/refunds-2025"], candidates=["policy/refunds-2025"])],
        ),
        # Stale in the list, current absent: it stands in its place.
        rag.trace("instead", "refunds", [rag.round("q", ["kb/filler", "policy/refunds-2023"], candidates=[])]),
        # Current absent and no stale version listed: not stale.
        rag.trace("plain", "refunds", [rag.round("q", ["kb/filler"], candidates=[])]),
    ]
    scores = classify(rag, cases, traces, k=1)
    assert rag.row(scores, "above")["failure_class"] == "stale_version_outranks_current"
    assert rag.row(scores, "instead")["failure_class"] == "stale_version_outranks_current"
    assert rag.row(scores, "plain")["failure_class"] == "embedding_miss"


def test_reranker_demotion_and_embedding_miss(rag):
    cases = [rag.case("pricing", ["kb/pricing"])]
    traces = [
        rag.trace("demoted", "pricing", [rag.round("plan price", ["kb/other"], candidates=["kb/other", "kb/pricing"])]),
        rag.trace(
            "beyond-k",
            "pricing",
            [rag.round("plan price", ["kb/other", "kb/pricing"], candidates=["kb/pricing", "kb/other"])],
        ),
        rag.trace("never", "pricing", [rag.round("plan price", ["kb/other"], candidates=["kb/other"])]),
    ]
    scores = classify(rag, cases, traces, k=1)
    assert rag.row(scores, "demoted")["failure_class"] == "reranker_demotion"
    assert rag.row(scores, "beyond-k")["failure_class"] == "reranker_demotion"
    never = rag.row(scores, "never")
    assert never["failure_class"] == "embedding_miss"
    # Candidates were logged, so the reason carries no caveat.
    assert never["retrieval_reason"] == "no relevant doc in the top 1; failure_class embedding_miss (kb/pricing)"


def test_candidates_not_logged_falls_to_embedding_miss_with_a_caveat(rag):
    cases = [rag.case("pricing", ["kb/pricing"])]
    traces = [rag.trace("t", "pricing", [rag.round("plan price", ["kb/other", "kb/pricing"])])]
    row = rag.row(classify(rag, cases, traces, k=1), "t")
    assert row["failure_class"] == "embedding_miss"
    assert row["retrieval_reason"] == (
        "no relevant doc in the top 1; failure_class embedding_miss (kb/pricing);"
        " candidates not logged, so reranker_demotion could not be tested"
    )


def test_keyword_miss_needs_a_literal_and_another_variant_in_the_same_run(rag):
    cases = [rag.case("err", ["kb/err-4412"])]
    miss = [rag.round("what does ERR-4412 mean", ["kb/other"], variant="dense-v3", candidates=["kb/other"])]
    traces = [
        rag.trace("dense", "err", miss),
        rag.trace(
            "bm25",
            "err",
            [rag.round("what does ERR-4412 mean", ["kb/err-4412"], variant="bm25", candidates=["kb/err-4412"])],
        ),
        rag.trace(
            "no-literal",
            "err",
            [rag.round("what does the error mean", ["kb/other"], variant="dense-v3", candidates=[])],
        ),
    ]
    scores = classify(rag, cases, traces)
    assert rag.row(scores, "dense")["failure_class"] == "keyword_miss"
    assert rag.row(scores, "bm25")["retrieval_stage"] == "pass"
    # The bm25 trace found the doc, but this query holds no literal.
    assert rag.row(scores, "no-literal")["failure_class"] == "embedding_miss"


def test_keyword_miss_is_not_confirmed_by_the_same_variant_or_another_run(rag):
    cases = [rag.case("err", ["kb/err-4412"])]
    found_dense = [rag.round("ERR-4412", ["kb/err-4412"], variant="dense-v3", candidates=[])]
    traces = [
        rag.trace(
            "dense-miss", "err", [rag.round("what does ERR-4412 mean", ["kb/other"], variant="dense-v3", candidates=[])]
        ),
        rag.trace("dense-hit", "err", found_dense, attempt=2),
        rag.trace("bm25-other-run", "err", [rag.round("ERR-4412", ["kb/err-4412"], variant="bm25", candidates=[])]),
    ]
    scores = classify(rag, cases, traces, run_ids={"bm25-other-run": "run-b"})
    assert rag.row(scores, "dense-miss")["failure_class"] == "embedding_miss"


def test_highest_class_over_the_relevant_docs_wins(rag):
    # Two relevant docs: one not in the corpus, one demoted by the reranker: the trace keeps doc_missing_from_corpus.
    cases = [rag.case("two", ["kb/ghost", "kb/pricing"])]
    traces = [rag.trace("t", "two", [rag.round("q", ["kb/other"], candidates=["kb/pricing"])])]
    row = rag.row(classify(rag, cases, traces), "t")
    assert row["failure_class"] == "doc_missing_from_corpus"
    assert row["retrieval_reason"].endswith("failure_class doc_missing_from_corpus (kb/ghost)")


def test_passing_traces_have_no_failure_class(rag):
    cases = [rag.case("pricing", ["kb/pricing"])]
    traces = [rag.trace("t", "pricing", [rag.round("q", ["kb/pricing"], candidates=["kb/pricing"])])]
    row = rag.row(classify(rag, cases, traces), "t")
    assert (row["retrieval_stage"], row["failure_class"], row["retrieval_reason"]) == ("pass", None, None)


@pytest.mark.parametrize(
    ("query", "literal"),
    [
        ("what does ERR-4412 mean", True),
        ("is SKU-88-B in stock", True),
        ("X200 battery life", True),
        ("enable 2FA for admins", True),
        ('refund for the "annual SMB" plan', True),
        ("refund window for SMB plans in 2025", False),
        ("how long is the refund window", False),
    ],
)
def test_literal_pattern(query: str, literal: bool):
    assert pl.Series([query]).str.contains(LITERAL_PATTERN).item() is literal
