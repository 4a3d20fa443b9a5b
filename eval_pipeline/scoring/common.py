"""Helpers every lane scorer shares: which traces belong to a lane, and the harness-incomplete rule."""

from __future__ import annotations

import polars as pl

STAGE_STATUSES = ("pass", "fail", "incomplete", "not_applicable")
ROW_STATUSES = ("scored", "incomplete", "not_applicable")

RAG_STAGES = ("retrieval", "context_assembly", "grounding", "citation", "answer")
AGENT_STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop", "recovery", "outcome")
LANE_STAGES = {"rag": RAG_STAGES, "agent": AGENT_STAGES}

KEY_COLUMNS = ("run_id", "trace_id", "case_id", "attempt")


def lane_traces(traces: pl.DataFrame, cases: pl.DataFrame, lane: str) -> pl.DataFrame:
    """Traces whose case has `lane` in its lanes, with the case's columns joined (case columns suffixed `_case` on
    clash)."""
    lane_cases = cases.filter(pl.col("lanes").list.contains(lane))
    return traces.join(lane_cases, on="case_id", how="inner", suffix="_case")


def harness_incomplete() -> pl.Expr:
    """True when the harness status of the attempt is error or timeout."""
    return pl.col("status").is_in(["error", "timeout"])


def harness_reason() -> pl.Expr:
    """`harness status <status>: <error>` for harness-incomplete traces, null otherwise."""
    return (
        pl.when(harness_incomplete())
        .then(pl.format("harness status {}: {}", pl.col("status"), pl.col("error").fill_null("no error message")))
        .otherwise(None)
    )
