"""Loaders for every input of docs/inputs.md; bad lines become reject rows, unusable locations raise InputError.

Case lines are read columnar first (pyarrow against a strict schema, polars for the contract's rules, orjson for the
free-form values); a line that read cannot vouch for is validated on its own, as every line once was, so the cases
and rejects are those of the per-line validation. The columnar helpers here serve the trace ingestion too.
"""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pydantic import BaseModel, ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.identifiers import HIDDEN_CHARACTER_REGEX, text_id_problem
from eval_pipeline.contracts.models import (
    MILESTONE_OPERATORS,
    Case,
    CorpusDoc,
    GatePolicy,
    GroundingLabel,
    QrelsJudgment,
    RetrievalPolicy,
    RunManifest,
    ToolRegistry,
)
from eval_pipeline.io.json_limits import MAX_JSON_DEPTH, UTF8_BOM, limit_breach, may_break_limits
from eval_pipeline.io.storage import InputError, Location
from eval_pipeline.io.strict_yaml import YamlDocument, YamlError, parse_yaml

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector while many small objects are built (it rescans them all otherwise)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def describe_validation_error(error: ValidationError) -> str:
    """A one-line reason naming each failing field, e.g. `attempt: Input should be a valid integer`."""
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "record"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    more = len(error.errors()) - 3
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def reject(run_id: str | None, kind: str, source_file: str, line: int, reason: str, **keys: Any) -> dict[str, Any]:
    """One reject row."""
    return {
        "run_id": run_id,
        "input_kind": kind,
        "source_file": source_file,
        "line": line,
        "reason": reason,
        "trace_id": _usable_id(keys.get("trace_id")),
        "case_id": _usable_id(keys.get("case_id")),
    }


def _usable_id(value: Any) -> str | None:
    """An id as a reject row may hold it: a valid text id, else None (a list, an object, a number or hidden characters
    are named in the reason instead)."""
    return value if text_id_problem(value) is None else None


def rejects_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A rejects frame from reject rows."""
    return pl.DataFrame(rows, schema=frames.REJECTS_SCHEMA, strict=False)


def parse_json_line(raw: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> tuple[dict | None, str | None]:
    """(object, None) for a JSON object line, (None, reason) otherwise (also NaN, numbers or nesting beyond the limits
    of json_limits)."""
    if len(raw) > max_line_bytes:
        return None, f"line of {len(raw)} bytes exceeds the {max_line_bytes}-byte limit"
    offset = 0
    if raw.startswith(UTF8_BOM):
        # the first line of a file saved "with BOM", or files concatenated with cat
        raw, offset = raw[len(UTF8_BOM) :], len(UTF8_BOM)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte offset {exc.start + offset}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        # Python's "Unterminated string starting at" names the column itself
        return None, f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno + offset}"
    except RecursionError:
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    # Python's json reads NaN, Infinity, 1e400 (as inf) and integers of any size; a second, exact pass only for lines
    # that may hold one
    if may_break_limits(raw):
        breach = limit_breach(text)
        if breach is not None:
            return None, breach
    if not isinstance(value, dict):
        return None, f"not a JSON object: a {type(value).__name__}"
    return value, None


def iter_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line bytes without the newline) for every line, blank ones included; no leading BOM."""
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        yield number, raw


@dataclass
class Loaded:
    """A loaded input: its frame and the rejects found while loading it."""

    frame: pl.DataFrame
    rejects: list[dict[str, Any]] = field(default_factory=list)


def _validate(model: type[BaseModel], value: Any) -> tuple[BaseModel | None, str | None]:
    try:
        return model.model_validate(value), None
    except ValidationError as exc:
        return None, describe_validation_error(exc)


def _config(model: type[BaseModel], document: YamlDocument, what: str) -> BaseModel:
    """A configuration file validated against its model; InputError at file:line:column of the first bad field."""
    if not isinstance(document.value, dict):
        found = "an empty file" if document.value is None else f"a {type(document.value).__name__}"
        raise InputError(f"{document.where(())}: not a valid {what}: expected a mapping, found {found}")
    try:
        return model.model_validate(document.value)
    except ValidationError as exc:
        first = exc.errors()[0].get("loc", ()) if exc.errors() else ()
        raise InputError(f"{document.where(first)}: not a valid {what}: {describe_validation_error(exc)}") from exc


def _jsonl_records(
    location: Location, folder: tuple[str, ...], model: type[BaseModel], kind: str
) -> tuple[list[tuple[str, int, BaseModel]], list[dict[str, Any]]]:
    records, rejects = [], []
    for name in location.files(*folder, suffixes=(".jsonl",)):
        source = "/".join([*folder, name])
        for number, raw in iter_lines(location.read_bytes(*folder, name)):
            if not raw.strip():
                continue
            value, reason = parse_json_line(raw)
            if value is not None:
                record, reason = _validate(model, value)
                if record is not None:
                    records.append((source, number, record))
                    continue
            rejects.append(reject(None, kind, source, number, reason or "invalid"))
    return records, rejects


