"""Input contracts: the SPEC §2 examples validate, bad records are refused, committed JSON Schemas are current."""

import json

import jsonschema
import pytest
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import Case
from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.contracts.schemas import SCHEMA_DIR, schema_documents
from eval_pipeline.contracts.traces import RunManifest, Trace
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

SPEC_TRACE = {
    "trace_id": "cand-12:rag-0117#1",
    "case_id": "rag-0117",
    "case_revision": 3,
    "attempt": 1,
    "status": "ok",
    "error": None,
    "input": "How long is the refund window for annual SMB plans?",
    "retrieval": [
        {
            "round": 1,
            "tool": "search_docs",
            "variant": "dense-v3",
            "query": "refund window annual SMB plan",
            "candidates": [{"doc_id": "policy/refunds-2025", "score": 0.83}],
            "hits": [{"doc_id": "policy/refunds-2025", "score": 0.91}],
        }
    ],
    "context": [{"doc_id": "policy/refunds-2025", "text": "...", "tokens": 312}],
    "answer": {
        "text": "Annual SMB plans can be refunded within 14 days [doc:policy/refunds-2025].",
        "citations": [{"doc_id": "policy/refunds-2025", "quote": "..."}],
    },
    "steps": [
        {
            "index": 1,
            "kind": "tool_call",
            "tool": "get_order",
            "args": {"order_id": "88131"},
            "status": "ok",
            "result": {},
            "error": None,
            "state_diff": [],
            "dispatched": {"tool": "get_order", "args": {"order_id": "88131"}},
        },
        {"index": 2, "kind": "finish", "content": "Refund issued."},
    ],
    "final_state": {},
    "usage": {"input_tokens": 1900, "output_tokens": 120, "cost_usd": 0.0042, "latency_ms": 2300},
}

SPEC_CASE = {
    "case_id": "rag-0117",
    "case_revision": 3,
    "lanes": ["rag"],
    "input": "How long is the refund window?",
    "criticality": "high",
    "required_doc_ids": ["policy/refunds-2025"],
    "expected_answer_contains": ["14 days"],
    "reference_tool_calls": [
        {"name": "get_order", "args": {"order_id": "88131"}},
        {"name": "issue_refund", "args": {"order_id": "88131", "amount": 49.00}},
    ],
    "dependencies": [["get_order", "issue_refund"]],
    "milestones": {"refund_correct": {"path": "refunds.R-552.amount", "equals": 49.00}},
    "fault": {"kind": "tool_error", "tool": "issue_refund"},
}


def test_spec_trace_becomes_one_canonical_row():
    frame = traces_frame_from_records([SPEC_TRACE], run_id="cand-12")
    row = frame.row(0, named=True)
    assert frame.height == 1 and frame.schema == frames.TRACES_SCHEMA
    assert row["retrieval"][0]["hits"][0]["doc_id"] == "policy/refunds-2025"
    assert row["steps"][0]["args_json"] == '{"order_id":"88131"}'
    assert row["steps"][0]["dispatched_args_json"] == '{"order_id":"88131"}'
    assert row["steps"][1]["content"] == "Refund issued."
    assert row["cost_usd"] == 0.0042


def test_canonical_json_makes_equal_numbers_equal_strings():
    # YAML's 49.00 and a trace's 49 are the same JSON number, so the same call key.
    assert (
        frames.canonical_json({"b": 49.00, "a": "x"})
        == frames.canonical_json({"a": "x", "b": 49})
        == '{"a":"x","b":49}'
    )
    assert frames.canonical_json({"x": 49.5}) == '{"x":49.5}'
    assert frames.canonical_json({"flag": True}) == '{"flag":true}'
    assert frames.call_key("issue_refund", '{"amount":49}') == 'issue_refund({"amount":49})'


def test_case_row_carries_milestones_and_reference_calls_as_canonical_json():
    frame = cases_frame_from_records([SPEC_CASE])
    row = frame.row(0, named=True)
    assert row["reference_tool_calls"][1] == {
        "name": "issue_refund",
        "args_json": '{"amount":49,"order_id":"88131"}',
        "accepted_json": None,
        "optional": [],
    }
    assert row["milestones"] == [
        {"name": "refund_correct", "path": "refunds.R-552.amount", "op": "equals", "value_json": "49"}
    ]
    assert row["fault_kind"] == "tool_error" and row["fault_tool"] == "issue_refund"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"attempt": "1"}, "attempt"),
        ({"status": "crashed"}, "status"),
        ({"retrieval": {"hits": []}}, "retrieval"),
        ({"case_id": 17}, "case_id"),
    ],
)
def test_wrong_types_are_refused_not_coerced(change, field):
    with pytest.raises(ValidationError) as info:
        Trace.model_validate({**SPEC_TRACE, **change})
    assert field in str(info.value)


def test_milestone_needs_exactly_one_operator():
    with pytest.raises(ValidationError, match="exactly one operator"):
        Case.model_validate({**SPEC_CASE, "milestones": {"m": {"path": "a.b", "equals": 1, "gte": 0}}})


def test_gate_policy_rejects_unknown_metric_and_key():
    gate = {"name": "g", "lane": "rag", "metric": "recall_at_10", "max_regression_points": 2}
    GatePolicy.model_validate({"version": 1, "gates": [gate]})
    with pytest.raises(ValidationError, match="unknown gate metric"):
        GatePolicy.model_validate({"version": 1, "gates": [{**gate, "metric": "overall_score"}]})
    with pytest.raises(ValidationError):
        GatePolicy.model_validate({"version": 1, "gates": [{**gate, "max_regresion_points": 2}]})


def test_run_manifest_candidate_as_string_or_mapping():
    base = {"run_id": "r", "corpus_version": "c", "dataset_version": "d"}
    assert RunManifest.model_validate({**base, "candidate": "bot@1"}).candidate_label == "bot@1"
    assert (
        RunManifest.model_validate({**base, "candidate": {"system": "bot", "version": "2"}}).candidate_label == "bot@2"
    )


def test_committed_json_schemas_match_the_models():
    for name, document in schema_documents().items():
        committed = json.loads((SCHEMA_DIR / name).read_text())
        assert committed == json.loads(json.dumps(document)), f"{name} is stale: run `eval-pipeline schemas`"


def test_json_schema_validates_the_spec_trace_and_rejects_a_bad_one():
    schema = json.loads((SCHEMA_DIR / "trace.schema.json").read_text())
    jsonschema.validate(SPEC_TRACE, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**SPEC_TRACE, "attempt": "one"}, schema)
