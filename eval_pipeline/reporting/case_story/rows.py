"""One case's tables as row dicts indexed by trace id, and frames built back from rows.

A story looks rows up a hundred times, and a polars query costs ~50 µs however few rows it has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import polars as pl

from eval_pipeline.reporting.case_story.tables import CaseTables, empty_frame

_EMPTY: dict[tuple, pl.DataFrame] = {}


def rows_frame(rows: list[dict], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Row dicts as a frame of this schema (other keys ignored): one construction instead of a query."""
    if rows:
        return pl.DataFrame(rows, schema=schema)
    # clearing a kept empty frame is a fifth of the cost of building one
    key = tuple(schema.items())
    if key not in _EMPTY:
        _EMPTY[key] = empty_frame(dict(schema))
    return _EMPTY[key].clear()


def nulls_first(value) -> tuple[bool, object]:
    """A sort key ordering None first, as polars sorts nulls."""
    return value is not None, value


def nulls_last(value) -> tuple[bool, object]:
    """A sort key ordering None last."""
    return value is None, value


def by_trace(rows: Iterable[dict]) -> dict[str, list[dict]]:
    """Rows by trace id, in order; a null id is left out, as a filter on it matches nothing."""
    index: dict[str, list[dict]] = {}
    for row in rows:
        if row["trace_id"] is not None:
            index.setdefault(row["trace_id"], []).append(row)
    return index


class CaseRows:
    """One case's tables as row dicts, each table converted once and indexed by trace id on first use."""

    def __init__(self, tables: CaseTables) -> None:
        self.tables = tables
        self._all: dict[str, list[dict]] = {}
        self._traces: dict[str, dict[str, list[dict]]] = {}
        self._schemas: dict[str, pl.Schema] = {}

    def all(self, name: str) -> list[dict]:
        """Every row of a table; none for a table the run lacks."""
        rows = self._all.get(name)
        if rows is None:
            frame = self.tables.frame(name)
            rows = self._all[name] = frame.to_dicts() if frame is not None else []
        return rows

    def of_trace(self, name: str, trace_id: str | None) -> list[dict]:
        """The rows of one trace in table order; none for a table without a trace_id column."""
        index = self._traces.get(name)
        if index is None:
            frame = self.tables.frame(name)
            index = self._traces[name] = (
                by_trace(self.all(name)) if frame is not None and "trace_id" in frame.columns else {}
            )
        return index.get(trace_id, []) if trace_id is not None else []

    def first(self, name: str, trace_id: str | None) -> dict | None:
        rows = self.of_trace(name, trace_id)
        return rows[0] if rows else None

    def schema(self, name: str) -> pl.Schema:
        """The column types of a table the run has (a frame builds its schema anew each time it is asked)."""
        if name not in self._schemas:
            self._schemas[name] = self.tables.frames[name].schema
        return self._schemas[name]