# ---------------------------------------------------------------- work on forked workers

_inherited: tuple = ()


def fork_workers() -> int:
    """How many forked workers a large batch may use (1: none)."""
    # A daemonic process may not start children: a step in a Celery prefork worker (or any pool worker) runs in one.
    if "fork" not in mp.get_all_start_methods() or mp.current_process().daemon:
        return 1
    return min(os.cpu_count() or 1, 8)


def _inherit(payload: tuple) -> None:
    global _inherited
    _inherited = payload
    # Forked inside a Dagster step, a worker inherits the handler with which Dagster defers SIGTERM: it would
    # survive Pool.terminate(). The default action makes it stoppable again.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_part(task: tuple) -> object:
    part, start, stop = task
    return part(_inherited, start, stop)


class Forked:
    """part(payload, start, stop) for ranges covering `count` items, on forked workers that inherit the payload (never
    sent), started at once and collected by results(), so the caller works meanwhile.

    Parts run Python only: a worker must not start the thread pools of polars or pyarrow, whose locks the fork may
    have copied while held.
    """

    def __init__(self, part: Callable[[tuple, int, int], Any], payload: tuple, count: int):
        workers = fork_workers()
        size = max(1, -(-count // (workers * 4)))
        self._pool = mp.get_context("fork").Pool(workers, initializer=_inherit, initargs=(payload,))
        self._collected = False
        try:
            self._parts = self._pool.map_async(
                _run_part, [(part, i, min(i + size, count)) for i in range(0, count, size)]
            )
        except BaseException:
            self.close()
            raise

    def results(self) -> list:
        """Each part's result, in order."""
        try:
            parts = self._parts.get()
            self._pool.close()  # workers leave on their own once the queue is drained; no signal is needed
        except BaseException:
            self.close()
            raise
        self._pool.join()
        self._collected = True
        self._parts = None  # the payload goes with the pool
        return parts

    def close(self) -> None:
        """Stop the workers (when the results are not wanted)."""
        if not self._collected:
            self._collected = True
            self._pool.terminate()
            self._pool.join()

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def run_parts(part: Callable[[tuple, int, int], Any], payload: tuple, count: int, parallel_from: int) -> Forked | list:
    """part(payload, ...) over `count` items: on forked workers (a Forked) from `parallel_from` items on and with
    cores to spare, else at once in this process (a list of one result)."""
    if count >= parallel_from and fork_workers() > 1:
        return Forked(part, payload, count)
    return [part(payload, 0, count)]


def results_of(parts: Forked | list) -> list:
    """The results of run_parts."""
    return parts.results() if isinstance(parts, Forked) else parts


# ---------------------------------------------------------------- columnar reading of JSON lines

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


def each(column: pl.Expr, holds: pl.Expr) -> pl.Expr:
    """Whether every element of a list column holds (true for a null list)."""
    return column.list.eval(holds).list.all().fill_null(True)


def any_of(column: pl.Expr, holds: pl.Expr) -> pl.Expr:
    """Whether some element of a list column holds (false for a null list)."""
    return column.list.eval(holds).list.any().fill_null(False)


# ---------------------------------------------------------------- corpus, tools, cases


def require_corpus(location: Location, corpus_version: str) -> tuple[str, str]:
    """The corpus folder of a version; InputError when there is none."""
    folder = ("corpus", corpus_version)
    if not location.is_dir(*folder):
        raise InputError(f"corpus version {corpus_version!r} not found: no directory {location.uri_of(*folder)}")
    return folder


def load_corpus(location: Location, corpus_version: str) -> Loaded:
    """corpus/<version>/docs.jsonl as a corpus frame (a doc's `source` system null when the line gives none); a doc_id
    given again is a reject (the first is kept)."""
    folder = require_corpus(location, corpus_version)
    records, rejects = _jsonl_records(location, folder, CorpusDoc, "corpus")
    rows, first = [], {}
    for file, number, record in records:
        earlier = first.setdefault(record.doc_id, (file, number))
        if earlier != (file, number):
            rejects.append(
                reject(
                    None,
                    "corpus",
                    file,
                    number,
                    f"duplicate doc_id {record.doc_id!r} (first occurrence kept: {earlier[0]} line {earlier[1]})",
                )
            )
            continue
        # model_dump carries every CORPUS_SCHEMA field, `source` included
        rows.append({"corpus_version": corpus_version, **record.model_dump()})
    return Loaded(pl.DataFrame(rows, schema=frames.CORPUS_SCHEMA, strict=False), rejects)


def load_tool_registry(location: Location, environment_version: str) -> ToolRegistry:
    """tools/<version>/tools.yaml, strictly parsed and validated (unknown keys are errors)."""
    folder = ("tools", environment_version)
    name = next((n for n in ("tools.yaml", "tools.yml") if location.exists(*folder, n)), None)
    if name is None:
        raise InputError(
            f"tool registry {environment_version!r} not found: no {location.uri_of(*folder, 'tools.yaml')}"
        )
    document = parse_yaml(location.read_bytes(*folder, name), location.uri_of(*folder, name))
    return _config(ToolRegistry, document, "tool registry")


def load_tools(location: Location, environment_version: str | None) -> pl.DataFrame:
    """tools/<version>/tools.yaml as a tools frame (empty when the run names no environment)."""
    if not environment_version:
        return frames.empty(frames.TOOLS_SCHEMA)
    return frames.tools_frame_from_registry(load_tool_registry(location, environment_version))


def load_cases(location: Location, dataset_version: str) -> Loaded:
    """cases/<version>/*.yaml|*.jsonl as a cases frame; a bad case file or line is a reject."""
    folder = ("cases", dataset_version)
    if not location.is_dir(*folder):
        raise InputError(f"dataset version {dataset_version!r} not found: no directory {location.uri_of(*folder)}")
    parts: list[pl.DataFrame] = []
    rows: list[dict[str, Any]] = []  # cases of YAML files not yet in `parts`
    rejects: list[dict[str, Any]] = []
    seen: set[str] = set()
    with collector_paused():
        for name in location.files(*folder, suffixes=(".yaml", ".yml", ".jsonl")):
            source = "/".join([*folder, name])
            if name.endswith(".jsonl"):
                if rows:
                    parts.append(frames.cases_frame(rows))
                    rows = []
                frame, file_rejects = _jsonl_cases(location, (*folder, name), dataset_version, seen)
                parts.append(frame)
                rejects.extend(file_rejects)
                continue
            try:
                value = parse_yaml(location.read_bytes(*folder, name), source).value
            except YamlError as exc:
                # a broken case file is bad data, not bad configuration: a reject row, and the run goes on
                rejects.append(reject(None, "case", source, exc.line, f"invalid YAML: {exc}"))
                continue
            case, problem = _case_of(value, source, 1)
            if problem is not None:
                rejects.append(problem)
            elif case.case_id in seen:
                rejects.append(
                    reject(None, "case", source, 1, f"duplicate case_id {case.case_id!r}", case_id=case.case_id)
                )
            else:
                seen.add(case.case_id)
                rows.append(frames.case_row(case, dataset_version, source))
        if rows or not parts:
            parts.append(frames.cases_frame(rows))
        return Loaded(pl.concat(parts) if len(parts) > 1 else parts[0], rejects)


def _case_of(value: Any, source: str, line: int) -> tuple[Case | None, dict[str, Any] | None]:
    """A decoded case validated: (case, None), or (None, its reject row)."""
    if not isinstance(value, dict):
        return None, reject(None, "case", source, line, f"not a mapping: a {type(value).__name__}")
    case, reason = _validate(Case, value)
    if case is None:
        return None, reject(None, "case", source, line, reason or "invalid", case_id=value.get("case_id"))
    return case, None


def _case_of_line(raw: bytes, source: str, number: int) -> tuple[Case | None, dict[str, Any] | None]:
    """A case line validated one by one (the reference the columnar read is held to): (case, None) or (None, reject)."""
    case = None
    # pydantic's JSON parser accepts NaN, Infinity and numbers beyond a double: such lines take the slow path
    if not raw.startswith(UTF8_BOM) and not may_break_limits(raw):
        try:
            case = Case.model_validate_json(raw)
        except ValidationError:
            case = None
    if case is not None:
        return case, None
    # the slow path only for bad or suspicious lines, for a precise reason
    value, reason = parse_json_line(raw)
    if value is None:
        return None, reject(None, "case", source, number, reason or "invalid")
    return _case_of(value, source, number)


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


def _jsonl_cases(
    location: Location, path: tuple[str, ...], dataset_version: str, seen: set[str]
) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """The cases of one JSONL file, columnar first, and its reject rows; `seen` holds the case_ids of earlier files."""
    source = "/".join(path)
    raw = pl.Series(jsonl_lines(location.read_bytes(*path)), dtype=pl.Binary)
    positions, columnar = _columnar_cases(raw, dataset_version, source)
    taken = np.zeros(raw.len(), dtype=bool)
    taken[positions] = True
    rest = np.flatnonzero(~taken)
    valid: list[tuple[int, Case]] = []
    rejected: list[tuple[int, dict[str, Any]]] = []
    for position, line in zip(rest.tolist(), raw.gather(rest).to_list(), strict=True):
        if not line.strip():
            continue
        case, problem = _case_of_line(line, source, position + 1)
        if problem is not None:
            rejected.append((position, problem))
        else:
            valid.append((position, case))
    # a case_id given again is a reject wherever its lines were read: the first valid line keeps it
    order = pl.DataFrame(
        {
            "_pos": np.concatenate([positions, np.array([p for p, _ in valid], dtype=np.int64)]),
            "case_id": pl.concat(
                [columnar["case_id"], pl.Series([case.case_id for _, case in valid], dtype=pl.String)]
            ),
            "_columnar": np.concatenate([np.ones(positions.size, dtype=bool), np.zeros(len(valid), dtype=bool)]),
            "_row": np.concatenate([np.arange(positions.size), np.arange(len(valid))]),
        }
    ).sort("_pos")
    ids = order["case_id"]
    earlier = seen.intersection(ids.to_list())
    duplicate = (~ids.is_first_distinct() | ids.is_in(pl.Series(list(earlier), dtype=pl.String))).to_numpy()
    for position, case_id in order.filter(pl.Series(duplicate)).select("_pos", "case_id").iter_rows():
        rejected.append(
            (position, reject(None, "case", source, position + 1, f"duplicate case_id {case_id!r}", case_id=case_id))
        )
    kept = order.filter(pl.Series(~duplicate))
    seen.update(kept["case_id"].to_list())
    rejected.sort(key=lambda item: item[0])
    columnar_kept = kept.filter(pl.col("_columnar"))
    per_line_kept = kept.filter(~pl.col("_columnar"))
    if columnar_kept.height < columnar.height:
        columnar = columnar[columnar_kept["_row"]]
    frame = (
        pl.concat(
            [
                columnar.with_columns(_pos=columnar_kept["_pos"]),
                frames.cases_frame(
                    frames.case_row(valid[row][1], dataset_version, source) for row in per_line_kept["_row"].to_list()
                ).with_columns(_pos=per_line_kept["_pos"]),
            ]
        )
        .sort("_pos")
        .drop("_pos")
    )
    return frame, [problem for _, problem in rejected]


# A case line as the columnar read parses it: every field of the contract with a JSON type of its own; the free-form
# ones only as far as telling whether they are given, and with the right kind of JSON value.
_FREE_OBJECT = pa.struct([])
CASE_LINE_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("case_revision", pa.int64()),
        ("lanes", pa.list_(pa.string())),
        ("input", pa.string()),
        ("criticality", pa.string()),
        ("required_doc_ids", pa.list_(pa.string())),
        ("expected_answer_contains", pa.list_(pa.string())),
        ("reference_answer", pa.string()),
        ("expect_refusal", pa.bool_()),
        ("multi_hop", pa.bool_()),
        ("allowed_tools", pa.list_(pa.string())),
        ("forbidden_tools", pa.list_(pa.string())),
        ("tool_match", pa.string()),
        ("dependencies", pa.list_(pa.list_(pa.string()))),
        ("clock", pa.string()),
        ("fault", pa.struct([("kind", pa.string()), ("tool", pa.string())])),
        ("unsafe_after_fault", pa.list_(pa.string())),
        ("escalation_tools", pa.list_(pa.string())),
        ("reference_tool_calls", pa.list_(_FREE_OBJECT)),
        ("alternatives", pa.list_(pa.list_(_FREE_OBJECT))),
        ("fixtures", _FREE_OBJECT),
        ("milestones", _FREE_OBJECT),
        ("scope", _FREE_OBJECT),
    ]
)
_CASE_FREE_FORM = ("reference_tool_calls", "alternatives", "fixtures", "milestones", "scope")
_CASE_PARSE = pa_json.ParseOptions(explicit_schema=CASE_LINE_SCHEMA, unexpected_field_behavior="ignore")
# What pyarrow reads and Case.model_validate_json must not get (may_break_limits: NaN, Infinity, a surrogate escape,
# numbers that may pass a double or 64 bits), nor orjson (an integer beyond 64 bits it reads as a float).
_CASE_NOT_COLUMNAR = rf"NaN|Inf|\\u[dD]|[0-9]{{19}}|[0-9][eE]\+?[0-9]{{3}}|{NOT_COLUMNAR_BYTES}"
# Fields with a default that null may not replace (pyarrow reads a missing one and a null one alike).
_CASE_DEFAULTED = [
    "case_revision",
    "input",
    "criticality",
    "required_doc_ids",
    "expected_answer_contains",
    "expect_refusal",
    "multi_hop",
    "forbidden_tools",
    "tool_match",
    "dependencies",
    "unsafe_after_fault",
    "escalation_tools",
    "reference_tool_calls",
    "alternatives",
    "fixtures",
    "milestones",
]
_CASE_NULL_FOR_DEFAULT = null_for_default(_CASE_DEFAULTED)
# a line naming a field only the per-line path reads (or spelling a key with an escape) is decoded to see whether it
# has one
_PER_LINE_FIELDS = ("value_rules", "tags", "counterfactual_of", "changed_fact")
_MAY_NAME_VALUE_RULES = rf"{'|'.join(_PER_LINE_FIELDS)}|{ESCAPED_KEY}"
_STRING_LISTS = (
    "required_doc_ids",
    "expected_answer_contains",
    "allowed_tools",
    "forbidden_tools",
    "unsafe_after_fault",
    "escalation_tools",
)
_LITERALS = {"criticality": ["high", "normal"], "tool_match": ["strict_order", "unordered", "goal_only"]}
_FAULT_KINDS = ["tool_error", "empty", "timeout", "injected_instruction"]
_CASE_FREE_FORM_SCHEMA: dict[str, pl.DataType] = {
    "_row": pl.Int64,
    **{
        name: frames.CASES_SCHEMA[name]
        for name in ("reference_tool_calls", "alternatives", "fixtures_json", "milestones", "scope_json")
    },
}


