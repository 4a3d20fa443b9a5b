"""The columnar path of the trace ingestion: the lines it can vouch for, read together instead of one by one.

pyarrow reads them against a strict schema, polars checks what the Trace contract asks beyond types, orjson decodes
the free-form values on forked workers; every other line is left to trace_per_line.
"""

from __future__ import annotations

from contextlib import nullcontext
from itertools import chain

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.identifiers import HIDDEN_CHARACTER_REGEX
from eval_pipeline.io.columnar import (
    ESCAPED_KEY,
    NOT_COLUMNAR_BYTES,
    every_element,
    null_for_default,
    read_json_lines,
    some_element,
    start_columnar_read,
)
from eval_pipeline.io.forked import Forked, results_of
from eval_pipeline.io.loaders import collector_paused
from eval_pipeline.io.trace_schema import (
    EMPTY_LINES,
    FREE_FORM_STEP_FIELDS,
    LINE_SCHEMA,
    NO_FINAL_STATE,
    STEP_TEXTS_SCHEMA,
    LinesRead,
    step_texts_frame,
)

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


def columnar_lines(raw: pl.Series, max_line_bytes: int) -> LinesRead:
    """The lines the columnar pass can vouch for: those that the per-line path would accept with the same values.

    A line is left out when it may break a JSON limit, when pyarrow refuses it, when a contract rule fails on its
    columns, or when its free-form values are not what the contract reads; the per-line path then decides.
    """
    # the free-form texts of every line that may have steps or a final state, written on other cores while pyarrow
    # reads the lines
    text, candidates, lines, written, parts = start_columnar_read(
        raw, max_line_bytes, _NOT_COLUMNAR, _MAY_HAVE_FREE_FORM, _free_form_part, _PARALLEL_FREE_FORM
    )
    with parts if isinstance(parts, Forked) else nullcontext():
        table, rows = read_json_lines(lines, _COLUMNAR_PARSE) if candidates.size else (None, candidates)
        del lines
        if table is None:
            return LinesRead(
                np.zeros(0, dtype=np.int64), EMPTY_LINES, NO_FINAL_STATE, step_texts_frame([], [[]] * 5), []
            )
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
        schema=STEP_TEXTS_SCHEMA,
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
        return LinesRead(positions, parsed, final_state, step_frame, [])
    return LinesRead(positions[kept], parsed[kept], final_state[kept], step_frame, [])


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
    retrieval_round = (
        element.is_not_null() & every_element(field("candidates"), doc) & every_element(field("hits"), doc)
    )
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
                & every_element(pl.col("retrieval"), retrieval_round)
                & every_element(pl.col("context"), doc)
                & every_element(answer.struct.field("citations"), doc)
                & every_element(pl.col("steps"), step)
            ),
            defaulted=(
                pl.col("attempt").is_null()
                | pl.col("status").is_null()
                | some_element(pl.col("retrieval"), field("round").is_null() | field("hits").is_null())
                | some_element(pl.col("context"), field("text").is_null())
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
