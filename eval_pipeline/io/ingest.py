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
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import chain

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.identifiers import HIDDEN_CHARACTER_REGEX, text_id_problem
from eval_pipeline.contracts.models import Trace
from eval_pipeline.io.json_limits import SUSPICIOUS_JSON_PATTERN, UTF8_BOM, limit_breach
from eval_pipeline.io.loaders import (
    DEFAULT_MAX_LINE_BYTES,
    ESCAPED_KEY,
    NOT_COLUMNAR_BYTES,
    Forked,
    any_of,
    collector_paused,
    columnar_candidates,
    describe_validation_error,
    each,
    lines_as_text,
    null_for_default,
    parse_json_line,
    read_json_lines,
    results_of,
    run_parts,
    trace_files,
    trimmed,
)
from eval_pipeline.io.storage import InputError, Location

RAW_LINES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "source_file": pl.String,
    "line": pl.Int64,
    "raw": pl.Binary,
}

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


RAW_CHUNK_LINES = 100_000


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


def _explain(raw: bytes, max_line_bytes: int, error: ValidationError) -> tuple[str, str | None, str | None]:
    """The reason a line failed validation, with its trace_id and case_id when they can be read."""
    value, reason = parse_json_line(raw, max_line_bytes)
    if value is None:
        return reason or describe_validation_error(error), None, None
    trace_id, case_id = _ids_of(value)
    try:
        Trace.model_validate(value)
    except ValidationError as exc:
        return describe_validation_error(exc), trace_id, case_id
    # valid as Python reads it, refused by the JSON parser: a limit (surrogate, depth) or the parser's own message
    return _limit_breach(raw) or describe_validation_error(error), trace_id, case_id


def _free_form(trace: Trace) -> tuple[list[list[str | None]], str | None]:
    """Per step: args, result, state diff and dispatched args as JSON text; and the final state.

    Arguments are canonical (49.0 written as 49) because call keys compare them as text; results, state diffs and
    the final state keep numbers as written, since milestones and checks compare their values, not their text.
    """
    columns: list[list[str | None]] = [[], [], [], [], []]
    for step in trace.steps or ():
        args_text, float_paths = frames.canonical_args(step.args) if step.args is not None else (None, None)
        columns[0].append(args_text)
        columns[1].append(frames.sorted_json(step.result) if step.result is not None else None)
        columns[2].append(
            frames.sorted_json([{"path": c.path, "before": c.before, "after": c.after} for c in step.state_diff])
            if step.state_diff is not None
            else None
        )
        columns[3].append(frames.canonical_json(step.dispatched.args) if step.dispatched is not None else None)
        columns[4].append(float_paths)
    return columns, frames.sorted_json(trace.final_state) if trace.final_state is not None else None


# A validated line: ("ok", trace_id, case_id, case_revision, free-form texts) or ("reject", reason, trace_id, case_id).
Checked = tuple


def _check_line(raw: bytes, max_line_bytes: int, suspect: bool = True) -> Checked | None:
    """None for a blank line; else the line validated against the Trace contract (and, when `suspect`, against the
    limits of json_limits)."""
    if not raw.strip():
        return None
    if len(raw) > max_line_bytes:
        return ("reject", f"line of {len(raw)} bytes exceeds the {max_line_bytes}-byte limit", None, None)
    if suspect:
        breach = _limit_breach(raw)
        if breach is not None:
            return ("reject", breach, *_identifiers(raw))
    try:
        trace = Trace.model_validate_json(raw)
    except ValidationError as exc:
        return ("reject", *_explain(raw, max_line_bytes, exc))
    try:
        texts = _free_form(trace)
    except (ValueError, TypeError, RecursionError) as exc:
        return (
            "reject",
            f"a tool argument, result or final state cannot be stored: {exc}",
            trace.trace_id,
            trace.case_id,
        )
    return ("ok", trace.trace_id, trace.case_id, trace.case_revision, texts)


