"""Counterfactual pairs (docs/evidence_use.md): evidence_use per pair, and the evidence_ignored gate, on hand-built
runs."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.contracts.policy import GatePolicy, GateSpec
from eval_pipeline.scoring.counterfactual import counterfactual_pairs, evidence_use_counts
from eval_pipeline.scoring.gate_facts import RunFacts
from eval_pipeline.scoring.gates import evaluate_gate
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

REFUND = [
    {"name": "get_order", "args": {"order_id": "1"}},
    {"name": "issue_refund", "args": {"order_id": "1", "amount": 5.0}},
]
DECLINE = [
    {"name": "get_order", "args": {"order_id": "1"}},
    {"name": "send_email", "args": {"to": "x", "template": "declined"}},
]


def agent_case(case_id, reference, original=None, fact="order 1 is 90 days old"):
    case = {
        "case_id": case_id,
        "lanes": ["agent"],
        "reference_tool_calls": reference,
        "milestones": {"done": {"path": "orders.1.status", "exists": True}},
    }
    if original:
        case.update(counterfactual_of=original, changed_fact=fact)
    return case


def agent_trace(case_id, attempt, calls, status="ok"):
    steps = [
        {"index": i + 1, "kind": "tool_call", "tool": c["name"], "args": c["args"], "status": "ok"}
        for i, c in enumerate(calls)
    ]
    return {
        "trace_id": f"r:{case_id}#{attempt}",
        "case_id": case_id,
        "attempt": attempt,
        "status": status,
        "steps": [*steps, {"index": len(steps) + 1, "kind": "finish", "content": "done"}],
    }


def outcome(case_id, attempt, result, lane="agent"):
    return {
        "run_id": "r",
        "trace_id": f"r:{case_id}#{attempt}",
        "case_id": case_id,
        "attempt": attempt,
        "lane": lane,
        "outcome": result,
    }


def run(cases, traces, outcomes):
    frame = counterfactual_pairs(
        cases_frame_from_records(cases),
        traces_frame_from_records(traces, "r"),
        pl.DataFrame(
            outcomes,
            schema={
                "run_id": pl.String,
                "trace_id": pl.String,
                "case_id": pl.String,
                "attempt": pl.Int64,
                "lane": pl.String,
                "outcome": pl.String,
            },
        ),
        "r",
    )
    return {row["case_id"]: row for row in frame.iter_rows(named=True)}


def test_each_outcome_of_a_pair_by_hand():
    cases = [
        agent_case("o1", REFUND),
        agent_case("c1", DECLINE, "o1"),  # responsive: both pass
        agent_case("o2", REFUND),
        agent_case("c2", DECLINE, "o2"),  # ignored: c2 refunds as o2 does
        agent_case("o3", REFUND),
        agent_case("c3", DECLINE, "o3"),  # broken: c3 reads only, and fails
        agent_case("o4", REFUND),
        agent_case("c4", DECLINE, "o4"),
    ]  # incomplete: every c4 attempt timed out
    traces = [
        agent_trace("o1", 1, REFUND),
        agent_trace("c1", 1, DECLINE),
        agent_trace("o2", 1, REFUND),
        agent_trace("c2", 1, REFUND),
        agent_trace("o3", 1, REFUND),
        agent_trace("c3", 1, DECLINE[:1]),
        agent_trace("o4", 1, REFUND),
        agent_trace("c4", 1, [], status="timeout"),
    ]
    outcomes = [
        outcome("o1", 1, "pass"),
        outcome("c1", 1, "pass"),
        outcome("o2", 1, "pass"),
        outcome("c2", 1, "fail"),
        outcome("o3", 1, "pass"),
        outcome("c3", 1, "fail"),
        outcome("o4", 1, "pass"),
        outcome("c4", 1, "incomplete"),
    ]
    rows = run(cases, traces, outcomes)
    assert {c: r["evidence_use"] for c, r in rows.items()} == {
        "c1": "responsive",
        "c2": "ignored",
        "c3": "broken",
        "c4": "incomplete",
    }
    assert rows["c2"]["same_behaviour"] is True and rows["c3"]["same_behaviour"] is False
    assert rows["c2"]["shared_behaviour"] == (
        'calls get_order({"order_id":"1"}) → issue_refund({"amount":5,"order_id":"1"})'
    )
    assert rows["c2"]["reason"].startswith("did the same with and without the changed fact (order 1 is 90 days old)")
    assert rows["c3"]["reason"] == "behaved differently, but the counterfactual fails"
    assert rows["c4"]["reason"] == "no complete attempt of the counterfactual c4"
    assert (
        rows["c4"]["counterfactual_attempts"],
        rows["c4"]["counterfactual_passed"],
        rows["c4"]["same_behaviour"],
    ) == (0, None, None)
    assert rows["c1"]["reason"] is None and rows["c1"]["original_passed"] and rows["c1"]["counterfactual_passed"]
    assert evidence_use_counts(pl.DataFrame(list(rows.values()))) == {
        "responsive": 1,
        "ignored": 1,
        "broken": 1,
        "incomplete": 1,
    }


def test_one_shared_attempt_makes_a_pair_ignored_and_incomplete_attempts_are_left_out():
    cases = [agent_case("o", REFUND), agent_case("c", DECLINE, "o")]
    # attempt 1 of c declines (different), attempt 2 refunds exactly as the original did, attempt 3 is incomplete
    traces = [
        agent_trace("o", 1, REFUND),
        agent_trace("o", 2, REFUND),
        agent_trace("c", 1, DECLINE),
        agent_trace("c", 2, REFUND),
        agent_trace("c", 3, REFUND[:1], status="error"),
    ]
    outcomes = [
        outcome("o", 1, "pass"),
        outcome("o", 2, "pass"),
        outcome("c", 1, "pass"),
        outcome("c", 2, "fail"),
        outcome("c", 3, "incomplete"),
    ]
    row = run(cases, traces, outcomes)["c"]
    assert (row["evidence_use"], row["original_attempts"], row["counterfactual_attempts"]) == ("ignored", 2, 2)


def test_pairs_that_cannot_tell_anything_are_incomplete_with_the_reason():
    cases = [agent_case("o", REFUND), agent_case("same", REFUND, "o"), agent_case("orphan", DECLINE, "nowhere")]
    traces = [agent_trace("o", 1, REFUND), agent_trace("same", 1, REFUND), agent_trace("orphan", 1, DECLINE)]
    outcomes = [outcome("o", 1, "pass"), outcome("same", 1, "pass"), outcome("orphan", 1, "pass")]
    rows = run(cases, traces, outcomes)
    assert rows["same"]["evidence_use"] == "incomplete" and rows["same"]["expectations_differ"] is False
    assert rows["same"]["reason"].startswith("the two cases expect the same")
    assert rows["orphan"]["evidence_use"] == "incomplete"
    assert rows["orphan"]["reason"] == "original case nowhere is not in the dataset"


def test_a_rag_pair_compares_answers_without_citation_markers_case_or_articles():
    original = {"case_id": "q", "lanes": ["rag"], "required_doc_ids": ["d"], "expected_answer_contains": ["14 days"]}
    changed = {
        "case_id": "q-cf",
        "lanes": ["rag"],
        "required_doc_ids": ["d"],
        "expected_answer_contains": ["30 days"],
        "counterfactual_of": "q",
        "changed_fact": "the window is 30 days in the corpus",
    }
    traces = [
        {"trace_id": "r:q#1", "case_id": "q", "attempt": 1, "answer": {"text": "The window is 14 days [doc:d]."}},
        {"trace_id": "r:q-cf#1", "case_id": "q-cf", "attempt": 1, "answer": {"text": "the window is 14 days."}},
    ]
    rows = run([original, changed], traces, [outcome("q", 1, "pass", "rag"), outcome("q-cf", 1, "fail", "rag")])
    assert rows["q-cf"]["evidence_use"] == "ignored"
    assert rows["q-cf"]["shared_behaviour"] == 'answer "window is 14 days"'


def test_no_pairs_give_an_empty_table():
    rows = run([agent_case("o", REFUND)], [agent_trace("o", 1, REFUND)], [outcome("o", 1, "pass")])
    assert rows == {}


# ---------------------------------------------------------------- the gate


def pairs_frame(uses: dict[str, str], lanes=("agent",)) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "case_id": list(uses),
            "original_case_id": [c.removesuffix("-cf") for c in uses],
            "lanes": [list(lanes)] * len(uses),
            "evidence_use": list(uses.values()),
            "reason": [f"why {c}" for c in uses],
        },
        schema={
            "case_id": pl.String,
            "original_case_id": pl.String,
            "lanes": pl.List(pl.String),
            "evidence_use": pl.String,
            "reason": pl.String,
        },
    )


def facts(run_id, pairs, flaky=()):
    return RunFacts(
        run_id=run_id,
        manifest={"dataset_version": "d", "mode": "gate"},
        cases=pl.DataFrame({"case_id": [], "multi_hop": []}, schema={"case_id": pl.String, "multi_hop": pl.Boolean}),
        reliability=pl.DataFrame(
            {"case_id": list(flaky), "flaky": [True] * len(flaky), "lane": ["agent"] * len(flaky)},
            schema={"case_id": pl.String, "flaky": pl.Boolean, "lane": pl.String},
        ),
        counterfactual=pairs,
    )


SPEC = GateSpec(name="evidence_ignored", lane="all", metric="evidence_ignored", max_new=0, exclude=["quarantined"])


def test_a_pair_newly_ignored_blocks_with_its_reason():
    base = facts("b", pairs_frame({"a-cf": "responsive", "b-cf": "ignored", "c-cf": "responsive"}))
    cand = facts("c", pairs_frame({"a-cf": "ignored", "b-cf": "ignored", "c-cf": "broken"}))
    row = evaluate_gate(SPEC, cand, base, True)
    assert (
        row["status"],
        row["blocking_cases"],
        row["baseline_value"],
        row["candidate_value"],
        row["delta"],
        row["n_cases"],
    ) == ("fail", ["a-cf"], 1.0, 2.0, 1.0, 3)
    assert row["blocking_details"] == ["a-cf: why a-cf (not in b)"] and row["unit"] == "cases"


def test_ignored_in_both_runs_passes_and_max_new_allows_some():
    base = facts("b", pairs_frame({"a-cf": "ignored", "b-cf": "responsive"}))
    assert (
        evaluate_gate(SPEC, facts("c", pairs_frame({"a-cf": "ignored", "b-cf": "responsive"})), base, True)["status"]
        == "pass"
    )
    lenient = SPEC.model_copy(update={"max_new": 1})
    assert (
        evaluate_gate(lenient, facts("c", pairs_frame({"a-cf": "ignored", "b-cf": "ignored"})), base, True)["status"]
        == "pass"
    )


def test_an_incomplete_pair_makes_the_gate_incomplete_never_a_pass():
    base = facts("b", pairs_frame({"a-cf": "responsive", "b-cf": "responsive"}))
    row = evaluate_gate(SPEC, facts("c", pairs_frame({"a-cf": "responsive", "b-cf": "incomplete"})), base, True)
    assert (row["status"], row["blocking_cases"]) == ("incomplete", ["b-cf"])
    assert evaluate_gate(SPEC, facts("c", None), base, True)["status"] == "incomplete"


def test_pairs_with_a_flaky_case_and_pairs_of_another_lane_are_left_out():
    base = facts("b", pairs_frame({"a-cf": "responsive"}))
    cand = facts("c", pairs_frame({"a-cf": "ignored"}), flaky=("a",))
    row = evaluate_gate(SPEC, cand, base, True)
    assert (row["status"], row["excluded_cases"], row["n_cases"]) == ("pass", ["a-cf"], 0)
    rag_only = SPEC.model_copy(update={"lane": "rag"})
    assert evaluate_gate(rag_only, facts("c", pairs_frame({"a-cf": "ignored"})), base, True)["status"] == "pass"


def test_the_policy_accepts_the_metric():
    policy = GatePolicy.model_validate(
        {"version": 1, "gates": [{"name": "e", "lane": "all", "metric": "evidence_ignored", "max_new": 0}]}
    )
    assert policy.gates[0].metric == "evidence_ignored"
    with pytest.raises(ValueError):
        GatePolicy.model_validate({"version": 1, "gates": [{"name": "e", "lane": "all", "metric": "evidence_ignord"}]})