def _columnar_cases(raw: pl.Series, dataset_version: str, source: str) -> tuple[np.ndarray, pl.DataFrame]:
    """The case lines a columnar read can vouch for, as (their positions, their rows of the cases frame): those that
    Case.model_validate_json would accept with the same values; the others are left to the per-line path."""
    text = lines_as_text(raw)
    candidates = columnar_candidates(raw, text, DEFAULT_MAX_LINE_BYTES, _CASE_NOT_COLUMNAR)
    lines = raw if candidates.size == raw.len() else raw.gather(candidates)
    # the free-form columns of every line that may have any, written on other cores while pyarrow reads the lines
    written = (
        candidates[text.gather(candidates).str.contains(_CASE_MAY_HAVE_FREE_FORM).to_numpy()]
        if candidates.size
        else candidates
    )
    parts = run_parts(_case_free_form_part, (raw.gather(written).to_list(),), written.size, _PARALLEL_FREE_FORM)
    with parts if isinstance(parts, Forked) else nullcontext():
        table, rows = read_json_lines(lines, _CASE_PARSE) if candidates.size else (None, candidates)
        del lines
        if table is None:
            return np.zeros(0, dtype=np.int64), frames.empty(frames.CASES_SCHEMA)
        positions = candidates[rows]
        given = np.zeros(table.num_rows, dtype=bool)
        left_out = np.zeros(table.num_rows, dtype=bool)  # a free-form field with a default, missing or null
        for name in _CASE_FREE_FORM:
            valid = pc.is_valid(table.column(name)).to_numpy(zero_copy_only=False)
            given |= valid
            if name in _CASE_DEFAULTED:
                left_out |= ~valid
        parsed = pl.from_arrow(table.drop_columns(list(_CASE_FREE_FORM)))
        holds = _case_holds(parsed, text, positions, left_out)
        given |= text.gather(positions).str.contains(_MAY_NAME_VALUE_RULES).to_numpy()
        del table, text
        written_rows = [row for part in results_of(parts) for row in part]
    free_form = np.flatnonzero(holds & given)
    # each line with free-form values has them written, or goes per line
    at = np.searchsorted(written, positions[free_form]).tolist()
    decoded = []
    for row, index in zip(free_form.tolist(), at, strict=True):
        written_row = written_rows[index] if index < len(written_rows) and written[index] == positions[row] else None
        if written_row is None:
            holds[row] = False
        else:
            decoded.append({"_row": row, **written_row})
    kept = np.flatnonzero(holds)
    free = frames.frame_from_rows(decoded, _CASE_FREE_FORM_SCHEMA)
    no_calls = pl.lit([], dtype=frames.CASES_SCHEMA["reference_tool_calls"])
    parsed = parsed.with_columns(_row=pl.int_range(parsed.height, dtype=pl.Int64))
    if kept.size < parsed.height:
        parsed = parsed[kept]
    frame = (
        parsed.join(free, on="_row", how="left", maintain_order="left")
        .select(
            pl.lit(dataset_version, dtype=pl.String).alias("dataset_version"),
            "case_id",
            pl.col("case_revision").fill_null(1),
            "lanes",
            pl.col("input").fill_null(""),
            pl.col("criticality").fill_null("normal"),
            *[
                pl.col(name).fill_null(pl.lit([], dtype=pl.List(pl.String)))
                for name in ("required_doc_ids", "expected_answer_contains")
            ],
            "reference_answer",
            pl.col("expect_refusal").fill_null(False),
            pl.col("multi_hop").fill_null(False),
            "allowed_tools",
            pl.col("forbidden_tools").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            pl.col("reference_tool_calls").fill_null(no_calls),
            pl.col("tool_match").fill_null("strict_order"),
            pl.col("alternatives").fill_null(pl.lit([], dtype=frames.CASES_SCHEMA["alternatives"])),
            pl.col("dependencies").fill_null(pl.lit([], dtype=frames.CASES_SCHEMA["dependencies"])),
            pl.col("fixtures_json").fill_null("{}"),
            "clock",
            pl.col("milestones").fill_null(pl.lit([], dtype=frames.CASES_SCHEMA["milestones"])),
            pl.col("fault").struct.field("kind").alias("fault_kind"),
            pl.col("fault").struct.field("tool").alias("fault_tool"),
            *[
                pl.col(name).fill_null(pl.lit([], dtype=pl.List(pl.String)))
                for name in ("unsafe_after_fault", "escalation_tools")
            ],
            "scope_json",
            pl.lit(None, dtype=pl.String).alias("value_rules_json"),
            pl.lit(source, dtype=pl.String).alias("source_file"),
            pl.lit([], dtype=frames.CASES_SCHEMA["tags"]).alias("tags"),
            pl.lit(None, dtype=pl.String).alias("counterfactual_of"),
            pl.lit(None, dtype=pl.String).alias("changed_fact"),
        )
        .cast(frames.CASES_SCHEMA)
    )
    return positions[kept], frame


