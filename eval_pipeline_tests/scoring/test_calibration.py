"""Judge calibration: kappa by hand, the seeded bootstrap, judge_calibration rows, and the review queue."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from eval_pipeline.judge import make_judge
from eval_pipeline.judge.base import Judge
from eval_pipeline.scoring.agreement import balanced_accuracy, bootstrap_kappa_ci, cohen_kappa, confusion_matrix
from eval_pipeline.scoring.calibration import (
    CALIBRATION_SCHEMA,
    DETERMINISTIC_NOTE,
    calibrate,
    judge_may_gate,
    review_queue,
    self_consistency,
)
from eval_pipeline.scoring.claims import CLAIMS_SCHEMA, judge_claims
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import grounding_labels_frame_from_records, traces_frame_from_records

HUMAN = ["S", "S", "S", "S", "S", "N", "N", "N", "C", "C"]
JUDGE = ["S", "S", "S", "S", "N", "N", "N", "S", "C", "N"]
LONG = {"S": "SUPPORTED", "N": "NOT_IN_EVIDENCE", "C": "CONTRADICTED"}


def test_kappa_matches_the_hand_computation():
    # p_o = 7/10; marginals human S5 N3 C2, judge S5 N4 C1: p_e = (25 + 12 + 2) / 100 = 0.39
    # kappa = (0.7 - 0.39) / (1 - 0.39) = 0.31 / 0.61
    assert cohen_kappa(HUMAN, JUDGE) == pytest.approx(0.31 / 0.61)
    # recall per human class: S 4/5, N 2/3, C 1/2
    assert balanced_accuracy(HUMAN, JUDGE) == pytest.approx((4 / 5 + 2 / 3 + 1 / 2) / 3)
    assert confusion_matrix(HUMAN, JUDGE, ["S", "N", "C"]) == {
        "S": {"S": 4, "N": 1, "C": 0},
        "N": {"S": 1, "N": 2, "C": 0},
        "C": {"S": 0, "N": 1, "C": 1},
    }
    assert cohen_kappa(["S", "S"], ["S", "S"]) is None  # one shared category: p_e = 1, undefined
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["S", "N"], ["N", "S"]) == pytest.approx(-1.0)  # p_o 0, p_e 0.5


def test_bootstrap_interval_is_seeded_reproducible_and_the_plain_percentile_bootstrap():
    first = bootstrap_kappa_ci(HUMAN, JUDGE, n_boot=500, seed=11)
    assert first == bootstrap_kappa_ci(HUMAN, JUDGE, n_boot=500, seed=11)
    assert first != bootstrap_kappa_ci(HUMAN, JUDGE, n_boot=500, seed=12)
    # The same resamples drawn by hand: rng.integers(0, n, (n_boot, n)), kappa of each, undefined ones dropped.
    rng = np.random.default_rng(11)
    kappas = []
    for rows in rng.integers(0, len(HUMAN), size=(500, len(HUMAN))):
        value = cohen_kappa([HUMAN[i] for i in rows], [JUDGE[i] for i in rows])
        if value is not None:
            kappas.append(value)
    low, high = np.percentile(kappas, [2.5, 97.5])
    assert first == (pytest.approx(low), pytest.approx(high))
    assert -1.0 <= first[0] < cohen_kappa(HUMAN, JUDGE) < first[1] <= 1.0


def _judged(statuses=None):
    statuses = statuses or {}
    rows = []
    for i, verdict in enumerate(JUDGE, start=1):
        status = statuses.get(f"t{i}", "ok")
        rows.append(
            {
                "run_id": "r",
                "trace_id": f"t{i}",
                "case_id": "c1",
                "attempt": 1,
                "claim_index": 0,
                "claim": f"Claim number {i} holds [doc:d{i}].",
                "verdict": LONG[verdict] if status == "ok" else None,
                "judge_version": "v1",
                "status": status,
            }
        )
    return pl.DataFrame(rows)


def _labels(extra=()):
    # Labels write the claim differently: no marker, other case, no final period.
    claim_labels = [
        {"trace_id": f"t{i}", "claim": f"claim NUMBER {i}  holds", "verdict": LONG[v]}
        for i, v in enumerate(HUMAN, start=1)
    ]
    answer_labels = [
        {"trace_id": t, "answer_grounded": g}
        for t, g in (("t1", True), ("t5", True), ("t6", False), ("t9", False), ("t10", False))
    ]
    return grounding_labels_frame_from_records([*claim_labels, *answer_labels, *extra])


def test_calibrate_gives_claim_and_answer_rows():
    labels = _labels([{"trace_id": "t-unknown", "claim": "Nobody judged this.", "verdict": "SUPPORTED"}])
    calibration = calibrate(_judged(), labels, ScoringSettings(min_kappa=0.6, min_n=10), n_boot=200, seed=3)
    assert calibration.schema == pl.Schema(CALIBRATION_SCHEMA)
    claim, answer = calibration.to_dicts()
    assert (claim["judge_version"], claim["level"], claim["n"], claim["agreement"], claim["n_unmatched_labels"]) == (
        "v1",
        "claim",
        10,
        0.7,
        1,
    )
    assert claim["cohen_kappa"] == pytest.approx(0.31 / 0.61)
    # The bootstrap resamples the pairs in trace-id order (t1, t10, t2, …, t9), not in the order they came.
    by_trace = sorted(range(len(HUMAN)), key=lambda i: f"t{i + 1}")
    assert (claim["kappa_ci_low"], claim["kappa_ci_high"]) == bootstrap_kappa_ci(
        [LONG[HUMAN[i]] for i in by_trace], [LONG[JUDGE[i]] for i in by_trace], n_boot=200, seed=3
    )
    assert json.loads(claim["confusion"])["SUPPORTED"] == {"SUPPORTED": 4, "CONTRADICTED": 0, "NOT_IN_EVIDENCE": 1}
    # kappa 0.508 < 0.6: may not gate, although n = 10 meets min_n
    assert claim["may_gate"] is False
    # Answers: human g g ng ng ng (t1 t5 t6 t9 t10), judge (every claim SUPPORTED?) g ng ng ng ng.
    # p_o 4/5; p_e = (2*1 + 3*4) / 25 = 0.56; kappa = 0.24 / 0.44; balanced accuracy (1/2 + 3/3) / 2
    assert (answer["level"], answer["n"], answer["agreement"]) == ("answer", 5, 0.8)
    assert answer["cohen_kappa"] == pytest.approx(0.24 / 0.44)
    assert answer["balanced_accuracy"] == pytest.approx(0.75)
    lenient = calibrate(_judged(), labels, ScoringSettings(min_kappa=0.5, min_n=10), n_boot=50)
    assert judge_may_gate(lenient, "v1") is True
    assert judge_may_gate(lenient, "v2") is False  # no calibration row: may not gate


def test_calibration_does_not_depend_on_the_order_of_claims_or_labels():
    labels = _labels()
    calibration = calibrate(_judged(), labels, ScoringSettings(), n_boot=200, seed=3)
    shuffled = calibrate(_judged().reverse(), labels.reverse(), ScoringSettings(), n_boot=200, seed=3)
    assert shuffled.equals(calibration)
    # Rows in reverse give the claim interval in reverse order too: only the sorted pairs make the two runs agree.
    assert bootstrap_kappa_ci([LONG[h] for h in HUMAN[::-1]], [LONG[j] for j in JUDGE[::-1]], n_boot=200, seed=3) != (
        calibration["kappa_ci_low"][0],
        calibration["kappa_ci_high"][0],
    )


def test_incomplete_verdicts_are_counted_apart_and_too_few_labels_never_gate():
    calibration = calibrate(
        _judged({"t2": "incomplete"}), _labels(), ScoringSettings(min_kappa=0.0, min_n=50), n_boot=50
    )
    claim, answer = calibration.to_dicts()
    assert (claim["n"], claim["n_judge_incomplete"], claim["n_unmatched_labels"], claim["may_gate"]) == (9, 1, 0, False)
    assert (answer["n"], answer["n_judge_incomplete"]) == (5, 0)


def test_review_queue_holds_grounding_failures_of_a_judge_that_may_not_gate():
    judged = _judged()
    scores = pl.DataFrame(
        {
            "run_id": ["r", "r", "r"],
            "trace_id": ["t5", "t1", "t-incomplete"],
            "case_id": ["c1"] * 3,
            "attempt": [1, 1, 1],
            "grounding_rate": [0.0, 1.0, None],
            "grounding_stage": ["fail", "pass", "incomplete"],
            "judge_version": ["v1"] * 3,
            "n_claims": [1, 1, 1],
        }
    )
    strict = calibrate(judged, _labels(), ScoringSettings(min_kappa=0.6, min_n=10), n_boot=50)
    queue = review_queue(scores, judged, strict)
    assert queue.select("trace_id", "stage", "detail").rows() == [
        ("t5", "grounding", "claim 0 NOT_IN_EVIDENCE: Claim number 5 holds [doc:d5].")
    ]
    assert (
        queue["why"][0]
        == "grounding failed (rate 0.0); judge v1 may not gate: kappa 0.5082 (needs 0.6), n 10 (needs 10)"
    )
    lenient = calibrate(judged, _labels(), ScoringSettings(min_kappa=0.5, min_n=10), n_boot=50)
    assert review_queue(scores, judged, lenient).height == 0
    uncalibrated = review_queue(scores, judged, calibrate(judged.head(0), _labels(), ScoringSettings()))
    assert uncalibrated["why"].to_list() == [
        "grounding failed (rate 0.0); judge v1 has no calibration against human labels"
    ]


def test_local_judge_calibrated_against_ragcheckers_recorded_verdicts(ragchecker_outputs):
    results = json.loads(ragchecker_outputs.read_text())["results"]
    traces, claims, labels = [], [], []
    for item in results:
        trace_id = f"ragchecker-{item['query_id']}"
        traces.append(
            {
                "trace_id": trace_id,
                "case_id": trace_id,
                "context": item["retrieved_context"],
                "answer": {"text": item["response"]},
            }
        )
        for index, (triplet, row) in enumerate(zip(item["response_claims"], item["retrieved2response"], strict=True)):
            claims.append(
                {
                    "run_id": "rc",
                    "trace_id": trace_id,
                    "case_id": trace_id,
                    "attempt": 1,
                    "claim_index": index,
                    "claim": " ".join(triplet),
                    "inline_cited_doc_ids": [],
                }
            )
            labels.append(
                {
                    "trace_id": trace_id,
                    "claim": " ".join(triplet),
                    "verdict": "SUPPORTED" if "Entailment" in row else "NOT_IN_EVIDENCE",
                }
            )
    frame = traces_frame_from_records(traces, run_id="rc")
    judged = judge_claims(pl.DataFrame(claims, schema=CLAIMS_SCHEMA), frame, make_judge("local"))
    row = calibrate(judged, grounding_labels_frame_from_records(labels), ScoringSettings(), n_boot=200).to_dicts()[0]
    # RAGChecker: 9 supported, 7 not; the local judge: 8 supported, 8 not; they agree on 15 of 16 claims (it misses
    # "The yellow denotes the nation's wealth", which needs nation = country). p_e = (9*8 + 7*8) / 256 = 1/2.
    assert (row["judge_version"], row["n"], row["agreement"], row["n_unmatched_labels"]) == (
        make_judge("local").version,
        16,
        0.9375,
        0,
    )
    assert row["cohen_kappa"] == pytest.approx((0.9375 - 0.5) / (1 - 0.5))
    assert json.loads(row["confusion"])["SUPPORTED"] == {"SUPPORTED": 8, "CONTRADICTED": 0, "NOT_IN_EVIDENCE": 1}
    assert json.loads(row["confusion"])["NOT_IN_EVIDENCE"] == {"SUPPORTED": 0, "CONTRADICTED": 0, "NOT_IN_EVIDENCE": 7}
    # κ 0.875 but n 16 < 50: this judge may not gate on so few labels.
    assert row["may_gate"] is False


class SecondThoughtsJudge(Judge):
    """Not deterministic: asked again, it changes its mind on the claims named in `flip`."""

    version, model = "second-thoughts-1", "none"

    def __init__(self, flip: set[str]) -> None:
        self.flip, self.asked = flip, []

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        self.asked.append(sorted(requests["request_key"].to_list()))
        return requests.select(
            "request_key",
            pl.when(pl.col("request_key").is_in(sorted(self.flip)))
            .then(pl.lit("NOT_IN_EVIDENCE"))
            .otherwise(pl.lit("SUPPORTED"))
            .alias("verdict"),
            pl.col("claim").alias("evidence_quote"),
            pl.lit("ok").alias("status"),
        )

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError("pairwise is not used here")


def test_self_consistency_asks_a_seeded_sample_again_and_counts_the_flips():
    keys = [f"k{i}" for i in range(10)]
    judged = pl.DataFrame({"request_key": keys, "verdict": ["SUPPORTED"] * 10, "status": ["ok"] * 9 + ["incomplete"]})
    requests = pl.DataFrame(
        {"request_key": keys, "claim": keys, "evidence": [[{"doc_id": "d", "text": k}] for k in keys]}
    )
    judge = SecondThoughtsJudge({"k1", "k2", "k3"})
    everything = self_consistency(judge, judged, requests, sample=50, seed=0)
    # the 9 completed verdicts are asked again; 3 of them change
    assert judge.asked == [sorted(keys[:9])]
    assert (everything["self_consistency_n"], everything["self_consistency_flip_rate"]) == (9, pytest.approx(3 / 9))
    assert (
        everything["self_consistency_note"] == "3 of 9 claims (seeded sample, seed 0) changed verdict when asked again"
    )
    first, again = (
        self_consistency(judge, judged, requests, sample=4, seed=7),
        self_consistency(judge, judged, requests, sample=4, seed=7),
    )
    assert first == again and first["self_consistency_n"] == 4 and judge.asked[1] == judge.asked[2]


def test_a_deterministic_judge_is_not_asked_again():
    local = make_judge("local")
    assert local.deterministic is True
    result = self_consistency(
        local,
        pl.DataFrame({"request_key": ["a"], "verdict": ["SUPPORTED"], "status": ["ok"]}),
        pl.DataFrame(),
        sample=50,
    )
    assert result == {
        "self_consistency_n": 0,
        "self_consistency_flip_rate": 0.0,
        "self_consistency_note": DETERMINISTIC_NOTE,
    }
