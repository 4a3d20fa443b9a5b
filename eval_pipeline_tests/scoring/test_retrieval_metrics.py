"""retrieval_scores on hand-written traces: SPEC §5 worked examples, null rules, stage rule, sequence metrics."""

from __future__ import annotations

import math

import polars as pl
import pytest

from eval_pipeline.scoring.retrieval import RANKING_METRICS, score_retrieval, side_by_side
from eval_pipeline.settings import ScoringSettings


def score(rag, cases, traces, judgments=None, corpus=None, **settings):
    cases_frame, traces_frame, corpus_frame, qrels = rag.frames(cases, traces, corpus=corpus, judgments=judgments)
    return score_retrieval(traces_frame, cases_frame, qrels, corpus_frame, ScoringSettings(**settings))


def test_spec_ndcg_worked_example_and_the_other_ranking_metrics(rag):
    cases = [rag.case("c1", ["d2"])]
    # Grades by rank: d2 = 2 (seed), d1 unjudged = 0, d3 = 1 (human).
    traces = [rag.trace("t1", "c1", [rag.round("refund window", ["d2", "d1", "d3"])])]
    judgments = [{"query_id": "c1", "doc_id": "d3", "grade": 1, "annotator": "a1"}]
    row = rag.row(score(rag, cases, traces, judgments), "t1")
    # DCG@3 = 3/1 + 0/log2(3) + 1/log2(4) = 3.5; IDCG@3 = 3 + 1/log2(3) = 3.6309; nDCG@3 = 0.9639.
    assert round(row["ndcg_at_3"], 4) == 0.9639
    assert row["ndcg_at_3"] == pytest.approx(3.5 / (3 + 1 / math.log2(3)))
    assert row["ndcg_at_5"] == row["ndcg_at_10"] == row["ndcg_at_3"]
    # One relevant doc (grade >= 2), found at rank 1.
    assert (row["recall_at_1"], row["recall_at_20"], row["first_hit_rank"], row["mrr"]) == (1.0, 1.0, 1, 1.0)
    assert (row["precision_at_1"], row["precision_at_3"], row["precision_at_5"], row["precision_at_10"]) == (
        1.0,
        1 / 3,
        0.2,
        0.1,
    )
    assert row["context_precision"] == 1.0
    # d2 and d3 are judged, d1 is not: 2 of min(10, 3).
    assert row["judged_at_10"] == pytest.approx(2 / 3)
    assert (row["n_relevant"], row["n_retrieved"], row["retrieved_any"]) == (1, 3, True)
    assert (row["status"], row["reason"], row["retrieval_stage"], row["retrieval_reason"], row["failure_class"]) == (
        "scored",
        None,
        "pass",
        None,
        None,
    )
    assert row["input"] == "question of c1" and row["queries"] == ["refund window"] and row["variants"] == ["dense-v3"]


def test_linear_gain_option(rag):
    cases = [rag.case("c1", ["d2"])]
    traces = [rag.trace("t1", "c1", [rag.round("q", ["d2", "d1", "d3"])])]
    judgments = [{"query_id": "c1", "doc_id": "d3", "grade": 1}]
    row = rag.row(score(rag, cases, traces, judgments, gain="linear"), "t1")
    # gain = grade: DCG 2 + 1/2 = 2.5, IDCG 2 + 1/log2(3) = 2.6309 -> 0.9502 (trec_eval's ndcg_cut).
    assert round(row["ndcg_at_3"], 4) == 0.9502


def test_ragas_context_precision(rag):
    cases = [rag.case("c1", ["r"]), rag.case("c2", ["r1", "r2"])]
    traces = [
        rag.trace("first", "c1", [rag.round("q", ["r", "x"])]),
        rag.trace("second", "c1", [rag.round("q", ["x", "r"])]),
        rag.trace("none", "c1", [rag.round("q", ["x", "y"])]),
        rag.trace("two", "c2", [rag.round("q", ["r1", "x", "r2"])]),
    ]
    scores = score(rag, cases, traces)
    # [relevant, irrelevant] -> 1.0; [irrelevant, relevant] -> P@2 * 1 / 1 = 0.5.
    assert rag.row(scores, "first")["context_precision"] == 1.0
    assert rag.row(scores, "second")["context_precision"] == 0.5
    # Relevant docs exist but none is in the top K: 0.0, not null.
    assert rag.row(scores, "none")["context_precision"] == 0.0
    # (P@1 + P@3) / 2 = (1 + 2/3) / 2.
    assert rag.row(scores, "two")["context_precision"] == pytest.approx((1 + 2 / 3) / 2)
    assert rag.row(scores, "none")["mrr"] == 0.0 and rag.row(scores, "none")["first_hit_rank"] is None


def test_refusal_case_metrics_are_null_not_zero(rag):
    cases = [rag.case("r1", [], expect_refusal=True)]
    traces = [
        rag.trace("something", "r1", [rag.round("q", ["x"])]),
        rag.trace("nothing", "r1", [rag.round("q", [])]),
    ]
    scores = score(rag, cases, traces)
    for trace_id, retrieved in (("something", True), ("nothing", False)):
        row = rag.row(scores, trace_id)
        assert all(row[m] is None for m in RANKING_METRICS), trace_id
        assert (row["status"], row["retrieval_stage"], row["retrieved_any"]) == (
            "not_applicable",
            "not_applicable",
            retrieved,
        )
        assert row["reason"] == row["retrieval_reason"] == "refusal case: no relevant doc in the qrels"
        assert row["failure_class"] is None and row["n_relevant"] == 0
    # Pool coverage is still measured: x is unjudged.
    assert rag.row(scores, "something")["judged_at_10"] == 0.0
    assert rag.row(scores, "nothing")["judged_at_10"] is None


