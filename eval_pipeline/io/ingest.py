"""Trace batches: raw lines into the restricted area, then validated traces and one reject row per bad line.

Validation is columnar first: the lines that can be read as they are (a JSON object per line, valid UTF-8, within
the limits of json_limits) are parsed together by pyarrow's JSON reader against a strict schema, and polars
expressions check what the Trace contract asks beyond types (required fields, non-empty ids, the status values);
only the free-form values (tool args, results, state diffs, final state) pass through Python, decoded by orjson and
written in canonical form. Every line the columnar pass cannot vouch for takes the per-line path, the reference:
each line validated against the Trace contract (pydantic), the accepted ones parsed by pyarrow, so a bad line gets
the same reason either way. Whatever a step cannot hold (a NaN, an integer beyond 64 bits, a contract field given
twice, nesting beyond the limit) makes its line a reject, never a failed batch: every non-blank line is exactly one
trace or one reject.

This module reads the raw lines and applies the run's rules (case, revision, duplicates) to the lines read either
way; the columnar pass is in trace_columnar, the per-line path in trace_per_line, the line schema in trace_schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.contracts import frames
from eval_pipeline.io.columnar import trimmed
from eval_pipeline.io.json_limits import UTF8_BOM
from eval_pipeline.io.loaders import DEFAULT_MAX_LINE_BYTES, trace_files
from eval_pipeline.io.storage import InputError, Location
from eval_pipeline.io.trace_columnar import columnar_lines
from eval_pipeline.io.trace_per_line import read_per_line
from eval_pipeline.io.trace_schema import LinesRead

RAW_LINES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "source_file": pl.String,
    "line": pl.Int64,
    "raw": pl.Binary,
}

# Lines per chunk of raw lines, copied and validated one chunk at a time. 50,000, not 100,000: a chunk's validation
# holds several copies of it at once, and at a million traces 100,000-line chunks took the whole run to 7.8-8.2 GiB
# (over its 8 GiB budget); 50,000 gave 6.3 GiB in the same place at the same speed (docs/benchmarks/pipeline.md).
RAW_CHUNK_LINES = 50_000


def require_run(location: Location, run_id: str) -> None:
    """InputError unless the run has a traces folder."""
    if not location.is_dir("traces", run_id):
        raise InputError(f"run {run_id!r} not found: no directory {location.uri_of('traces', run_id)}")


def iter_raw_lines(location: Location, run_id: str, chunk_lines: int = RAW_CHUNK_LINES) -> Iterator[pl.DataFrame]:
    """The run's lines (every JSONL file, bytes as written, blank lines included) in file order, a chunk at a time."""
    require_run(location, run_id)
    for name in trace_files(location, run_id):
        source = f"traces/{run_id}/{name}"
        pending: list[pa.Array] = []
        first_line = 1
        tail = b""
        for block in location.iter_blocks("traces", run_id, name):
            cut = block.rfind(b"\n") + 1
            if not cut:
                tail += block
                continue
            start = 0
            if tail:  # the line the last block left open ends at this block's first newline
                start = block.find(b"\n") + 1
                pending.append(_split_lines(tail + block[:start], 0, len(tail) + start))
            if cut > start:
                pending.append(_split_lines(block, start, cut))
            tail = block[cut:]
            count = sum(len(lines) for lines in pending)
            while count >= chunk_lines:
                lines = pa.concat_arrays(pending)
                yield _raw_frame(run_id, source, first_line, lines.slice(0, chunk_lines))
                first_line += chunk_lines
                pending, count = [lines.slice(chunk_lines)], count - chunk_lines
        if tail:
            pending.append(_split_lines(tail + b"\n", 0, len(tail) + 1))
        if pending and sum(len(lines) for lines in pending):
            yield _raw_frame(run_id, source, first_line, pa.concat_arrays(pending))


def _split_lines(data: bytes, start: int, stop: int) -> pa.Array:
    """The lines of data[start:stop], which ends with a newline: each without its newline, one CR and one byte-order
    mark, split in Arrow."""
    whole = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 1, [None, pa.py_buffer(np.array([start, stop], dtype=np.int64)), pa.py_buffer(data)]
    )
    lines = pc.split_pattern(whole, pattern=b"\n").flatten()
    lines = lines.slice(0, len(lines) - 1)  # what follows the last newline
    # The byte-order mark some editors write at the start of a UTF-8 file belongs to the file, not to its line
    # (files joined with cat carry one at the start of a later line too).
    return trimmed(lines, pc.ends_with(lines, pattern=b"\r"), pc.starts_with(lines, pattern=UTF8_BOM))


