"""The Delta Lake warehouse: tables partitioned by run_id, a partition overwritten per write, old versions readable."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from eval_pipeline.io.read_cache import READS
from eval_pipeline.io.storage import is_url, within

RESTRICTED_AREA = "_restricted"
PARTITION_COLUMN = "run_id"


# Columns that give the rows of an input-line table (raw lines, traces, rejects) their order: run, file, line.
LINE_ORDER = ((PARTITION_COLUMN, "source_file", "source_line"), (PARTITION_COLUMN, "source_file", "line"))
ORDER_COLUMNS = frozenset(column for order in LINE_ORDER for column in order)


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


def _hashable(wanted: Mapping[str, object]) -> tuple:
    """A read's row filters as a key: each column with its value, or its set of values."""
    return tuple(
        (column, frozenset(value) if isinstance(value, list | tuple | set) else value)
        for column, value in sorted(wanted.items())
    )


def _retry_conflicts(write: Callable[[], int], tries: int = 5) -> int:
    """Run a Delta write, writing again (after a short pause) when its commit lost a logical conflict; what the
    write returned (the table's version it made)."""
    for attempt in range(tries - 1):
        try:
            return write()
        except CommitFailedError:
            time.sleep(0.2 * (attempt + 1))
    return write()


_DONE = object()


