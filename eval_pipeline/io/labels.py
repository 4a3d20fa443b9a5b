"""Loaders of the labels: qrels judgments (checked against the policy's grade scale) and grounding labels."""

from __future__ import annotations

import polars as pl

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.labels import GroundingLabel, QrelsJudgment
from eval_pipeline.io.loaders import Loaded, jsonl_records, reject
from eval_pipeline.io.policy import grade_scale
from eval_pipeline.io.storage import Location


def load_judgments(location: Location, grades: tuple[int, int] | None = None) -> Loaded:
    """labels/qrels/*.jsonl as a judgments frame; a grade outside the scale (default: the policy's) is a reject."""
    low, high = grades or grade_scale(location)
    records, rejects = jsonl_records(location, ("labels", "qrels"), QrelsJudgment, "qrels_label")
    rows = []
    for source, number, record in records:
        if not low <= record.grade <= high:
            rejects.append(
                reject(
                    None,
                    "qrels_label",
                    source,
                    number,
                    f"grade {record.grade} is outside the grade scale {low}..{high}"
                    " (retrieval.grades of the gate policy)",
                )
            )
            continue
        rows.append({**record.model_dump(), "source_file": source, "source_line": number})
    return Loaded(pl.DataFrame(rows, schema=frames.JUDGMENTS_SCHEMA, strict=False), rejects)


def load_grounding_labels(location: Location) -> Loaded:
    """labels/grounding/*.jsonl as a grounding-labels frame."""
    records, rejects = jsonl_records(location, ("labels", "grounding"), GroundingLabel, "grounding_label")
    rows = [{**r.model_dump(), "source_file": s, "source_line": n} for s, n, r in records]
    return Loaded(pl.DataFrame(rows, schema=frames.GROUNDING_LABELS_SCHEMA, strict=False), rejects)
