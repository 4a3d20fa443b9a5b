"""Segmented gates on hand-built runs: a gate computed on one decision slice only, `insufficient` below min_cases
(exit 2, never a pass), the policy's and the gate's min_cases, and the policy errors a segment can raise at load
time."""

import dataclasses

import polars as pl
import pytest

from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.io.policy import parse_gate_policy
from eval_pipeline.io.storage import InputError
from eval_pipeline.scoring.gate_facts import RunFacts, restrict
from eval_pipeline.scoring.gate_table import INCOMPLETE, exit_code, overall_status, undecided_gates
from eval_pipeline.scoring.gates import evaluate_gates

CASES = ["h1", "h2", "n1", "n2", "n3"]
# h = high criticality; intent refund: h1, n1, n2; intent status: h2, n3
SLICES = pl.DataFrame(
    {
        "case_id": [*CASES, "h1", "n1", "n2", "h2", "n3"],
        "dimension": ["criticality"] * 5 + ["tags.intent"] * 5,
        "value": ["high", "high", "normal", "normal", "normal", "refund", "refund", "refund", "status", "status"],
    }
)


def run(run_id: str, pass1: dict, outcomes: dict, slices: pl.DataFrame | None = SLICES) -> RunFacts:
    attempts = [(c, o) for c, values in outcomes.items() for o in values]
    return RunFacts(
        run_id=run_id,
        manifest={"mode": "gate", "dataset_version": "ds"},
        cases=pl.DataFrame({"case_id": CASES, "multi_hop": [False] * 5}),
        reliability=pl.DataFrame(
            {
                "case_id": list(pass1),
                "lane": ["agent"] * len(pass1),
                "pass_at_1": list(pass1.values()),
                "flaky": [False] * len(pass1),
            }
        ),
        quarantine=pl.DataFrame(schema={"case_id": pl.String}),
        outcomes=pl.DataFrame({"case_id": [c for c, _ in attempts], "outcome": [o for _, o in attempts]}),
        tools=pl.DataFrame({"case_id": CASES, "status": ["scored"] * 5, "policy_violation": [False] * 5}),
        calibration=pl.DataFrame({"level": ["claim"], "may_gate": [True]}),
        slices=slices,
    )


BASELINE = run("base", dict.fromkeys(CASES, 1.0), {c: ["pass", "pass"] for c in CASES})
# h1 never succeeds, n2 one of two attempts
CANDIDATE = run(
    "cand",
    {"h1": 0.0, "h2": 1.0, "n1": 1.0, "n2": 0.5, "n3": 1.0},
    {
        "h1": ["fail", "fail"],
        "h2": ["pass", "pass"],
        "n1": ["pass", "pass"],
        "n2": ["pass", "fail"],
        "n3": ["pass", "pass"],
    },
)


def policy(*gates: dict, **options) -> GatePolicy:
    return GatePolicy.model_validate({"version": 1, **options, "gates": list(gates)})


PASS1 = {"name": "pass1", "lane": "agent", "metric": "pass_at_1", "max_regression_points": 5}


def rows(p: GatePolicy, candidate=CANDIDATE, baseline=BASELINE) -> dict:
    return {r["gate"]: r for r in evaluate_gates(p, candidate, baseline).iter_rows(named=True)}


def test_a_segmented_gate_is_computed_on_its_slice_only():
    result = rows(
        policy(
            PASS1,
            {**PASS1, "name": "pass1_high", "segment": {"criticality": "high"}, "min_cases": 2},
            {**PASS1, "name": "pass1_refund", "segment": {"tags.intent": "refund"}, "min_cases": 3},
        )
    )
    # the suite: (0 + 1 + 1 + 0.5 + 1) / 5 = 0.7 against 1.0: −30 points
    assert (result["pass1"]["candidate_value"], result["pass1"]["n_cases"]) == (pytest.approx(0.7), 5)
    assert (result["pass1"]["segment"], result["pass1"]["min_cases"]) == (None, None)
    # h1 and h2: (0 + 1) / 2 = 0.5 against 1.0: −50 points, blocked by h1 alone
    high = result["pass1_high"]
    assert (high["status"], high["n_cases"], high["segment"], high["min_cases"]) == ("fail", 2, "criticality=high", 2)
    assert high["candidate_value"] == 0.5 and high["delta"] == pytest.approx(-50.0) and high["blocking_cases"] == ["h1"]
    # h1, n1, n2: (0 + 1 + 0.5) / 3 = 0.5: blocked by h1 and n2
    refund = result["pass1_refund"]
    assert (refund["status"], refund["n_cases"], refund["candidate_value"], refund["blocking_cases"]) == (
        "fail",
        3,
        0.5,
        ["h1", "n2"],
    )
    refund_only = policy({**PASS1, "name": "r", "segment": {"tags.intent": "refund"}, "min_cases": 3})
    assert exit_code(evaluate_gates(refund_only, CANDIDATE, BASELINE)) == 1


