"""The contract of each report table accepts a minimal frame of that table's real shape and rejects a broken one."""

import polars as pl
import pytest

from eval_pipeline.quality import tables
from eval_pipeline.quality.contracts import check_complete, check_schema_and_ranges

KEYS = {
    "run_id": ["r1", "r1"],
    "trace_id": ["r1:c1#1", "r1:c2#1"],
    "case_id": ["c1", "c2"],
    "attempt": [1, 1],
    "status": ["scored", "incomplete"],
    "reason": [None, "judge timed out"],
}


def _stages(*stages: str) -> dict:
    out = {}
    for stage in stages:
        out[f"{stage}_stage"] = ["pass", "incomplete"]
        out[f"{stage}_reason"] = [None, f"{stage} could not be scored"]
    return out


def _lists(*values) -> list:
    return list(values)


VALID = {
    "RETRIEVAL_SCORES": {
        **KEYS,
        **_stages("retrieval"),
        **{
            c: [1.0, None]
            for c in (*tables.RECALLS, *tables.PRECISIONS, "mrr", *tables.NDCGS, "context_precision", "judged_at_10")
        },
        "first_hit_rank": [1, None],
        "failure_class": [None, "keyword_miss"],
        "qrels_version": ["q1", "q1"],
    },
    "CONTEXT_SCORES": {
        **KEYS,
        **_stages("context_assembly"),
        "context_recall": [0.5, None],
        "context_precision": [1.0, None],
        "context_tokens": [812, 0],
        "context_families": [3, None],
        "context_sources": [2, None],
        "redundant_chunk_share": [0.25, None],
    },
    "GROUNDING_SCORES": {
        **KEYS,
        **_stages("grounding"),
        "grounding_rate": [0.75, None],
        "n_claims": [4, 0],
        "n_supported": [3, 0],
        "n_triangulated": [1, 0],
        "judge_version": ["local-1", "local-1"],
    },
    "CITATION_SCORES": {
        **KEYS,
        **_stages("citation"),
        "citation_precision": [1.0, None],
        "citation_recall": [0.5, None],
        "citation_resolution_rate": [1.0, None],
        "quotes_found_rate": [0.0, None],
        "cited_families": [2, None],
        "cited_sources": [None, None],
    },
    "ANSWER_SCORES": {
        **KEYS,
        **_stages("answer"),
        "contains_all": [True, None],
        "exact_match": [False, None],
        "token_f1": [0.6, None],
        "refused": [False, None],
    },
    "TOOL_SCORES": {
        **KEYS,
        **_stages("policy", "tool_selection", "tool_arguments", "tool_order", "loop"),
        **{
            c: [1.0, None]
            for c in (
                "tool_call_f1",
                "tool_call_precision",
                "tool_call_recall",
                "strict_order_accuracy",
                "args_valid_rate",
                "unnecessary_call_rate",
            )
        },
        "order_violations": [[], None],
        "loop_detected": [False, None],
        "missing_calls": [["issue_refund"], None],
        "unexpected_calls": [[], None],
        "adapter_divergence": [None, "dispatched get_order, logged get_orders"],
        "policy_violation": [False, None],
    },
    "OUTCOME_SCORES": {
        **KEYS,
        **_stages("recovery", "outcome"),
        "success": [True, None],
        "milestones": [[{"name": "refunded", "path": "orders.1.status", "op": "eq", "passed": True}], None],
        "policy_violation": [False, None],
        "fault_outcome": ["recovered", None],
        "cost_usd": [0.0021, 0.0],
    },
    "CLAIMS": {
        "run_id": ["r1", "r1"],
        "trace_id": ["r1:c1#1", "r1:c1#1"],
        "claim_index": [0, 1],
        "claim": ["Refunds take 5 days.", "Shipping is free."],
        "verdict": ["SUPPORTED", "NOT_IN_EVIDENCE"],
        "score": [0.97, 0.1],
        "evidence_quote": ["within 5 business days", None],
        "quote_verified": [True, None],
        "cited_doc_ids": [["kb-refunds"], []],
        "citation_verdict": ["SUPPORTS", "UNCITED"],
        "supporting_families": [2, 0],
        "triangulated": [True, False],
    },
    "STAGE_RESULTS": {
        "run_id": ["r1", "r1"],
        "trace_id": ["r1:c1#1", "r1:c1#1"],
        "case_id": ["c1", "c1"],
        "lane": ["rag", "rag"],
        "stage": ["retrieval", "grounding"],
        "status": ["pass", "fail"],
        "reason": [None, "claim 1 NOT_IN_EVIDENCE"],
    },
    "ATTRIBUTION": {
        "run_id": ["r1", "r1"],
        "trace_id": ["r1:c1#1", "r1:a1#1"],
        "case_id": ["c1", "a1"],
        "lane": ["rag", "agent"],
        "first_failing_stage": ["retrieval", None],
        "reason": ["recall 0", "x incomplete"],
        "owner": ["retrieval", "harness"],
        "hazard": ["unsupported_correct", None],
        "outcome": ["fail", "incomplete"],
    },
    "ROLLUP": {
        "run_id": ["r1", "r1"],
        "lane": ["rag", "rag"],
        "stage": ["retrieval", "answer"],
        "failures": [3, 0],
        "share": [1.0, 0.0],
    },
    "RELIABILITY": {
        "run_id": ["r1", "r1"],
        "case_id": ["a1", "a2"],
        "n_attempts": [3, 3],
        "n_incomplete": [0, 1],
        "n_success": [2, 0],
        "pass_at_1": [2 / 3, 0.0],
        "pass_hat_1": [2 / 3, 0.0],
        "flaky": [True, False],
    },
}

