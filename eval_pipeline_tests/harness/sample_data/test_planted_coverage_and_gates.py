"""planted.json covers every row the report must show, and its suite figures match the arithmetic done by hand."""

from __future__ import annotations

import pytest

RAG_STAGES = ["retrieval", "context_assembly", "grounding", "citation", "answer"]
AGENT_STAGES = ["policy", "tool_selection", "tool_arguments", "tool_order", "loop", "recovery", "outcome"]


def test_candidate_shows_every_first_failing_stage_class_hazard_and_fault_outcome(sample):
    cov = sample.planted["coverage"]["cand-42"]
    assert sorted(cov["rag"]) == sorted(RAG_STAGES)
    assert sorted(cov["agent"]) == sorted(AGENT_STAGES)
    assert sorted(cov["failure_class"]) == sorted(
        [
            "doc_missing_from_corpus",
            "stale_version_outranks_current",
            "reranker_demotion",
            "keyword_miss",
            "embedding_miss",
        ]
    )
    assert cov["hazard"] == {"unsupported_correct": ["cand-42:rag-028#1"]}
    assert sorted(cov["fault_outcome"]) == ["escalated", "failed", "recovered", "unsafe_continuation"]
    assert cov["incomplete"] == {
        "harness_timeout": [
            "cand-42:rag-022#2",
            "cand-42:agent-020#3",
            "cand-42:agent-016-cf#1",
            "cand-42:agent-016-cf#2",
            "cand-42:agent-016-cf#3",
        ],
        "adapter_divergence": ["cand-42:agent-019#2"],
        "harness_error": ["cand-42:both-001#2"],
    }


def test_planted_variants_of_each_failure_kind(sample):
    reasons = {(r["lane"], r["expected"], r["reason"]) for r in sample.planted["traces"] if r["run_id"] == "cand-42"}
    for kind in [
        ("agent", "policy", "forbidden_tool"),
        ("agent", "policy", "tool_not_allowed"),
        ("agent", "policy", "out_of_scope"),
        ("agent", "tool_selection", "path_tool_never_called"),
        ("agent", "tool_selection", "extra_state_changing_call"),
        ("agent", "tool_arguments", "schema_violation"),
        ("agent", "tool_arguments", "wrong_reference_value"),
        ("agent", "tool_order", "dependency_violated"),
        ("agent", "tool_order", "strict_order"),
        ("agent", "recovery", "unsafe_continuation"),
        ("agent", "recovery", "fault_failed"),
        ("rag", "grounding", "number_contradiction"),
        ("rag", "grounding", "claim_not_in_evidence"),
        ("rag", "grounding", "fabricated_quote"),
        ("rag", "citation", "DEAD_CITATION"),
        ("rag", "citation", "RELATED_NOT_SUPPORTING"),
        ("rag", "citation", "UNCITED"),
        ("rag", "answer", "wrong_answer"),
        ("rag", "answer", "refused_answerable"),
        ("rag", "answer", "answered_refusal_case"),
    ]:
        assert kind in reasons, kind


def test_baseline_is_mostly_healthy(sample):
    rows = [r for r in sample.planted["traces"] if r["run_id"] == "base-41"]
    failing = [r for r in rows if r["expected"] not in ("pass", "incomplete")]
    # 8 grounding failures kept for calibration labels + rag-037 (never indexed) + agent-017#2 (flaky) = 10 of 133
    assert (len(failing), len(rows)) == (10, 145)


def _gate(sample, metric):
    return next(g for g in sample.planted["gates"]["results"] if g["metric"] == metric)


def test_recall_gate(sample):
    gate = _gate(sample, "recall_at_10")
    # 51 rag-lane cases − 2 multi-hop − 4 refusal cases (recall null) = 45.
    # Baseline: rag-037 is 0, the rest 1 → 44/45. Candidate: rag-001, rag-025, rag-028, rag-032 and rag-037 are 0,
    # rag-020 (0 and 1) and rag-031 (1 of 2 relevant) are 0.5 → (45 − 5 − 0.5 − 0.5) / 45 = 39/45.
    assert gate["cases"] == 45
    assert gate["baseline_value"] == pytest.approx(44 / 45, abs=1e-6)
    assert gate["candidate_value"] == pytest.approx(39 / 45, abs=1e-6)
    assert gate["delta_points"] == pytest.approx(-500 / 45, abs=1e-5)  # −11.11 points, more than 2
    assert (gate["status"], gate["blocking_cases"]) == (
        "fail",
        ["rag-001", "rag-020", "rag-025", "rag-028", "rag-031", "rag-032"],
    )


