"""Trace batches: raw lines into the restricted area, then validated traces and one reject row per bad line.

Each line is validated against the Trace contract one by one (pydantic, in Rust); the accepted lines are then
parsed together by polars' JSON reader into the canonical frame, so no trace is rebuilt in Python.
"""

from __future__ import annotations

import io
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

_DOC = pl.Struct({"doc_id": pl.String, "score": pl.Float64})
# A trace line as written; free-form values (args, results, final state) are read as their JSON text.
LINE_SCHEMA: dict[str, pl.DataType] = {
    "trace_id": pl.String,
    "case_id": pl.String,
    "case_revision": pl.Int64,
    "attempt": pl.Int64,
    "status": pl.String,
    "error": pl.String,
    "input": pl.String,
    "retrieval": pl.List(pl.Struct({"round": pl.Int64, "tool": pl.String, "variant": pl.String, "query": pl.String,
                                    "candidates": pl.List(_DOC), "hits": pl.List(_DOC)})),
    "context": pl.List(pl.Struct({"doc_id": pl.String, "text": pl.String, "tokens": pl.Int64})),
    "answer": pl.Struct({"text": pl.String, "refused": pl.Boolean,
                         "citations": pl.List(pl.Struct({"doc_id": pl.String, "quote": pl.String, "claim_index": pl.Int64}))}),
    "steps": pl.List(pl.Struct({"index": pl.Int64, "kind": pl.String, "tool": pl.String, "args": pl.String, "status": pl.String,
                                "result": pl.String, "error": pl.String, "state_diff": pl.String,
                                "dispatched": pl.Struct({"tool": pl.String, "args": pl.String}), "content": pl.String})),
    "final_state": pl.String,
    "usage": pl.Struct({"input_tokens": pl.Int64, "output_tokens": pl.Int64, "cost_usd": pl.Float64, "latency_ms": pl.Float64}),
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


def _explain(raw: bytes, max_line_bytes: int) -> tuple[str, str | None, str | None]:
    """The reason a line failed validation, with its trace_id and case_id when they can be read."""
    value, reason = parse_json_line(raw, max_line_bytes)
    if value is None:
        return reason or "invalid", None, None
    trace_id = value.get("trace_id") if isinstance(value.get("trace_id"), str) else None
    case_id = value.get("case_id") if isinstance(value.get("case_id"), str) else None
    try:
        Trace.model_validate(value)
    except ValidationError as exc:
        return describe_validation_error(exc), trace_id, case_id
    return "invalid", trace_id, case_id


def _scalar_result(trace: Trace) -> bool:
    """Whether a step result is a JSON scalar, whose text alone would not say string from number."""
    return any(s.result is not None and not isinstance(s.result, dict | list) for s in trace.steps or ())


def parse_traces(
    raw_lines: pl.DataFrame,
    cases: pl.DataFrame,
    run_id: str,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> ParsedTraces:
    """Validate each raw line against the Trace contract and the run's cases (SPEC §11 'Trace files')."""
    revisions = dict(zip(cases["case_id"].to_list(), cases["case_revision"].to_list(), strict=True))
    accepted, by_model, rejected, seen = [], [], [], set()
    blank = 0
    for source, number, raw in raw_lines.select("source_file", "line", "raw").iter_rows():
        if not raw.strip():
            blank += 1
            continue
        if len(raw) > max_line_bytes:
            rejected.append(reject(run_id, "trace", source, number, f"line of {len(raw)} bytes exceeds the {max_line_bytes}-byte limit"))
            continue
        try:
            trace = Trace.model_validate_json(raw)
        except ValidationError:
            reason, trace_id, case_id = _explain(raw, max_line_bytes)
            rejected.append(reject(run_id, "trace", source, number, reason, trace_id=trace_id, case_id=case_id))
            continue
        keys = {"trace_id": trace.trace_id, "case_id": trace.case_id}
        expected_revision = revisions.get(trace.case_id)
        if expected_revision is None:
            rejected.append(reject(run_id, "trace", source, number, f"unknown case_id {trace.case_id!r}", **keys))
        elif trace.case_revision is not None and trace.case_revision != expected_revision:
            rejected.append(reject(run_id, "trace", source, number,
                                   f"case_revision {trace.case_revision} does not match case {trace.case_id!r} revision "
                                   f"{expected_revision}", **keys))
        elif trace.trace_id in seen:
            rejected.append(reject(run_id, "trace", source, number,
                                   f"duplicate trace_id {trace.trace_id!r} (first occurrence kept)", **keys))
        else:
            seen.add(trace.trace_id)
            if _scalar_result(trace):
                by_model.append(frames.trace_row(trace, run_id, source, number))
            else:
                accepted.append((source, number, raw))
    parts = [lines_to_frame(accepted, run_id)]
    if by_model:
        parts.append(frames.traces_frame(by_model))
    traces = pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]
    traces = traces.sort("source_file", "source_line")
    return ParsedTraces(traces, rejects_frame(rejected), blank)


def _canonical(column: pl.Expr) -> pl.Expr:
    """JSON text in canonical form (sorted keys, compact, 49.0 as 49), computed once per distinct text."""
    return column.map_batches(_canonical_series, return_dtype=pl.String)


def _canonical_series(series: pl.Series) -> pl.Series:
    distinct = series.drop_nulls().unique()
    mapping = dict(zip(distinct.to_list(), [frames.canonical_json_text(t) for t in distinct.to_list()], strict=True))
    return series.replace_strict(mapping, default=None, return_dtype=pl.String)


def lines_to_frame(accepted: list[tuple[str, int, bytes]], run_id: str) -> pl.DataFrame:
    """Validated trace lines as one canonical traces frame (TRACES_SCHEMA), parsed by polars in one pass."""
    if not accepted:
        return frames.empty(frames.TRACES_SCHEMA)
    sources = pl.Series("source_file", [s for s, _, _ in accepted], dtype=pl.String)
    numbers = pl.Series("source_line", [n for _, n, _ in accepted], dtype=pl.Int64)
    parsed = pl.read_ndjson(io.BytesIO(b"\n".join(raw for _, _, raw in accepted)), schema=LINE_SCHEMA)
    step = pl.element()
    steps = pl.col("steps").list.eval(
        pl.struct(
            step.struct.field("index"),
            step.struct.field("kind"),
            step.struct.field("tool"),
            step.struct.field("args").alias("args_json"),
            step.struct.field("status"),
            step.struct.field("result").alias("result_json"),
            step.struct.field("error"),
            step.struct.field("state_diff").alias("state_diff_json"),
            step.struct.field("dispatched").struct.field("tool").alias("dispatched_tool"),
            step.struct.field("dispatched").struct.field("args").fill_null(
                pl.when(step.struct.field("dispatched").is_not_null()).then(pl.lit("{}"))
            ).alias("dispatched_args_json"),
            step.struct.field("content"),
        )
    )
    rounds = pl.col("retrieval").list.eval(
        pl.element().struct.with_fields(
            pl.field("round").fill_null(1), pl.field("hits").fill_null(pl.lit([], dtype=pl.List(_DOC)))
        )
    )
    answer = pl.col("answer")
    frame = parsed.select(
        pl.lit(run_id, dtype=pl.String).alias("run_id"),
        "trace_id",
        "case_id",
        "case_revision",
        pl.col("attempt").fill_null(1),
        pl.col("status").fill_null("ok"),
        "error",
        "input",
        rounds.alias("retrieval"),
        pl.col("context").list.eval(pl.element().struct.with_fields(pl.field("text").fill_null(""))),
        answer.is_not_null().alias("has_answer"),
        answer.struct.field("text").alias("answer_text"),
        answer.struct.field("refused").alias("answer_refused"),
        answer.struct.field("citations").fill_null(pl.lit([], dtype=frames.TRACES_SCHEMA["citations"])).alias("citations"),
        steps.alias("steps"),
        pl.col("final_state").alias("final_state_json"),
        pl.col("usage").struct.field("input_tokens"),
        pl.col("usage").struct.field("output_tokens"),
        pl.col("usage").struct.field("cost_usd"),
        pl.col("usage").struct.field("latency_ms"),
    ).with_columns(sources, numbers)
    return _canonicalize_free_form(frame).cast(frames.TRACES_SCHEMA)


def _canonicalize_free_form(frame: pl.DataFrame) -> pl.DataFrame:
    """Rewrite the free-form JSON texts of steps and the final state in canonical form."""
    frame = frame.with_columns(_canonical(pl.col("final_state_json")).alias("final_state_json"))
    frame = frame.with_row_index("_row")
    with_steps = frame.select("_row", "steps").filter(pl.col("steps").list.len() > 0)
    if with_steps.height == 0:
        return frame.drop("_row")
    fields = ["args_json", "result_json", "state_diff_json", "dispatched_args_json"]
    exploded = with_steps.explode("steps").unnest("steps")
    exploded = exploded.with_columns(_canonical(pl.col(f)).alias(f) for f in fields)
    step_fields = list(frames.STEP.to_schema())
    rebuilt = exploded.group_by("_row", maintain_order=True).agg(pl.struct(step_fields).alias("steps"))
    return (
        frame.join(rebuilt, on="_row", how="left", suffix="_canonical")
        .with_columns(pl.coalesce("steps_canonical", "steps").alias("steps"))
        .drop("_row", "steps_canonical")
    )