def _case_holds(parsed: pl.DataFrame, text: pl.Series, positions: np.ndarray, left_out: np.ndarray) -> np.ndarray:
    """Per row of the columnar read (of line positions[row] of `text`; `left_out`: rows missing a free-form field
    with a default, or giving it as null), whether the Case contract holds beyond the types pyarrow checked: required
    fields present, values of the literals, pairs as dependencies, the RAG contract, and a null only where the field
    may be left out."""
    element = pl.element()
    lanes = pl.col("lanes")
    fault = pl.col("fault")
    checked = (
        parsed.lazy()
        .select(
            holds=(
                (pl.col("case_id").str.len_bytes() > 0).fill_null(False)
                & ~pl.col("case_id").str.contains(HIDDEN_CHARACTER_REGEX).fill_null(True)
                & (lanes.list.len() > 0).fill_null(False)
                & each(lanes, element.is_in(["rag", "agent"]).fill_null(False))
                & pl.all_horizontal(
                    pl.col(name).is_null() | pl.col(name).is_in(values) for name, values in _LITERALS.items()
                )
                & pl.all_horizontal(each(pl.col(name), element.is_not_null()) for name in _STRING_LISTS)
                & each(
                    pl.col("dependencies"),
                    (element.list.len() == 2).fill_null(False) & each(element, pl.element().is_not_null()),
                )
                & (
                    fault.is_null()
                    | (
                        fault.struct.field("kind").is_in(_FAULT_KINDS).fill_null(False)
                        & fault.struct.field("tool").is_not_null()
                    )
                )
                # a rag case names the documents to retrieve, or expects a refusal
                & (
                    ~lanes.list.contains("rag")
                    | (pl.col("required_doc_ids").list.len() > 0).fill_null(False)
                    | pl.col("expect_refusal").fill_null(False)
                )
            ),
            defaulted=pl.any_horizontal(pl.col(name).is_null() for name in parsed.columns if name in _CASE_DEFAULTED),
        )
        .collect()
    )
    holds = checked["holds"].fill_null(False).to_numpy().copy()
    defaulted = np.flatnonzero((checked["defaulted"].fill_null(True).to_numpy() | left_out) & holds)
    if defaulted.size:
        holds[defaulted[text.gather(positions[defaulted]).str.contains(_CASE_NULL_FOR_DEFAULT).to_numpy()]] = False
    return holds


