"""Every gate status and exit code on hand-built runs with planted regressions."""

import polars as pl
import pytest

from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.scoring.gate_facts import RunFacts
from eval_pipeline.scoring.gate_table import INCOMPLETE, exit_code, undecided_gates
from eval_pipeline.scoring.gates import evaluate_gates

POLICY = GatePolicy.model_validate(
    {
        "version": 1,
        "gates": [
            {
                "name": "recall",
                "lane": "rag",
                "metric": "recall_at_10",
                "max_regression_points": 2,
                "exclude": ["multi_hop", "quarantined"],
            },
            {"name": "args", "lane": "agent", "metric": "args_valid_rate", "max_regression_points": 3},
            {
                "name": "pass1",
                "lane": "agent",
                "metric": "pass_at_1",
                "max_regression_points": 5,
                "report_beside": ["pass_hat_k"],
            },
            {"name": "policy", "lane": "agent", "metric": "policy_violations", "max_new": 0},
            {"name": "no_new", "lane": "all", "metric": "no_new_failures", "max_new_failures": 0},
            {
                "name": "grounding",
                "lane": "rag",
                "metric": "grounding_rate",
                "max_regression_points": 2,
                "requires_calibrated_judge": True,
            },
        ],
    }
)
CASES = pl.DataFrame(
    {
        "case_id": ["r1", "r2", "r3", "mh", "a1", "a2"],
        "multi_hop": [False, False, False, True, False, False],
        "lanes": [["rag"]] * 4 + [["agent"]] * 2,
    }
)


def facts(
    run_id, recall, args, pass1, violations, outcomes, grounding, flaky=(), may_gate=True, **manifest
) -> RunFacts:
    return RunFacts(
        run_id=run_id,
        manifest={"mode": "gate", "dataset_version": "ds", **manifest},
        cases=CASES,
        retrieval=pl.DataFrame(
            {"case_id": list(recall), "status": ["scored"] * len(recall), "recall_at_10": list(recall.values())}
        ),
        tools=pl.DataFrame(
            {
                "case_id": list(args),
                "status": ["scored"] * len(args),
                "args_valid_rate": list(args.values()),
                "policy_violation": [c in violations for c in args],
            }
        ),
        grounding=pl.DataFrame(
            {
                "case_id": list(grounding),
                "status": ["scored"] * len(grounding),
                "grounding_rate": list(grounding.values()),
            }
        ),
        reliability=pl.DataFrame(
            {
                "case_id": list(pass1),
                "lane": ["agent"] * len(pass1),
                "pass_at_1": list(pass1.values()),
                "pass_hat_2": [v * v for v in pass1.values()],
                "flaky": [c in flaky for c in pass1],
            }
        ),
        quarantine=pl.DataFrame({"case_id": list(flaky)}, schema={"case_id": pl.String}),
        outcomes=pl.DataFrame({"case_id": list(outcomes), "outcome": list(outcomes.values())}),
        calibration=pl.DataFrame({"level": ["claim"], "may_gate": [may_gate]}),
        qrels_version=manifest.get("qrels_version", "q1"),
    )


def baseline(**kw):
    return facts(
        "base",
        {"r1": 1.0, "r2": 1.0, "r3": 0.5, "mh": 1.0},
        {"a1": 1.0, "a2": 1.0},
        {"a1": 1.0, "a2": 2 / 3},
        set(),
        {"r1": "pass", "r2": "pass", "r3": "fail", "a1": "pass", "a2": "pass"},
        {"r1": 1.0, "r2": 1.0},
        **kw,
    )


def by_gate(frame: pl.DataFrame) -> dict:
    return {r["gate"]: r for r in frame.iter_rows(named=True)}


def test_identical_runs_pass_every_gate_exit_0():
    results = evaluate_gates(POLICY, baseline(), baseline())
    assert set(results["status"].to_list()) == {"pass"}
    assert exit_code(results) == 0


