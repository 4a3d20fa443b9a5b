"""reliability, suite means and quarantine over repeated attempts (SPEC §5 "Repeated runs", §11)."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.scoring.reliability import quarantine, reliability, suite_reliability


def attempts(run_id: str, case_id: str, outcomes: list[bool | None]) -> list[dict]:
    return [
        {"run_id": run_id, "trace_id": f"{run_id}:{case_id}#{i}", "case_id": case_id, "attempt": i, "success": s}
        for i, s in enumerate(outcomes, start=1)
    ]


@pytest.fixture
def success() -> pl.DataFrame:
    rows = (
        attempts("r1", "flaky-5", [True, False, True, True, False])  # n 5, c 3
        + attempts("r1", "stable-2", [True, True])  # n 2, c 2
        + attempts("r1", "failing-3", [False, None, False, False])  # n 3 (one incomplete), c 0
        + attempts("r1", "all-incomplete", [None, None])  # n 0
        + attempts("r2", "flaky-5", [True, False])  # another run: n 2, c 1
    )
    return pl.DataFrame(
        rows,
        schema={
            "run_id": pl.String,
            "trace_id": pl.String,
            "case_id": pl.String,
            "attempt": pl.Int64,
            "success": pl.Boolean,
        },
    )


def test_pass_hat_k_is_tau_bench_combinatorics(success):
    rel = reliability(success)
    assert rel.columns == [
        "run_id",
        "case_id",
        "n_attempts",
        "n_complete",
        "n_incomplete",
        "n_success",
        "pass_at_1",
        "pass_hat_1",
        "pass_hat_2",
        "pass_hat_3",
        "pass_hat_4",
        "pass_hat_5",
        "flaky",
    ]
    got = {(r["run_id"], r["case_id"]): r for r in rel.to_dicts()}
    flaky5 = got[("r1", "flaky-5")]
    # c=3, n=5: C(3,1)/C(5,1)=3/5, C(3,2)/C(5,2)=3/10, C(3,3)/C(5,3)=1/10, C(3,4)=0, C(3,5)=0
    assert (flaky5["n_attempts"], flaky5["n_complete"], flaky5["n_incomplete"], flaky5["n_success"]) == (5, 5, 0, 3)
    assert flaky5["pass_at_1"] == 0.6
    assert [flaky5[f"pass_hat_{k}"] for k in range(1, 6)] == pytest.approx([0.6, 0.3, 0.1, 0.0, 0.0])
    assert flaky5["flaky"] is True
    stable = got[("r1", "stable-2")]
    # c=n=2: every k ≤ 2 is 1.0; k > n is null, never 0
    assert [stable[f"pass_hat_{k}"] for k in range(1, 6)] == [1.0, 1.0, None, None, None]
    assert stable["flaky"] is False
    failing = got[("r1", "failing-3")]
    # 4 attempts, the incomplete one is out of n: n 3, c 0
    assert (failing["n_attempts"], failing["n_complete"], failing["n_incomplete"]) == (4, 3, 1)
    assert (failing["pass_at_1"], failing["flaky"]) == (0.0, False)
    assert [failing[f"pass_hat_{k}"] for k in range(1, 6)] == [0.0, 0.0, 0.0, None, None]
    empty = got[("r1", "all-incomplete")]
    assert (empty["n_attempts"], empty["n_complete"], empty["n_incomplete"], empty["pass_at_1"]) == (2, 0, 2, None)
    assert (empty["pass_hat_1"], empty["flaky"]) == (None, False)
    other_run = got[("r2", "flaky-5")]
    assert (other_run["pass_at_1"], other_run["pass_hat_2"], other_run["pass_hat_3"]) == (0.5, 0.0, None)


def test_suite_means_are_over_cases(success):
    suite = suite_reliability(reliability(success))
    r1 = suite["r1"]
    # cases with n > 0: flaky-5 (0.6), stable-2 (1.0), failing-3 (0.0) → pass_at_1 = 1.6/3
    assert (r1["n_cases"], r1["n_cases_scored"], r1["n_flaky"], r1["n_incomplete_attempts"]) == (4, 3, 1, 3)
    assert r1["pass_at_1"] == pytest.approx(1.6 / 3)
    # pass^2 over cases with n ≥ 2: (0.3 + 1.0 + 0.0)/3; pass^3 over n ≥ 3: (0.1 + 0.0)/2; pass^5 over n ≥ 5: 0.0
    assert r1["pass_hat_2"] == pytest.approx(1.3 / 3)
    assert r1["pass_hat_3"] == pytest.approx(0.05)
    assert r1["pass_hat_5"] == 0.0
    assert suite["r2"]["pass_at_1"] == 0.5 and suite["r2"]["pass_hat_3"] is None


def test_quarantine_lists_flaky_cases_with_the_traces_that_flipped(success):
    q = quarantine(reliability(success), success)
    assert q.select("run_id", "case_id", "reason", "flipped_trace_ids").rows() == [
        # 3 passes, 2 fails: the failing attempts are the flips
        ("r1", "flaky-5", "flaky: 3 of 5 complete attempts succeeded", ["r1:flaky-5#2", "r1:flaky-5#5"]),
        # 1 pass, 1 fail: a tie names every attempt
        ("r2", "flaky-5", "flaky: 1 of 2 complete attempts succeeded", ["r2:flaky-5#1", "r2:flaky-5#2"]),
    ]
    first = q.row(0, named=True)
    assert first["passed_trace_ids"] == ["r1:flaky-5#1", "r1:flaky-5#3", "r1:flaky-5#4"]
    assert first["failed_trace_ids"] == ["r1:flaky-5#2", "r1:flaky-5#5"]
