"""A metric's values in two versions of a warehouse table, side by side (Delta time travel)."""

from __future__ import annotations

import difflib

import polars as pl

from eval_pipeline.io.storage import open_location
from eval_pipeline.io.warehouse import Warehouse, sql_literal
from eval_pipeline.scoring.retrieval import side_by_side


def warehouse_tables(warehouse: Warehouse) -> list[str]:
    """Names of the tables under the warehouse root (the restricted area, which compare does not read, left out)."""
    root = open_location(warehouse.root)
    return [name for name in root.subdirs() if root.is_dir(name, "_delta_log")]


def _unknown(kind: str, name: str, where: str, known: list[str], list_all: bool = False) -> LookupError:
    """A LookupError naming what does not exist, the close names, and every name when asked or when none is close."""
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    hints = [f"did you mean {', '.join(close)}?"] if close else []
    if list_all or not close:
        hints.append(f"{kind}s: {', '.join(known) or 'none'}")
    return LookupError(f"{kind} {name} does not exist in {where}; {' '.join(hints)}")


def run_write_versions(warehouse: Warehouse, table: str, run_id: str) -> list[int]:
    """Table versions whose commit wrote this run's partition, oldest first."""
    versions = []
    literal = sql_literal(run_id)
    for entry in warehouse.history(table):
        operation = entry.get("operation", "")
        predicate = str((entry.get("operationParameters") or {}).get("predicate", ""))
        if operation in {"WRITE", "CREATE TABLE"} and (
            literal in predicate or entry.get("version") == 0 or not predicate
        ):
            versions.append(int(entry["version"]))
    return sorted(v for v in versions if _has_run(warehouse, table, run_id, v))


def _has_run(warehouse: Warehouse, table: str, run_id: str, version: int) -> bool:
    frame = warehouse.read(table, run_id, version=version, columns=["run_id"])
    return frame is not None and frame.height > 0


def metric_versions(
    warehouse: Warehouse,
    table: str,
    metric: str,
    run_id: str,
    from_version: int | None = None,
    to_version: int | None = None,
) -> tuple[pl.DataFrame, int, int]:
    """(side-by-side frame, old version, new version) for one run's rows of a table."""
    if not warehouse.exists(table):
        raise _unknown("table", table, warehouse.root, warehouse_tables(warehouse), list_all=True)
    # Checked before the history: a mistyped name is not a table with too few versions.
    columns = warehouse.columns(table)
    if metric not in columns:
        raise _unknown("column", metric, table, columns)
    writes = run_write_versions(warehouse, table, run_id)
    if to_version is None:
        if not writes:
            raise LookupError(f"run {run_id} has no rows in {table}")
        to_version = writes[-1]
    if from_version is None:
        earlier = [v for v in writes if v < to_version]
        if not earlier:
            raise LookupError(
                f"{table} holds a single write of run {run_id} (version {to_version}); nothing to compare"
            )
        from_version = earlier[-1]
    old = warehouse.read(table, run_id, version=from_version)
    new = warehouse.read(table, run_id, version=to_version)
    if old is None or new is None or metric not in old.columns or metric not in new.columns:
        raise ValueError(f"column {metric} is not in both versions of {table}")
    key = ("run_id", "trace_id") if "trace_id" in new.columns else ("run_id", "case_id")
    return side_by_side(old, new, metric, key), from_version, to_version