_PARALLEL_FREE_FORM = 4_000
# a line with free-form values names them (or spells a key with an escape)
_CASE_MAY_HAVE_FREE_FORM = rf'"(?:{"|".join(_CASE_FREE_FORM)})"|{_MAY_NAME_VALUE_RULES}'


def _case_free_form_part(payload: tuple, start: int, stop: int) -> list[dict[str, Any] | None]:
    """The free-form columns of lines start..stop of the payload (the lines), None for a line left to the per-line
    path."""
    (lines,) = payload
    written: list[dict[str, Any] | None] = []
    with collector_paused():
        for line in lines[start:stop]:
            try:
                written.append(_case_free_form(orjson.loads(line)))
            except Exception:  # noqa: BLE001 - whatever the reason, the per-line path decides
                written.append(None)
    return written


class _NotColumnar(ValueError):
    """A free-form value the contract reads otherwise than as given, or refuses: the per-line path decides."""


def _case_free_form(value: dict) -> dict[str, Any]:
    """The free-form columns of a case row (as case_row writes them) from a decoded line the columnar read accepted;
    raises where Case would refuse or convert a value."""
    for name in _PER_LINE_FIELDS:
        if name in value:
            raise _NotColumnar(name)
    fixtures = value.get("fixtures", {})
    scope = value.get("scope")
    milestones = value.get("milestones", {})
    calls = value.get("reference_tool_calls", [])
    alternatives = value.get("alternatives", [])
    if type(fixtures) is not dict or (scope is not None and type(scope) is not dict) or type(milestones) is not dict:
        raise _NotColumnar("fixtures, scope or milestones")
    if (
        type(calls) is not list
        or type(alternatives) is not list
        or any(type(path) is not list for path in alternatives)
    ):
        raise _NotColumnar("reference_tool_calls or alternatives")
    return {
        "reference_tool_calls": [_tool_call(call) for call in calls],
        "alternatives": [[_tool_call(call) for call in path] for path in alternatives],
        "fixtures_json": frames.sorted_json(fixtures),
        "milestones": [_milestone(name, milestone) for name, milestone in milestones.items()],
        "scope_json": frames.canonical_json(scope) if scope is not None else None,
    }


