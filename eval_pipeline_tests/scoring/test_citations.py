"""Citations: the §11 mapping of structured citations, per-claim verdicts, and citation_scores."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.judge import make_judge
from eval_pipeline.scoring.citations import CITATION_SCORES_SCHEMA, claims_and_citations, score_citations
from eval_pipeline.scoring.claims import extract_claims, judge_claims
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import traces_frame_from_records

WINDOW = "Annual SMB plans can be refunded within 14 days"
PROCESSING = "Processing takes 5 business days"


def _score(context, corpus, rag_cases, records, settings: ScoringSettings | None = None):
    traces = traces_frame_from_records([{"case_id": "c1", "context": context, **r} for r in records])
    judge = make_judge("local")
    judged = judge_claims(extract_claims(traces), traces, judge)
    claims, scores = score_citations(judged, traces, corpus, judge, settings or ScoringSettings(), cases=rag_cases)
    return claims, {r["trace_id"]: r for r in scores.to_dicts()}


def test_every_claim_supported_by_its_inline_citation_passes(context, corpus, rag_cases):
    claims, scores = _score(
        context,
        corpus,
        rag_cases,
        [
            {
                "trace_id": "t1",
                "answer": {"text": f"{WINDOW} [doc:policy/refunds-2025]. {PROCESSING} [doc:billing/faq]."},
            }
        ],
    )
    assert claims.select("claim_index", "cited_doc_ids", "citation_verdict").rows() == [
        (0, ["policy/refunds-2025"], "SUPPORTS"),
        (1, ["billing/faq"], "SUPPORTS"),
    ]
    row = scores["t1"]
    assert (
        row["citation_precision"],
        row["citation_recall"],
        row["citation_resolution_rate"],
        row["n_dead_citations"],
    ) == (1.0, 1.0, 1.0, 0)
    assert (row["citation_stage"], row["citation_reason"], row["status"], row["quotes_found_rate"]) == (
        "pass",
        None,
        "scored",
        None,
    )


def test_wrong_dead_and_missing_citations(context, corpus, rag_cases):
    claims, scores = _score(
        context,
        corpus,
        rag_cases,
        [
            {
                "trace_id": "t2",
                "answer": {
                    "text": f"{WINDOW} [doc:billing/faq]. {PROCESSING} [doc:ghost/doc]. No fee is charged.",
                    "citations": [
                        {"doc_id": "pricing/plans", "claim_index": 2},
                        {"doc_id": "billing/faq", "quote": "Processing takes 5 business days."},
                    ],
                },
            }
        ],
    )
    assert claims.select("claim_index", "cited_doc_ids", "citation_verdict").rows() == [
        # billing/faq does not say 14 days
        (0, ["billing/faq"], "RELATED_NOT_SUPPORTING"),
        # the quote overlaps claim 1 most (process, 5, business, day): billing/faq supports it, ghost/doc is dead
        (1, ["ghost/doc", "billing/faq"], "SUPPORTS"),
        # claim_index 2 names the claim; pricing/plans exists in the corpus only and says nothing of fees
        (2, ["pricing/plans"], "RELATED_NOT_SUPPORTING"),
    ]
    row = scores["t2"]
    # pairs: (0, billing/faq) no, (1, ghost/doc) dead, (1, billing/faq) yes, (2, pricing/plans) no: precision 1/4
    assert (row["n_citation_pairs"], row["citation_precision"]) == (4, 0.25)
    # claims with a supporting citation: 1 of 3
    assert row["citation_recall"] == pytest.approx(1 / 3)
    # cited ids billing/faq, ghost/doc, pricing/plans: 2 of 3 resolve
    assert row["citation_resolution_rate"] == pytest.approx(2 / 3)
    assert (row["n_dead_citations"], row["dead_citation_ids"], row["quotes_found_rate"]) == (1, ["ghost/doc"], 1.0)
    assert row["citation_stage"] == "fail"
    assert (
        row["citation_reason"]
        == "2 of 3 claims lack a supporting citation (first: claim 0 RELATED_NOT_SUPPORTING); dead citations: ghost/doc"
    )


def test_a_claim_citing_only_a_dead_id_is_a_dead_citation_and_quotes_are_searched_in_the_corpus(
    context, corpus, rag_cases
):
    claims, scores = _score(
        context,
        corpus,
        rag_cases,
        [
            {
                "trace_id": "t3",
                "answer": {
                    "text": f"{WINDOW} [doc:ghost/doc].",
                    "citations": [
                        {
                            "doc_id": "pricing/plans",
                            "quote": "The Pro plan costs  $49.00\nper month.",
                            "claim_index": 0,
                        },
                        {"doc_id": "pricing/plans", "quote": "The Pro plan costs $39.00 per month.", "claim_index": 0},
                    ],
                },
            }
        ],
    )
    assert claims.select("cited_doc_ids", "citation_verdict", "citation_reason").rows() == [
        (["ghost/doc", "pricing/plans"], "DEAD_CITATION", "cited id ghost/doc is in neither the corpus nor the context")
    ]
    # One of the two quotes is in the corpus once white space is folded.
    assert scores["t3"]["quotes_found_rate"] == 0.5


def test_uncited_claims_follow_the_citations_required_setting(context, corpus, rag_cases):
    records = [{"trace_id": "t4", "answer": {"text": f"{WINDOW}."}}]
    claims, optional = _score(context, corpus, rag_cases, records)
    assert claims["citation_verdict"].to_list() == ["UNCITED"]
    assert (optional["t4"]["citation_stage"], optional["t4"]["status"], optional["t4"]["citation_recall"]) == (
        "not_applicable",
        "not_applicable",
        None,
    )
    assert optional["t4"]["reason"] == "the answer cites nothing and the run does not require citations"
    _, required = _score(context, corpus, rag_cases, records, ScoringSettings(citations_required=True))
    assert (
        required["t4"]["citation_stage"],
        required["t4"]["citation_recall"],
        required["t4"]["citation_precision"],
    ) == ("fail", 0.0, None)
    assert required["t4"]["citation_reason"] == "1 of 1 claims lack a supporting citation (first: claim 0 UNCITED)"


def test_a_citation_without_claim_index_or_quote_cites_every_claim(context, corpus, rag_cases):
    claims, scores = _score(
        context,
        corpus,
        rag_cases,
        [
            {
                "trace_id": "t5",
                "answer": {"text": f"{WINDOW}. {PROCESSING}.", "citations": [{"doc_id": "policy/refunds-2025"}]},
            }
        ],
    )
    assert claims.select("cited_doc_ids", "citation_verdict").rows() == [
        (["policy/refunds-2025"], "SUPPORTS"),
        (["policy/refunds-2025"], "RELATED_NOT_SUPPORTING"),
    ]
    assert (scores["t5"]["citation_precision"], scores["t5"]["citation_recall"], scores["t5"]["citation_stage"]) == (
        0.5,
        0.5,
        "fail",
    )


def test_harness_errors_are_incomplete_and_the_schema_holds(context, corpus, rag_cases):
    traces = traces_frame_from_records([{"trace_id": "t6", "case_id": "c1", "status": "error", "error": "crash"}])
    judge = make_judge("local")
    claims, scores = score_citations(
        judge_claims(extract_claims(traces), traces, judge),
        traces,
        corpus,
        judge,
        ScoringSettings(citations_required=True),
        cases=rag_cases,
    )
    assert claims.height == 0
    assert scores.schema == pl.Schema(CITATION_SCORES_SCHEMA)
    assert scores.select("status", "citation_stage", "citation_reason").rows() == [
        ("incomplete", "incomplete", "harness status error: crash")
    ]


def test_batches_of_traces_give_the_same_claims_and_scores_as_one_batch(context, corpus, rag_cases):
    traces = traces_frame_from_records(
        [
            {
                "case_id": "c1",
                "context": context,
                "trace_id": "t1",
                "answer": {"text": f"{WINDOW} [doc:policy/refunds-2025]."},
            },
            {
                "case_id": "c1",
                "context": context,
                "trace_id": "t2",
                "answer": {"text": f"{PROCESSING} [doc:ghost/doc]. No fee."},
            },
            {"case_id": "c-agent", "context": context, "trace_id": "t-agent", "answer": {"text": WINDOW}},
            {"case_id": "c1", "context": context, "trace_id": "t3", "answer": {"text": f"{WINDOW} [doc:billing/faq]."}},
        ]
    )
    whole = claims_and_citations(traces, corpus, rag_cases, make_judge("local"), ScoringSettings())
    batched = claims_and_citations(traces, corpus, rag_cases, make_judge("local"), ScoringSettings(), batch_traces=1)
    assert whole[0].height == 4 and whole[1]["trace_id"].to_list() == ["t1", "t2", "t3"]
    assert batched[0].equals(whole[0]) and batched[1].equals(whole[1])


def test_citations_of_an_answer_without_logged_context_are_incomplete_not_dead(context, corpus, rag_cases):
    text = f"{WINDOW} [doc:policy/refunds-2025]. {PROCESSING} [doc:ghost/doc]."
    claims, scores = _score(
        context,
        corpus,
        rag_cases,
        [
            {"trace_id": "t-null", "context": None, "answer": {"text": text}},
            {"trace_id": "t-with", "answer": {"text": text}},
        ],
    )
    assert claims.select("trace_id", "claim_index", "cited_doc_ids", "citation_verdict", "citation_reason").rows() == [
        ("t-null", 0, ["policy/refunds-2025"], None, "no_context_logged"),
        ("t-null", 1, ["ghost/doc"], None, "no_context_logged"),
        ("t-with", 0, ["policy/refunds-2025"], "SUPPORTS", None),
        ("t-with", 1, ["ghost/doc"], "DEAD_CITATION", "cited id ghost/doc is in neither the corpus nor the context"),
    ]
    blind, seen = scores["t-null"], scores["t-with"]
    # Without the context, ghost/doc may have been in it: no rate, no dead count, no verdict.
    assert (
        blind["n_claims"],
        blind["n_citation_pairs"],
        blind["citation_precision"],
        blind["citation_recall"],
        blind["citation_resolution_rate"],
        blind["n_dead_citations"],
        blind["dead_citation_ids"],
    ) == (2, 2, None, None, None, None, None)
    assert (blind["status"], blind["reason"], blind["citation_stage"], blind["citation_reason"]) == (
        "incomplete",
        "no_context_logged",
        "incomplete",
        "no_context_logged",
    )
    # With it: pairs (0, refunds) supports, (1, ghost) dead: precision 1/2, recall 1/2, 1 of 2 ids resolve
    assert (
        seen["citation_precision"],
        seen["citation_recall"],
        seen["citation_resolution_rate"],
        seen["n_dead_citations"],
        seen["citation_stage"],
    ) == (0.5, 0.5, 0.5, 1, "fail")
