"""Grounding: exact claim verdicts of the local judge, the quote check, grounding_scores, and RAGChecker."""

from __future__ import annotations

import json

import polars as pl
import pytest

from eval_pipeline.judge import make_judge
from eval_pipeline.judge.base import Judge, evidence_sets
from eval_pipeline.judge.profile import default_profile
from eval_pipeline.scoring.claims import CLAIMS_SCHEMA, extract_claims, judge_claims
from eval_pipeline.scoring.grounding import score_grounding
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

REFUND_SENTENCE = "Annual SMB plans have a 14 day refund window."
LOCAL_VERSION = make_judge("local").version
THRESHOLD = f"{default_profile('local').support_threshold:g}"


def _judge_one(judge: Judge, claim: str, evidence: list[dict]) -> dict:
    requests = pl.DataFrame(
        {
            "request_key": ["k"],
            "claim": [claim],
            "evidence": [[{"doc_id": e["doc_id"], "text": e["text"]} for e in evidence]],
        }
    )
    return judge.judge_claims(requests).drop("request_key").to_dicts()[0]


@pytest.mark.parametrize(
    ("claim", "verdict", "score", "quote", "reason"),
    [
        # every content word (annual, smb, plan, refund, 14, day) is in the sentence
        (
            "Annual SMB plans can be refunded within 14 days.",
            "SUPPORTED",
            1.0,
            REFUND_SENTENCE,
            f"support 1.0 >= {THRESHOLD}: 6 of 6 claim words in 1 evidence sentence(s)",
        ),
        # same unit (day), another value: 5/6 found, halved for the missing number and again for the conflict
        (
            "Annual SMB plans can be refunded within 30 days.",
            "CONTRADICTED",
            0.2083,
            REFUND_SENTENCE,
            "contradicted (support 0.2083): 5 of 6 claim words in 1 evidence sentence(s); "
            "conflicting value claim 30 day vs evidence 14 day; number not in the evidence: 30",
        ),
        (
            "Processing takes 10 business days.",
            "CONTRADICTED",
            0.2,
            "Processing takes 5 business days.",
            "contradicted (support 0.2): 4 of 5 claim words in 1 evidence sentence(s); "
            "conflicting value claim 10 busi vs evidence 5 busi; number not in the evidence: 10",
        ),
        # "refundable" is negated in the evidence only
        (
            "Monthly plans are refundable.",
            "CONTRADICTED",
            0.5,
            "Monthly plans are not refundable.",
            "contradicted (support 0.5): 3 of 3 claim words in 1 evidence sentence(s); "
            "negated on one side only: refundable",
        ),
        # "monthly" is found in the second sentence, but the sentence that carries the claim says annual
        (
            "Monthly SMB plans have a 14 day refund window.",
            "CONTRADICTED",
            0.5,
            f"{REFUND_SENTENCE} … Monthly plans are not refundable.",
            "contradicted (support 0.5): 7 of 7 claim words in 2 evidence sentence(s); "
            "conflicting period: claim monthly vs evidence annual",
        ),
        # nothing in the evidence speaks of fees: 1 of 3 words (refund)
        (
            "No fee is charged for refunds.",
            "NOT_IN_EVIDENCE",
            0.3333,
            REFUND_SENTENCE,
            f"support 0.3333 < {THRESHOLD}: 1 of 3 claim words in 1 evidence sentence(s); not found: charged, fee",
        ),
        (
            "Gift cards never expire.",
            "NOT_IN_EVIDENCE",
            0.0,
            None,
            "support 0: no evidence sentence shares a word with the claim",
        ),
    ],
)
def test_local_judge_gives_the_exact_verdict_score_and_the_sentences_it_used(
    context, claim, verdict, score, quote, reason
):
    result = _judge_one(make_judge("local"), claim, context)
    assert (result["verdict"], result["score"], result["evidence_quote"], result["reason"]) == (
        verdict,
        score,
        quote,
        reason,
    )
    assert result["quote_verified"] is (quote is not None)
    assert (
        result["status"] == "ok"
        and result["judge_version"] == LOCAL_VERSION
        and result["judge_model"] == "local-lexical"
    )


def test_a_claim_without_evidence_is_not_in_evidence():
    result = _judge_one(make_judge("local"), "Annual SMB plans can be refunded within 14 days.", [])
    assert (
        result["verdict"],
        result["score"],
        result["evidence_quote"],
        result["quote_verified"],
        result["reason"],
    ) == ("NOT_IN_EVIDENCE", 0.0, None, False, "no evidence")


