"""Builders for agent-lane tests: SPEC §2 cases, traces and a tool registry written as plain dicts."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import ToolRegistry
from eval_pipeline.scoring.outcome import score_outcomes
from eval_pipeline.scoring.tools import score_tools
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

ORDER_ARGS = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
REGISTRY = {
    "environment_version": "env-1",
    "tools": [
        {"name": "get_order", "read_only": True, "args": ORDER_ARGS},
        {"name": "get_ticket", "read_only": True, "args": {"type": "object"}},
        {"name": "verify_identity", "read_only": True, "args": {"type": "object"}},
        {
            "name": "issue_refund",
            "read_only": False,
            "destructive": True,
            "args": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["order_id", "amount"],
                "additionalProperties": False,
            },
        },
        {"name": "send_email", "read_only": False, "args": {"type": "object"}},
        {"name": "set_status", "read_only": False, "args": {"type": "object"}},
        {"name": "escalate_to_human", "read_only": False, "args": {"type": "object"}},
        {"name": "close_account", "read_only": False, "destructive": True, "args": {"type": "object"}},
    ],
}
GET = {"name": "get_order", "args": {"order_id": "88131"}}
REFUND = {"name": "issue_refund", "args": {"order_id": "88131", "amount": 49.00}}


def case(**fields: Any) -> dict[str, Any]:
    """The SPEC §2 example agent case (refund of order 88131), with fields overridden."""
    base = {
        "case_id": "agent-1",
        "case_revision": 1,
        "lanes": ["agent"],
        "input": "Refund the duplicate charge on order 88131.",
        "allowed_tools": [
            "get_ticket",
            "get_order",
            "verify_identity",
            "issue_refund",
            "send_email",
            "set_status",
            "escalate_to_human",
        ],
        "forbidden_tools": ["close_account"],
        "reference_tool_calls": [GET, REFUND],
        "tool_match": "strict_order",
        "milestones": {"refund_correct": {"path": "refunds.R-552.amount", "equals": 49.00}},
        "escalation_tools": ["escalate_to_human"],
    }
    return {**base, **fields}


def call(
    tool: str | None = None,
    args: dict[str, Any] | None = None,
    status: str = "ok",
    result: Any = None,
    name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A tool_call step (index filled in by `trace`); `name` is accepted so case calls (GET, REFUND) spread into it."""
    return {
        "kind": "tool_call",
        "tool": tool or name,
        "args": args if args is not None else {},
        "status": status,
        "result": {"ok": True} if result is None else result,
        **extra,
    }


def finish(text: str) -> dict[str, Any]:
    """The final message step."""
    return {"kind": "finish", "content": text}


def trace(
    steps: list[dict[str, Any]] | None,
    trace_id: str = "t1",
    case_id: str = "agent-1",
    attempt: int = 1,
    final_state: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A trace record with its steps numbered from 1."""
    numbered = None if steps is None else [{"index": i, **step} for i, step in enumerate(steps, start=1)]
    record = {"trace_id": trace_id, "case_id": case_id, "attempt": attempt, "steps": numbered, **fields}
    if final_state is not None:
        record["final_state"] = final_state
    return record


@pytest.fixture
def tools_frame() -> pl.DataFrame:
    """The test registry as a tools frame."""
    return frames.tools_frame_from_registry(ToolRegistry.model_validate(REGISTRY))


@pytest.fixture
def score(tools_frame: pl.DataFrame) -> Callable[..., tuple[pl.DataFrame, pl.DataFrame]]:
    """score(traces, cases) -> (tool_scores, tool_call_diffs) from record dicts."""

    def run(traces: list[dict[str, Any]], cases: list[dict[str, Any]]) -> tuple[pl.DataFrame, pl.DataFrame]:
        return score_tools(traces_frame_from_records(traces), cases_frame_from_records(cases), tools_frame)

    return run


@pytest.fixture
def outcomes(tools_frame: pl.DataFrame) -> Callable[..., pl.DataFrame]:
    """outcomes(traces, cases) -> outcome_scores from record dicts (tool_scores computed on the way)."""

    def run(traces: list[dict[str, Any]], cases: list[dict[str, Any]]) -> pl.DataFrame:
        trace_frame = traces_frame_from_records(traces)
        case_frame = cases_frame_from_records(cases)
        tool_scores, _ = score_tools(trace_frame, case_frame, tools_frame)
        return score_outcomes(trace_frame, case_frame, tool_scores)

    return run


def row(frame: pl.DataFrame, trace_id: str = "t1") -> dict[str, Any]:
    """The row of one trace as a dict."""
    rows = frame.filter(pl.col("trace_id") == trace_id).to_dicts()
    assert len(rows) == 1, f"expected one row for {trace_id}, got {len(rows)}"
    return rows[0]


@pytest.fixture
def build() -> SimpleNamespace:
    """The record builders, for test modules (importlib mode lets tests reach conftest only through fixtures)."""
    return SimpleNamespace(case=case, call=call, finish=finish, trace=trace, row=row, GET=GET, REFUND=REFUND)
