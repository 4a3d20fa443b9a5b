"""Builders for the retrieval tests: SPEC §2 records as dicts, turned into the canonical frames."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

from eval_pipeline.contracts.frames import (
    cases_frame_from_records,
    corpus_frame_from_records,
    judgments_frame_from_records,
    traces_frame_from_records,
)
from eval_pipeline.scoring.qrels import freeze_qrels, seed_qrels

REPO_ROOT = Path(__file__).resolve().parents[2]


def _round(query: str, docs: list[str], variant: str | None = "dense-v3", candidates: list[str] | None = None, number: int = 1) -> dict:
    """A retrieval round: hits scored 0.99, 0.98, ... in the given order."""
    entry: dict[str, Any] = {
        "round": number,
        "tool": "search_docs",
        "variant": variant,
        "query": query,
        "hits": [{"doc_id": d, "score": round(0.99 - i / 100, 2)} for i, d in enumerate(docs)],
    }
    if candidates is not None:
        entry["candidates"] = [{"doc_id": d, "score": round(0.9 - i / 100, 2)} for i, d in enumerate(candidates)]
    return entry


def _trace(trace_id: str, case_id: str, rounds: list[dict] | None, **fields: Any) -> dict:
    """A trace line; `rounds=None` leaves the retrieval field out."""
    record: dict[str, Any] = {"trace_id": trace_id, "case_id": case_id, "attempt": fields.pop("attempt", 1), "status": "ok"}
    if rounds is not None:
        record["retrieval"] = rounds
    record.update(fields)
    return record


def _case(case_id: str, required: list[str], **fields: Any) -> dict:
    """A rag case with required_doc_ids."""
    return {"case_id": case_id, "lanes": ["rag"], "input": f"question of {case_id}", "required_doc_ids": required, **fields}


def _frames(
    cases: list[dict], traces: list[dict], corpus: list[dict] | None = None, judgments: list[dict] | None = None, run_id: str = "run-a"
):
    """cases, traces, corpus and frozen qrels frames (seeds plus the given human judgments)."""
    cases_frame = cases_frame_from_records(cases)
    traces_frame = traces_frame_from_records(traces, run_id=run_id)
    doc_ids = sorted({d for c in cases for d in c.get("required_doc_ids", [])})
    corpus_frame = corpus_frame_from_records(corpus if corpus is not None else [{"doc_id": d} for d in doc_ids])
    judged = judgments_frame_from_records(judgments or [])
    return cases_frame, traces_frame, corpus_frame, freeze_qrels(seed_qrels(cases_frame), judged)


def _row(frame: pl.DataFrame, trace_id: str) -> dict:
    """The one row of `trace_id` as a dict."""
    rows = frame.filter(pl.col("trace_id") == trace_id).to_dicts()
    assert len(rows) == 1, f"expected one row for {trace_id}, got {len(rows)}"
    return rows[0]


@pytest.fixture
def rag() -> SimpleNamespace:
    """Record builders: round, trace, case, frames, row."""
    return SimpleNamespace(round=_round, trace=_trace, case=_case, frames=_frames, row=_row)


@pytest.fixture(scope="session")
def trec_eval_dir() -> Path:
    """usnistgov/trec_eval's test files: ../shared/data/trec_eval beside the repository (or EVAL_PIPELINE_REFERENCE_DATA,
    or the copy under eval_pipeline_tests/reference_data)."""
    candidates = [REPO_ROOT.parent / "shared" / "data" / "trec_eval", REPO_ROOT / "eval_pipeline_tests" / "reference_data" / "trec_eval"]
    if os.environ.get("EVAL_PIPELINE_REFERENCE_DATA"):
        candidates.insert(0, Path(os.environ["EVAL_PIPELINE_REFERENCE_DATA"]) / "trec_eval")
    for path in candidates:
        if (path / "results.test").is_file():
            return path
    pytest.skip(f"trec_eval reference files not found (looked in {', '.join(map(str, candidates))})")