class FabricatingJudge(Judge):
    """A backend that is sure of itself: SUPPORTED with a quote it made up, or one copied with odd spacing."""

    version, model = "fabricating-1", "none"

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        quotes = {
            "fabricated": "Annual SMB plans have a 30 day refund window.",
            "respaced": "Annual  SMB plans\nhave a 14 day refund window.",
            "two passages": "Annual SMB plans have a 14 day refund window. … Processing takes 5 business days.",
            "one passage made up": "Annual SMB plans have a 14 day refund window. … Refunds are instant.",
        }
        return requests.select(
            "request_key",
            pl.lit("SUPPORTED").alias("verdict"),
            pl.col("claim").replace_strict(quotes, default=None).alias("evidence_quote"),
            pl.lit("billing/faq").alias("evidence_doc_id"),
            pl.lit("ok").alias("status"),
        )

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("pairwise is not used here")


def test_a_quote_not_in_the_evidence_downgrades_the_verdict(context):
    requests = pl.DataFrame(
        {
            "request_key": ["f", "r", "n", "t", "m"],
            "claim": ["fabricated", "respaced", "no quote", "two passages", "one passage made up"],
        }
    ).with_columns(evidence=pl.lit([{"doc_id": c["doc_id"], "text": c["text"]} for c in context]))
    results = {r["request_key"]: r for r in FabricatingJudge().judge_claims(requests).to_dicts()}
    assert (results["f"]["verdict"], results["f"]["quote_verified"], results["f"]["reason"]) == (
        "NOT_IN_EVIDENCE",
        False,
        "quote not found in the evidence: SUPPORTED downgraded to NOT_IN_EVIDENCE",
    )
    # White space is folded before the search, and the doc where the quote was found replaces the judge's guess.
    assert (results["r"]["verdict"], results["r"]["quote_verified"], results["r"]["evidence_doc_id"]) == (
        "SUPPORTED",
        True,
        "policy/refunds-2025",
    )
    assert (results["n"]["verdict"], results["n"]["quote_verified"], results["n"]["reason"]) == (
        "NOT_IN_EVIDENCE",
        False,
        "no evidence quote given: SUPPORTED downgraded to NOT_IN_EVIDENCE",
    )
    # A quote of passages joined by " … " is verified passage by passage, in any chunk (its doc: the first passage's);
    # one made-up passage is enough to downgrade it.
    assert (results["t"]["verdict"], results["t"]["quote_verified"], results["t"]["evidence_doc_id"]) == (
        "SUPPORTED",
        True,
        "policy/refunds-2025",
    )
    assert (results["m"]["verdict"], results["m"]["quote_verified"]) == ("NOT_IN_EVIDENCE", False)


def _sample_traces(context):
    return traces_frame_from_records(
        [
            {
                "trace_id": "t-good",
                "case_id": "c1",
                "context": context,
                "answer": {
                    "text": "Annual SMB plans can be refunded within 14 days [doc:policy/refunds-2025]. Happy to help!"
                },
            },
            {
                "trace_id": "t-bad",
                "case_id": "c1",
                "context": context,
                "answer": {
                    "text": (
                        "Annual SMB plans can be refunded within 30 days. Processing takes 5 business days. "
                        "No fee is charged."
                    )
                },
            },
            {"trace_id": "t-refusal", "case_id": "c-refusal", "context": context, "answer": {"text": "I don't know."}},
            {"trace_id": "t-timeout", "case_id": "c1", "status": "timeout", "error": "provider timeout"},
            {"trace_id": "t-blank", "case_id": "c1"},
            {"trace_id": "t-agent", "case_id": "c-agent", "answer": {"text": "Refund issued."}},
        ]
    )