def test_fewer_complete_cases_than_min_cases_is_insufficient_never_a_pass():
    # the policy's min_cases (default 5) over 2 cases: the values say fail, the gate says insufficient
    result = rows(policy({**PASS1, "name": "pass1_high", "segment": {"criticality": "high"}}))["pass1_high"]
    assert (result["status"], result["n_cases"], result["min_cases"]) == ("insufficient", 2, 5)
    assert result["reason"] == (
        "slice criticality=high has 2 complete case(s), fewer than min_cases 5: not decided (on these "
        "cases the gate says fail: pass_at_1 dropped 50.00 points (allowed 5))"
    )
    # values are kept for the reader
    assert (result["baseline_value"], result["candidate_value"]) == (1.0, 0.5)
    # a slice that would pass is insufficient as well: exit 2, undecided
    same = rows(
        policy({**PASS1, "name": "same", "segment": {"tags.intent": "status"}}, min_cases=3), CANDIDATE, BASELINE
    )["same"]
    assert (same["status"], same["n_cases"], same["min_cases"]) == ("insufficient", 2, 3)
    assert same["reason"].endswith("(on these cases the gate says pass)")
    frame = evaluate_gates(policy({**PASS1, "name": "same", "segment": {"tags.intent": "status"}}), CANDIDATE, BASELINE)
    assert exit_code(frame) == 2 and overall_status(frame) == "incomplete"


def test_the_gate_s_min_cases_overrides_the_policy_s():
    p = policy(
        {**PASS1, "name": "a", "segment": {"criticality": "high"}},
        {**PASS1, "name": "b", "segment": {"criticality": "high"}, "min_cases": 2},
        min_cases=3,
    )
    result = rows(p)
    assert (result["a"]["status"], result["a"]["min_cases"]) == ("insufficient", 3)
    assert (result["b"]["status"], result["b"]["min_cases"]) == ("fail", 2)


def test_several_keys_must_all_hold_and_an_empty_slice_compares_nothing():
    result = rows(
        policy(
            {**PASS1, "name": "both", "segment": {"criticality": "high", "tags.intent": "refund"}, "min_cases": 1},
            {**PASS1, "name": "none", "segment": {"tags.intent": "cancel"}, "min_cases": 1},
        )
    )
    # h1 only: 0.0 against 1.0
    assert (result["both"]["status"], result["both"]["n_cases"], result["both"]["segment"]) == (
        "fail",
        1,
        "criticality=high, tags.intent=refund",
    )
    assert (result["none"]["status"], result["none"]["n_cases"]) == ("insufficient", 0)


def test_count_gates_are_segmented_the_same_way():
    new = {
        "name": "no_new_refund",
        "lane": "all",
        "metric": "no_new_failures",
        "max_new_failures": 0,
        "segment": {"tags.intent": "refund"},
        "min_cases": 3,
    }
    result = rows(policy(new, {**new, "name": "no_new_status", "segment": {"tags.intent": "status"}, "min_cases": 2}))
    # h1, n1, n2 passed in the baseline; h1 and n2 fail now
    refund = result["no_new_refund"]
    assert (refund["status"], refund["n_cases"], refund["delta"], refund["blocking_cases"]) == (
        "fail",
        3,
        2.0,
        ["h1", "n2"],
    )
    status = result["no_new_status"]
    assert (status["status"], status["n_cases"], status["delta"]) == ("pass", 2, 0.0)


