"""The contract of each output table that feeds a report (the columns of docs/tables.md plus stage columns)."""

from eval_pipeline.quality.contracts import TableContract, lane_table
from eval_pipeline.scoring.common import STAGE_STATUSES

RECALLS = tuple(f"recall_at_{k}" for k in (1, 3, 5, 10, 20))
PRECISIONS = tuple(f"precision_at_{k}" for k in (1, 3, 5, 10))
NDCGS = tuple(f"ndcg_at_{k}" for k in (3, 5, 10))

RETRIEVAL_SCORES = lane_table(
    *RECALLS,
    *PRECISIONS,
    "mrr",
    *NDCGS,
    "first_hit_rank",
    "context_precision",
    "judged_at_10",
    "failure_class",
    "qrels_version",
    stages=("retrieval",),
    unit_interval=(*RECALLS, *PRECISIONS, "mrr", *NDCGS, "context_precision", "judged_at_10"),
    non_negative=("first_hit_rank",),
    value_sets={
        "failure_class": (
            "doc_missing_from_corpus",
            "stale_version_outranks_current",
            "reranker_demotion",
            "keyword_miss",
            "embedding_miss",
        )
    },
)
CONTEXT_SCORES = lane_table(
    "context_recall",
    "context_precision",
    "context_tokens",
    "context_families",
    "context_sources",
    "redundant_chunk_share",
    stages=("context_assembly",),
    unit_interval=("context_recall", "context_precision", "redundant_chunk_share"),
    non_negative=("context_tokens", "context_families", "context_sources"),
)
GROUNDING_SCORES = lane_table(
    "grounding_rate",
    "n_claims",
    "n_supported",
    "n_triangulated",
    "judge_version",
    stages=("grounding",),
    unit_interval=("grounding_rate",),
    non_negative=("n_claims", "n_supported", "n_triangulated"),
)
CITATION_SCORES = lane_table(
    "citation_precision",
    "citation_recall",
    "citation_resolution_rate",
    "quotes_found_rate",
    "cited_families",
    "cited_sources",
    stages=("citation",),
    unit_interval=("citation_precision", "citation_recall", "citation_resolution_rate", "quotes_found_rate"),
    non_negative=("cited_families", "cited_sources"),
)
ANSWER_SCORES = lane_table(
    "contains_all",
    "exact_match",
    "token_f1",
    "refused",
    stages=("answer",),
    unit_interval=("token_f1",),
)
CLAIMS = TableContract(
    columns=(
        "run_id",
        "trace_id",
        "claim_index",
        "claim",
        "verdict",
        "score",
        "evidence_quote",
        "quote_verified",
        "cited_doc_ids",
        "citation_verdict",
        "supporting_families",
        "triangulated",
    ),
    unit_interval=("score",),
    non_negative=("supporting_families",),
    value_sets={
        "verdict": ("SUPPORTED", "CONTRADICTED", "NOT_IN_EVIDENCE"),
        "citation_verdict": ("SUPPORTS", "RELATED_NOT_SUPPORTING", "UNCITED", "DEAD_CITATION"),
    },
    per_trace=False,
)
JUDGE_VERDICTS = TableContract(
    columns=(
        "run_id",
        "judge_version",
        "hash_scheme",
        "digest_a",
        "digest_b",
        "verdict",
        "score",
        "status",
        "reason",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "latency_ms",
    ),
    unit_interval=("score",),
    non_negative=("input_tokens", "output_tokens", "cost_usd", "latency_ms"),
    # only completed verdicts are stored: an incomplete call is asked again, never replayed
    value_sets={"status": ("ok",)},
    per_trace=False,
)
TOOL_SCORES = lane_table(
    "tool_call_f1",
    "tool_call_precision",
    "tool_call_recall",
    "strict_order_accuracy",
    "args_valid_rate",
    "order_violations",
    "unnecessary_call_rate",
    "loop_detected",
    "missing_calls",
    "unexpected_calls",
    "adapter_divergence",
    "policy_violation",
    stages=("policy", "tool_selection", "tool_arguments", "tool_order", "loop"),
    unit_interval=(
        "tool_call_f1",
        "tool_call_precision",
        "tool_call_recall",
        "strict_order_accuracy",
        "args_valid_rate",
        "unnecessary_call_rate",
    ),
)
OUTCOME_SCORES = lane_table(
    "success",
    "milestones",
    "policy_violation",
    "fault_outcome",
    "cost_usd",
    stages=("recovery", "outcome"),
    non_negative=("cost_usd",),
    value_sets={"fault_outcome": ("unsafe_continuation", "recovered", "escalated", "failed")},
)
STAGE_RESULTS = TableContract(
    columns=("run_id", "trace_id", "case_id", "lane", "stage", "status", "reason"),
    value_sets={"status": STAGE_STATUSES, "lane": ("rag", "agent")},
    per_trace=False,
)
ATTRIBUTION = TableContract(
    columns=("run_id", "trace_id", "case_id", "lane", "first_failing_stage", "reason", "owner", "hazard", "outcome"),
    value_sets={"outcome": ("fail", "incomplete"), "hazard": ("unsupported_correct",)},
    per_trace=False,
)
ROLLUP = TableContract(
    columns=("run_id", "lane", "stage", "failures", "share"),
    unit_interval=("share",),
    non_negative=("failures",),
    per_trace=False,
    scan_personal_data=False,
)
RELIABILITY = TableContract(
    columns=("run_id", "case_id", "n_attempts", "n_incomplete", "n_success", "pass_at_1", "pass_hat_1", "flaky"),
    unit_interval=("pass_at_1", "pass_hat_1"),
    non_negative=("n_attempts", "n_incomplete", "n_success"),
    unique=("case_id",),
    per_trace=False,
    scan_personal_data=False,
)
COUNTERFACTUAL_PAIRS = TableContract(
    columns=(
        "run_id",
        "case_id",
        "original_case_id",
        "changed_fact",
        "original_passed",
        "counterfactual_passed",
        "expectations_differ",
        "same_behaviour",
        "evidence_use",
        "reason",
    ),
    non_negative=("original_attempts", "counterfactual_attempts"),
    value_sets={"evidence_use": ("responsive", "ignored", "broken", "incomplete")},
    unique=("case_id",),
    per_trace=False,
)
# decision slices (docs/slices.md): one row per (lane, slice); the slice's value may be a tag written by a person
SLICE_ROLLUP = TableContract(
    columns=(
        "run_id",
        "lane",
        "dimension",
        "value",
        "slice",
        "n_cases",
        "n_traces",
        "traces_passed",
        "traces_failed",
        "traces_incomplete",
        "traces_not_applicable",
        "pass_rate",
        "pass_at_1",
        "pass_at_1_cases",
        "failed_case_ids",
        "top_failing_stage",
    ),
    unit_interval=("pass_rate", "pass_at_1"),
    non_negative=(
        "n_cases",
        "n_traces",
        "traces_passed",
        "traces_failed",
        "traces_incomplete",
        "traces_not_applicable",
        "pass_at_1_cases",
    ),
    value_sets={"lane": ("rag", "agent")},
    unique=("slice",),
    per_trace=False,
)
SLICE_ATTRIBUTION_ROLLUP = TableContract(
    columns=("run_id", "lane", "dimension", "value", "slice", "stage", "failures", "share"),
    unit_interval=("share",),
    non_negative=("failures",),
    value_sets={"lane": ("rag", "agent")},
    per_trace=False,
)