def test_stage_pass_uses_k(rag):
    cases = [rag.case("c1", ["r"])]
    traces = [rag.trace("t", "c1", [rag.round("q", ["x", "r"])], input="typed by the user")]
    at_2 = rag.row(score(rag, cases, traces, k=2), "t")
    at_1 = rag.row(score(rag, cases, traces, k=1), "t")
    assert (at_2["retrieval_stage"], at_2["context_precision"], at_2["k"]) == ("pass", 0.5, 2)
    # k = 1: r at rank 2 is outside; context precision uses K = 1 too.
    assert (at_1["retrieval_stage"], at_1["context_precision"]) == ("fail", 0.0)
    assert at_1["retrieval_reason"].startswith("no relevant doc in the top 1; failure_class embedding_miss (r)")
    assert at_1["input"] == "typed by the user"


def test_multi_hop_needs_every_required_doc(rag):
    cases = [rag.case("m", ["a", "b"], multi_hop=True)]
    traces = [
        rag.trace("both", "m", [rag.round("q", ["a", "b"])]),
        rag.trace("one", "m", [rag.round("q", ["a", "z"])]),
    ]
    scores = score(rag, cases, traces)
    assert rag.row(scores, "both")["retrieval_stage"] == "pass"
    one = rag.row(scores, "one")
    assert (one["retrieval_stage"], one["recall_at_10"], one["multi_hop"]) == ("fail", 0.5, True)
    assert one["retrieval_reason"].startswith(
        "multi_hop: required docs missing from the top 10: b; failure_class embedding_miss (b)"
    )


def test_sequence_metrics(rag):
    cases = [rag.case("c1", ["z"])]
    rounds = [
        rag.round("refund window", ["x", "y"], number=1),
        rag.round("Refund   WINDOW ", ["y", "z"], variant="bm25", number=2),
        rag.round("annual plan", [], number=3),
    ]
    row = rag.row(score(rag, cases, [rag.trace("t", "c1", rounds)]), "t")
    # Round 2 repeats round 1's query (case and spaces aside); its hits y (seen) and z (new): novelty 1/2.
    assert (row["rounds"], row["evidence_round"], row["repeated_queries"]) == (3, 2, 1)
    assert row["novelty_per_round"] == [1.0, 0.5, None]
    assert row["queries"] == ["refund window", "Refund   WINDOW ", "annual plan"]
    assert row["variants"] == ["dense-v3", "bm25", "dense-v3"]
    # Ranked list x, y, z (y of round 2 is a repeat): z at rank 3.
    assert (row["first_hit_rank"], row["n_retrieved"]) == (3, 3)
    assert row["mrr"] == pytest.approx(1 / 3)


def test_incomplete_rows_and_lane_membership(rag):
    cases = [rag.case("c1", ["r"]), {"case_id": "agent-1", "lanes": ["agent"], "input": "do it"}]
    traces = [
        rag.trace("boom", "c1", [rag.round("q", ["r"])], status="error", error="provider 500"),
        rag.trace("slow", "c1", None, status="timeout"),
        rag.trace("unlogged", "c1", None),
        rag.trace("agent", "agent-1", None),
    ]
    scores = score(rag, cases, traces)
    # The agent-only case has no row; every rag trace has one.
    assert sorted(scores.get_column("trace_id").to_list()) == ["boom", "slow", "unlogged"]
    boom, slow, unlogged = (rag.row(scores, t) for t in ("boom", "slow", "unlogged"))
    assert (boom["status"], boom["retrieval_stage"], boom["reason"]) == (
        "incomplete",
        "incomplete",
        "harness status error: provider 500",
    )
    assert boom["recall_at_10"] is None and boom["mrr"] is None and boom["failure_class"] is None
    assert slow["reason"] == "harness status timeout: no error message"
    assert (unlogged["status"], unlogged["reason"]) == (
        "incomplete",
        "retrieval not logged: the trace has no retrieval field",
    )
    assert unlogged["retrieved_any"] is None and unlogged["rounds"] is None


def test_side_by_side_shows_old_and_new_values(rag):
    cases = [rag.case("c1", ["r"])]
    traces = [rag.trace("t1", "c1", [rag.round("q", ["x", "r"])]), rag.trace("t2", "c1", [rag.round("q", ["r"])])]
    before = score(rag, cases, traces)
    # A human grades x relevant: t1's recall@1 goes from 0 to 1/2 (two relevant docs now), t2's from 1 to 1/2.
    after = score(rag, cases, traces, judgments=[{"query_id": "c1", "doc_id": "x", "grade": 2}])
    table = side_by_side(before, after, "recall_at_1")
    assert table.select("trace_id", "old", "new", "delta", "changed").rows() == [
        ("t1", 0.0, 0.5, 0.5, True),
        ("t2", 1.0, 0.5, -0.5, True),
    ]
    assert table.get_column("old_qrels_version")[0] != table.get_column("new_qrels_version")[0]
    same = side_by_side(before, before, "first_hit_rank")
    assert same.get_column("changed").to_list() == [False, False]
    assert same.filter(pl.col("trace_id") == "t1").get_column("delta").to_list() == [0]
