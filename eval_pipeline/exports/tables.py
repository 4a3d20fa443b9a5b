"""Warehouse tables out as CSV, JSON lines or Parquet: which tables may leave, for which runs, written run by run."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from eval_pipeline.contracts.identifiers import identifier_problem
from eval_pipeline.io.storage import open_location
from eval_pipeline.io.warehouse import RESTRICTED_AREA, Warehouse

FILE_FORMATS = ("csv", "jsonl", "parquet")
# rows encoded at a time: bounds the bytes held besides the run being written
SLICE_ROWS = 50_000


class ExportError(Exception):
    """An export that cannot be done as asked (unknown or restricted table, unknown run); a usage error."""


def _delta_tables(warehouse: Warehouse, *parts: str) -> list[str]:
    """Names of the Delta tables directly under a folder of the warehouse."""
    location = open_location(warehouse.root)
    return [
        name
        for name in location.subdirs(*parts)
        if not name.startswith((".", "_")) and location.exists(*parts, name, "_delta_log")
    ]


def exportable_tables(warehouse: Warehouse) -> list[str]:
    """Tables outside the restricted area, the only ones that may leave the warehouse."""
    return _delta_tables(warehouse)


def restricted_tables(warehouse: Warehouse) -> list[str]:
    """Tables of the restricted area (raw lines, validated traces and cases: personal data)."""
    return _delta_tables(warehouse, RESTRICTED_AREA)


def check_table(warehouse: Warehouse, table: str, allowed: list[str] | None = None) -> str:
    """The table name when it may be exported; ExportError saying why not (and what may be) otherwise."""
    exportable = exportable_tables(warehouse) if allowed is None else allowed
    listing = ", ".join(exportable) or "none"
    head = table.strip("/").split("/", 1)[0]
    # Refused by name even when it is not there: the restricted area is never read, let alone listed as an option.
    if head == RESTRICTED_AREA or (table in restricted_tables(warehouse) and table not in exportable):
        raise ExportError(
            f"table {table!r} is restricted (raw personal data) and is never exported; exportable tables: {listing}"
        )
    problem = identifier_problem(table)
    if problem is not None:
        raise ExportError(f"table {table!r} {problem}; exportable tables: {listing}")
    if table not in exportable:
        where = f" in {warehouse.root}" if allowed is None else ""
        raise ExportError(f"unknown table {table!r}{where}; exportable tables: {listing}")
    return table


def known_runs(warehouse: Warehouse, tables: list[str]) -> list[str]:
    """Runs of the warehouse: those with a manifest, and those with rows in any of `tables`."""
    runs = set(warehouse.runs("run_manifest"))
    for table in tables:
        runs.update(warehouse.runs(table))
    return sorted(runs)


def runs_to_export(warehouse: Warehouse, tables: list[str], run_id: str | None) -> list[str]:
    """The runs an export covers: the one asked for (ExportError when the warehouse has no such run), else every run."""
    runs = known_runs(warehouse, tables)
    if run_id is None:
        return sorted(set().union(*(warehouse.runs(t) for t in tables))) if tables else []
    if run_id not in runs:
        raise ExportError(f"unknown run {run_id!r}; runs in {warehouse.root}: {', '.join(runs) or 'none'}")
    return [run_id]


def _is_nested(dtype: pl.DataType) -> bool:
    return isinstance(dtype, (pl.List, pl.Array, pl.Struct))


def json_text(column: str) -> pl.Expr:
    """A nested column as compact JSON text (struct fields in stored order), null where the value is null."""
    # json_encode is a struct method: wrap the value as {"v": value} and cut the wrapper off again.
    encoded = pl.struct(pl.col(column).alias("v")).struct.json_encode()
    inner = encoded.str.strip_prefix('{"v":').str.strip_suffix("}")
    return pl.when(pl.col(column).is_null()).then(None).otherwise(inner).alias(column)


def flat(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with every list and struct column as JSON text, so CSV loses nothing."""
    nested = [name for name, dtype in frame.schema.items() if _is_nested(dtype)]
    return frame.with_columns(json_text(name) for name in nested) if nested else frame


# A text cell a spreadsheet would read as a formula (=, +, -, @ after leading whitespace) or that starts with a tab or
# carriage return (OWASP's CSV injection list): written with a leading ' so it is read as text.
FORMULA_START = r"^(?:[\t\r]|\s*[=+\-@])"


def as_text_cells(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with every string cell that a spreadsheet would evaluate prefixed with a single quote."""
    text = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    return (
        frame.with_columns(
            pl.when(pl.col(name).str.contains(FORMULA_START))
            .then(pl.lit("'") + pl.col(name))
            .otherwise(pl.col(name))
            .alias(name)
            for name in text
        )
        if text
        else frame
    )


def stored_schema(warehouse: Warehouse, table: str) -> pa.Schema:
    """The Arrow schema the table is stored with."""
    delta = DeltaTable(warehouse.uri(table), storage_options=warehouse.storage_options or None)
    return delta.to_pyarrow_dataset().schema


def run_frames(warehouse: Warehouse, table: str, runs: list[str]) -> Iterator[tuple[str, pl.DataFrame]]:
    """(run, rows) of a table, one run at a time (memory bounded by the largest run), in the warehouse's row order."""
    for run_id in runs:
        frame = warehouse.read(table, run_id)
        if frame is not None:
            yield run_id, frame


def _encode(frame: pl.DataFrame, fmt: str, header: bool) -> bytes:
    """The frame as csv or jsonl bytes."""
    buffer = io.BytesIO()
    if fmt == "csv":
        # numbers stay numbers (a negative float is not a text cell); nested columns become JSON text first
        as_text_cells(flat(frame)).write_csv(buffer, include_header=header)
    elif fmt == "jsonl":
        frame.write_ndjson(buffer)
    else:
        raise ValueError(f"unknown file format {fmt!r}")
    return buffer.getvalue()


def write_table(
    warehouse: Warehouse, table: str, runs: list[str], fmt: str, out: BinaryIO | str, slice_rows: int = SLICE_ROWS
) -> int:
    """Write a table's rows of `runs` as csv or jsonl (to a binary stream) or parquet (to a path); the rows written."""
    if fmt == "parquet":
        return _write_parquet(warehouse, table, runs, out)
    rows, first = 0, True
    for _, frame in run_frames(warehouse, table, runs):
        # polars reports a closed pipe as a plain OSError; writing its bytes ourselves keeps it a BrokenPipeError,
        # which the command line turns into a quiet stop (`export … | head`)
        for part in frame.iter_slices(slice_rows) if frame.height else [frame]:
            out.write(_encode(part, fmt, header=first))
            first = False
        rows += frame.height
    if fmt == "csv" and first:
        # an export of no run still says which columns it would have had
        out.write(_encode(pl.from_arrow(stored_schema(warehouse, table).empty_table()), fmt, header=True))
    return rows


def _write_parquet(warehouse: Warehouse, table: str, runs: list[str], path: str) -> int:
    """One Parquet file with the stored Arrow schema, a row group per run."""
    schema = stored_schema(warehouse, table)
    rows = 0
    with pq.ParquetWriter(path, schema) as writer:
        for _, frame in run_frames(warehouse, table, runs):
            writer.write_table(frame.to_arrow().select(schema.names).cast(schema))
            rows += frame.height
    return rows