def test_grounding_scores_per_rag_trace(context, rag_cases):
    traces = _sample_traces(context)
    judged = judge_claims(extract_claims(traces), traces, make_judge("local"))
    assert judged.filter(pl.col("trace_id") == "t-bad")["verdict"].to_list() == [
        "CONTRADICTED",
        "SUPPORTED",
        "NOT_IN_EVIDENCE",
    ]
    scores = score_grounding(judged, traces, rag_cases, ScoringSettings())
    rows = {r["trace_id"]: r for r in scores.to_dicts()}
    assert set(rows) == {
        "t-good",
        "t-bad",
        "t-refusal",
        "t-timeout",
        "t-blank",
    }  # the agent-only case is not in the lane
    good, bad = rows["t-good"], rows["t-bad"]
    assert (good["n_claims"], good["n_supported"], good["grounding_rate"], good["grounding_stage"], good["status"]) == (
        1,
        1,
        1.0,
        "pass",
        "scored",
    )
    # 1 supported of 3 claims: 1/3
    assert (bad["n_claims"], bad["n_supported"], bad["n_contradicted"], bad["n_not_in_evidence"]) == (3, 1, 1, 1)
    assert bad["grounding_rate"] == pytest.approx(1 / 3)
    assert bad["grounding_stage"] == "fail"
    assert bad["grounding_reason"] == (
        "grounding_rate 0.3333 < threshold 1.0: 1 contradicted, 1 not in evidence "
        "(first: claim 0 CONTRADICTED: Annual SMB plans can be refunded within 30 days.)"
    )
    # A refusal asserts nothing: no claims, rate 1.0.
    assert (
        rows["t-refusal"]["n_claims"],
        rows["t-refusal"]["grounding_rate"],
        rows["t-refusal"]["grounding_stage"],
    ) == (0, 1.0, "pass")
    assert (
        rows["t-timeout"]["grounding_stage"],
        rows["t-timeout"]["grounding_rate"],
        rows["t-timeout"]["grounding_reason"],
    ) == ("incomplete", None, "harness status timeout: provider timeout")
    assert (rows["t-blank"]["status"], rows["t-blank"]["reason"]) == ("incomplete", "trace has no answer")
    assert {r["judge_version"] for r in rows.values()} == {LOCAL_VERSION}


def test_threshold_below_one_lets_a_partly_grounded_answer_pass(context, rag_cases):
    traces = _sample_traces(context)
    judged = judge_claims(extract_claims(traces), traces, make_judge("local"))
    scores = score_grounding(judged, traces, rag_cases, ScoringSettings(grounding_threshold=0.3))
    # 1/3 = 0.333 >= 0.3
    assert scores.filter(pl.col("trace_id") == "t-bad")["grounding_stage"].to_list() == ["pass"]


def test_an_incomplete_claim_makes_the_rate_null_not_zero(context, rag_cases):
    traces = _sample_traces(context)
    judged = judge_claims(extract_claims(traces), traces, make_judge("local")).with_columns(
        status=pl.when(pl.col("claim_index") == 2).then(pl.lit("incomplete")).otherwise(pl.col("status")),
        reason=pl.when(pl.col("claim_index") == 2)
        .then(pl.lit("failed after 5 attempts: HTTP 429"))
        .otherwise(pl.col("reason")),
        verdict=pl.when(pl.col("claim_index") == 2).then(None).otherwise(pl.col("verdict")),
    )
    row = (
        score_grounding(judged, traces, rag_cases, ScoringSettings())
        .filter(pl.col("trace_id") == "t-bad")
        .to_dicts()[0]
    )
    assert (row["grounding_rate"], row["n_incomplete"], row["status"], row["grounding_stage"], row["reason"]) == (
        None,
        1,
        "incomplete",
        "incomplete",
        "judge could not finish 1 of 3 claims: failed after 5 attempts: HTTP 429",
    )


class RecordedEntailmentJudge(Judge):
    """Replays RAGChecker's retrieved2response matrix: SUPPORTED when at least one chunk entails the claim."""

    version, model = "ragchecker-recorded", "ragchecker"

    def __init__(self, entailment: dict[tuple[str, str], str]) -> None:
        self.entailment = entailment

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        chunks = evidence_sets(requests).to_dicts()
        rows = []
        for request in requests.select("request_key", "claim", "evidence_key").to_dicts():
            mine = [c for c in chunks if c["evidence_key"] == request["evidence_key"]]
            entailing = [c for c in mine if self.entailment[(request["claim"], c["doc_id"])] == "Entailment"]
            rows.append(
                {
                    "request_key": request["request_key"],
                    "status": "ok",
                    "verdict": "SUPPORTED" if entailing else "NOT_IN_EVIDENCE",
                    "evidence_quote": entailing[0]["text"] if entailing else None,
                    "evidence_doc_id": entailing[0]["doc_id"] if entailing else None,
                }
            )
        return pl.DataFrame(rows)

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("pairwise is not used here")


