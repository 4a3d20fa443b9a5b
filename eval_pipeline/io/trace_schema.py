"""The trace line as pyarrow reads it (LINE_SCHEMA), and the lines of a chunk read one way: valid ones and rejects."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

_DOC = pa.struct([("doc_id", pa.string()), ("score", pa.float64())])
# A trace line as pyarrow's JSON reader parses it: every field but the free-form ones (args, results, state diffs,
# final state), which come from the validated model in canonical form.
LINE_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("case_id", pa.string()),
        ("case_revision", pa.int64()),
        ("attempt", pa.int64()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("input", pa.string()),
        (
            "retrieval",
            pa.list_(
                pa.struct(
                    [
                        ("round", pa.int64()),
                        ("tool", pa.string()),
                        ("variant", pa.string()),
                        ("query", pa.string()),
                        ("candidates", pa.list_(_DOC)),
                        ("hits", pa.list_(_DOC)),
                    ]
                )
            ),
        ),
        ("context", pa.list_(pa.struct([("doc_id", pa.string()), ("text", pa.string()), ("tokens", pa.int64())]))),
        (
            "answer",
            pa.struct(
                [
                    ("text", pa.string()),
                    ("refused", pa.bool_()),
                    (
                        "citations",
                        pa.list_(
                            pa.struct([("doc_id", pa.string()), ("quote", pa.string()), ("claim_index", pa.int64())])
                        ),
                    ),
                ]
            ),
        ),
        (
            "steps",
            pa.list_(
                pa.struct(
                    [
                        ("index", pa.int64()),
                        ("kind", pa.string()),
                        ("tool", pa.string()),
                        ("status", pa.string()),
                        ("error", pa.string()),
                        ("dispatched", pa.struct([("tool", pa.string())])),
                        ("content", pa.string()),
                    ]
                )
            ),
        ),
        (
            "usage",
            pa.struct(
                [
                    ("input_tokens", pa.int64()),
                    ("output_tokens", pa.int64()),
                    ("cost_usd", pa.float64()),
                    ("latency_ms", pa.float64()),
                ]
            ),
        ),
    ]
)
FREE_FORM_STEP_FIELDS = ("args_json", "result_json", "state_diff_json", "dispatched_args_json", "args_float_paths")


@dataclass
class LinesRead:
    """Lines of a chunk read one way: the valid ones (LINE_SCHEMA columns, their free-form texts) and the rejects,
    each keyed by its position in the chunk."""

    positions: np.ndarray
    parsed: pl.DataFrame
    final_state: pl.Series
    # one row per step of the parsed lines, in their order: _pos and FREE_FORM_STEP_FIELDS
    step_texts: pl.DataFrame
    rejects: list[tuple[int, str, str | None, str | None]]
    blank: int = 0


STEP_TEXTS_SCHEMA: dict[str, pl.DataType] = {"_pos": pl.Int64, **{name: pl.String for name in FREE_FORM_STEP_FIELDS}}
EMPTY_LINES = pl.from_arrow(LINE_SCHEMA.empty_table())
NO_FINAL_STATE = pl.Series("final_state_json", [], dtype=pl.String)


def step_texts_frame(positions: list[int], columns: list[list[str | None]]) -> pl.DataFrame:
    """The free-form step texts as a frame: per step, the position of its line and its FREE_FORM_STEP_FIELDS."""
    return pl.DataFrame(
        {"_pos": positions, **dict(zip(FREE_FORM_STEP_FIELDS, columns, strict=True))}, schema=STEP_TEXTS_SCHEMA
    )