# (table, column, bad values, the failure it is named by)
BROKEN = [
    (
        "RETRIEVAL_SCORES",
        "recall_at_10",
        [1.5, None],
        "expect_column_values_to_be_between(recall_at_10): 1 unexpected [1.5]",
    ),
    (
        "RETRIEVAL_SCORES",
        "first_hit_rank",
        [-1, None],
        "expect_column_values_to_be_between(first_hit_rank): 1 unexpected [-1.0]",
    ),
    (
        "RETRIEVAL_SCORES",
        "failure_class",
        ["bad_luck", None],
        "expect_column_values_to_be_in_set(failure_class): 1 unexpected ['bad_luck']",
    ),
    (
        "CONTEXT_SCORES",
        "context_tokens",
        [-5, 0],
        "expect_column_values_to_be_between(context_tokens): 1 unexpected [-5]",
    ),
    (
        "CONTEXT_SCORES",
        "redundant_chunk_share",
        [1.5, None],
        "expect_column_values_to_be_between(redundant_chunk_share): 1 unexpected [1.5]",
    ),
    (
        "CONTEXT_SCORES",
        "context_families",
        [-1, None],
        "expect_column_values_to_be_between(context_families): 1 unexpected [-1.0]",
    ),
    (
        "GROUNDING_SCORES",
        "grounding_rate",
        [1.25, None],
        "expect_column_values_to_be_between(grounding_rate): 1 unexpected [1.25]",
    ),
    (
        "GROUNDING_SCORES",
        "grounding_stage",
        ["passed", "incomplete"],
        "expect_column_values_to_be_in_set(grounding_stage): 1 unexpected ['passed']",
    ),
    (
        "CITATION_SCORES",
        "citation_recall",
        [-0.5, None],
        "expect_column_values_to_be_between(citation_recall): 1 unexpected [-0.5]",
    ),
    (
        "CITATION_SCORES",
        "cited_families",
        [-2, None],
        "expect_column_values_to_be_between(cited_families): 1 unexpected [-2.0]",
    ),
    (
        "CLAIMS",
        "supporting_families",
        [-1, 0],
        "expect_column_values_to_be_between(supporting_families): 1 unexpected [-1]",
    ),
    (
        "ANSWER_SCORES",
        "status",
        ["scored", "error"],
        "expect_column_values_to_be_in_set(status): 1 unexpected ['error']",
    ),
    (
        "TOOL_SCORES",
        "loop_stage",
        ["pass", "skipped"],
        "expect_column_values_to_be_in_set(loop_stage): 1 unexpected ['skipped']",
    ),
    (
        "TOOL_SCORES",
        "trace_id",
        ["r1:c1#1", "r1:c1#1"],
        "expect_column_values_to_be_unique(trace_id): 2 unexpected ['r1:c1#1', 'r1:c1#1']",
    ),
    (
        "OUTCOME_SCORES",
        "fault_outcome",
        ["ignored", None],
        "expect_column_values_to_be_in_set(fault_outcome): 1 unexpected ['ignored']",
    ),
    ("OUTCOME_SCORES", "cost_usd", [-0.01, 0.0], "expect_column_values_to_be_between(cost_usd): 1 unexpected [-0.01]"),
    (
        "CLAIMS",
        "verdict",
        ["SUPPORTED", "UNSUPPORTED"],
        "expect_column_values_to_be_in_set(verdict): 1 unexpected ['UNSUPPORTED']",
    ),
    (
        "CLAIMS",
        "citation_verdict",
        ["SUPPORTS", "DEAD"],
        "expect_column_values_to_be_in_set(citation_verdict): 1 unexpected ['DEAD']",
    ),
    ("STAGE_RESULTS", "lane", ["rag", "chat"], "expect_column_values_to_be_in_set(lane): 1 unexpected ['chat']"),
    ("ATTRIBUTION", "outcome", ["fail", "pass"], "expect_column_values_to_be_in_set(outcome): 1 unexpected ['pass']"),
    ("ROLLUP", "share", [1.5, 0.0], "expect_column_values_to_be_between(share): 1 unexpected [1.5]"),
    ("RELIABILITY", "case_id", ["a1", "a1"], "expect_column_values_to_be_unique(case_id): 2 unexpected ['a1', 'a1']"),
    ("RELIABILITY", "n_success", [2, -1], "expect_column_values_to_be_between(n_success): 1 unexpected [-1]"),
]


