"""Trace batches: raw lines into the restricted area, then validated traces and one reject row per bad line."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.models import Trace
from eval_pipeline.io.loaders import (
    DEFAULT_MAX_LINE_BYTES,
    describe_validation_error,
    iter_lines,
    parse_json_line,
    reject,
    rejects_frame,
    trace_files,
)
from eval_pipeline.io.storage import InputError, Location

RAW_LINES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "source_file": pl.String,
    "line": pl.Int64,
    "raw": pl.Binary,
}


def read_raw_lines(location: Location, run_id: str) -> pl.DataFrame:
    """Every line of every JSONL file of a run, bytes as written (blank lines included)."""
    if not location.is_dir("traces", run_id):
        raise InputError(f"run {run_id!r} not found: no directory {location.uri_of('traces', run_id)}")
    parts = []
    for name in trace_files(location, run_id):
        data = location.read_bytes("traces", run_id, name)
        if data.endswith(b"\n"):
            data = data[:-1]
        if not data:
            continue
        lines = [raw for _, raw in iter_lines(data)]
        parts.append(
            pl.DataFrame(
                {
                    "run_id": run_id,
                    "source_file": f"traces/{run_id}/{name}",
                    "line": pl.int_range(1, len(lines) + 1, eager=True),
                    "raw": pl.Series(lines, dtype=pl.Binary),
                },
                schema=RAW_LINES_SCHEMA,
            )
        )
    if not parts:
        return frames.empty(RAW_LINES_SCHEMA)
    return pl.concat(parts)


@dataclass
class ParsedTraces:
    """Valid traces, reject rows and the count of blank lines skipped."""

    traces: pl.DataFrame
    rejects: pl.DataFrame
    blank_lines: int


def parse_traces(
    raw_lines: pl.DataFrame,
    cases: pl.DataFrame,
    run_id: str,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> ParsedTraces:
    """Validate each raw line against the Trace contract and the run's cases (SPEC §11 'Trace files')."""
    revisions = dict(zip(cases["case_id"].to_list(), cases["case_revision"].to_list(), strict=True))
    rows, rejected, seen = [], [], set()
    blank = 0
    for source, number, raw in raw_lines.select("source_file", "line", "raw").iter_rows():
        if not raw.strip():
            blank += 1
            continue
        value, reason = parse_json_line(raw, max_line_bytes)
        if value is None:
            rejected.append(reject(run_id, "trace", source, number, reason))
            continue
        trace_id = value.get("trace_id") if isinstance(value.get("trace_id"), str) else None
        case_id = value.get("case_id") if isinstance(value.get("case_id"), str) else None
        try:
            trace = Trace.model_validate(value)
        except ValidationError as exc:
            rejected.append(reject(run_id, "trace", source, number, describe_validation_error(exc), trace_id=trace_id, case_id=case_id))
            continue
        if trace.case_id not in revisions:
            rejected.append(reject(run_id, "trace", source, number, f"unknown case_id {trace.case_id!r}", trace_id=trace_id, case_id=case_id))
            continue
        expected_revision = revisions[trace.case_id]
        if trace.case_revision is not None and trace.case_revision != expected_revision:
            rejected.append(
                reject(run_id, "trace", source, number,
                       f"case_revision {trace.case_revision} does not match case {trace.case_id!r} revision {expected_revision}",
                       trace_id=trace_id, case_id=case_id)
            )
            continue
        if trace.trace_id in seen:
            rejected.append(reject(run_id, "trace", source, number, f"duplicate trace_id {trace.trace_id!r} (first occurrence kept)",
                                   trace_id=trace_id, case_id=case_id))
            continue
        seen.add(trace.trace_id)
        rows.append(frames.trace_row(trace, run_id, source, number))
    return ParsedTraces(frames.traces_frame(rows), rejects_frame(rejected), blank)