def _tool_call(call: object) -> dict[str, Any]:
    """A TOOL_CALL row of a decoded ToolCall (strict: every value of its own JSON type)."""
    if type(call) is not dict:
        raise _NotColumnar("tool call")
    name, args, accepted, optional = (
        call.get("name"),
        call.get("args", {}),
        call.get("accepted"),
        call.get("optional", []),
    )
    if type(name) is not str or not name or type(args) is not dict:
        raise _NotColumnar("tool call name or args")
    if accepted is not None and (
        type(accepted) is not dict or any(type(values) is not list for values in accepted.values())
    ):
        raise _NotColumnar("accepted")
    if type(optional) is not list or any(type(item) is not str for item in optional):
        raise _NotColumnar("optional")
    if accepted and any(not values and name not in optional for name, values in accepted.items()):
        raise _NotColumnar("empty accepted values")
    return {
        "name": name,
        "args_json": frames.canonical_json(args),
        "accepted_json": frames.canonical_json(accepted) if accepted is not None else None,
        "optional": list(optional),
    }


_MILESTONE_KEYS = frozenset({"path", *MILESTONE_OPERATORS})
# the largest integer a float holds exactly: gte and lte read an integer as a float
_EXACT_FLOAT_INT = 2**53


def _milestone(name: str, milestone: object) -> dict[str, Any]:
    """A MILESTONE row of a decoded Milestone: a path and exactly one operator, whose operand Milestone keeps as given
    (or, for gte and lte, an integer as its float)."""
    if type(milestone) is not dict or not _MILESTONE_KEYS.issuperset(milestone):
        raise _NotColumnar("milestone")
    path = milestone.get("path")
    operators = [op for op in MILESTONE_OPERATORS if op in milestone]
    if type(path) is not str or not path or len(operators) != 1:
        raise _NotColumnar("milestone path or operator")
    operator = operators[0]
    operand = milestone[operator]
    if operator in ("exists", "absent") and operand is not None and type(operand) is not bool:
        raise _NotColumnar("milestone flag")
    if operator in ("gte", "lte") and operand is not None:
        if type(operand) is int and abs(operand) <= _EXACT_FLOAT_INT:
            operand = float(operand)
        elif type(operand) is not float:
            raise _NotColumnar("milestone bound")
    return {"name": name, "path": path, "op": operator, "value_json": frames.canonical_json(operand)}