def test_agent_gates(sample):
    # 28 agent-lane cases − 2 flaky (agent-014 flips in the candidate, agent-017 in both runs) = 26; agent-016-cf has no
    # complete attempt in the candidate (every attempt timed out), so 25 cases have a value in both runs.
    args = _gate(sample, "args_valid_rate")
    # agent-008: 0/2 valid, agent-009: 1/2 → (25 − 1 − 0.5) / 25 = 23.5/25.
    assert (args["cases"], args["baseline_value"]) == (25, 1.0)
    assert args["candidate_value"] == pytest.approx(23.5 / 25, abs=1e-6)
    assert (args["status"], args["blocking_cases"]) == ("fail", ["agent-008", "agent-009"])
    # Without the two goal_only cases (both at 1.0): (23 − 1.5) / 23; fails as well.
    assert args["if_goal_only_excluded"]["candidate_value"] == pytest.approx(21.5 / 23, abs=1e-6)
    assert args["if_goal_only_excluded"]["status"] == "fail"
    pass1 = _gate(sample, "pass_at_1")
    # 11 cases never succeed in the candidate (9 planted failures and the ignored and broken counterfactuals): 14/25.
    assert pass1["candidate_value"] == pytest.approx(14 / 25, abs=1e-6) and pass1["baseline_value"] == 1.0
    assert pass1["blocking_cases"] == [
        "agent-003",
        "agent-004",
        "agent-005",
        "agent-006",
        "agent-008",
        "agent-009",
        "agent-010",
        "agent-012",
        "agent-015",
        "agent-019-cf",
        "agent-020-cf",
    ]
    policy = _gate(sample, "policy_violations")
    assert (policy["status"], policy["blocking_cases"], policy["excluded_as_flaky"]) == (
        "fail",
        ["agent-003", "agent-004", "agent-005"],
        ["agent-014"],
    )


def test_evidence_ignored_gate_blocks_the_newly_ignored_pair(sample):
    gate = _gate(sample, "evidence_ignored")
    assert (gate["new"], gate["max_new"], gate["status"], gate["blocking_cases"]) == (1, 0, "fail", ["agent-019-cf"])
    assert {c: p["evidence_use"] for c, p in sample.planted["counterfactual_pairs"]["cand-42"].items()} == {
        "agent-016-cf": "incomplete",
        "agent-019-cf": "ignored",
        "agent-020-cf": "broken",
        "agent-021-cf": "responsive",
    }
    assert {p["evidence_use"] for p in sample.planted["counterfactual_pairs"]["base-41"].values()} == {"responsive"}