def test_grounding_rate_reproduces_ragchecker_faithfulness(ragchecker_outputs):
    results = json.loads(ragchecker_outputs.read_text())["results"]
    traces, claims, entailment = [], [], {}
    for item in results:
        trace_id = f"ragchecker-{item['query_id']}"
        traces.append(
            {
                "trace_id": trace_id,
                "case_id": trace_id,
                "input": item["query"],
                "context": item["retrieved_context"],
                "answer": {"text": item["response"]},
            }
        )
        for index, triplet in enumerate(item["response_claims"]):
            claim = " ".join(triplet)
            claims.append(
                {
                    "run_id": "ragchecker",
                    "trace_id": trace_id,
                    "case_id": trace_id,
                    "attempt": 1,
                    "claim_index": index,
                    "claim": claim,
                    "inline_cited_doc_ids": [],
                }
            )
            for chunk, verdict in zip(item["retrieved_context"], item["retrieved2response"][index], strict=True):
                entailment[(claim, chunk["doc_id"])] = verdict
    trace_frame = traces_frame_from_records(traces, run_id="ragchecker")
    cases = cases_frame_from_records(
        [{"case_id": t["case_id"], "lanes": ["rag"], "required_doc_ids": [t["context"][0]["doc_id"]]} for t in traces]
    )
    judged = judge_claims(pl.DataFrame(claims, schema=CLAIMS_SCHEMA), trace_frame, RecordedEntailmentJudge(entailment))
    scores = score_grounding(judged, trace_frame, cases, ScoringSettings()).sort("trace_id")
    # Query 0: 4 of 11 claims entailed by some chunk = 0.3636;
    # query 1: 5 of 5 (entailed despite contradicting chunks) = 1.0.
    assert scores.select("trace_id", "n_claims", "n_supported").rows() == [
        ("ragchecker-0", 11, 4),
        ("ragchecker-1", 5, 5),
    ]
    assert [round(r, 4) for r in scores["grounding_rate"]] == [0.3636, 1.0]
    assert scores["grounding_rate"].to_list() == pytest.approx([r["metrics"]["faithfulness"] for r in results])
    assert judged["quote_verified"].filter(judged["verdict"] == "SUPPORTED").to_list() == [True] * 9


class CountingJudge(Judge):
    """The local judge, counting the claims it is asked about."""

    def __init__(self) -> None:
        self.inner, self.asked = make_judge("local"), []
        self.version, self.model = self.inner.version, self.inner.model

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        self.asked.extend(requests["request_key"].to_list())
        return self.inner._judge_claims(requests)

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("pairwise is not used here")


def test_an_answer_without_logged_context_is_incomplete_not_a_zero_and_costs_no_judge_call(context, rag_cases):
    answer = {"text": "Annual SMB plans can be refunded within 30 days. Processing takes 5 business days."}
    traces = traces_frame_from_records(
        [
            {"trace_id": "t-null", "case_id": "c1", "answer": answer},
            {"trace_id": "t-empty", "case_id": "c1", "context": [], "answer": answer},
            {"trace_id": "t-with", "case_id": "c1", "context": context, "answer": answer},
        ]
    )
    judge = CountingJudge()
    judged = judge_claims(extract_claims(traces), traces, judge)
    # only the two claims of the trace that logged its context went to the judge
    assert judge.asked == ["test-run\x1ft-with\x1f0", "test-run\x1ft-with\x1f1"]
    assert judged.select("trace_id", "claim_index", "verdict", "status", "reason", "judge_version").rows()[:4] == [
        ("t-null", 0, None, "incomplete", "no_context_logged", LOCAL_VERSION),
        ("t-null", 1, None, "incomplete", "no_context_logged", LOCAL_VERSION),
        ("t-empty", 0, None, "incomplete", "no_context_logged", LOCAL_VERSION),
        ("t-empty", 1, None, "incomplete", "no_context_logged", LOCAL_VERSION),
    ]
    scores = score_grounding(judged, traces, rag_cases, ScoringSettings())
    # by trace id; with context: 30 days contradicts the 14-day window, 5 business days is supported: 1/2
    assert scores.select(
        "trace_id",
        "n_claims",
        "n_supported",
        "n_incomplete",
        "grounding_rate",
        "status",
        "reason",
        "grounding_stage",
        "grounding_reason",
    ).rows() == [
        ("t-empty", 2, 0, 2, None, "incomplete", "no_context_logged", "incomplete", "no_context_logged"),
        ("t-null", 2, 0, 2, None, "incomplete", "no_context_logged", "incomplete", "no_context_logged"),
        (
            "t-with",
            2,
            1,
            0,
            0.5,
            "scored",
            None,
            "fail",
            "grounding_rate 0.5 < threshold 1.0: 1 contradicted, 0 not in evidence "
            "(first: claim 0 CONTRADICTED: Annual SMB plans can be refunded within 30 days.)",
        ),
    ]
