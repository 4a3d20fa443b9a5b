"""planted.json's "slices": every case file carries its tags, and the planted slice figures match hand arithmetic."""

from __future__ import annotations

import pytest


def _slice(sample, run, lane, key):
    return next(s for s in sample.planted["slices"]["rollup"][run][lane] if s["slice"] == key)


def _gate(sample, name):
    return next(g for g in sample.planted["slices"]["gates"] if g["name"] == name)


def test_every_case_file_carries_intent_workflow_language_and_permission_scope(sample):
    assert all(
        set(case["tags"]) == {"intent", "workflow", "language", "permission_scope"} for case in sample.cases.values()
    )
    assert sample.cases["agent-003"]["tags"] == {
        "intent": "cancellation",
        "language": "en",
        "permission_scope": "subscription",
        "workflow": "account",
    }
    # membership follows the case files, the corpus and the registry
    membership = sample.planted["slices"]["membership"]
    assert ["tool_risk", "destructive"] in membership["agent-003"]  # cancel_subscription
    assert ["tool_risk", "write"] in membership["agent-004"]  # update_address, send_email
    assert ["tool_risk", "read_only"] in membership["agent-018"]  # get_ticket only
    assert ["corpus_family", "kb/plans"] in membership["rag-038"] and [
        "corpus_family",
        "kb/storage-limits",
    ] in membership["rag-038"]
    assert not any(d == "tool_risk" for d, _ in membership["rag-001"])


def test_high_criticality_slices_of_the_candidate(sample):
    agent = _slice(sample, "cand-42", "agent", "criticality=high")
    # agent-001, agent-003, agent-014, agent-020, agent-020-cf, both-001, three attempts each: 18 traces.
    # agent-001 fails tool_order 3×, agent-003 policy 3×, agent-014 policy once, agent-020-cf tool_selection 3×;
    # agent-020#3 and both-001#2 are incomplete → 6 passed of 16 complete = 0.375.
    assert (
        agent["n_cases"],
        agent["n_traces"],
        agent["traces_passed"],
        agent["traces_failed"],
        agent["traces_incomplete"],
    ) == (6, 18, 6, 10, 2)
    assert agent["pass_rate"] == 0.375
    assert agent["failures_by_stage"] == {"policy": 4, "tool_selection": 3, "tool_order": 3}
    assert agent["failed_case_ids"] == ["agent-001", "agent-003", "agent-014", "agent-020-cf"]
    # pass@1: 1, 0, 2/3, 1, 0, 1 → 3.6667 / 6
    assert agent["pass_at_1"] == pytest.approx((1 + 0 + 2 / 3 + 1 + 0 + 1) / 6, abs=1e-6)
    rag = _slice(sample, "cand-42", "rag", "criticality=high")
    # rag-001, -002, -014, -020 (2 variants), -043, -044 and both-001 (3 attempts): 10 traces; rag-001 retrieval,
    # rag-002 answer, rag-020 retrieval and answer fail; both-001#2 incomplete → 5 of 9.
    # pass@1 over the 6 RAG-only cases: 3/6.
    assert (rag["n_cases"], rag["n_traces"], rag["traces_passed"], rag["traces_failed"], rag["traces_incomplete"]) == (
        7,
        10,
        5,
        4,
        1,
    )
    assert rag["pass_rate"] == pytest.approx(5 / 9, abs=1e-6) and (rag["pass_at_1"], rag["pass_at_1_cases"]) == (0.5, 6)
    assert sample.planted["slices"]["failed_high_criticality"]["cand-42"] == {
        "rag": ["rag-001", "rag-002", "rag-020"],
        "agent": ["agent-001", "agent-003", "agent-014", "agent-020-cf"],
    }
    assert sample.planted["slices"]["failed_high_criticality"]["base-41"] == {"rag": [], "agent": []}


def test_the_segmented_gates_of_the_sample_policy(sample):
    high = _gate(sample, "agent_pass_at_1_high_criticality")
    # the six high-criticality agent-lane cases less agent-014 (flaky): 5 ≥ min_cases 4.
    # Candidate pass@1 1, 0, 1, 0, 1 (agent-001, -003, -020, -020-cf, both-001) = 0.6 against 1.0: −40 points.
    assert (high["n_cases"], high["candidate_value"], high["delta"], high["status"]) == (5, 0.6, -40.0, "fail")
    assert high["blocking_cases"] == ["agent-003", "agent-020-cf"]
    refunds = _gate(sample, "no_new_failures_refunds")
    # 17 refund cases passed in the baseline; 11 of them fail now
    assert (refunds["n_cases"], refunds["delta"], refunds["status"]) == (17, 11.0, "fail")
    assert "rag-001" in refunds["blocking_cases"] and "agent-019" not in refunds["blocking_cases"]
    closure = _gate(sample, "recall_account_closure")
    # rag-014 and rag-015: recall 1.0 in both runs, but 2 cases are fewer than the policy's 5
    assert (closure["cases"], closure["n_cases"], closure["values_say"], closure["status"]) == (
        ["rag-014", "rag-015"],
        2,
        "pass",
        "insufficient",
    )
    # the candidate stays blocked: exit 1
    assert sample.planted["gates"]["exit_code"] == 1