def _limit_breach(raw: bytes) -> str | None:
    try:
        return limit_breach(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None  # the contract check names the byte


def _identifiers(raw: bytes) -> tuple[str | None, str | None]:
    """trace_id and case_id of a line refused for its numbers or depth (Python's own decoder still reads it)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    return _ids_of(value) if isinstance(value, dict) else (None, None)


def _ids_of(value: dict) -> tuple[str | None, str | None]:
    """trace_id and case_id of a decoded line, each when it is a string that is also valid text and a valid id (no
    control or format character: the reason names such an id, escaped)."""
    found = []
    for key in ("trace_id", "case_id"):
        text = value.get(key)
        try:
            found.append(text if text_id_problem(text) is None and text.encode("utf-8") else None)
        except UnicodeEncodeError:
            found.append(None)
    return found[0], found[1]


_PARALLEL_LINES = 40_000


def _check_part(payload: tuple, start: int, stop: int) -> list[Checked | None]:
    raws, suspects, max_line_bytes = payload
    with collector_paused():
        return [
            _check_line(raw, max_line_bytes, suspect)
            for raw, suspect in zip(raws[start:stop], suspects[start:stop], strict=True)
        ]


def suspect_lines(raw: pl.Series) -> list[bool]:
    """Per line, whether it may break a JSON limit (one RE2 pass over the whole column, in Arrow)."""
    if raw.len() == 0:
        return []
    return pc.match_substring_regex(raw.to_arrow(), SUSPICIOUS_JSON_PATTERN).fill_null(False).to_pylist()


def _check_lines(raws: list[bytes], max_line_bytes: int, suspects: list[bool] | None = None) -> list[Checked | None]:
    """Every line checked; large batches on every core (forked workers read the lines they inherit)."""
    suspects = [True] * len(raws) if suspects is None else suspects
    parts = run_parts(_check_part, (raws, suspects, max_line_bytes), len(raws), _PARALLEL_LINES)
    with parts if isinstance(parts, Forked) else nullcontext():
        return [checked for part in results_of(parts) for checked in part]


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
    columnar = _columnar_lines(raw, max_line_bytes)
    taken = np.zeros(raw.len(), dtype=bool)
    taken[columnar.positions] = True
    rest = np.flatnonzero(~taken)
    per_line = _per_line(raw.gather(rest).to_list() if rest.size else [], rest, max_line_bytes)
    parsed = _assemble(raw_lines, [columnar, per_line], revisions, run_id, seen)
    # A run's chunks are parsed one after another: pages pyarrow's allocator keeps from this chunk would otherwise add to
    # the next chunk's.
    pa.default_memory_pool().release_unused()
    return parsed


@dataclass
class _Read:
    """Lines of a chunk read one way: the valid ones (LINE_SCHEMA columns, their free-form texts) and the rejects,
    each keyed by its position in the chunk."""

    positions: np.ndarray
    parsed: pl.DataFrame
    final_state: pl.Series
    # one row per step of the parsed lines, in their order: _pos and FREE_FORM_STEP_FIELDS
    step_texts: pl.DataFrame
    rejects: list[tuple[int, str, str | None, str | None]]
    blank: int = 0


_STEP_TEXTS_SCHEMA: dict[str, pl.DataType] = {"_pos": pl.Int64, **{name: pl.String for name in FREE_FORM_STEP_FIELDS}}
_EMPTY_LINES = pl.from_arrow(LINE_SCHEMA.empty_table())
_NO_FINAL_STATE = pl.Series("final_state_json", [], dtype=pl.String)


def _step_texts(positions: list[int], columns: list[list[str | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"_pos": positions, **dict(zip(FREE_FORM_STEP_FIELDS, columns, strict=True))}, schema=_STEP_TEXTS_SCHEMA
    )


# ---------------------------------------------------------------- the per-line path (the reference)


def _per_line(raws: list[bytes], positions: np.ndarray, max_line_bytes: int) -> _Read:
    """Lines validated one by one against the Trace contract, the accepted ones then parsed by pyarrow."""
    checked_lines = _check_lines(raws, max_line_bytes, suspect_lines(pl.Series(raws, dtype=pl.Binary)))
    valid = [i for i, checked in enumerate(checked_lines) if checked is not None and checked[0] == "ok"]
    table, rows_of, unreadable = columnar_parse([raws[i] for i in valid])
    rejects: list[tuple[int, str, str | None, str | None]] = []
    kept: list[int] = []  # the positions in `valid` of the lines kept, in table order
    blank = 0
    for index, checked in enumerate(checked_lines):
        if checked is None:
            blank += 1
        elif checked[0] == "reject":
            rejects.append((int(positions[index]), checked[1], checked[2], checked[3]))
    for position, index in enumerate(valid):
        _, trace_id, case_id, _, _ = checked_lines[index]
        if position in unreadable:
            rejects.append((int(positions[index]), unreadable[position], trace_id, case_id))
        else:
            kept.append(position)
    rejects.sort(key=lambda item: item[0])
    if table is None or not kept:
        return _Read(
            np.zeros(0, dtype=np.int64), _EMPTY_LINES, _NO_FINAL_STATE, _step_texts([], [[]] * 5), rejects, blank
        )
    table = table.take(pa.array([rows_of[position] for position in kept], type=pa.int64()))
    lines = [checked_lines[valid[position]] for position in kept]
    kept_positions = [int(positions[valid[position]]) for position in kept]
    step_positions = [p for p, line in zip(kept_positions, lines, strict=True) for _ in line[4][0][0]]
    columns = [[text for line in lines for text in line[4][0][i]] for i in range(len(FREE_FORM_STEP_FIELDS))]
    return _Read(
        np.array(kept_positions, dtype=np.int64),
        pl.from_arrow(table),
        pl.Series("final_state_json", [line[4][1] for line in lines], dtype=pl.String),
        _step_texts(step_positions, columns),
        rejects,
        blank,
    )


# ---------------------------------------------------------------- the columnar path

# LINE_SCHEMA and the final state as a struct of no fields: pyarrow then tells an object from null (or from a value
# of another type) without reading its members.
COLUMNAR_SCHEMA = LINE_SCHEMA.append(pa.field("final_state", pa.struct([])))
_COLUMNAR_PARSE = pa_json.ParseOptions(explicit_schema=COLUMNAR_SCHEMA, unexpected_field_behavior="ignore")
# What pyarrow reads and the contract or json_limits do not (lone surrogates and numbers beyond a double pyarrow
# refuses itself): NaN and Inf literals, and integers of 19 digits or more (beyond 64 bits where a column is a float
# or a value is not read by pyarrow).
_NOT_COLUMNAR = rf"NaN|Inf|[0-9]{{19}}|{NOT_COLUMNAR_BYTES}"
# Fields with a default that null may not replace (pyarrow reads a missing one and a null one alike).
_NULL_FOR_DEFAULT = null_for_default(["attempt", "status", "round", "hits", "text", "citations"])
_STATUSES = ["ok", "error", "timeout"]


def _columnar_lines(raw: pl.Series, max_line_bytes: int) -> _Read:
    """The lines the columnar pass can vouch for: those that the per-line path would accept with the same values.

    A line is left out when it may break a JSON limit, when pyarrow refuses it, when a contract rule fails on its
    columns, or when its free-form values are not what the contract reads; the per-line path then decides.
    """
    text = lines_as_text(raw)
    candidates = columnar_candidates(raw, text, max_line_bytes, _NOT_COLUMNAR)
    lines = raw if candidates.size == raw.len() else raw.gather(candidates)
    # the free-form texts of every line that may have steps or a final state, written on other cores while pyarrow
    # reads the lines
    written = (
        candidates[text.gather(candidates).str.contains(_MAY_HAVE_FREE_FORM).to_numpy()]
        if candidates.size
        else candidates
    )
    parts = run_parts(_free_form_part, (raw.gather(written).to_list(),), written.size, _PARALLEL_FREE_FORM)
    with parts if isinstance(parts, Forked) else nullcontext():
        table, rows = read_json_lines(lines, _COLUMNAR_PARSE) if candidates.size else (None, candidates)
        del lines
        if table is None:
            return _Read(np.zeros(0, dtype=np.int64), _EMPTY_LINES, _NO_FINAL_STATE, _step_texts([], [[]] * 5), [])
        positions = candidates[rows]
        has_final_state = pc.is_valid(table.column("final_state")).to_numpy(zero_copy_only=False)
        parsed = pl.from_arrow(table.drop_columns(["final_state"]))
        holds = _contract_holds(parsed, text, positions)
        del table, text
        written_parts = results_of(parts)
    del parts
    steps = parsed["steps"].list.len().fill_null(0).to_numpy()
    free_form = np.flatnonzero(holds & ((steps > 0) | has_final_state))
    counts = np.fromiter(chain.from_iterable(part[0] for part in written_parts), dtype=np.int64, count=written.size)
    # each line with free-form values has its texts written, as many steps as pyarrow read, or goes per line
    at = np.minimum(np.searchsorted(written, positions[free_form]), max(written.size - 1, 0))
    found = written[at] == positions[free_form] if written.size else np.zeros(free_form.size, dtype=bool)
    agree = found & (counts[at] == steps[free_form]) if written.size else found
    holds[free_form[~agree]] = False
    free_form, at = free_form[agree], at[agree]
    starts = np.cumsum(np.maximum(counts, 0)) - np.maximum(counts, 0)
    taken_steps = steps[free_form]
    step_index = np.repeat(starts[at] - np.cumsum(taken_steps) + taken_steps, taken_steps) + np.arange(
        int(taken_steps.sum())
    )
    columns = [
        pl.Series(list(chain.from_iterable(part[1][i] for part in written_parts)), dtype=pl.String).gather(step_index)
        for i in range(len(FREE_FORM_STEP_FIELDS))
    ]
    step_frame = pl.DataFrame(
        {
            "_pos": np.repeat(positions[free_form], taken_steps),
            **dict(zip(FREE_FORM_STEP_FIELDS, columns, strict=True)),
        },
        schema=_STEP_TEXTS_SCHEMA,
    )
    finals = pl.Series(list(chain.from_iterable(part[2] for part in written_parts)), dtype=pl.String)
    final_state = pl.DataFrame({"_row": np.arange(parsed.height)}).join(
        pl.DataFrame({"_row": free_form, "final_state_json": finals.gather(at)}),
        on="_row",
        how="left",
        maintain_order="left",
    )["final_state_json"]
    kept = np.flatnonzero(holds)
    if kept.size == parsed.height:
        return _Read(positions, parsed, final_state, step_frame, [])
    return _Read(positions[kept], parsed[kept], final_state[kept], step_frame, [])


_PARALLEL_FREE_FORM = 4_000
# a line with steps or a final state names them (or spells a key with an escape)
_MAY_HAVE_FREE_FORM = rf'"steps"|"final_state"|{ESCAPED_KEY}'


def _free_form_part(
    payload: tuple, start: int, stop: int
) -> tuple[list[int], list[list[str | None]], list[str | None]]:
    """Free-form texts of lines start..stop of the payload (the lines): per line its step count (-1: left to the
    per-line path), the FREE_FORM_STEP_FIELDS columns of the steps, and per line its final state."""
    (lines,) = payload
    counts: list[int] = []
    columns: list[list[str | None]] = [[] for _ in FREE_FORM_STEP_FIELDS]
    finals: list[str | None] = []
    with collector_paused():
        for line in lines[start:stop]:
            filled = len(columns[0])
            try:
                count, final = _line_free_form(line, columns)
            except Exception:  # noqa: BLE001 - whatever the reason, the per-line path decides
                for column in columns:
                    del column[filled:]
                count, final = -1, None
            counts.append(count)
            finals.append(final)
    return counts, columns, finals


def _contract_holds(parsed: pl.DataFrame, text: pl.Series, positions: np.ndarray) -> np.ndarray:
    """Per row of the columnar parse (of line positions[row] of `text`), whether the Trace contract holds beyond the
    types pyarrow checked: required fields and list elements present, ids not empty, a known status, and a null only
    where the field may be left out."""
    element = pl.element()

    def field(name: str) -> pl.Expr:
        return element.struct.field(name)

    doc = element.is_not_null() & field("doc_id").is_not_null()
    retrieval_round = element.is_not_null() & each(field("candidates"), doc) & each(field("hits"), doc)
    step = (
        element.is_not_null()
        & field("index").is_not_null()
        & field("kind").is_not_null()
        & (field("dispatched").is_null() | field("dispatched").struct.field("tool").is_not_null())
    )
    answer = pl.col("answer")
    checked = (
        parsed.lazy()
        .select(
            holds=(
                (pl.col("trace_id").str.len_bytes() > 0).fill_null(False)
                & (pl.col("case_id").str.len_bytes() > 0).fill_null(False)
                # ids with a control or format character: the per-line path refuses them with the reason
                & ~pl.col("trace_id").str.contains(HIDDEN_CHARACTER_REGEX).fill_null(True)
                & ~pl.col("case_id").str.contains(HIDDEN_CHARACTER_REGEX).fill_null(True)
                & (pl.col("status").is_null() | pl.col("status").is_in(_STATUSES))
                & each(pl.col("retrieval"), retrieval_round)
                & each(pl.col("context"), doc)
                & each(answer.struct.field("citations"), doc)
                & each(pl.col("steps"), step)
            ),
            defaulted=(
                pl.col("attempt").is_null()
                | pl.col("status").is_null()
                | any_of(pl.col("retrieval"), field("round").is_null() | field("hits").is_null())
                | any_of(pl.col("context"), field("text").is_null())
                | (answer.is_not_null() & answer.struct.field("citations").is_null())
            ),
        )
        .collect()
    )
    holds = checked["holds"].fill_null(False).to_numpy().copy()
    defaulted = np.flatnonzero(checked["defaulted"].fill_null(True).to_numpy() & holds)
    if defaulted.size:
        holds[defaulted[text.gather(positions[defaulted]).str.contains(_NULL_FOR_DEFAULT).to_numpy()]] = False
    return holds


class _NotColumnar(ValueError):
    """A free-form value the contract would refuse: the per-line path names the reason."""


def _line_free_form(raw: bytes, columns: list[list[str | None]]) -> tuple[int, str | None]:
    """The texts _free_form writes for the steps of a line, appended to `columns` (in FREE_FORM_STEP_FIELDS order):
    (its step count, its final state); raises where the contract would refuse a value or a text cannot be written
    (the caller then drops what was appended)."""
    value = orjson.loads(raw)
    steps = value.get("steps")
    add_args, add_result, add_diff, add_dispatched, add_paths = (column.append for column in columns)
    json_bytes, canonical_args_of, sorted_json = frames.json_bytes, frames.canonical_args_of, frames.sorted_json
    count = 0
    for step in steps if steps is not None else ():
        if type(step) is not dict:
            raise _NotColumnar("step")
        get = step.get
        args = get("args")
        args_bytes = args_text = None
        if args is None:
            add_args(None)
            add_paths(None)
        elif type(args) is dict:
            args_bytes = json_bytes(args)
            args_text, paths = canonical_args_of(args_bytes, args)
            add_args(args_text)
            add_paths(paths)
        else:
            raise _NotColumnar("args")
        result = get("result")
        add_result(None if result is None else sorted_json(result))
        changes = get("state_diff")
        if changes is not None:
            if type(changes) is not list:
                raise _NotColumnar("state_diff")
            # a state change as the contract keeps it: path, before and after, nothing else
            kept = []
            for change in changes:
                if type(change) is not dict or type(change.get("path")) is not str:
                    raise _NotColumnar("state_diff")
                kept.append({"path": change["path"], "before": change.get("before"), "after": change.get("after")})
            changes = sorted_json(kept)
        add_diff(changes)
        dispatched = get("dispatched")
        if dispatched is not None:
            # the dispatch record's args default to {}; null is not a default
            dispatched_args = dispatched.get("args", {}) if type(dispatched) is dict else None
            if type(dispatched_args) is not dict:
                raise _NotColumnar("dispatched.args")
            dispatched_bytes = json_bytes(dispatched_args)
            # the args as dispatched are most often the args as called: the same text
            dispatched = (
                args_text if dispatched_bytes == args_bytes else canonical_args_of(dispatched_bytes, dispatched_args)[0]
            )
        add_dispatched(dispatched)
        count += 1
    final = value.get("final_state")
    if final is not None and type(final) is not dict:
        raise _NotColumnar("final_state")
    return count, None if final is None else sorted_json(final)


# ---------------------------------------------------------------- the run's rules, and the frames


def _assemble(
    raw_lines: pl.DataFrame, reads: list[_Read], revisions: dict[str, int], run_id: str, seen: set[str]
) -> ParsedTraces:
    """Traces and rejects of a chunk from its lines read either way: case, revision and duplicate rules in line order."""
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


_READ_BLOCK_BYTES = 8 << 20
_ARROW_COLUMN_TWICE = re.compile(r"Column\((/[^)]*)\) was specified twice")


def _read_lines(raws: list[bytes]) -> pa.Table:
    # a block must hold the longest line: pyarrow refuses a line that straddles two blocks
    block = max(_READ_BLOCK_BYTES, max(len(raw) for raw in raws) + 1)
    return pa_json.read_json(
        io.BytesIO(b"\n".join(raws)),
        read_options=pa_json.ReadOptions(block_size=block),
        parse_options=pa_json.ParseOptions(explicit_schema=LINE_SCHEMA, unexpected_field_behavior="ignore"),
    )


def _columnar_reason(error: Exception) -> str:
    """A reject reason from pyarrow's message about one line."""
    message = str(error).removeprefix("JSON parse error: ")
    twice = _ARROW_COLUMN_TWICE.search(message)
    if twice:
        return f"duplicate key {twice.group(1).strip('/').replace('/', '.')!r}: a field may be given once"
    return f"cannot be read into the trace columns: {message.split(' in row ')[0]}"


def columnar_parse(raws: list[bytes]) -> tuple[pa.Table | None, dict[int, int], dict[int, str]]:
    """Lines parsed by pyarrow against LINE_SCHEMA: (table, line position → table row, line position → reason).

    A block pyarrow refuses is bisected until each refused line is alone, so one line never costs the batch.
    """
    tables: list[pa.Table] = []
    rows: dict[int, int] = {}
    reasons: dict[int, str] = {}
    pending = [(0, len(raws))] if raws else []
    finished: list[tuple[int, pa.Table]] = []
    while pending:
        start, stop = pending.pop()
        try:
            finished.append((start, _read_lines(raws[start:stop])))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            if stop - start == 1:
                reasons[start] = _limit_breach(raws[start]) or _columnar_reason(exc)
            else:
                middle = (start + stop) // 2
                pending.extend([(middle, stop), (start, middle)])
    row = 0
    for start, table in sorted(finished, key=lambda item: item[0]):
        for offset in range(table.num_rows):
            rows[start + offset] = row + offset
        row += table.num_rows
        tables.append(table)
    return (pa.concat_tables(tables) if tables else None), rows, reasons


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
    """Steps in the canonical STEP shape, their free-form fields taken from `step_texts` (one row per step, in order)."""
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
