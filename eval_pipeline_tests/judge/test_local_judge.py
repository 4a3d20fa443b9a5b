"""The graded local judge on hand-checked claims.

Support across sentences, numbers and units, names, negation, normalisation, the score and its threshold, and reasons
a person can check.
"""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.judge import make_judge
from eval_pipeline.judge.local import LocalJudge
from eval_pipeline.judge.profile import JudgeProfile, default_profile

THRESHOLD = default_profile("local").support_threshold
INVOICES = (
    "Enterprise invoices are payable within 30 days (Net 30); Starter and Pro plans are charged monthly in advance."
)
REFUNDS = "Refunds are issued within 14 days. They go back to the original payment method."


def judge(claim: str, *evidence: str, judge_: LocalJudge | None = None) -> dict:
    requests = pl.DataFrame(
        {
            "request_key": ["k"],
            "claim": [claim],
            "evidence": [[{"doc_id": f"doc-{i}", "text": t} for i, t in enumerate(evidence)]],
        }
    )
    return (judge_ or make_judge("local")).judge_claims(requests).to_dicts()[0]


def test_a_unit_is_never_read_across_clause_punctuation():
    # v1 read the unit of "(Net 30)" across ");" as "starter"; the claim's 30|day and 30|net are both in the evidence.
    result = judge("Enterprise invoices are payable within 30 days (Net 30).", INVOICES)
    assert (result["verdict"], result["score"], result["evidence_quote"]) == ("SUPPORTED", 1.0, INVOICES)
    assert result["reason"] == f"support 1.0 >= {THRESHOLD:g}: 6 of 6 claim words in 1 evidence sentence(s)"


def test_support_from_two_adjacent_sentences_is_quoted_and_verified():
    result = judge("Refunds are issued within 14 days to the original payment method.", REFUNDS)
    assert (result["verdict"], result["score"], result["quote_verified"]) == ("SUPPORTED", 1.0, True)
    assert (
        result["evidence_quote"] == "Refunds are issued within 14 days. … They go back to the original payment method."
    )
    assert result["reason"] == f"support 1.0 >= {THRESHOLD:g}: 7 of 7 claim words in 2 evidence sentence(s)"


def test_support_from_sentences_of_two_chunks():
    result = judge(
        "Refunds are issued within 14 days to the original payment method.",
        "Refunds are issued within 14 days.",
        "Cards are charged monthly. They go back to the original payment method.",
    )
    assert (result["verdict"], result["evidence_doc_id"], result["quote_verified"]) == ("SUPPORTED", "doc-0", True)


@pytest.mark.parametrize(
    ("claim", "evidence", "conflict"),
    [
        ("Refunds are issued within 30 days.", REFUNDS, "conflicting value claim 30 day vs evidence 14 day"),
        (
            "The office opened on March 3, 2019.",
            "The office opened on March 5, 2019 in Berlin.",
            "conflicting value claim 3 march vs evidence 5 march",
        ),
        (
            "The office opened on March 3, 2019.",
            "The office opened on March 3, 2018 in Berlin.",
            "conflicting value claim 2019 yr vs evidence 2018 yr",
        ),
        (
            "The office opened in April 2019.",
            "The office opened in March 2019 in Berlin.",
            "conflicting month: claim april vs evidence march",
        ),
        (
            "CEO John Smith announced the merger.",
            "CEO Jane Doe announced the merger on Monday.",
            "conflicting name claim john vs evidence jane, claim smith vs evidence doe",
        ),
        (
            "The Pro plan costs $19.95 per month.",
            "The Pro plan costs 14.95 USD per month.",
            "conflicting value claim 19.95 $ vs evidence 14.95 $",
        ),
        (
            "Delivery takes 7 to 10 business days.",
            "Delivery takes 7-12 business days.",
            "conflicting value claim 10 busi vs evidence 12 busi",
        ),
        ("Monthly plans are refundable.", "Monthly plans are not refundable.", "negated on one side only: refundable"),
    ],
)
def test_a_changed_number_date_name_or_negation_is_contradicted(claim, evidence, conflict):
    result = judge(claim, evidence)
    assert result["verdict"] == "CONTRADICTED" and conflict in result["reason"]
    # a conflict halves the score: it never reaches the support threshold
    assert result["score"] <= 0.5 < THRESHOLD


def test_an_added_unsupported_clause_is_not_in_evidence():
    result = judge("Refunds are issued within 14 days and a gift card is sent to every customer.", REFUNDS)
    assert (result["verdict"], result["score"]) == ("NOT_IN_EVIDENCE", 0.5)
    assert result["reason"] == (
        f"support 0.5 < {THRESHOLD:g}: 4 of 8 claim words in 1 evidence sentence(s); "
        "not found: card, customer, gift, sent"
    )


