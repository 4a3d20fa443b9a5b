"""Answer correctness: contains_all, SQuAD exact match and token F1, refusal both ways, the hazard expression."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.scoring.answer import (
    ANSWER_SCHEMA,
    hazard_unsupported_correct,
    score_answers,
)
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records


def _scores(cases, records, settings: ScoringSettings | None = None):
    scores = score_answers(traces_frame_from_records(records), cases, settings or ScoringSettings())
    assert scores.schema == pl.Schema(ANSWER_SCHEMA)
    return {r["trace_id"]: r for r in scores.to_dicts()}


def test_expected_strings_and_squad_metrics(rag_cases):
    rows = _scores(
        rag_cases,
        [
            {
                "trace_id": "t1",
                "case_id": "c1",
                "answer": {"text": "Annual SMB plans can be refunded within 14  DAYS [doc:policy/refunds-2025]."},
            },
            {
                "trace_id": "t2",
                "case_id": "c1",
                "answer": {"text": "The annual SMB plans have a 14-day refund window!"},
            },
            {"trace_id": "t3", "case_id": "c1", "answer": {"text": "Annual plans: 30 days."}},
        ],
    )
    # pred: annual smb plans can be refunded within 14 days (9 tokens);
    # gold: annual smb plans have 14 day refund window (8);
    # common: annual smb plans 14 -> P 4/9, R 4/8, F1 = 2PR/(P+R) = 8/17
    assert (rows["t1"]["contains_all"], rows["t1"]["exact_match"], rows["t1"]["answer_stage"]) == (True, False, "pass")
    assert rows["t1"]["token_f1"] == pytest.approx(8 / 17)
    # "14-day" loses its hyphen: "14day" is one token; pred: annual smb plans have 14day refund window (7), gold 8,
    # common 6 (all but 14day) -> P 6/7, R 6/8, F1 = 0.8
    assert rows["t2"]["token_f1"] == pytest.approx(0.8)
    assert (rows["t2"]["contains_all"], rows["t2"]["answer_stage"], rows["t2"]["answer_reason"]) == (
        False,
        "fail",
        "answer lacks expected: 14 days",
    )
    assert (rows["t3"]["missing_expected"], rows["t3"]["answer_correct"]) == (["14 days"], False)


def test_exact_match_ignores_case_punctuation_and_articles(rag_cases):
    rows = _scores(
        rag_cases,
        [{"trace_id": "t1", "case_id": "c1", "answer": {"text": "annual SMB plans have a 14 day refund window"}}],
    )
    assert (rows["t1"]["exact_match"], rows["t1"]["token_f1"]) == (True, 1.0)


def test_refusal_is_checked_both_ways(rag_cases):
    rows = _scores(
        rag_cases,
        [
            {
                "trace_id": "refuses-ok",
                "case_id": "c-refusal",
                "answer": {"text": "I don’t have information about enterprise plans."},
            },
            {"trace_id": "flag-ok", "case_id": "c-refusal", "answer": {"refused": True}},
            {
                "trace_id": "answers-refusal-case",
                "case_id": "c-refusal",
                "answer": {"text": "Enterprise plans get 30 days."},
            },
            {
                "trace_id": "refuses-answerable",
                "case_id": "c1",
                "answer": {"text": "I couldn't find the refund window, 14 days maybe."},
            },
        ],
    )
    # rows come by trace id, whatever order the traces came in
    assert [(t, r["refused"], r["expect_refusal"], r["answer_stage"]) for t, r in rows.items()] == [
        ("answers-refusal-case", False, True, "fail"),
        ("flag-ok", True, True, "pass"),
        ("refuses-answerable", True, False, "fail"),
        ("refuses-ok", True, True, "pass"),
    ]
    assert rows["answers-refusal-case"]["answer_reason"] == "expected a refusal; the answer did not refuse"
    assert rows["refuses-answerable"]["answer_reason"] == "the answer refused"


def test_reference_only_uses_the_f1_threshold_and_no_contract_is_not_applicable():
    cases = cases_frame_from_records(
        [
            {
                "case_id": "ref",
                "lanes": ["rag"],
                "required_doc_ids": ["geo/rivers"],
                "reference_answer": "the Nile river is the longest",
            },
            {"case_id": "none", "lanes": ["rag", "agent"], "required_doc_ids": ["geo/rivers"]},
        ]
    )
    records = [
        {"trace_id": "close", "case_id": "ref", "answer": {"text": "The Nile is the longest river."}},
        {"trace_id": "far", "case_id": "ref", "answer": {"text": "The Amazon carries the most water."}},
        {"trace_id": "free", "case_id": "none", "answer": {"text": "Anything."}},
    ]
    rows = _scores(cases, records)
    # close: nile is longest river vs nile river is longest: same 4-token multiset -> F1 1.0
    assert (rows["close"]["token_f1"], rows["close"]["answer_stage"]) == (1.0, "pass")
    # far: amazon carries most water vs nile river is longest: nothing shared -> 0.0
    assert (rows["far"]["token_f1"], rows["far"]["answer_stage"], rows["far"]["answer_reason"]) == (
        0.0,
        "fail",
        "token_f1 0.0 < threshold 0.5",
    )
    assert (rows["free"]["status"], rows["free"]["answer_stage"], rows["free"]["answer_correct"]) == (
        "not_applicable",
        "not_applicable",
        None,
    )
    strict = _scores(cases, records[:1], ScoringSettings(token_f1_threshold=1.01))
    assert strict["close"]["answer_stage"] == "fail"


def test_incomplete_traces_have_null_metrics(rag_cases):
    rows = _scores(
        rag_cases,
        [
            {"trace_id": "t-timeout", "case_id": "c1", "status": "timeout", "error": "provider timeout"},
            {"trace_id": "t-missing", "case_id": "c1"},
        ],
    )
    assert [(r["status"], r["reason"], r["contains_all"], r["token_f1"], r["refused"]) for r in rows.values()] == [
        ("incomplete", "trace has no answer", None, None, None),  # t-missing
        ("incomplete", "harness status timeout: provider timeout", None, None, None),  # t-timeout
    ]


def test_hazard_unsupported_correct_needs_failed_retrieval_and_a_passing_answer():
    stages = pl.DataFrame(
        {"retrieval_stage": ["fail", "fail", "pass", "incomplete"], "answer_stage": ["pass", "fail", "pass", "pass"]}
    )
    flagged = stages.select(hazard_unsupported_correct(pl.col("retrieval_stage"), pl.col("answer_stage")))
    assert flagged.to_series().to_list() == [True, False, False, False]