def _raw_frame(run_id: str, source: str, first_line: int, lines: pa.Array) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": run_id,
            "source_file": source,
            "line": pl.int_range(first_line, first_line + len(lines), eager=True),
            "raw": pl.Series(lines, dtype=pl.Binary),
        },
        schema=RAW_LINES_SCHEMA,
    )


def read_raw_lines(location: Location, run_id: str) -> pl.DataFrame:
    """Every line of every JSONL file of a run, bytes as written (blank lines included)."""
    chunks = list(iter_raw_lines(location, run_id))
    return pl.concat(chunks) if chunks else frames.empty(RAW_LINES_SCHEMA)


@dataclass
class ParsedTraces:
    """Valid traces, reject rows and the count of blank lines skipped."""

    traces: pl.DataFrame
    rejects: pl.DataFrame
    blank_lines: int


def case_revisions(cases: pl.DataFrame) -> dict[str, int]:
    """case_id → case_revision."""
    return dict(zip(cases["case_id"].to_list(), cases["case_revision"].to_list(), strict=True))


def parse_traces(
    raw_lines: pl.DataFrame,
    cases: pl.DataFrame | dict[str, int],
    run_id: str,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    seen: set[str] | None = None,
) -> ParsedTraces:
    """Validate each raw line against the Trace contract and the run's cases (docs/inputs.md#rejects).

    Chunks of one run are parsed in file order with the same `seen` set, so a duplicate in a later chunk is caught.
    """
    revisions = cases if isinstance(cases, dict) else case_revisions(cases)
    seen = set() if seen is None else seen
    raw = raw_lines["raw"]
    columnar = columnar_lines(raw, max_line_bytes)
    taken = np.zeros(raw.len(), dtype=bool)
    taken[columnar.positions] = True
    rest = np.flatnonzero(~taken)
    per_line = read_per_line(raw.gather(rest).to_list() if rest.size else [], rest, max_line_bytes)
    parsed = _assemble(raw_lines, [columnar, per_line], revisions, run_id, seen)
    # A run's chunks are parsed one after another: pages pyarrow's allocator keeps from this chunk would otherwise add
    # to the next chunk's.
    pa.default_memory_pool().release_unused()
    return parsed


# ---------------------------------------------------------------- the run's rules, and the frames


def _assemble(
    raw_lines: pl.DataFrame, reads: list[LinesRead], revisions: dict[str, int], run_id: str, seen: set[str]
) -> ParsedTraces:
    """Traces and rejects of a chunk from its lines read either way: case, revision and duplicate rules in line
    order."""
    offsets = np.cumsum([0, *[read.parsed.height for read in reads]])
    valid = pl.concat(
        [
            read.parsed.select("trace_id", "case_id", "case_revision").with_columns(
                _pos=pl.Series(read.positions, dtype=pl.Int64),
                _row=pl.int_range(int(offset), int(offset) + read.parsed.height, dtype=pl.Int64),
            )
            for read, offset in zip(reads, offsets, strict=False)
        ]
    ).sort("_pos")
    known = valid["case_id"].unique().to_list()
    valid = valid.join(
        pl.DataFrame(
            {"case_id": known, "_expected": [revisions.get(case_id) for case_id in known]},
            schema={"case_id": pl.String, "_expected": pl.Int64},
        ),
        on="case_id",
        how="left",
    ).sort("_pos")
    unknown = valid["_expected"].is_null()
    stale = ~unknown & valid["case_revision"].is_not_null() & (valid["case_revision"] != valid["_expected"])
    passing = valid.filter(~unknown & ~stale)
    ids = passing["trace_id"]
    earlier = (
        pl.Series(list(seen.intersection(ids.to_list())), dtype=pl.String)
        if not seen.isdisjoint(ids.to_list())
        else pl.Series([], dtype=pl.String)
    )
    duplicate = ~ids.is_first_distinct() | ids.is_in(earlier)
    kept = passing.filter(~duplicate)
    seen.update(kept["trace_id"].to_list())

    rejected: list[tuple[int, str, str | None, str | None]] = [item for read in reads for item in read.rejects]
    for frame, reason in (
        (valid.filter(unknown), lambda t, c, r, e: f"unknown case_id {c!r}"),
        (valid.filter(stale), lambda t, c, r, e: f"case_revision {r} does not match case {c!r} revision {e}"),
        (passing.filter(duplicate), lambda t, c, r, e: f"duplicate trace_id {t!r} (first occurrence kept)"),
    ):
        for position, trace_id, case_id, revision, expected in frame.select(
            "_pos", "trace_id", "case_id", "case_revision", "_expected"
        ).iter_rows():
            rejected.append((position, reason(trace_id, case_id, revision, expected), trace_id, case_id))
    rejected.sort(key=lambda item: item[0])

    rows = kept["_row"]
    parsed = pl.concat([read.parsed for read in reads])
    final_state = pl.concat([read.final_state for read in reads])
    if rows.len() < parsed.height or not rows.equals(
        pl.int_range(parsed.height, eager=True, dtype=pl.Int64), check_names=False
    ):
        parsed, final_state = parsed[rows], final_state[rows]
    step_texts = pl.concat([read.step_texts for read in reads])
    kept_positions = kept["_pos"]
    if step_texts.height:
        step_texts = step_texts.filter(pl.col("_pos").is_in(kept_positions.implode())).sort("_pos", maintain_order=True)
    traces = lines_to_frame(
        parsed,
        final_state,
        step_texts.drop("_pos"),
        raw_lines["source_file"][kept_positions],
        raw_lines["line"][kept_positions],
        run_id,
    )
    return ParsedTraces(traces, _rejects(raw_lines, rejected, run_id), sum(read.blank for read in reads))


