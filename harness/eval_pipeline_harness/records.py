"""Canonical frames built from inline records (dicts as a JSONL or YAML file holds them), for tests and benchmarks.

The pipeline reads its inputs from files (eval_pipeline.io); these builders validate records with the same models and
turn them into the same frames, so a test can state its traces, cases, corpus and labels inline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from eval_pipeline.contracts.cases import Case, CorpusDoc
from eval_pipeline.contracts.frames import (
    CORPUS_SCHEMA,
    GROUNDING_LABELS_SCHEMA,
    JUDGMENTS_SCHEMA,
    case_row,
    cases_frame,
    trace_row,
    traces_frame,
)
from eval_pipeline.contracts.labels import GroundingLabel, QrelsJudgment
from eval_pipeline.contracts.traces import Trace


def traces_frame_from_records(records: Iterable[Mapping[str, Any]], run_id: str = "test-run") -> pl.DataFrame:
    """A traces frame from trace dicts as they appear in a JSONL file (validated, so bad records raise)."""
    return traces_frame(trace_row(Trace.model_validate(r), run_id, "inline", i + 1) for i, r in enumerate(records))


def cases_frame_from_records(
    records: Iterable[Mapping[str, Any]], dataset_version: str = "test-dataset"
) -> pl.DataFrame:
    """A cases frame from case dicts as they appear in YAML (validated, so bad records raise)."""
    return cases_frame(case_row(Case.model_validate(r), dataset_version, "inline") for r in records)


def corpus_frame_from_records(
    records: Iterable[Mapping[str, Any]], corpus_version: str = "test-corpus"
) -> pl.DataFrame:
    """A corpus frame from corpus lines."""
    rows = [{"corpus_version": corpus_version, **CorpusDoc.model_validate(r).model_dump()} for r in records]
    return pl.DataFrame(rows, schema=CORPUS_SCHEMA, strict=False)


def judgments_frame_from_records(records: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """A judgments frame from qrels label lines."""
    rows = [
        {**QrelsJudgment.model_validate(r).model_dump(), "source_file": "inline", "source_line": i + 1}
        for i, r in enumerate(records)
    ]
    return pl.DataFrame(rows, schema=JUDGMENTS_SCHEMA, strict=False)


def grounding_labels_frame_from_records(records: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """A grounding-labels frame from label lines."""
    rows = [
        {**GroundingLabel.model_validate(r).model_dump(), "source_file": "inline", "source_line": i + 1}
        for i, r in enumerate(records)
    ]
    return pl.DataFrame(rows, schema=GROUNDING_LABELS_SCHEMA, strict=False)
