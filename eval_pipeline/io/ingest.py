"""Trace batches: raw lines into the restricted area, then validated traces and one reject row per bad line.

Each line is validated against the Trace contract one by one (pydantic, in Rust); the accepted lines are then
parsed together by pyarrow's JSON reader, so only the free-form values (tool args, results, final state) pass
through Python, where they are written in canonical form. Whatever a step cannot hold (a NaN, an integer beyond 64
bits, a contract field given twice, nesting beyond the limit) makes its line a reject, never a failed batch: every
non-blank line is exactly one trace or one reject.
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.models import Trace
from eval_pipeline.io.json_limits import SUSPECT_PATTERN, UTF8_BOM, limit_breach
from eval_pipeline.io.loaders import (
    DEFAULT_MAX_LINE_BYTES,
    collector_paused,
    describe_validation_error,
    parse_json_line,
    reject,
    rejects_frame,
    trace_files,
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
LINE_SCHEMA = pa.schema([
    ("trace_id", pa.string()), ("case_id", pa.string()), ("case_revision", pa.int64()), ("attempt", pa.int64()),
    ("status", pa.string()), ("error", pa.string()), ("input", pa.string()),
    ("retrieval", pa.list_(pa.struct([("round", pa.int64()), ("tool", pa.string()), ("variant", pa.string()),
                                      ("query", pa.string()), ("candidates", pa.list_(_DOC)), ("hits", pa.list_(_DOC))]))),
    ("context", pa.list_(pa.struct([("doc_id", pa.string()), ("text", pa.string()), ("tokens", pa.int64())]))),
    ("answer", pa.struct([("text", pa.string()), ("refused", pa.bool_()),
                          ("citations", pa.list_(pa.struct([("doc_id", pa.string()), ("quote", pa.string()),
                                                            ("claim_index", pa.int64())])))])),
    ("steps", pa.list_(pa.struct([("index", pa.int64()), ("kind", pa.string()), ("tool", pa.string()), ("status", pa.string()),
                                  ("error", pa.string()), ("dispatched", pa.struct([("tool", pa.string())])),
                                  ("content", pa.string())]))),
    ("usage", pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("cost_usd", pa.float64()),
                         ("latency_ms", pa.float64())])),
])
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
        pending: list[bytes] = []
        first_line = 1
        tail = b""
        for block in location.iter_blocks("traces", run_id, name):
            pieces = (tail + block).split(b"\n")
            tail = pieces.pop()
            pending.extend(pieces)
            while len(pending) >= chunk_lines:
                yield _raw_frame(run_id, source, first_line, pending[:chunk_lines])
                first_line += chunk_lines
                pending = pending[chunk_lines:]
        if tail:
            pending.append(tail)
        if pending:
            yield _raw_frame(run_id, source, first_line, pending)


def _raw_frame(run_id: str, source: str, first_line: int, lines: list[bytes]) -> pl.DataFrame:
    lines = [raw[:-1] if raw.endswith(b"\r") else raw for raw in lines]
    # The byte-order mark some editors write at the start of a UTF-8 file belongs to the file, not to its line
    # (files joined with cat carry one at the start of a later line too).
    lines = [raw[len(UTF8_BOM):] if raw.startswith(UTF8_BOM) else raw for raw in lines]
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
        columns[2].append(frames.sorted_json([{"path": c.path, "before": c.before, "after": c.after} for c in step.state_diff])
                          if step.state_diff is not None else None)
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
        return ("reject", f"a tool argument, result or final state cannot be stored: {exc}", trace.trace_id, trace.case_id)
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
    """trace_id and case_id of a decoded line, each when it is a string that is also valid text."""
    found = []
    for key in ("trace_id", "case_id"):
        text = value.get(key)
        try:
            found.append(text if isinstance(text, str) and text.encode("utf-8") else None)
        except UnicodeEncodeError:
            found.append(None)
    return found[0], found[1]


_PARALLEL_LINES = 40_000
_lines_for_workers: list[bytes] = []
_suspects_for_workers: list[bool] = []


def _check_range(bounds: tuple[int, int, int]) -> list[Checked | None]:
    start, stop, max_line_bytes = bounds
    with collector_paused():
        return [_check_line(raw, max_line_bytes, suspect)
                for raw, suspect in zip(_lines_for_workers[start:stop], _suspects_for_workers[start:stop], strict=True)]


def suspect_lines(raw: pl.Series) -> list[bool]:
    """Per line, whether it may break a JSON limit (one RE2 pass over the whole column, in Arrow)."""
    if raw.len() == 0:
        return []
    return pc.match_substring_regex(raw.to_arrow(), SUSPECT_PATTERN).fill_null(False).to_pylist()


def _worker_signals() -> None:
    # Forked inside a Dagster step, a worker inherits the handler with which Dagster defers SIGTERM: it would
    # survive Pool.terminate(). The default action makes it stoppable again.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _check_lines(raws: list[bytes], max_line_bytes: int, suspects: list[bool] | None = None) -> list[Checked | None]:
    """Every line checked; large batches on every core (forked workers read the lines they inherit)."""
    suspects = [True] * len(raws) if suspects is None else suspects
    workers = min(os.cpu_count() or 1, 8)
    if len(raws) < _PARALLEL_LINES or workers < 2 or "fork" not in mp.get_all_start_methods():
        with collector_paused():
            return [_check_line(raw, max_line_bytes, suspect) for raw, suspect in zip(raws, suspects, strict=True)]
    global _lines_for_workers, _suspects_for_workers
    _lines_for_workers, _suspects_for_workers = raws, suspects
    try:
        size = -(-len(raws) // (workers * 4))
        bounds = [(i, min(i + size, len(raws)), max_line_bytes) for i in range(0, len(raws), size)]
        pool = mp.get_context("fork").Pool(workers, initializer=_worker_signals)
        try:
            checked = [checked for part in pool.map(_check_range, bounds) for checked in part]
            pool.close()  # workers leave on their own once the queue is drained; no signal is needed
            return checked
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()
    finally:
        _lines_for_workers, _suspects_for_workers = [], []


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
    """Validate each raw line against the Trace contract and the run's cases (SPEC §11 'Trace files').

    Chunks of one run are parsed in file order with the same `seen` set, so a duplicate in a later chunk is caught.
    """
    revisions = cases if isinstance(cases, dict) else case_revisions(cases)
    seen = set() if seen is None else seen
    sources, numbers, raws = (raw_lines[c].to_list() for c in ("source_file", "line", "raw"))
    checked_lines = _check_lines(raws, max_line_bytes, suspect_lines(raw_lines["raw"]))
    valid = [i for i, checked in enumerate(checked_lines) if checked is not None and checked[0] == "ok"]
    table, rows_of, unreadable = columnar_parse([raws[i] for i in valid])
    row_of_line = {valid[position]: row for position, row in rows_of.items()}
    columnar_reasons = {valid[position]: reason for position, reason in unreadable.items()}
    kept_rows: list[int] = []
    kept: list[tuple[str, int]] = []
    free_form: list[tuple[list[list[str | None]], str | None]] = []
    rejected = []
    blank = 0
    with collector_paused():
        for index, (source, number, checked) in enumerate(zip(sources, numbers, checked_lines, strict=True)):
            if checked is None:
                blank += 1
                continue
            if checked[0] == "reject":
                _, reason, trace_id, case_id = checked
                rejected.append(reject(run_id, "trace", source, number, reason, trace_id=trace_id, case_id=case_id))
                continue
            _, trace_id, case_id, case_revision, texts = checked
            keys = {"trace_id": trace_id, "case_id": case_id}
            expected_revision = revisions.get(case_id)
            if index in columnar_reasons:
                rejected.append(reject(run_id, "trace", source, number, columnar_reasons[index], **keys))
            elif expected_revision is None:
                rejected.append(reject(run_id, "trace", source, number, f"unknown case_id {case_id!r}", **keys))
            elif case_revision is not None and case_revision != expected_revision:
                rejected.append(reject(run_id, "trace", source, number,
                                       f"case_revision {case_revision} does not match case {case_id!r} revision "
                                       f"{expected_revision}", **keys))
            elif trace_id in seen:
                rejected.append(reject(run_id, "trace", source, number,
                                       f"duplicate trace_id {trace_id!r} (first occurrence kept)", **keys))
            else:
                seen.add(trace_id)
                kept_rows.append(row_of_line[index])
                kept.append((source, number))
                free_form.append(texts)
    return ParsedTraces(lines_to_frame(table, kept_rows, kept, free_form, run_id), rejects_frame(rejected), blank)


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


def lines_to_frame(table: pa.Table | None, kept_rows: list[int], kept: list[tuple[str, int]],
                   free_form: list[tuple[list[list[str | None]], str | None]], run_id: str) -> pl.DataFrame:
    """The kept rows of the columnar parse as one canonical traces frame (TRACES_SCHEMA)."""
    if table is None or not kept_rows:
        return frames.empty(frames.TRACES_SCHEMA)
    if kept_rows != list(range(table.num_rows)):
        table = table.take(pa.array(kept_rows, type=pa.int64()))
    parsed = pl.from_arrow(table).with_row_index("_row")
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
        answer.struct.field("citations").fill_null(pl.lit([], dtype=frames.TRACES_SCHEMA["citations"])).alias("citations"),
        "steps",
        pl.Series("final_state_json", [final for _, final in free_form], dtype=pl.String),
        pl.col("usage").struct.field("input_tokens"),
        pl.col("usage").struct.field("output_tokens"),
        pl.col("usage").struct.field("cost_usd"),
        pl.col("usage").struct.field("latency_ms"),
        pl.Series("source_file", [s for s, _ in kept], dtype=pl.String),
        pl.Series("source_line", [n for _, n in kept], dtype=pl.Int64),
    )
    return _with_step_free_form(frame, free_form).drop("_row").cast(frames.TRACES_SCHEMA)


def _with_step_free_form(frame: pl.DataFrame, free_form: list[tuple[list[list[str | None]], str | None]]) -> pl.DataFrame:
    """Steps in the canonical STEP shape, their free-form fields taken from the validated models."""
    steps = frame.select("_row", "steps").filter(pl.col("steps").list.len() > 0)
    if steps.height == 0:
        return frame.with_columns(pl.col("steps").cast(frames.TRACES_SCHEMA["steps"]))
    rows = steps["_row"].to_list()
    texts = pl.DataFrame({
        "_row": pl.Series([r for r in rows for _ in free_form[r][0][0]], dtype=pl.UInt32),
        **{name: pl.Series([v for r in rows for v in free_form[r][0][i]], dtype=pl.String)
           for i, name in enumerate(FREE_FORM_STEP_FIELDS)},
    })
    exploded = steps.explode("steps").unnest("steps")
    exploded = pl.concat([exploded, texts.drop("_row")], how="horizontal").with_columns(
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