def test_without_the_candidate_s_membership_a_segmented_gate_is_incomplete():
    result = rows(
        policy({**PASS1, "name": "high", "segment": {"criticality": "high"}}),
        dataclasses.replace(CANDIDATE, slices=None),
    )["high"]
    assert result["status"] == "incomplete" and result["reason"].startswith(
        "slice criticality=high: the candidate's slice membership is missing"
    )


def test_restrict_keeps_the_slice_rows_of_every_frame_with_a_case_id():
    restricted = restrict(CANDIDATE, ["h1", "n3"])
    for f in dataclasses.fields(restricted):
        frame = getattr(restricted, f.name)
        if isinstance(frame, pl.DataFrame) and "case_id" in frame.columns:
            assert set(frame["case_id"].to_list()) <= {"h1", "n3"}, f.name
    assert restricted.outcomes.height == 4 and restricted.reliability.height == 2
    # frames without cases (judge calibration) are the run's
    assert restricted.calibration.equals(CANDIDATE.calibration)


def test_undecided_rows_carry_the_segment_and_min_cases():
    p = policy(PASS1, {**PASS1, "name": "high", "segment": {"criticality": "high"}}, min_cases=4)
    frame = undecided_gates(p, "cand", None, INCOMPLETE, "no baseline")
    assert frame.select("gate", "segment", "min_cases").rows() == [
        ("pass1", None, None),
        ("high", "criticality=high", 4),
    ]
    assert frame.schema["segment"] == pl.String and frame.schema["min_cases"] == pl.Int64


GATE_LINE = "version: 1\ngates:\n  - {name: g, lane: agent, metric: pass_at_1, max_regression_points: 5%s}\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ", segment: {lang: en}",
            "unknown segment key 'lang'; known: criticality, corpus_family, tool_risk, tags.<name>",
        ),
        (", segment: {criticality: urgent}", "segment criticality: 'urgent' is not one of high, normal"),
        (", segment: {tool_risk: risky}", "segment tool_risk: 'risky' is not one of read_only, write, destructive"),
        (", segment: {tags.tier: 1}", "segment tags.tier: 1 is a int, not a string; quote it in the YAML"),
        (", segment: {'tags.9x': a}", "segment tags.9x: tag name '9x' must be a letter"),
        (", segment: {}", "segment names no slice"),
        (", segment: [criticality]", "segment is a mapping of slice dimensions to values"),
        (", min_cases: 3", "gate g: min_cases applies to a segmented gate only"),
        (
            ", segment: {criticality: high}, min_cases: 0",
            "gates.0.min_cases: Input should be greater than or equal to 1",
        ),
        (
            ", segment: {corpus_family: policy/refunds}",
            "gate g: corpus_family slices by required documents, a rag contract",
        ),
    ],
)
def test_a_bad_segment_is_an_error_when_the_policy_is_loaded(extra, message):
    with pytest.raises(InputError, match="^policy/gates.yaml:3:") as error:
        parse_gate_policy(GATE_LINE % extra, "policy/gates.yaml")
    assert message in str(error.value)


def test_a_valid_segment_and_the_policy_min_cases_load():
    loaded = parse_gate_policy(
        "version: 1\nmin_cases: 8\n" + GATE_LINE.split("\n", 1)[1] % ", segment: {criticality: high, "
        "tags.intent: refund}, min_cases: 3",
        "policy/gates.yaml",
    )
    assert loaded.min_cases == 8 and loaded.gates[0].min_cases == 3
    assert loaded.gates[0].segment == {"criticality": "high", "tags.intent": "refund"}
    rag = parse_gate_policy(
        "version: 1\ngates:\n  - {name: r, lane: rag, metric: recall_at_10, max_regression_points: 2, "
        "segment: {corpus_family: policy/refunds}}\n"
    )
    assert rag.gates[0].segment == {"corpus_family": "policy/refunds"} and rag.gates[0].min_cases is None
    assert parse_gate_policy("version: 1\ngates: []\n").min_cases == 5
    with pytest.raises(InputError, match="min_cases: Input should be greater than or equal to 1"):
        parse_gate_policy("version: 1\nmin_cases: 0\ngates: []\n", "policy/gates.yaml")