def _frame(name: str) -> pl.DataFrame:
    return pl.DataFrame(VALID[name], strict=False)


@pytest.mark.parametrize("name", sorted(VALID))
def test_contract_accepts_a_frame_of_its_table(name):
    contract = getattr(tables, name)
    frame = _frame(name)
    assert set(frame.columns) == set(contract.columns)
    schema, ranges = check_schema_and_ranges(name, contract, frame)
    assert schema.passed, schema.metadata["failures"]
    assert schema.metadata["expectations"] == len(contract.columns)
    assert ranges.passed, ranges.metadata["failures"]


@pytest.mark.parametrize("name", sorted({b[0] for b in BROKEN}))
def test_contract_rejects_broken_values_each_by_name(name):
    broken = [b for b in BROKEN if b[0] == name]
    frame = _frame(name).with_columns(pl.Series(column, values, strict=False) for _, column, values, _ in broken)
    schema, ranges = check_schema_and_ranges(name, getattr(tables, name), frame)
    assert schema.passed
    assert not ranges.passed
    assert ranges.metadata["unsuccessful"] == len(broken)
    assert sorted(ranges.metadata["failures"].splitlines()) == sorted(failure for *_, failure in broken)


@pytest.mark.parametrize(
    ("name", "column"),
    [
        ("GROUNDING_SCORES", "grounding_reason"),
        ("OUTCOME_SCORES", "recovery_stage"),
        ("CLAIMS", "evidence_quote"),
        ("RELIABILITY", "flaky"),
    ],
)
def test_contract_rejects_a_table_missing_a_column(name, column):
    contract = getattr(tables, name)
    schema, _ = check_schema_and_ranges(name, contract, _frame(name).drop(column))
    assert not schema.passed
    assert schema.description == f"{len(contract.columns) - 1}/{len(contract.columns)} expectations met"
    assert schema.metadata["failures"] == f"expect_column_to_exist({column}): failed unexpected []"


def test_agent_lane_contracts_carry_every_agent_stage():
    stage_columns = [c for c in (*tables.TOOL_SCORES.columns, *tables.OUTCOME_SCORES.columns) if c.endswith("_stage")]
    assert stage_columns == [
        "policy_stage",
        "tool_selection_stage",
        "tool_arguments_stage",
        "tool_order_stage",
        "loop_stage",
        "recovery_stage",
        "outcome_stage",
    ]


def test_which_tables_are_per_trace_and_scanned():
    per_trace = sorted(n for n in VALID if getattr(tables, n).per_trace)
    scanned = sorted(n for n in VALID if getattr(tables, n).scan_personal_data)
    assert per_trace == [
        "ANSWER_SCORES",
        "CITATION_SCORES",
        "CONTEXT_SCORES",
        "GROUNDING_SCORES",
        "OUTCOME_SCORES",
        "RETRIEVAL_SCORES",
        "TOOL_SCORES",
    ]
    assert sorted(set(VALID) - set(scanned)) == ["RELIABILITY", "ROLLUP"]


def test_lane_table_is_complete_for_its_traces():
    frame = _frame("GROUNDING_SCORES")
    assert check_complete(frame, frame.select("trace_id")).passed
    assert check_complete(frame.head(1), frame.select("trace_id")).metadata["missing_sample"] == "r1:c2#1"