def _rejects(
    raw_lines: pl.DataFrame, rejected: list[tuple[int, str, str | None, str | None]], run_id: str
) -> pl.DataFrame:
    positions = pl.Series([item[0] for item in rejected], dtype=pl.Int64)
    return pl.DataFrame(
        {
            "run_id": pl.Series([run_id] * len(rejected), dtype=pl.String),
            "input_kind": pl.Series(["trace"] * len(rejected), dtype=pl.String),
            "source_file": raw_lines["source_file"][positions],
            "line": raw_lines["line"][positions],
            "reason": [item[1] for item in rejected],
            "trace_id": [item[2] for item in rejected],
            "case_id": [item[3] for item in rejected],
        },
        schema=frames.REJECTS_SCHEMA,
    )


def lines_to_frame(
    parsed: pl.DataFrame,
    final_state: pl.Series,
    step_texts: pl.DataFrame,
    source_file: pl.Series,
    source_line: pl.Series,
    run_id: str,
) -> pl.DataFrame:
    """Kept lines (their LINE_SCHEMA columns and free-form texts, in line order) as one canonical traces frame."""
    if parsed.height == 0:
        return frames.empty(frames.TRACES_SCHEMA)
    parsed = parsed.with_row_index("_row")
    rounds = pl.col("retrieval").list.eval(
        pl.element().struct.with_fields(
            pl.field("round").fill_null(1), pl.field("hits").fill_null(pl.lit([], dtype=pl.List(frames.RANKED_DOC)))
        )
    )
    answer = pl.col("answer")
    frame = parsed.select(
        "_row",
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
        answer.struct.field("citations")
        .fill_null(pl.lit([], dtype=frames.TRACES_SCHEMA["citations"]))
        .alias("citations"),
        "steps",
        final_state.alias("final_state_json"),
        pl.col("usage").struct.field("input_tokens"),
        pl.col("usage").struct.field("output_tokens"),
        pl.col("usage").struct.field("cost_usd"),
        pl.col("usage").struct.field("latency_ms"),
        source_file.alias("source_file"),
        source_line.alias("source_line"),
    )
    return _with_step_free_form(frame, step_texts).drop("_row").cast(frames.TRACES_SCHEMA)


def _with_step_free_form(frame: pl.DataFrame, step_texts: pl.DataFrame) -> pl.DataFrame:
    """Steps in the canonical STEP shape, their free-form fields taken from `step_texts` (one row per step, in
    order)."""
    steps = frame.select("_row", "steps").filter(pl.col("steps").list.len() > 0)
    if steps.height == 0:
        return frame.with_columns(pl.col("steps").cast(frames.TRACES_SCHEMA["steps"]))
    exploded = steps.explode("steps").unnest("steps")
    if exploded.height != step_texts.height:
        raise AssertionError(f"{exploded.height} steps but {step_texts.height} free-form step texts")
    exploded = pl.concat([exploded, step_texts], how="horizontal").with_columns(
        pl.col("dispatched").struct.field("tool").alias("dispatched_tool")
    )
    step_type = frames.TRACES_SCHEMA["steps"]
    rebuilt = exploded.group_by("_row", maintain_order=True).agg(
        pl.struct(list(frames.STEP.to_schema())).cast(step_type.inner).alias("_steps")
    )
    return (
        frame.join(rebuilt, on="_row", how="left")
        .with_columns(
            pl.when(pl.col("steps").is_null())
            .then(pl.lit(None, dtype=step_type))
            .when(pl.col("steps").list.len() == 0)
            .then(pl.lit([], dtype=step_type))
            .otherwise(pl.col("_steps"))
            .alias("steps")
        )
        .drop("_steps")
    )