def test_negation_in_another_clause_is_ignored():
    evidence = "Monthly plans are not refundable, but annual plans are refundable within 14 days."
    assert judge("Annual plans are refundable within 14 days.", evidence)["verdict"] == "SUPPORTED"
    assert judge("Monthly plans are not refundable.", evidence)["verdict"] == "SUPPORTED"
    # a negation that governs another word says nothing about the claim's words
    assert (
        judge(
            "The Nile flows through Egypt.",
            "Since rainfall is almost non-existent in Egypt, the Nile offered a fertile oasis.",
        )["verdict"]
        == "SUPPORTED"
    )


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("The Pro plan costs $14.95 per month.", "The Pro plan costs 14.95 USD per month."),
        ("Delivery takes 7-12 business days.", "Delivery takes 7 to 12 business days."),
        ("The discount is 15 percent.", "A 15% discount applies."),
        ("The event was held on 2016-07-20.", "The event was held on 20 July 2016."),
        ("The event was held on July 20th, 2016.", "The event was held on 20 July 2016."),
        ("The colour of the organisation's logo is grey.", "The color of the organization's logo is gray."),
        ("You can e-mail support.", "You can email support at any time."),
        ("The children went to the theatre centre.", "A child goes to the theater center."),
        ("Six seats are included.", "The plan includes 6 seats."),
    ],
)
def test_values_and_spellings_compare_as_equals(claim, evidence):
    result = judge(claim, evidence)
    assert (result["verdict"], result["score"]) == ("SUPPORTED", 1.0), result["reason"]


def test_missing_numbers_names_and_opinions_cap_the_score():
    # 3 of 4 words found, but the number is missing: 0.75 * 0.5
    missing_number = judge("Refunds are issued within 30 minutes.", "Refunds are issued within minutes.")
    assert (missing_number["verdict"], missing_number["score"]) == ("NOT_IN_EVIDENCE", 0.375)
    assert "number not in the evidence: 30" in missing_number["reason"]
    missing_name = judge("Refunds are issued by Stripe within 14 days.", REFUNDS)
    assert missing_name["verdict"] == "NOT_IN_EVIDENCE" and "name not in the evidence: stripe" in missing_name["reason"]
    # "Thomas Arnold" is present through "Arnold"; its missing word costs 0.3 of the score instead of half
    partial = judge("The publisher Thomas Arnold runs Media Play News.", "The publisher Arnold runs Media Play News.")
    assert (partial["verdict"], partial["score"]) == ("SUPPORTED", round(6 / 7 * 0.7, 4))
    opinion = judge("Refunds are sadly issued within 14 days, which is great.", REFUNDS)
    assert opinion["verdict"] == "NOT_IN_EVIDENCE" and "opinion not in the evidence: great" in opinion["reason"]


def test_the_verdict_follows_the_profile_threshold_and_the_version_names_it():
    lenient = LocalJudge(JudgeProfile(backend="local", support_threshold=0.501, source="test"))
    strict = LocalJudge(JudgeProfile(backend="local", support_threshold=0.9, source="test"))
    claim = "Refunds are issued within 14 days to the card."
    assert judge(claim, REFUNDS, judge_=lenient)["verdict"] == "SUPPORTED"
    assert judge(claim, REFUNDS, judge_=strict)["verdict"] == "NOT_IN_EVIDENCE"
    assert judge(claim, REFUNDS, judge_=lenient)["score"] == judge(claim, REFUNDS, judge_=strict)["score"] == 0.8
    assert len({lenient.version, strict.version, make_judge("local").version}) == 3
    assert all(v.startswith("local-2.0+") for v in (lenient.version, strict.version))


def test_every_verdict_has_a_reason():
    requests = pl.DataFrame(
        {
            "request_key": ["a", "b", "c", "d", "e"],
            "claim": [
                "Refunds take 14 days.",
                "Yes.",
                "Gift cards never expire.",
                "Refunds take 30 days.",
                "Anything.",
            ],
            "evidence": [[{"doc_id": "d", "text": REFUNDS}]] * 4 + [[]],
        }
    )
    results = make_judge("local").judge_claims(requests)
    assert results["reason"].null_count() == 0 and results["score"].null_count() == 0
    assert results.filter(pl.col("request_key") == "b")["reason"].to_list() == ["the claim has no content words"]
    assert results.filter(pl.col("request_key") == "e")["reason"].to_list() == ["no evidence"]
    assert results["score"].is_between(0.0, 1.0).all()
