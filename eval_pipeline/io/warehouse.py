"""The Delta Lake warehouse: every table partitioned by run_id, one partition overwritten per write, old versions readable."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import polars as pl
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from eval_pipeline.io.storage import is_url, storage_options_from_env

RESTRICTED_AREA = "_restricted"
PARTITION_COLUMN = "run_id"


def sql_literal(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _writable(frame: pl.DataFrame) -> pl.DataFrame:
    """Columns Delta can store: all-null columns become strings, nested nulls likewise."""

    def fix(dtype: pl.DataType) -> pl.DataType:
        if dtype == pl.Null:
            return pl.String
        if isinstance(dtype, pl.List):
            return pl.List(fix(dtype.inner))
        if isinstance(dtype, pl.Array):
            return pl.List(fix(dtype.inner))
        if isinstance(dtype, pl.Struct):
            return pl.Struct({f.name: fix(f.dtype) for f in dtype.fields})
        return dtype

    casts = {name: fix(dtype) for name, dtype in frame.schema.items() if fix(dtype) != dtype}
    return frame.cast(casts) if casts else frame


@dataclass(frozen=True)
class Warehouse:
    """Tables under one root (local directory or object-store URL)."""

    root: str
    storage_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def at(cls, root: str | os.PathLike) -> Warehouse:
        """A warehouse at a root, with object-store credentials from the environment."""
        text = os.fspath(root)
        if not is_url(text):
            text = os.path.abspath(text)
        return cls(root=text, storage_options=storage_options_from_env() if is_url(text) else {})

    def uri(self, table: str, restricted: bool = False) -> str:
        parts = [self.root.rstrip("/"), RESTRICTED_AREA, table] if restricted else [self.root.rstrip("/"), table]
        return "/".join(parts)

    def _table(self, table: str, restricted: bool = False, version: int | None = None) -> DeltaTable | None:
        try:
            return DeltaTable(self.uri(table, restricted), version=version, storage_options=self.storage_options or None)
        except TableNotFoundError:
            return None

    def exists(self, table: str, restricted: bool = False) -> bool:
        return self._table(table, restricted) is not None

    def version(self, table: str, restricted: bool = False) -> int | None:
        """The latest version of a table, None when it does not exist."""
        delta = self._table(table, restricted)
        return None if delta is None else delta.version()

    def history(self, table: str, restricted: bool = False) -> list[dict]:
        """Commit history of a table, newest first."""
        delta = self._table(table, restricted)
        return [] if delta is None else delta.history()

    def write_partition(
        self,
        table: str,
        frame: pl.DataFrame,
        run_id: str,
        *,
        restricted: bool = False,
        within: dict[str, str] | None = None,
    ) -> int:
        """Replace the rows of one run (and, with `within`, of one value of other columns) as a new table version."""
        if PARTITION_COLUMN not in frame.columns:
            frame = frame.with_columns(pl.lit(run_id, dtype=pl.String).alias(PARTITION_COLUMN))
        frame = _writable(frame)
        stray = frame.filter(pl.col(PARTITION_COLUMN) != run_id).height
        if stray:
            raise ValueError(f"{stray} rows of {table} belong to another run than {run_id!r}")
        predicate = " AND ".join(
            f"{column} = {sql_literal(value)}" for column, value in {PARTITION_COLUMN: run_id, **(within or {})}.items()
        )
        uri = self.uri(table, restricted)
        for attempt in range(5):
            try:
                if self._table(table, restricted) is None:
                    # Merge even here: the other lane may create the table between the check and this append.
                    write_deltalake(uri, frame.to_arrow(), partition_by=[PARTITION_COLUMN], mode="append",
                                    schema_mode="merge", storage_options=self.storage_options or None)
                else:
                    write_deltalake(uri, frame.to_arrow(), partition_by=[PARTITION_COLUMN], mode="overwrite",
                                    predicate=predicate, schema_mode="merge", storage_options=self.storage_options or None)
                break
            except CommitFailedError:
                # Two lanes may replace their own rows of one table at once. deltalake retries a commit whose
                # version was taken by a non-conflicting writer itself; what reaches here is a logical conflict
                # (metadata or protocol changed, e.g. both lanes creating the table), settled by writing again.
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
        return self.version(table, restricted)

    def read(
        self,
        table: str,
        run_id: str | None = None,
        *,
        restricted: bool = False,
        version: int | None = None,
        within: dict[str, str] | None = None,
        columns: list[str] | None = None,
    ) -> pl.DataFrame | None:
        """Rows of a table (one run, or all), at the latest or a given version; None when the table does not exist."""
        if self._table(table, restricted, version) is None:
            return None
        scan = pl.scan_delta(self.uri(table, restricted), version=version, storage_options=self.storage_options or None)
        for column, value in {**({PARTITION_COLUMN: run_id} if run_id is not None else {}), **(within or {})}.items():
            scan = scan.filter(pl.col(column) == value)
        if columns is not None:
            scan = scan.select(columns)
        return scan.collect()

    def columns(self, table: str, restricted: bool = False) -> list[str]:
        """Column names of a table ([] when it does not exist)."""
        delta = self._table(table, restricted)
        return [] if delta is None else [field.name for field in delta.schema().fields]

    def runs(self, table: str, restricted: bool = False) -> list[str]:
        """Run ids that have rows in a table."""
        frame = self.read(table, restricted=restricted, columns=[PARTITION_COLUMN])
        return [] if frame is None else sorted(frame[PARTITION_COLUMN].unique().to_list())
