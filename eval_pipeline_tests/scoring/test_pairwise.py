"""Pairwise comparison with swapped positions: wins only in both orders, disagreement is a tie."""

from __future__ import annotations

import os

import pytest

from eval_pipeline.judge import make_judge
from eval_pipeline.scoring.pairwise import pairwise_compare
from eval_pipeline_harness.loopback_server import user_payload
from eval_pipeline_harness.records import traces_frame_from_records

RIGHT = "Annual SMB plans can be refunded within 14 days."
WRONG = "Annual SMB plans can be refunded within 30 days."


def _runs(context):
    baseline = traces_frame_from_records(
        [
            {
                "trace_id": "b1",
                "case_id": "c1",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": WRONG},
            },
            {
                "trace_id": "b2",
                "case_id": "c2",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": RIGHT},
            },
            {
                "trace_id": "b3",
                "case_id": "c3",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": RIGHT},
            },
            {"trace_id": "b4", "case_id": "c4", "status": "timeout", "error": "slow"},
            {"trace_id": "b5", "case_id": "c5", "input": "Only in the baseline", "answer": {"text": RIGHT}},
        ],
        run_id="baseline",
    )
    candidate = traces_frame_from_records(
        [
            {
                "trace_id": "k1",
                "case_id": "c1",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": RIGHT},
            },
            {
                "trace_id": "k2",
                "case_id": "c2",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": "Monthly plans are refundable."},
            },
            {
                "trace_id": "k3",
                "case_id": "c3",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": RIGHT + " Thanks!"},
            },
            {
                "trace_id": "k4",
                "case_id": "c4",
                "input": "Refund window?",
                "context": context,
                "answer": {"text": RIGHT},
            },
        ],
        run_id="candidate",
    )
    return baseline, candidate


def test_local_judge_prefers_the_grounded_answer_in_both_orders(context):
    per_pair, summary = pairwise_compare(*_runs(context), make_judge("local"))
    assert per_pair.select(
        "case_id", "order1_preference", "order2_preference", "outcome", "position_consistent", "status"
    ).rows() == [
        ("c1", "candidate", "candidate", "candidate_win", True, "scored"),
        ("c2", "baseline", "baseline", "baseline_win", True, "scored"),
        ("c3", "tie", "tie", "tie", True, "scored"),
        ("c4", None, None, None, None, "incomplete"),
    ]
    assert per_pair["reason"][3] == "a trace of the pair has harness status error or timeout"
    # 3 complete pairs: 1 candidate win, 1 baseline win, 1 tie; both orders always agree
    assert summary == {
        "n_pairs": 4,
        "n_complete": 3,
        "n_incomplete": 1,
        "candidate_wins": 1,
        "baseline_wins": 1,
        "ties": 1,
        "candidate_win_rate": pytest.approx(1 / 3),
        "baseline_win_rate": pytest.approx(1 / 3),
        "tie_rate": pytest.approx(1 / 3),
        "position_consistency_rate": 1.0,
        "judge_version": make_judge("local").version,
    }


def test_a_position_biased_judge_wins_nothing(loopback, judge_key, context):
    # This judge prefers whatever it is shown first, except on c2 where it always picks the baseline's text.
    def respond(body):
        payload = user_payload(body)
        if RIGHT in payload["answer_a"] and "Monthly plans are refundable." in payload["answer_b"]:
            return {"preference": "A", "reason": "grounded"}
        if "Monthly plans are refundable." in payload["answer_a"]:
            return {"preference": "B", "reason": "grounded"}
        return {"preference": "A", "reason": "first is best"}

    loopback.state.responder = respond
    judge = make_judge(
        "openai",
        model="m",
        base_url=loopback.base_url,
        api_key_env=judge_key,
        api_key=os.environ[judge_key],
        concurrency=2,
    )
    per_pair, summary = pairwise_compare(*_runs(context), judge)
    assert per_pair.select(
        "case_id", "order1_preference", "order2_preference", "outcome", "position_consistent"
    ).rows() == [
        ("c1", "baseline", "candidate", "tie", False),
        ("c2", "baseline", "baseline", "baseline_win", True),
        ("c3", "baseline", "candidate", "tie", False),
        ("c4", None, None, None, None),
    ]
    # 3 complete pairs, 1 consistent; 3 pairs x 2 orders = 6 calls (the timed-out pair is never sent)
    assert (summary["position_consistency_rate"], summary["baseline_wins"], summary["ties"]) == (
        pytest.approx(1 / 3),
        1,
        2,
    )
    assert loopback.count() == 6
    assert per_pair["reason"][0] == "the two orders disagree: counted as a tie"