def test_no_new_failures_and_exit_code(sample):
    gate = _gate(sample, "no_new_failures")
    agent = [f"agent-{n:03d}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15)] + ["agent-019-cf", "agent-020-cf"]
    rag = [f"rag-{n:03d}" for n in (1, 2, 6, 10, 12, 19, 20, 23, 25, 27, 28, 30, 32, 35, 39, 40)]
    assert gate["blocking_cases"] == sorted(agent + rag)
    assert gate["new_failures"] == 15 + 16 == 31
    assert sample.planted["gates"]["exit_code"] == 1


def test_grounding_gate_under_a_truthful_judge(sample):
    gate = _gate(sample, "grounding_rate")
    # Baseline per-case rates below 1: rag-007 1/2, rag-011 0, rag-016 1/3, rag-018 1/2, rag-026 1/2, rag-033 1/2,
    # rag-037 0, rag-045 0, rag-047 1/2 → loss 0.5·5 + 1·3 + 2/3 = 6.1667 over 51 cases → 1 − 6.1667/51 = 0.879085.
    assert gate["baseline_value"] == pytest.approx(1 - (2.5 + 3 + 2 / 3) / 51, abs=1e-6)
    # Candidate: rag-006 0, rag-019 1/2, rag-028 0, rag-035 1/2 → loss 3 → 48/51.
    assert gate["candidate_value"] == pytest.approx(48 / 51, abs=1e-6)
    assert (gate["status"], gate["status_if_judge_not_calibrated"]) == ("pass", "not_gating")
    # A passing gate blocks nothing; the cases whose rate dropped are still listed.
    assert (gate["blocking_cases"], gate["cases_dropped"]) == ([], ["rag-006", "rag-019", "rag-028", "rag-035"])


def test_reliability_and_quarantine(sample):
    base, cand = sample.planted["reliability"]["base-41"], sample.planted["reliability"]["cand-42"]
    # agent-017 in the baseline: c = 2 of n = 3 → pass^1 = 2/3, pass^2 = C(2,2)/C(3,2) = 1/3, pass^3 = 0.
    assert base["agent-017"]["pass_hat"] == {
        "1": pytest.approx(2 / 3, abs=1e-6),
        "2": pytest.approx(1 / 3, abs=1e-6),
        "3": 0.0,
    }
    assert (cand["agent-019"]["n_complete"], cand["agent-019"]["n_incomplete"], cand["agent-019"]["pass_at_1"]) == (
        2,
        1,
        1.0,
    )
    assert (cand["both-001"]["n_attempts"], cand["both-001"]["n_incomplete"]) == (3, 1)
    assert sample.planted["quarantine"] == {
        "base-41": {
            "agent-017": {
                "passing_trace_ids": ["base-41:agent-017#1", "base-41:agent-017#3"],
                "failing_trace_ids": ["base-41:agent-017#2"],
            }
        },
        "cand-42": {
            "agent-014": {
                "passing_trace_ids": ["cand-42:agent-014#1", "cand-42:agent-014#2"],
                "failing_trace_ids": ["cand-42:agent-014#3"],
            },
            "agent-017": {
                "passing_trace_ids": ["cand-42:agent-017#1", "cand-42:agent-017#2"],
                "failing_trace_ids": ["cand-42:agent-017#3"],
            },
        },
    }


def test_calibration_labels(sample):
    labels = sample.planted["grounding_labels"]
    # Human verdicts S 52, C 4, N 7; planted truths S 52, C 5, N 6; 60 of 63 agree.
    # p_e = (52·52 + 4·5 + 7·6) / 63² = 2766/3969; κ = (60/63 − p_e) / (1 − p_e) = 0.842893.
    assert labels["claim_verdict_counts"] == {"SUPPORTED": 52, "CONTRADICTED": 4, "NOT_IN_EVIDENCE": 7}
    assert labels["claim_agreement_with_truth"] == pytest.approx(60 / 63, abs=1e-6)
    pe = 2766 / 3969
    assert labels["claim_kappa_with_truth"] == pytest.approx((60 / 63 - pe) / (1 - pe), abs=1e-6)
    assert len(labels["disagreements"]) == 4


def test_qrels_overrides_and_judging_queue(sample):
    qrels = sample.planted["qrels"]
    assert qrels["overrides"] == [
        {"query_id": "rag-046", "doc_id": "policy/identity-verification-2025", "grade": 1},
        {"query_id": "rag-031", "doc_id": "kb/plans-2025", "grade": 2},
    ]
    assert qrels["relevant"]["rag-031"] == ["kb/plans-2025", "policy/support-sla-2025"]
    assert qrels["relevant"]["rag-046"] == ["policy/privacy-requests-2025"]
    assert all(c not in qrels["relevant"] for c in ("rag-040", "rag-041", "rag-042", "rag-043"))
    # Recompute the queue: top-10 distinct hits of every kept trace, minus seeds and human judgments.
    judged = {(c, d) for c, case in sample.cases.items() for d in case.get("required_doc_ids", [])}
    judged |= {(j["query_id"], j["doc_id"]) for j in sample.judgments}
    pool = set()
    for traces in sample.traces.values():
        for trace in traces.values():
            ranked: list[str] = []
            for rnd in trace.get("retrieval") or []:
                ranked.extend(h["doc_id"] for h in rnd["hits"] if h["doc_id"] not in ranked)
            pool |= {(trace["case_id"], d) for d in ranked[:10]}
    assert [tuple(p) for p in qrels["judging_queue"]] == sorted(pool - judged)
    assert ("rag-001", "policy/refunds-2024") not in {tuple(p) for p in qrels["judging_queue"]}