# ---------------------------------------------------------------- runs


def list_runs(location: Location) -> list[str]:
    """Run ids: folders under traces/ that hold a run.yaml."""
    return [run for run in location.subdirs("traces") if location.exists("traces", run, "run.yaml")]


def load_manifest(location: Location, run_id: str) -> RunManifest:
    """traces/<run_id>/run.yaml, validated; its run_id must match the folder."""
    path = ("traces", run_id, "run.yaml")
    if not location.exists(*path):
        raise InputError(f"run {run_id!r} has no manifest: {location.uri_of(*path)} does not exist")
    manifest = _config(RunManifest, parse_yaml(location.read_bytes(*path), location.uri_of(*path)), "run manifest")
    if manifest.run_id != run_id:
        raise InputError(f"{location.uri_of(*path)} says run_id {manifest.run_id!r} but lives in folder {run_id!r}")
    return manifest


def trace_files(location: Location, run_id: str) -> list[str]:
    """The JSONL files of a run, sorted by name."""
    return location.files("traces", run_id, suffixes=(".jsonl",))


def check_input_paths(location: Location, manifest: RunManifest) -> None:
    """Resolve every input file a run reads without reading any: OutsideRootError for one (or its folder) that a
    symbolic link takes out of the data root."""
    folders = [
        ("traces", manifest.run_id),
        ("cases", manifest.dataset_version),
        ("corpus", manifest.corpus_version),
        ("labels", "qrels"),
        ("labels", "grounding"),
        ("policy",),
    ]
    if manifest.environment_version:
        folders.append(("tools", manifest.environment_version))
    for folder in folders:
        for name in location.files(*folder):
            location.join(*folder, name)