def _prefetched(batches: Iterable, depth: int = 2) -> Iterator:
    """The items of `batches`, produced on a worker thread a few ahead of the consumer.

    Delta's writer pulls batches from inside its async runtime, where reading another Delta table (its runtime
    again) is refused; produced on a thread of their own, batches may read any table, and compute overlaps the write.
    The thread starts here, when called, so the first batches are ready before the writer asks for them.
    """
    pending: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in batches:
                while not stop.is_set():
                    try:
                        pending.put(item, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            pending.put(_DONE)
        except BaseException as exc:  # handed to the consumer, which raises it
            pending.put(exc)

    worker = threading.Thread(target=produce, name="warehouse-batches", daemon=True)
    worker.start()

    def consume() -> Iterator:
        try:
            while (item := pending.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            worker.join(timeout=5)

    return consume()


class FrameBatches:
    """A table produced batch after batch (bounded memory); written as one commit. `rows` counts what was consumed."""

    def __init__(self, batches: Iterable[pl.DataFrame], schema: Mapping[str, pl.DataType]) -> None:
        self._batches = batches
        self.schema = dict(schema)
        self.rows = 0

    def __iter__(self) -> Iterator[pl.DataFrame]:
        for batch in self._batches:
            self.rows += batch.height
            yield batch


@dataclass(frozen=True)
class TableBatches:
    """One run's rows of a table, read batch after batch each time it is iterated."""

    warehouse: Warehouse
    table: str
    run_id: str
    restricted: bool = False
    columns: tuple[str, ...] | None = None
    batch_rows: int = 100_000

    def __iter__(self) -> Iterator[pl.DataFrame]:
        return self.warehouse.read_batches(
            self.table,
            self.run_id,
            restricted=self.restricted,
            columns=list(self.columns) if self.columns else None,
            batch_rows=self.batch_rows,
        )

    def select(self, *columns: str) -> TableBatches:
        """The same batches with only these columns read."""
        return TableBatches(self.warehouse, self.table, self.run_id, self.restricted, columns, self.batch_rows)


@dataclass(frozen=True)
class Warehouse:
    """Tables under one root (local directory or object-store URL)."""

    root: str
    storage_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def at(cls, root: str | os.PathLike, storage_options: Mapping[str, str] | None = None) -> Warehouse:
        """A warehouse at a root; `storage_options`: the object-store credentials of a URL root, which the edge reads
        (io.storage.storage_options_from_env of its environment)."""
        text = os.fspath(root)
        if not is_url(text):
            text = os.path.abspath(text)
        return cls(root=text, storage_options=dict(storage_options or {}) if is_url(text) else {})

    def uri(self, table: str, restricted: bool = False) -> str:
        parts = [self.root.rstrip("/"), RESTRICTED_AREA, table] if restricted else [self.root.rstrip("/"), table]
        path = "/".join(parts)
        if not is_url(path):
            within(path, os.path.realpath(self.root))  # a linked table folder would be read and written outside
        return path

    def _table(self, table: str, restricted: bool = False, version: int | None = None) -> DeltaTable | None:
        try:
            return DeltaTable(
                self.uri(table, restricted), version=version, storage_options=self.storage_options or None
            )
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
        frame: pl.DataFrame | FrameBatches,
        run_id: str,
        *,
        restricted: bool = False,
        within: dict[str, str] | None = None,
    ) -> int:
        """Replace the rows of one run (and, with `within`, of one value of other columns) as a new table version."""
        if isinstance(frame, FrameBatches):
            return self._write_batches(table, frame, run_id, restricted, within)
        if PARTITION_COLUMN not in frame.columns:
            frame = frame.with_columns(pl.lit(run_id, dtype=pl.String).alias(PARTITION_COLUMN))
        frame = _writable(frame)
        stray = frame.filter(pl.col(PARTITION_COLUMN) != run_id).height
        if stray:
            raise ValueError(f"{stray} rows of {table} belong to another run than {run_id!r}")
        predicate = " AND ".join(
            f"{column} = {sql_literal(value)}" for column, value in {PARTITION_COLUMN: run_id, **(within or {})}.items()
        )
        # Two lanes may replace their own rows of one table at once. deltalake retries a commit whose version was
        # taken by a non-conflicting writer itself; what reaches here is a logical conflict (metadata or protocol
        # changed, e.g. both lanes creating the table), settled by writing again.
        # one record batch: deltalake encodes the batches of a write concurrently and may store them out of order
        arrow = frame.rechunk().to_arrow()
        return _retry_conflicts(lambda: self._replace(table, arrow, restricted, predicate))

    def _replace(self, table: str, data, restricted: bool, predicate: str) -> int:
        """Append to a new table, else replace the rows matching `predicate`; new columns are merged into the schema.
        The table's version the write made."""
        # Merge even when appending: the other lane may create the table between the check and this write.
        delta = self._table(table, restricted)
        if delta is not None and delta.metadata().partition_columns != [PARTITION_COLUMN]:
            self._partition_by_run(table, restricted, delta)
            delta = self._table(table, restricted)
        # An existing table is written through the one just opened, not opened again, and then holds the version
        # this write made (a writer of another run's rows may have committed since).
        write_deltalake(
            self.uri(table, restricted) if delta is None else delta,
            data,
            partition_by=[PARTITION_COLUMN],
            mode="append" if delta is None else "overwrite",
            predicate=None if delta is None else predicate,
            schema_mode="merge",
            storage_options=(self.storage_options or None) if delta is None else None,
        )
        created = delta if delta is not None else self._table(table, restricted)
        if created is None:
            raise TableNotFoundError(f"{table} is not there after it was written")
        return created.version()

    def _write_batches(
        self, table: str, batches: FrameBatches, run_id: str, restricted: bool, within: dict[str, str] | None
    ) -> int:
        """Stream batches into one commit; a generator cannot be replayed, so a conflicting commit is not retried."""
        stamps = {PARTITION_COLUMN: run_id, **(within or {})}
        template = pl.DataFrame(schema=batches.schema)
        template = template.with_columns(
            pl.lit(v, dtype=pl.String).alias(k) for k, v in stamps.items() if k not in template.columns
        )
        arrow_schema = _writable(template).to_arrow().schema

        def arrow_batches() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                batch = batch.with_columns(pl.lit(v, dtype=pl.String).alias(k) for k, v in stamps.items())
                yield from _writable(batch).select(template.columns).to_arrow().cast(arrow_schema).to_batches()

        reader = pa.RecordBatchReader.from_batches(arrow_schema, _prefetched(arrow_batches()))
        predicate = " AND ".join(f"{column} = {sql_literal(value)}" for column, value in stamps.items())
        return self._replace(table, reader, restricted, predicate)

    def _partition_by_run(self, table: str, restricted: bool, delta: DeltaTable) -> None:
        """Rewrite a table written unpartitioned (judge_verdicts before it became an asset of each run) as partitioned
        by run, rows kept, so replacing one run's rows is possible; one new version, earlier ones stay readable."""
        rows = delta.to_pyarrow_table()
        write_deltalake(
            self.uri(table, restricted),
            rows,
            partition_by=[PARTITION_COLUMN],
            mode="overwrite",
            schema_mode="overwrite",
            storage_options=self.storage_options or None,
        )

    def scan(self, table: str) -> pl.LazyFrame | None:
        """A lazy scan of a whole table at its latest version; None when it does not exist."""
        if self._table(table) is None:
            return None
        return pl.scan_delta(self.uri(table), storage_options=self.storage_options or None)

    def read_batches(
        self,
        table: str,
        run_id: str,
        *,
        restricted: bool = False,
        columns: list[str] | None = None,
        batch_rows: int = 100_000,
    ) -> Iterator[pl.DataFrame]:
        """One run's rows of a table as frames of about `batch_rows` rows, in storage order (a streamed write may have
        stored its batches in any order; `read` restores the order of line tables)."""
        delta = self._table(table, restricted)
        if delta is None:
            return
        dataset = delta.to_pyarrow_dataset()
        pending: list[pa.RecordBatch] = []
        size = 0
        for batch in dataset.to_batches(
            filter=pc.field(PARTITION_COLUMN) == run_id, columns=columns, batch_size=batch_rows
        ):
            pending.append(batch)
            size += batch.num_rows
            if size >= batch_rows:
                yield pl.from_arrow(pa.Table.from_batches(pending))
                pending, size = [], 0
        if pending:
            yield pl.from_arrow(pa.Table.from_batches(pending))

    def read(
        self,
        table: str,
        run_id: str | None = None,
        *,
        restricted: bool = False,
        version: int | None = None,
        within: dict[str, str | list[str]] | None = None,
        columns: list[str] | None = None,
    ) -> pl.DataFrame | None:
        """Rows of a table (one run, or all), at the latest or a given version; None when the table does not exist.

        `within` keeps the rows whose column equals a value, or is one of a list of values (filtered in the scan)."""
        delta = self._table(table, restricted, version)
        if delta is None:
            return None
        uri, at = self.uri(table, restricted), delta.version()
        wanted = {**({PARTITION_COLUMN: run_id} if run_id is not None else {}), **(within or {})}
        key = (uri, delta.metadata().id, at, _hashable(wanted), None if columns is None else tuple(columns))
        if (kept := READS.get(key)) is not None:
            return kept
        # The frame kept is of the version its key names. A local table is scanned through the DeltaTable just opened,
        # not opened again; an object store's by its URI, so that polars' own credential provider (profiles, SSO) is
        # not dropped, as it is for a DeltaTable passed in.
        scan = (
            pl.scan_delta(uri, version=at, storage_options=self.storage_options or None)
            if is_url(uri)
            else pl.scan_delta(delta)
        )
        for column, value in wanted.items():
            scan = scan.filter(
                pl.col(column).is_in(list(value)) if isinstance(value, list | tuple | set) else pl.col(column) == value
            )
        if columns is not None:
            scan = scan.select(columns)
        frame = scan.collect()
        order = next((key for key in LINE_ORDER if set(key) <= set(frame.columns)), None)
        # tables of input lines are streamed in batches that deltalake may store in any order: read in file order
        frame = frame if order is None else frame.sort(order, maintain_order=True)
        READS.put(key, frame)
        return frame

    def columns(self, table: str, restricted: bool = False) -> list[str]:
        """Column names of a table ([] when it does not exist)."""
        delta = self._table(table, restricted)
        return [] if delta is None else [field.name for field in delta.schema().fields]

    def rows(self, table: str, run_id: str, restricted: bool = False) -> int | None:
        """One run's row count from the table's file statistics (no data is read); None when the table does not exist
        or a file of the run has no count."""
        delta = self._table(table, restricted)
        if delta is None:
            return None
        actions = pa.table(delta.get_add_actions(flatten=True))
        column = f"partition.{PARTITION_COLUMN}"
        if column not in actions.column_names:
            return None
        counts = actions.filter(pc.equal(actions[column], run_id))["num_records"]
        return None if counts.null_count else int(pc.sum(counts).as_py() or 0)

    def runs(self, table: str, restricted: bool = False) -> list[str]:
        """Run ids that have rows in a table."""
        frame = self.read(table, restricted=restricted, columns=[PARTITION_COLUMN])
        return [] if frame is None else sorted(frame[PARTITION_COLUMN].unique().to_list())
