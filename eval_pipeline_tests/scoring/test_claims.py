"""Claim extraction: sentence splitting, inline citations, pleasantries, refusals."""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.claims import CLAIMS_SCHEMA, extract_claims
from eval_pipeline_harness.records import traces_frame_from_records


def _claims(text: str) -> list[tuple[str, list[str]]]:
    traces = traces_frame_from_records([{"trace_id": "t1", "case_id": "c1", "answer": {"text": text}}])
    claims = extract_claims(traces)
    assert claims["claim_index"].to_list() == list(range(claims.height))
    return list(zip(claims["claim"].to_list(), claims["inline_cited_doc_ids"].to_list(), strict=True))


def test_markers_attach_to_the_sentence_they_follow_before_or_after_the_period():
    text = (
        "Annual SMB plans can be refunded within 14 days [doc:policy/refunds-2025]. "
        "Refunds take 5 business days. [doc:billing/faq] [doc:billing/faq-2]"
    )
    assert _claims(text) == [
        ("Annual SMB plans can be refunded within 14 days.", ["policy/refunds-2025"]),
        ("Refunds take 5 business days.", ["billing/faq", "billing/faq-2"]),
    ]


def test_decimals_abbreviations_and_eg_do_not_split_a_sentence():
    text = (
        "The fee is $49.00 per month, e.g. for the Pro plan. Dr. Smith approved No. 5 of the list. "
        "It costs approx. 3.5 credits."
    )
    assert [c for c, _ in _claims(text)] == [
        "The fee is $49.00 per month, e.g. for the Pro plan.",
        "Dr. Smith approved No. 5 of the list.",
        "It costs approx. 3.5 credits.",
    ]


def test_pleasantries_offers_questions_and_refusals_are_not_claims():
    text = (
        "Thanks for reaching out! Annual SMB plans have a 14 day refund window. "
        "Would you like me to start a refund? I couldn't find anything about enterprise plans. "
        "Let me know if you need anything else. Happy to help!"
    )
    assert _claims(text) == [("Annual SMB plans have a 14 day refund window.", [])]


def test_list_items_are_separate_claims_and_the_lead_in_is_not_a_claim():
    text = (
        "Here is what applies:\n- Annual plans: 14 days [doc:a]\n- Monthly plans are not refundable\n"
        "1. Refunds take 5 days."
    )
    assert _claims(text) == [
        ("Annual plans: 14 days", ["a"]),
        ("Monthly plans are not refundable", []),
        ("Refunds take 5 days.", []),
    ]


def test_traces_without_text_or_with_harness_errors_yield_no_claims():
    traces = traces_frame_from_records(
        [
            {"trace_id": "t-ok", "case_id": "c1", "attempt": 2, "answer": {"text": "Refunds take 5 days. Thanks!"}},
            {
                "trace_id": "t-error",
                "case_id": "c1",
                "status": "error",
                "error": "boom",
                "answer": {"text": "Refunds take 5 days."},
            },
            {"trace_id": "t-refused", "case_id": "c1", "answer": {"refused": True}},
            {"trace_id": "t-none", "case_id": "c1"},
        ],
        run_id="run-7",
    )
    claims = extract_claims(traces)
    assert claims.schema == pl.Schema(CLAIMS_SCHEMA)
    assert claims.to_dicts() == [
        {
            "run_id": "run-7",
            "trace_id": "t-ok",
            "case_id": "c1",
            "attempt": 2,
            "claim_index": 0,
            "claim": "Refunds take 5 days.",
            "inline_cited_doc_ids": [],
        }
    ]


def test_lower_case_chat_text_splits_and_its_interjections_are_not_claims():
    text = (
        "yes it does. historically archery has been used for hunting and combat! that's so cool. "
        "i agree with you. do you like it? the nfl has 32 teams etc. and more."
    )
    assert [c for c, _ in _claims(text)] == [
        "historically archery has been used for hunting and combat!",
        "the nfl has 32 teams etc. and more.",
    ]


def test_answers_repeated_across_traces_are_split_once_with_each_traces_claims_in_order():
    texts = [
        "Refunds take 5 days [doc:a]. Thanks!",
        "Annual plans renew yearly. Refunds take 5 days [doc:b].",
        "Refunds take 5 days [doc:a]. Thanks!",
        "Thanks!",
        "Annual plans renew yearly. Refunds take 5 days [doc:b].",
        "Refunds take 5 days [doc:a]. Thanks!",
    ]
    records = [{"trace_id": f"t{i}", "case_id": f"c{i % 2}", "answer": {"text": text}} for i, text in enumerate(texts)]
    together = extract_claims(traces_frame_from_records(records))
    one_by_one = pl.concat([extract_claims(traces_frame_from_records([record])) for record in records])
    assert together.to_dicts() == one_by_one.to_dicts()
    assert together.filter(pl.col("trace_id") == "t4").select(
        "claim_index", "claim", "inline_cited_doc_ids"
    ).rows() == [
        (0, "Annual plans renew yearly.", []),
        (1, "Refunds take 5 days.", ["b"]),
    ]
