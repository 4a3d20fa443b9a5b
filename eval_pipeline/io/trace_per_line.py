"""The per-line path of the trace ingestion, the reference: each line validated on its own against the Trace contract.

Validation is by pydantic; the accepted lines are then parsed by pyarrow (columnar_parse), so a bad line gets its
precise reason.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import nullcontext

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.identifiers import text_id_problem
from eval_pipeline.contracts.traces import Trace
from eval_pipeline.io.forked import Forked, results_of, run_parts
from eval_pipeline.io.json_limits import SUSPICIOUS_JSON_PATTERN, limit_breach
from eval_pipeline.io.loaders import collector_paused, describe_validation_error, parse_json_line
from eval_pipeline.io.trace_schema import (
    EMPTY_LINES,
    FREE_FORM_STEP_FIELDS,
    LINE_SCHEMA,
    NO_FINAL_STATE,
    LinesRead,
    step_texts_frame,
)


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


PARALLEL_LINES = 40_000


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


def check_lines(raws: list[bytes], max_line_bytes: int, suspects: list[bool] | None = None) -> list[Checked | None]:
    """Every line checked; large batches on every core (forked workers read the lines they inherit)."""
    suspects = [True] * len(raws) if suspects is None else suspects
    parts = run_parts(_check_part, (raws, suspects, max_line_bytes), len(raws), PARALLEL_LINES)
    with parts if isinstance(parts, Forked) else nullcontext():
        return [checked for part in results_of(parts) for checked in part]


def read_per_line(raws: list[bytes], positions: np.ndarray, max_line_bytes: int) -> LinesRead:
    """Lines validated one by one against the Trace contract, the accepted ones then parsed by pyarrow."""
    checked_lines = check_lines(raws, max_line_bytes, suspect_lines(pl.Series(raws, dtype=pl.Binary)))
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
        return LinesRead(
            np.zeros(0, dtype=np.int64), EMPTY_LINES, NO_FINAL_STATE, step_texts_frame([], [[]] * 5), rejects, blank
        )
    table = table.take(pa.array([rows_of[position] for position in kept], type=pa.int64()))
    lines = [checked_lines[valid[position]] for position in kept]
    kept_positions = [int(positions[valid[position]]) for position in kept]
    step_positions = [p for p, line in zip(kept_positions, lines, strict=True) for _ in line[4][0][0]]
    columns = [[text for line in lines for text in line[4][0][i]] for i in range(len(FREE_FORM_STEP_FIELDS))]
    return LinesRead(
        np.array(kept_positions, dtype=np.int64),
        pl.from_arrow(table),
        pl.Series("final_state_json", [line[4][1] for line in lines], dtype=pl.String),
        step_texts_frame(step_positions, columns),
        rejects,
        blank,
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