def test_planted_regressions_fail_with_their_blocking_cases_exit_1():
    # recall: r2 drops 1.0 -> 0.0 over 3 cases (mh excluded) = -33.33 points; args: a1 1.0 -> 0.5 => -25 points;
    # pass@1: a2 2/3 -> 1/3 => mean (1+2/3)/2 -> (1+1/3)/2 = -16.67 points; a new violation in a2; r2 newly fails.
    candidate = facts(
        "cand",
        {"r1": 1.0, "r2": 0.0, "r3": 0.5, "mh": 0.0},
        {"a1": 0.5, "a2": 1.0},
        {"a1": 1.0, "a2": 1 / 3},
        {"a2"},
        {"r1": "pass", "r2": "fail", "r3": "fail", "a1": "pass", "a2": "pass"},
        {"r1": 1.0, "r2": 0.985},
    )
    rows = by_gate(evaluate_gates(POLICY, candidate, baseline()))
    assert rows["recall"]["status"] == "fail" and rows["recall"]["blocking_cases"] == ["r2"]
    assert rows["recall"]["delta"] == pytest.approx(-100 / 3)
    assert rows["recall"]["n_cases"] == 3 and "mh" in rows["recall"]["excluded_cases"]
    assert (
        rows["args"]["status"] == "fail"
        and rows["args"]["delta"] == pytest.approx(-25.0)
        and rows["args"]["blocking_cases"] == ["a1"]
    )
    assert rows["pass1"]["status"] == "fail" and rows["pass1"]["delta"] == pytest.approx(-100 / 6)
    assert '"pass_hat_2"' in rows["pass1"]["beside"]
    assert rows["policy"]["status"] == "fail" and rows["policy"]["blocking_cases"] == ["a2"]
    assert rows["no_new"]["status"] == "fail" and rows["no_new"]["blocking_cases"] == ["r2"]
    # grounding: (1.0 + 0.985)/2 vs 1.0 = -0.75 points, within 2
    assert rows["grounding"]["status"] == "pass" and rows["grounding"]["delta"] == pytest.approx(-0.75)
    assert exit_code(evaluate_gates(POLICY, candidate, baseline())) == 1


def test_a_drop_equal_to_the_threshold_passes():
    # args: a1 1.0 -> 0.94, a2 1.0 -> 1.0 => mean drop 3 points exactly
    candidate = baseline()
    candidate.tools = candidate.tools.with_columns(pl.Series("args_valid_rate", [0.94, 1.0]))
    assert by_gate(evaluate_gates(POLICY, candidate, baseline()))["args"]["status"] == "pass"


def test_exploratory_or_other_dataset_is_incomparable_exit_2():
    results = evaluate_gates(POLICY, baseline(mode="exploratory"), baseline())
    assert set(results["status"].to_list()) == {"incomparable"}
    assert exit_code(results) == 2
    other = evaluate_gates(POLICY, baseline(dataset_version="ds-2"), baseline())
    assert "dataset versions differ" in other["reason"][0]


def test_other_qrels_version_makes_only_the_retrieval_gate_incomparable():
    rows = by_gate(evaluate_gates(POLICY, baseline(qrels_version="q2"), baseline()))
    assert rows["recall"]["status"] == "incomparable" and "qrels versions differ" in rows["recall"]["reason"]
    assert rows["args"]["status"] == "pass"


def test_missing_complete_attempts_make_a_gate_incomplete_not_a_pass():
    candidate = baseline()
    candidate.tools = candidate.tools.with_columns(pl.Series("status", ["scored", "incomplete"]))
    candidate.outcomes = pl.DataFrame(
        {"case_id": ["r1", "r2", "r3", "a1", "a2"], "outcome": ["pass", "pass", "fail", "pass", "incomplete"]}
    )
    rows = by_gate(evaluate_gates(POLICY, candidate, baseline()))
    assert rows["args"]["status"] == "incomplete" and rows["args"]["blocking_cases"] == ["a2"]
    assert rows["no_new"]["status"] == "incomplete" and rows["no_new"]["blocking_cases"] == ["a2"]
    assert exit_code(evaluate_gates(POLICY, candidate, baseline())) == 2


def test_flaky_cases_are_excluded_from_every_gate():
    candidate = facts(
        "cand",
        {"r1": 1.0, "r2": 1.0, "r3": 0.5, "mh": 1.0},
        {"a1": 1.0, "a2": 0.0},
        {"a1": 1.0, "a2": 0.0},
        {"a2"},
        {"r1": "pass", "r2": "pass", "r3": "fail", "a1": "pass", "a2": "fail"},
        {"r1": 1.0, "r2": 1.0},
        flaky=("a2",),
    )
    rows = by_gate(evaluate_gates(POLICY, candidate, baseline()))
    assert {rows[n]["status"] for n in ("args", "pass1", "policy", "no_new")} == {"pass"}
    assert rows["args"]["excluded_cases"] == ["a2"]


def test_uncalibrated_judge_does_not_gate_grounding():
    candidate = baseline(may_gate=False)
    candidate.grounding = candidate.grounding.with_columns(pl.Series("grounding_rate", [0.0, 0.0]))
    rows = by_gate(evaluate_gates(POLICY, candidate, baseline()))
    assert rows["grounding"]["status"] == "not_gating" and rows["grounding"]["delta"] == pytest.approx(-100.0)
    assert exit_code(evaluate_gates(POLICY, candidate, baseline())) == 0


def test_no_baseline_is_undecided():
    results = undecided_gates(POLICY, "cand", None, INCOMPLETE, "no baseline")
    assert results.height == 6 and exit_code(results) == 2
