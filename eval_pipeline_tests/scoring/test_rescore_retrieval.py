"""retrieval_scores after a qrels change, from the scores before it: only the changed cases' traces are scored again."""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.retrieval import changed_cases, rescore_retrieval, score_retrieval
from eval_pipeline.settings import ScoringSettings


def _three_cases(rag):
    cases = [rag.case("c1", ["d1"]), rag.case("c2", ["d2"]), rag.case("c3", ["d3", "d4"], multi_hop=True)]
    traces = [
        rag.trace("t1", "c1", [rag.round("q1", ["d9", "d1", "d5"])]),
        rag.trace("t2", "c1", [rag.round("ERR-4412 q1", ["d9"], variant="bm25")], attempt=2),
        rag.trace("t3", "c2", [rag.round("q2", ["d2", "d5"])]),
        rag.trace("t4", "c3", [rag.round("q3", ["d3"]), rag.round("q3b", ["d5", "d4"], number=2)]),
        rag.trace("t5", "c3", None, status="error", error="timeout"),
    ]
    corpus = [{"doc_id": d} for d in ("d1", "d2", "d3", "d4", "d5", "d9")]
    return cases, traces, corpus


def test_changed_cases_are_those_whose_grades_differ(rag):
    cases, traces, corpus = _three_cases(rag)
    _, _, _, before = rag.frames(cases, traces, corpus=corpus)
    judgments = [
        {"query_id": "c1", "doc_id": "d5", "grade": 2},  # a new relevant doc
        {"query_id": "c3", "doc_id": "d4", "grade": 1},  # re-graded below the threshold
        {"query_id": "c2", "doc_id": "d2", "grade": 2},  # the seed's grade again: no change
    ]
    _, _, _, after = rag.frames(cases, traces, corpus=corpus, judgments=judgments)
    assert sorted(changed_cases(before, after).unique()) == ["c1", "c3"]
    assert changed_cases(after, after).is_empty()


def test_rescoring_the_changed_cases_equals_scoring_every_trace_again(rag):
    cases, traces, corpus = _three_cases(rag)
    settings = ScoringSettings()
    cases_frame, traces_frame, corpus_frame, before = rag.frames(cases, traces, corpus=corpus)
    previous = score_retrieval(traces_frame, cases_frame, before, corpus_frame, settings)
    judgments = [{"query_id": "c1", "doc_id": "d5", "grade": 2}, {"query_id": "c3", "doc_id": "d4", "grade": 0}]
    _, _, _, after = rag.frames(cases, traces, corpus=corpus, judgments=judgments)

    again = score_retrieval(traces_frame, cases_frame, after, corpus_frame, settings)
    rescored = rescore_retrieval(previous, traces_frame, cases_frame, after, before, corpus_frame, settings)
    assert rescored.equals(again)
    # what changed did change: t1's recall halves (d5 now relevant and found), c3 needs d3 alone; c2 is kept
    by_trace = {row["trace_id"]: row for row in rescored.iter_rows(named=True)}
    assert by_trace["t1"]["recall_at_10"] == 1.0 and by_trace["t1"]["n_relevant"] == 2
    assert by_trace["t4"]["n_relevant"] == 1
    kept = previous.filter(pl.col("trace_id") == "t3").drop("qrels_version")
    assert rescored.filter(pl.col("trace_id") == "t3").drop("qrels_version").equals(kept)
    assert rescored["qrels_version"].unique().to_list() == [again["qrels_version"][0]] != previous["qrels_version"][0]


def test_nothing_changed_keeps_every_row_with_the_new_version(rag):
    cases, traces, corpus = _three_cases(rag)
    cases_frame, traces_frame, corpus_frame, before = rag.frames(cases, traces, corpus=corpus)
    previous = score_retrieval(traces_frame, cases_frame, before, corpus_frame)
    # a judgment of a doc of a case outside the lane's traces changes no grade of theirs
    _, _, _, after = rag.frames(
        cases, traces, corpus=corpus, judgments=[{"query_id": "c9", "doc_id": "d1", "grade": 2}]
    )
    rescored = rescore_retrieval(previous, traces_frame, cases_frame, after, before, corpus_frame)
    assert rescored.equals(score_retrieval(traces_frame, cases_frame, after, corpus_frame))
    assert rescored.drop("qrels_version").equals(previous.drop("qrels_version"))