# ---------------------------------------------------------------- labels and policy


def grade_scale(location: Location) -> tuple[int, int]:
    """(lowest, highest) qrels grade of the data root's gate policy (`retrieval.grades`, default 0..2)."""
    try:
        return load_gate_policy(location).retrieval.grade_scale
    except InputError:
        # A broken policy is reported where it is loaded (the CLI's preflight, the gates step); the judgments are
        # still checked against the default scale rather than not at all.
        return RetrievalPolicy().grade_scale


def load_judgments(location: Location, grades: tuple[int, int] | None = None) -> Loaded:
    """labels/qrels/*.jsonl as a judgments frame; a grade outside the scale (default: the policy's) is a reject."""
    low, high = grades or grade_scale(location)
    records, rejects = _jsonl_records(location, ("labels", "qrels"), QrelsJudgment, "qrels_label")
    rows = []
    for source, number, record in records:
        if not low <= record.grade <= high:
            rejects.append(
                reject(
                    None,
                    "qrels_label",
                    source,
                    number,
                    f"grade {record.grade} is outside the grade scale {low}..{high} (retrieval.grades of the gate policy)",
                )
            )
            continue
        rows.append({**record.model_dump(), "source_file": source, "source_line": number})
    return Loaded(pl.DataFrame(rows, schema=frames.JUDGMENTS_SCHEMA, strict=False), rejects)


def load_grounding_labels(location: Location) -> Loaded:
    """labels/grounding/*.jsonl as a grounding-labels frame."""
    records, rejects = _jsonl_records(location, ("labels", "grounding"), GroundingLabel, "grounding_label")
    rows = [{**r.model_dump(), "source_file": s, "source_line": n} for s, n, r in records]
    return Loaded(pl.DataFrame(rows, schema=frames.GROUNDING_LABELS_SCHEMA, strict=False), rejects)


def parse_gate_policy(text: str | bytes, source: str = "gates.yaml") -> GatePolicy:
    """A validated gate policy; bad YAML, duplicate keys, unknown metrics or keys raise InputError (file:line:column)."""
    return _config(GatePolicy, parse_yaml(text, source), "gate policy")


def load_gate_policy(location: Location) -> GatePolicy:
    """policy/gates.yaml; without one, the default gates of docs/gates.md#the-gates."""
    path = ("policy", "gates.yaml")
    if not location.exists(*path):
        return default_gate_policy()
    return parse_gate_policy(location.read_bytes(*path), location.uri_of(*path))


def default_gate_policy() -> GatePolicy:
    """The default gates (docs/gates.md#the-gates)."""
    return GatePolicy.model_validate(
        {
            "version": "spec-default",
            "gates": [
                {
                    "name": "retrieval_recall",
                    "lane": "rag",
                    "metric": "recall_at_10",
                    "max_regression_points": 2,
                    "exclude": ["multi_hop", "quarantined"],
                    "owner": "retrieval",
                },
                {
                    "name": "agent_args_valid",
                    "lane": "agent",
                    "metric": "args_valid_rate",
                    "max_regression_points": 3,
                    "exclude": ["quarantined"],
                    "owner": "agent",
                },
                {
                    "name": "agent_pass_at_1",
                    "lane": "agent",
                    "metric": "pass_at_1",
                    "max_regression_points": 5,
                    "exclude": ["quarantined"],
                    "report_beside": ["pass_hat_k"],
                    "owner": "agent",
                },
                {
                    "name": "policy_violations",
                    "lane": "agent",
                    "metric": "policy_violations",
                    "max_new": 0,
                    "owner": "agent",
                },
                {
                    "name": "no_new_failures",
                    "lane": "all",
                    "metric": "no_new_failures",
                    "max_new_failures": 0,
                    "exclude": ["quarantined"],
                    "owner": "release",
                },
                {
                    "name": "grounding",
                    "lane": "rag",
                    "metric": "grounding_rate",
                    "max_regression_points": 2,
                    "requires_calibrated_judge": True,
                    "owner": "generation",
                },
            ],
        }
    )
