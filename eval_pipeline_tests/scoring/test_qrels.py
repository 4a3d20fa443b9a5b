"""Qrels: seeds, the pool, freezing with precedence and conflicts, the content-hash version, the judging queue."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.scoring.qrels import freeze_qrels, judging_queue, pool, qrels_version, seed_qrels
from eval_pipeline.scoring.retrieval import score_retrieval
from eval_pipeline_harness.records import (
    cases_frame_from_records,
    corpus_frame_from_records,
    judgments_frame_from_records,
    traces_frame_from_records,
)


def _cases() -> pl.DataFrame:
    return cases_frame_from_records(
        [
            {"case_id": "rag-1", "lanes": ["rag"], "required_doc_ids": ["d1", "d2"]},
            {"case_id": "both-1", "lanes": ["rag", "agent"], "required_doc_ids": ["d3"]},
            {"case_id": "refuse", "lanes": ["rag"], "required_doc_ids": [], "expect_refusal": True},
            {"case_id": "agent-1", "lanes": ["agent"], "required_doc_ids": ["d9"]},
        ]
    )


def test_seed_qrels_are_required_docs_at_grade_2():
    seeds = seed_qrels(_cases())
    assert seeds.rows() == [
        ("both-1", "d3", 2, "seed", None),
        ("rag-1", "d1", 2, "seed", None),
        ("rag-1", "d2", 2, "seed", None),
    ]
    assert seeds.columns == ["query_id", "doc_id", "grade", "source", "annotator"]


def _round(variant: str | None, docs: list[str]) -> dict:
    return {"variant": variant, "query": "q", "hits": [{"doc_id": d, "score": 1.0} for d in docs]}


def test_pool_takes_top_depth_per_trace_and_variant_across_runs():
    run_a = traces_frame_from_records(
        [
            # dense ranks d1, d4, d5 over its two rounds (d1 repeated); bm25 ranks d6, d1 on its own.
            {
                "trace_id": "a1",
                "case_id": "rag-1",
                "retrieval": [
                    _round("dense", ["d1", "d4"]),
                    _round("bm25", ["d6", "d1"]),
                    _round("dense", ["d1", "d5"]),
                ],
            },
            {"trace_id": "a2", "case_id": "refuse", "retrieval": [_round(None, ["d7", "d8", "d9"])]},
        ],
        run_id="run-a",
    )
    run_b = traces_frame_from_records(
        [{"trace_id": "b1", "case_id": "rag-1", "retrieval": [_round("dense", ["d4", "d2", "d1"])]}], run_id="run-b"
    )
    pooled = pool(pl.concat([run_a, run_b]), depth=2)
    assert pooled.rows() == [
        ("rag-1", "d1", ["run-a:bm25", "run-a:dense"]),
        ("rag-1", "d2", ["run-b:dense"]),
        ("rag-1", "d4", ["run-a:dense", "run-b:dense"]),
        ("rag-1", "d6", ["run-a:bm25"]),
        ("refuse", "d7", ["run-a:unlabelled"]),
        ("refuse", "d8", ["run-a:unlabelled"]),
    ]
    # Depth 3 adds d5 (dense's third distinct doc), d1 from run-b and d9.
    assert pool(pl.concat([run_a, run_b]), depth=3).height == 8


def _judgments(rows: list[dict]) -> pl.DataFrame:
    return judgments_frame_from_records(rows)


def test_freeze_precedence_human_over_model_over_seed():
    seeds = seed_qrels(_cases())
    judgments = _judgments(
        [
            {"query_id": "rag-1", "doc_id": "d1", "grade": 1, "annotator": "a1"},  # re-grades a seed
            {"query_id": "rag-1", "doc_id": "d9", "grade": 2, "annotator": "a2"},  # a pooled doc
            {"query_id": "rag-1", "doc_id": "d5", "grade": 0, "annotator": "a1"},
        ]
    )
    model = pl.DataFrame(
        {
            "query_id": ["rag-1", "rag-1", "rag-1"],
            "doc_id": ["d5", "d6", "d2"],
            "grade": [2, 1, 0],
            "source": ["model:judge-7"] * 3,
        }
    )
    frozen = freeze_qrels(seeds, judgments, model)
    assert frozen.select("query_id", "doc_id", "grade", "source", "annotator", "conflict").rows() == [
        ("both-1", "d3", 2, "seed", None, False),
        ("rag-1", "d1", 1, "human", "a1", False),
        ("rag-1", "d2", 0, "model:judge-7", None, False),  # a model grade beats a seed
        ("rag-1", "d5", 0, "human", "a1", False),  # a human beats the model
        ("rag-1", "d6", 1, "model:judge-7", None, False),
        ("rag-1", "d9", 2, "human", "a2", False),
    ]
    assert frozen.get_column("qrels_version").unique().to_list() == [qrels_version(frozen)]


def test_conflicting_human_judgments_majority_then_lower_grade():
    judgments = _judgments(
        [
            {"query_id": "q", "doc_id": "tie", "grade": 2, "annotator": "a2"},
            {"query_id": "q", "doc_id": "tie", "grade": 0, "annotator": "a1"},
            {"query_id": "q", "doc_id": "most", "grade": 2, "annotator": "a1"},
            {"query_id": "q", "doc_id": "most", "grade": 2, "annotator": "a2"},
            {"query_id": "q", "doc_id": "most", "grade": 1, "annotator": "a3"},
        ]
    )
    frozen = freeze_qrels(seed_qrels(_cases()).clear(), judgments)
    # 2 vs 0, one vote each: the lower grade. 2, 2, 1: the majority. Both are flagged with every annotator.
    assert frozen.select("doc_id", "grade", "annotator", "conflict").rows() == [
        ("most", 2, "a1,a2,a3", True),
        ("tie", 0, "a1,a2", True),
    ]


def test_qrels_version_is_a_content_hash_of_the_grades():
    frozen = freeze_qrels(seed_qrels(_cases()), _judgments([{"query_id": "rag-1", "doc_id": "d9", "grade": 2}]))
    version = qrels_version(frozen)
    assert version.startswith("qrels-") and len(version) == len("qrels-") + 16
    # Row order, sources and annotators do not change it; a grade does.
    assert qrels_version(frozen.sample(fraction=1.0, shuffle=True, seed=5)) == version
    assert qrels_version(frozen.with_columns(source=pl.lit("human"), annotator=pl.lit("zz"))) == version
    regraded = frozen.with_columns(grade=pl.when(pl.col("doc_id") == "d9").then(1).otherwise(pl.col("grade")))
    assert qrels_version(regraded) != version
    assert qrels_version(frozen.filter(pl.col("doc_id") != "d9")) != version


def test_judging_queue_is_pooled_pairs_without_a_grade():
    pooled = pl.DataFrame(
        {
            "query_id": ["rag-1", "rag-1", "rag-1"],
            "doc_id": ["d1", "d4", "d9"],
            "pooled_from": [["run-a:dense"], ["run-a:dense", "run-b:bm25"], ["run-b:bm25"]],
        }
    )
    frozen = freeze_qrels(seed_qrels(_cases()), _judgments([{"query_id": "rag-1", "doc_id": "d9", "grade": 0}]))
    # d1 is a seed and d9 judged: only d4 waits for a judge.
    assert judging_queue(pooled, frozen).rows() == [("rag-1", "d4", ["run-a:dense", "run-b:bm25"])]


def test_human_overrides_change_relevance_in_retrieval_scores():
    cases = _cases()
    corpus = corpus_frame_from_records([{"doc_id": d} for d in ("d1", "d2", "d9")])
    traces = traces_frame_from_records(
        [
            {"trace_id": "seed-only", "case_id": "rag-1", "retrieval": [_round("dense", ["d1", "x"])]},
            {"trace_id": "pooled", "case_id": "rag-1", "retrieval": [_round("dense", ["x", "d9"])]},
        ]
    )
    judgments = _judgments(
        [
            {"query_id": "rag-1", "doc_id": "d1", "grade": 1, "annotator": "a1"},
            {"query_id": "rag-1", "doc_id": "d9", "grade": 2, "annotator": "a1"},
        ]
    )
    scores = score_retrieval(traces, cases, freeze_qrels(seed_qrels(cases), judgments), corpus).sort("trace_id")
    # Relevant now: d2 (seed) and d9 (pooled, graded 2); d1 re-graded to 1 is not.
    assert scores.select("trace_id", "n_relevant", "first_hit_rank", "recall_at_10", "retrieval_stage").rows() == [
        ("pooled", 2, 2, 0.5, "pass"),
        ("seed-only", 2, None, 0.0, "fail"),
    ]


def _frozen_by_the_rules(rows: list[tuple[str, str, int, str, str | None]]) -> list[tuple]:
    """The freezing rules of the module docstring, one pair at a time in plain Python: the highest tier's grades,
    the majority grade (a tie to the lower), its sources, every annotator of that tier, and conflict when they
    disagree."""
    tier = {"seed": 0}
    by_pair: dict[tuple[str, str], list] = {}
    for query, doc, grade, source, annotator in rows:
        by_pair.setdefault((query, doc), []).append((grade, source, annotator))
    out = []
    for (query, doc), grades in sorted(by_pair.items()):
        level = max(tier.get(s, 1 if s.startswith("model:") else 2) for _, s, _ in grades)
        top = [g for g in grades if tier.get(g[1], 1 if g[1].startswith("model:") else 2) == level]
        votes: dict[int, int] = {}
        for grade, _, _ in top:
            votes[grade] = votes.get(grade, 0) + 1
        grade = min(votes, key=lambda g: (-votes[g], g))
        sources = ",".join(sorted({s for g, s, _ in top if g == grade}))
        annotators = ",".join(sorted({a for _, _, a in top if a is not None}))
        out.append((query, doc, grade, sources, annotators or None, len(votes) > 1))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["q1", "q2"]),
            st.sampled_from(["d1", "d2", "d3"]),
            st.integers(0, 3),
            st.sampled_from(["seed", "human", "model:j1", "model:j2"]),
            st.sampled_from([None, "", "a1", "a2"]),
        ),
        max_size=12,
    )
)
def test_freezing_follows_the_rules_for_any_mix_of_grades(rows):
    """Pairs graded once (most of a run's qrels, chosen as they stand) and pairs graded several times (voted) alike."""
    frame = pl.DataFrame(rows, schema=["query_id", "doc_id", "grade", "source", "annotator"], orient="row")
    frozen = freeze_qrels(frame.clear(), frame)
    assert frozen.select("query_id", "doc_id", "grade", "source", "annotator", "conflict").rows() == (
        _frozen_by_the_rules(rows)
    )
