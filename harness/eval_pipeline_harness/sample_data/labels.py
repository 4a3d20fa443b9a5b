"""Human labels of the sample data: qrels judgments, claim verdicts for judge calibration, and the gate policy."""

from __future__ import annotations

from typing import Any

from eval_pipeline_harness.sample_data.plans import BASELINE_RUN

R25 = "policy/refunds-2025"

# (query_id, doc_id, grade, annotator). Human judgments override the seed grades (required_doc_ids at 2).
QRELS_JUDGMENTS: tuple[tuple[str, str, int, str], ...] = (
    # Override of a seed: for a deletion request the identity-verification policy is related, not the answer.
    ("rag-046", "policy/identity-verification-2025", 1, "a3"),
    # A pooled doc that answers the question: the plans page states the Business response time too.
    ("rag-031", "kb/plans-2025", 2, "a1"),
    # Superseded versions of the refund policy are on topic but no longer answer it.
    ("rag-001", R25, 2, "a1"),
    ("rag-001", "policy/refunds-2024", 1, "a1"),
    ("rag-001", "policy/refunds-2023", 1, "a1"),
    # A judged doc that no run retrieved: it still enters the ideal DCG of its query.
    ("rag-006", "policy/shipping-2024", 1, "a2"),
    ("rag-010", "policy/returns-hardware-2025", 1, "a2"),
    ("rag-020", "kb/sync-errors-2025", 0, "a2"),
    ("rag-020", "kb/invoices-2025", 0, "a2"),
    ("rag-025", "kb/two-factor-2025", 0, "a3"),
    ("rag-027", "kb/plans-2025", 0, "a3"),
    ("rag-028", "policy/returns-hardware-2025", 0, "a3"),
    ("rag-032", "policy/support-sla-2025", 1, "a1"),
    ("rag-037", "kb/invoices-2025", 1, "a2"),
    ("rag-037", "policy/nonprofit-discount-2025", 1, "a2"),
    ("rag-039", "kb/plans-2025", 1, "a3"),
    ("rag-044", "policy/chargebacks-2025", 1, "a1"),
    ("rag-048", "kb/plans-2025", 1, "a1"),
    # Refusal cases: what came back is at most related, so they stay without a relevant doc.
    ("rag-040", R25, 1, "a2"),
    ("rag-040", "kb/plans-2025", 0, "a2"),
)

# Baseline traces whose claims the annotators labelled (the grounding-failure traces are added to these).
LABELLED_HEALTHY = (
    "rag-001",
    "rag-003",
    "rag-006",
    "rag-008",
    "rag-009",
    "rag-012",
    "rag-013",
    "rag-014",
    "rag-019",
    "rag-020",
    "rag-022",
    "rag-023",
    "rag-024",
    "rag-028",
    "rag-029",
    "rag-030",
    "rag-031",
    "rag-032",
    "rag-035",
    "rag-036",
    "rag-038",
    "rag-039",
    "rag-044",
    "both-002",
)
LABELLED_FAILING = ("rag-007", "rag-011", "rag-016", "rag-018", "rag-026", "rag-033", "rag-037", "rag-045", "rag-047")

# Honest disagreement (about 5%): the human verdict differs from what the corpus supports.
# (case, claim prefix) → verdict.
CLAIM_DISAGREEMENTS: dict[tuple[str, str], str] = {
    # Contradicted by "Three failed verification attempts ..."; the annotator read it as merely not stated.
    ("rag-016", "Five failed verification attempts"): "NOT_IN_EVIDENCE",
    # Nothing in the context says so; the annotator knew the export guide and marked it supported.
    ("rag-018", "Audit logs can be exported"): "SUPPORTED",
    # Verbatim in the service credit policy; a strict annotator missed the sentence.
    ("rag-032", "Service credits must be requested"): "NOT_IN_EVIDENCE",
}
# Answer-level labels: (case) → answer_grounded as labelled; rag-047 is the planted disagreement (its second claim
# is not in evidence, the annotator judged the answer as a whole grounded).
ANSWER_LABELS: dict[str, bool] = {
    "rag-001": True,
    "rag-006": True,
    "rag-012": True,
    "rag-023": True,
    "rag-030": True,
    "rag-044": True,
    "rag-007": False,
    "rag-011": False,
    "rag-016": False,
    "rag-033": False,
    "rag-037": False,
    "rag-047": True,
}

VERDICT = {"S": "SUPPORTED", "C": "CONTRADICTED", "N": "NOT_IN_EVIDENCE"}


def qrels_lines() -> list[dict[str, Any]]:
    """labels/qrels lines."""
    return [
        {"query_id": q, "doc_id": d, "grade": g, "source": "human", "annotator": a} for q, d, g, a in QRELS_JUDGMENTS
    ]


def segmented_gates() -> list[dict[str, Any]]:
    """The sample's gates on one decision slice each (slices.py)."""
    from eval_pipeline_harness.sample_data.slices import (
        segmented_gates as gates,
    )  # slices.py reads the labels: imported late

    return gates()


def gate_policy(baseline_run_id: str | None = BASELINE_RUN) -> dict[str, Any]:
    """policy/gates.yaml: the gates of docs/gates.md."""
    policy: dict[str, Any] = {"version": 3}
    if baseline_run_id:
        policy["baseline_run_id"] = baseline_run_id
    policy["retrieval"] = {"k": 10, "relevance_threshold": 2, "pool_depth": 10}
    policy["judge"] = {"min_kappa": 0.6, "min_n": 50}
    policy["gates"] = [
        {
            "name": "retrieval_recall_at_10",
            "lane": "rag",
            "metric": "recall_at_10",
            "max_regression_points": 2,
            "exclude": ["multi_hop", "quarantined"],
            "owner": "retrieval",
        },
        {
            "name": "agent_args_valid_rate",
            "lane": "agent",
            "metric": "args_valid_rate",
            "max_regression_points": 3,
            "exclude": ["quarantined"],
            "owner": "agent-tools",
        },
        {
            "name": "agent_pass_at_1",
            "lane": "agent",
            "metric": "pass_at_1",
            "max_regression_points": 5,
            "exclude": ["quarantined"],
            "report_beside": ["pass_hat_k"],
            "owner": "agent",
        },
        {
            "name": "policy_violations",
            "lane": "agent",
            "metric": "policy_violations",
            "max_new": 0,
            "exclude": ["quarantined"],
            "owner": "agent-safety",
        },
        {
            "name": "no_new_failures",
            "lane": "all",
            "metric": "no_new_failures",
            "max_new_failures": 0,
            "exclude": ["quarantined"],
            "owner": "release",
        },
        {
            "name": "grounding_rate",
            "lane": "rag",
            "metric": "grounding_rate",
            "max_regression_points": 2,
            "requires_calibrated_judge": True,
            "exclude": ["quarantined"],
            "owner": "generation",
        },
        {
            "name": "evidence_ignored",
            "lane": "all",
            "metric": "evidence_ignored",
            "max_new": 0,
            "exclude": ["quarantined"],
            "owner": "agent-policy",
        },
        *segmented_gates(),
    ]
    return policy
