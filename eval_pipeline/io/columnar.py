"""Columnar reading of JSON lines, shared by the case loader and the trace ingestion.

Lines are split and read in Arrow (pyarrow's JSON reader against a strict schema), polars tells the lines such a read
may vouch for, and predicates on list columns express the contracts' rules on what it read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from eval_pipeline.io.forked import Forked, run_parts
from eval_pipeline.io.json_limits import MAX_JSON_DEPTH, UTF8_BOM

# pyarrow's JSON reader parses blocks of about this size in parallel
JSON_BLOCK_BYTES = 8 << 20
# Bytes a columnar read leaves to the per-line path: a NUL (pyarrow ends a document there) and a CR (pyarrow may end a
# block there).
NOT_COLUMNAR_BYTES = r"[\x00\r]"
_ROW_NAMED = re.compile(r" in row (\d+)")
# reading a refused block again, piece by piece, may cost this many times the block (and a piece) before the rest
# goes per line
_RETRY_BUDGET = 4
_RETRY_BYTES = 1 << 20


# A key spelt with a \\u escape (only a key is followed by a colon); the one escape that can spell a letter.
ESCAPED_KEY = r'\\u[0-9a-fA-F]{4}(?:[^"\\]|\\.)*"[ \t]*:'


def null_for_default(fields: list[str]) -> str:
    """A pattern for a line that may give one of `fields` (each with a default that null may not replace) as null:
    the key written with null, or any key spelt with an escape. pyarrow reads a missing field and a null one alike, so
    a null there is the default only where this does not match."""
    return rf'"(?:{"|".join(fields)})"[ \t]*:[ \t]*null|{ESCAPED_KEY}'


def columnar_candidates(raw: pl.Series, text: pl.Series, max_line_bytes: int, refused: str) -> np.ndarray:
    """Positions of the lines a columnar read may vouch for: one JSON object per line (within the size limit, valid
    UTF-8, nesting that cannot pass MAX_JSON_DEPTH), matching nothing of `refused`."""
    return np.flatnonzero(
        pl.DataFrame({"raw": raw, "text": text})
        .lazy()
        .select(
            # (a line that is not UTF-8 is empty in `text`)
            pl.col("text").str.starts_with("{")
            # ending with } too, no value of one line can continue on the next, so rows and lines stay aligned
            & pl.col("text").str.ends_with("}")
            & (pl.col("raw").bin.size() <= max_line_bytes)
            & ~pl.col("text").str.contains(refused)
            # no more opening brackets than the depth limit: the nesting cannot pass it
            & (pl.col("text").str.count_matches(r"[\[{]") <= MAX_JSON_DEPTH)
        )
        .collect()
        .to_series()
        .to_numpy()
    )


def lines_as_text(raw: pl.Series) -> pl.Series:
    """The lines as text; a line that is not valid UTF-8 becomes empty (the per-line path names its byte)."""
    try:
        return raw.cast(pl.String)
    except pl.exceptions.PolarsError:
        pass
    invalid: list[int] = []
    for start in range(0, raw.len(), 1024):
        part = raw.slice(start, 1024)
        try:
            part.cast(pl.String)
        except pl.exceptions.PolarsError:
            invalid.extend(start + offset for offset, line in enumerate(part.to_list()) if not _is_utf8(line))
    valid = np.ones(raw.len(), dtype=bool)
    valid[invalid] = False
    try:
        return pl.select(pl.when(pl.Series(valid)).then(raw).otherwise(pl.lit(b""))).to_series().cast(pl.String)
    except pl.exceptions.PolarsError:  # a polars that checks whole buffers, not the lines in use
        return pl.Series(
            [line if ok else b"" for line, ok in zip(raw.to_list(), valid, strict=True)], dtype=pl.Binary
        ).cast(pl.String)


def start_columnar_read(
    raw: pl.Series,
    max_line_bytes: int,
    refused: str,
    may_have_free_form: str,
    free_form_part: Callable[[tuple, int, int], Any],
    parallel_from: int,
) -> tuple[pl.Series, np.ndarray, pl.Series, np.ndarray, Forked | list]:
    """(text, candidates, their lines, written, parts) of a columnar read: the lines pyarrow may read, and the free-form
    values of those that may have any (`written`, their positions) being written by `free_form_part` on other cores
    (`parts`, a Forked to enter while pyarrow reads the lines, or the parts already done)."""
    text = lines_as_text(raw)
    candidates = columnar_candidates(raw, text, max_line_bytes, refused)
    lines = raw if candidates.size == raw.len() else raw.gather(candidates)
    written = (
        candidates[text.gather(candidates).str.contains(may_have_free_form).to_numpy()]
        if candidates.size
        else candidates
    )
    parts = run_parts(free_form_part, (raw.gather(written).to_list(),), written.size, parallel_from)
    return text, candidates, lines, written, parts


def _is_utf8(raw: bytes | None) -> bool:
    try:
        raw.decode("utf-8")
    except (UnicodeDecodeError, AttributeError):
        return False
    return True


def _newline_joined(lines: pa.Array) -> pa.Array:
    """Each line with a newline after it, the values of all in one buffer."""
    return pc.binary_join_element_wise(lines, pa.scalar(b"", lines.type), pa.scalar(b"\n", lines.type))


def read_json_lines(lines: pl.Series, options: pa_json.ParseOptions) -> tuple[pa.Table | None, np.ndarray]:
    """Lines read by pyarrow against the schema of `options`: (table, for each row the index of its line).

    A refused block is read again in pieces, each refused piece split at the row pyarrow names or in halves, until
    each refused line is alone; a line refused, or left unread once the retry budget is spent, has no row.
    """
    joined = _newline_joined(lines.to_arrow())
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset : joined.offset + len(joined) + 1]
    data = joined.buffers()[2]
    count = len(lines)
    # a block must hold the longest line: pyarrow refuses a line that straddles two blocks
    longest = int(np.diff(offsets).max())

    def read(start: int, stop: int, block: int) -> pa.Table:
        size = int(offsets[stop] - offsets[start])
        return pa_json.read_json(
            pa.BufferReader(data.slice(int(offsets[start]), size)),
            read_options=pa_json.ReadOptions(block_size=max(block, longest + 1), use_threads=True),
            parse_options=options,
        )

    try:
        table = read(0, count, JSON_BLOCK_BYTES)
        if table.num_rows == count:
            return table, np.arange(count, dtype=np.int64)
    except pa.ArrowException:
        pass
    bounds = np.unique(np.searchsorted(offsets, np.arange(0, offsets[-1], _RETRY_BYTES), side="left"))
    pending = [
        (int(start), int(stop)) for start, stop in zip(bounds, [*bounds[1:], count], strict=True) if start < stop
    ][::-1]
    budget = _RETRY_BUDGET * int(offsets[-1] - offsets[0]) + _RETRY_BYTES
    finished: list[tuple[int, pa.Table]] = []
    while pending and budget > 0:
        start, stop = pending.pop()
        budget -= int(offsets[stop] - offsets[start])
        named = None
        try:
            # one block: a row pyarrow names in its message counts from the first line read
            table = read(start, stop, int(offsets[stop] - offsets[start]) + 1)
            if table.num_rows == stop - start:
                finished.append((start, table))
                continue
        except pa.ArrowException as exc:
            match = _ROW_NAMED.search(str(exc))
            named = int(match.group(1)) if match else None
        if stop - start == 1:
            continue
        if named is not None and named < stop - start:
            parts = [(start, start + named), (start + named, start + named + 1), (start + named + 1, stop)]
        else:
            middle = (start + stop) // 2
            parts = [(start, middle), (middle, stop)]
        pending.extend(part for part in reversed(parts) if part[0] < part[1])
    if not finished:
        return None, np.zeros(0, dtype=np.int64)
    finished.sort(key=lambda item: item[0])
    rows = np.concatenate([np.arange(start, start + table.num_rows, dtype=np.int64) for start, table in finished])
    return pa.concat_tables([table for _, table in finished]), rows


def every_element(column: pl.Expr, holds: pl.Expr) -> pl.Expr:
    """Whether every element of a list column holds (true for a null list)."""
    return column.list.eval(holds).list.all().fill_null(True)


def some_element(column: pl.Expr, holds: pl.Expr) -> pl.Expr:
    """Whether some element of a list column holds (false for a null list)."""
    return column.list.eval(holds).list.any().fill_null(False)


def jsonl_lines(data: bytes) -> pa.Array:
    """The lines of a JSONL file as iter_lines gives them (blank ones included, no leading BOM, no CR), in Arrow."""
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    whole = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 1, [None, pa.py_buffer(np.array([0, len(data)], dtype=np.int64)), pa.py_buffer(data)]
    )
    lines = pc.split_pattern(whole, pattern=b"\n").flatten()
    return trimmed(lines, pc.ends_with(lines, pattern=b"\r"))


def trimmed(lines: pa.Array, with_cr: pa.Array, with_bom: pa.Array | None = None) -> pa.Array:
    """Lines (large_binary) without the CR that ends those of `with_cr`, then without the byte-order mark that starts
    those of `with_bom`; the lines themselves when there are none."""
    cut_end = with_cr.to_numpy(zero_copy_only=False).astype(np.int64)
    cut_start = np.zeros_like(cut_end) if with_bom is None else with_bom.to_numpy(zero_copy_only=False) * len(UTF8_BOM)
    if not cut_end.any() and not cut_start.any():
        return lines
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    lengths = offsets[1:] - cut_end - offsets[:-1] - cut_start
    starts, ends = offsets[:-1] + cut_start, np.concatenate([[0], np.cumsum(lengths)])
    kept = np.repeat(starts - ends[:-1], lengths) + np.arange(ends[-1])
    data = np.frombuffer(lines.buffers()[2], dtype=np.uint8)[kept]
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lines), [None, pa.py_buffer(ends), pa.py_buffer(data)]
    )
