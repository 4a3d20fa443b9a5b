"""Reading a Langfuse observation export into traces: the blob-storage export (JSONL, CSV or Parquet, gzip or not,
snake_case columns) and the public API or UI export (a JSON list, an API page `{"data": [...]}`, a trace with its
`observations`; camelCase fields). The file is read columnar (polars) and grouped by trace; only the trace being
converted is held as Python objects (importers.langfuse turns each into an attempt)."""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from eval_pipeline.importers.common import ImporterError, parses_as_json
from eval_pipeline.importers.source import Unreadable
from eval_pipeline.io.json_errors import invalid_json, json_problem

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_LONG_FRACTION = re.compile(r"\.(\d{6})\d+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INPUT_TOKENS = ("input", "input_tokens", "prompt_tokens")
_OUTPUT_TOKENS = ("output", "output_tokens", "completion_tokens")
_TOTAL_COST = ("calculated_total_cost", "total_cost", "total_price")


def snake(name: str) -> str:
    """A field name in snake_case (Langfuse's API writes camelCase, its blob export snake_case)."""
    return _CAMEL.sub(r"_\1", name).lower()


@dataclass(slots=True)
class Observation:
    """One Langfuse observation, its JSON fields decoded."""

    row: int
    id: str
    type: str
    name: str | None
    parent: str | None
    is_root: bool  # the export's is_root_observation: an app root the SDK marked, even with a parent
    start_ns: int | None
    end_ns: int | None
    input: Any
    output: Any
    metadata: dict[str, Any]
    trace_metadata: dict[str, Any]
    level: str | None
    status_message: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None


@dataclass
class ExportTrace:
    """The rows of one trace: its observations, its trace-level rows, and what could not be read."""

    key: str
    record: int
    observations: list[Observation] = field(default_factory=list)
    trace_rows: list[dict[str, Any]] = field(default_factory=list)
    defects: list[str] = field(default_factory=list)


# ---- values ------------------------------------------------------------------------------------------------------


def decoded(value: Any) -> Any:
    """A JSON-text field as its JSON value (an object, array or string); any other value as it is."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def mapping(value: Any) -> dict[str, Any]:
    """A map field as a dict: a JSON object, its JSON text, or Parquet's list of {key, value} entries."""
    value = decoded(value)
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(e, dict) and "key" in e for e in value):
        return {str(e["key"]): decoded(e.get("value")) for e in value}
    return {}


def number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value) if isinstance(value, str) and value.strip() else None
    except ValueError:
        return None


def first_number(values: Mapping[str, Any], keys: Sequence[str]) -> float | None:
    return next((n for n in (number(values.get(k)) for k in keys) if n is not None), None)


def _ns(value: Any) -> int | None:
    """A timestamp as nanoseconds since the epoch: ISO 8601 text (UTC when it has no offset), a datetime, or a
    number of seconds, milliseconds, microseconds or nanoseconds (told apart by size)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int | float) and not isinstance(value, bool):
        scale = next(
            s
            for limit, s in ((1e17, 1), (1e14, 1_000), (1e11, 1_000_000), (0, 1_000_000_000))
            if abs(value) >= limit or limit == 0
        )
        return int(value * scale)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(_LONG_FRACTION.sub(r".\1", value.strip()))
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not a timestamp") from None
    if not isinstance(value, datetime):
        raise ValueError(f"a timestamp is a {type(value).__name__}")
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def text_id(value: Any) -> str | None:
    """An identifier field as text (ids may arrive as numbers); None when absent or a boolean."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    return str(value) if isinstance(value, str | int) else None


# ---- reading the file --------------------------------------------------------------------------------------------


def _document_rows(document: Any) -> list[Any]:
    """The rows of a JSON document: a list of them, an API page `{data: [...]}`, or one trace with its observations."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        return document["data"]
    if isinstance(document, dict) and isinstance(document.get("trace"), dict):
        return [{**document["trace"], "observations": document.get("observations") or []}]
    return [document]


def _lines_frame(lines: pl.Series) -> pl.DataFrame:
    """JSON rows as a frame of their text, with the row number and the trace each belongs to."""
    frame = pl.DataFrame({"__line": lines}).with_row_index("__row", offset=1)
    field_of = pl.col("__line").str.json_path_match
    trace = pl.coalesce(
        field_of("$.trace_id"), field_of("$.traceId"), pl.when(field_of("$.type").is_null()).then(field_of("$.id"))
    )
    return frame.with_columns(trace.alias("__trace"))


def _table_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV or Parquet rows with snake_case columns, the row number and the trace each belongs to."""
    renamed: dict[str, str] = {}
    for column in frame.columns:
        if snake(column) not in frame.columns and snake(column) not in renamed.values():
            renamed[column] = snake(column)
    frame = frame.rename(renamed).with_row_index("__row", offset=1)
    keys = [pl.col("trace_id").cast(pl.String)] if "trace_id" in frame.columns else []
    if "id" in frame.columns:
        trace_row = pl.col("type").is_null() if "type" in frame.columns else pl.lit(True)
        keys.append(pl.when(trace_row).then(pl.col("id").cast(pl.String)))
    return frame.with_columns((pl.coalesce(keys) if keys else pl.lit(None, pl.String)).alias("__trace"))


def _raw_bytes(path: Path) -> tuple[str, bytes | None]:
    """(the name that tells the format, the decompressed bytes of a gzip file, else None: polars reads the path)."""
    if path.suffix.lower() == ".gz":
        try:
            return path.stem, gzip.decompress(path.read_bytes())
        except (OSError, EOFError) as exc:
            raise ImporterError(f"{path}: not a readable gzip file ({exc})") from exc
    return path.name, None


def _frame(path: Path) -> pl.DataFrame:
    """The file's rows as a frame: `__row`, `__trace`, and either `__line` (JSON) or the export's columns."""
    name, data = _raw_bytes(path)
    source: Any = io.BytesIO(data) if data is not None else path
    if data is not None:
        head = data[:4096]
    else:
        with path.open("rb") as handle:
            head = handle.read(4096)
    suffix = Path(name).suffix.lower()
    try:
        if head.startswith(b"PAR1") or suffix in (".parquet", ".pq"):
            return _table_frame(pl.read_parquet(source))
        stripped = head.lstrip()
        if suffix == ".csv" or not stripped.startswith((b"{", b"[")):
            return _table_frame(pl.read_csv(source, infer_schema=False))
        lines = pl.read_csv(
            source,
            has_header=False,
            separator="\x1f",
            quote_char=None,
            new_columns=["line"],
            schema={"line": pl.String},
            truncate_ragged_lines=True,
        )["line"]
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ImporterError(f"{path}: cannot read it as a Langfuse export ({exc})") from exc
    filled = lines.drop_nulls().filter(lines.drop_nulls().str.strip_chars() != "")
    if stripped.startswith(b"[") or filled.len() <= 1 or not parses_as_json(filled[0]):
        # one JSON document (an array, an API page, a trace download, pretty-printed or not)
        text = data if data is not None else path.read_bytes()
        try:
            rows = _document_rows(orjson.loads(text))
        except orjson.JSONDecodeError as exc:
            raise ImporterError(f"{path}: neither JSONL nor one JSON document ({json_problem(text)})") from exc
        lines = pl.Series("line", [orjson.dumps(r).decode() for r in rows], dtype=pl.String)
    return _lines_frame(lines)


def _row(values: dict[str, Any]) -> dict[str, Any] | str:
    """One row as a dict with snake_case keys, or why it cannot be read."""
    if "__line" in values:
        if values["__line"] is None or not values["__line"].strip():
            return "an empty line"
        try:
            raw = orjson.loads(values["__line"])
        except orjson.JSONDecodeError:
            return invalid_json(values["__line"])
        if not isinstance(raw, dict):
            return f"not a JSON object: a {type(raw).__name__}"
    else:
        raw = {k: v for k, v in values.items() if not k.startswith("__") and v is not None}
    return {snake(k): v for k, v in raw.items()}


def _observation(row: int, raw: Mapping[str, Any]) -> Observation:
    """One observation row; ValueError naming the field that cannot be read."""
    obs_id = text_id(raw.get("id"))
    if obs_id is None:
        raise ValueError("an observation without an id")
    usage = {snake(k): v for k, v in {**mapping(raw.get("usage")), **mapping(raw.get("usage_details"))}.items()}
    costs = {k: n for k, n in ((k, number(v)) for k, v in mapping(raw.get("cost_details")).items()) if n is not None}
    cost = costs.get("total", sum(costs.values()) if costs else first_number({**usage, **raw}, _TOTAL_COST))
    tokens = [
        first_number(usage, keys) if first_number(usage, keys) is not None else number(raw.get(keys[-1]))
        for keys in (_INPUT_TOKENS, _OUTPUT_TOKENS)
    ]
    try:
        start, end = _ns(raw.get("start_time")), _ns(raw.get("end_time"))
    except ValueError as exc:
        raise ValueError(f"observation {obs_id}: {exc}") from None
    return Observation(
        row=row,
        id=obs_id,
        type=str(raw.get("type") or "").upper(),
        name=raw.get("name") if isinstance(raw.get("name"), str) else None,
        parent=text_id(raw.get("parent_observation_id")),
        is_root=raw.get("is_root_observation") in (True, "true", "True"),
        start_ns=start,
        end_ns=end,
        input=decoded(raw.get("input")),
        output=decoded(raw.get("output")),
        metadata=mapping(raw.get("metadata")),
        trace_metadata=mapping(raw.get("trace_metadata")),
        level=str(raw["level"]).upper() if raw.get("level") else None,
        status_message=raw.get("status_message") or None,
        input_tokens=int(tokens[0]) if tokens[0] is not None else None,
        output_tokens=int(tokens[1]) if tokens[1] is not None else None,
        cost=cost,
    )


def _collect(trace: ExportTrace, row: int, raw: dict[str, Any], source_file: str) -> Iterator[Unreadable]:
    """Add one row to its trace: an observation, or a trace-level row with the observations nested in it."""
    observations = [raw]
    if raw.get("type") is None:
        nested = raw.pop("observations", None)
        trace.trace_rows.append({k: decoded(v) for k, v in raw.items()})
        observations = nested if isinstance(nested, list) else []
    for item in observations:
        try:
            if not isinstance(item, dict):
                raise ValueError(f"an observation is a {type(item).__name__}, not an object")
            trace.observations.append(_observation(row, {snake(k): v for k, v in item.items()}))
        except (ValueError, TypeError) as exc:
            trace.defects.append(f"row {row} could not be read: {exc}")
            yield Unreadable(source_file, row, str(exc), trace_id=trace.key)


def export_traces(path: Path) -> Iterator[ExportTrace | Unreadable]:
    """The file's traces in the order of their first row, each with all of its rows; an Unreadable for each row
    that names no trace or cannot be read."""
    frame = _frame(path)
    lost = frame.filter(pl.col("__trace").is_null())
    for values in lost.iter_rows(named=True):
        raw = _row(values)
        reason = (
            raw
            if isinstance(raw, str)
            else (
                "an observation without a trace_id"
                if raw.get("type") is not None
                else "a row with no trace_id, type or id: neither an observation nor a trace"
            )
        )
        yield Unreadable(path.name, values["__row"], reason)
    kept = (
        frame.filter(pl.col("__trace").is_not_null())
        .with_columns(pl.col("__row").min().over("__trace").alias("__first"))
        .sort("__first", "__row")
    )
    offset = 0
    for key, size in kept.group_by("__first", maintain_order=True).len().iter_rows():
        part = kept.slice(offset, size)
        offset += size
        trace = ExportTrace(part["__trace"][0], key)
        for values in part.iter_rows(named=True):
            raw = _row(values)
            if isinstance(raw, str):
                trace.defects.append(f"row {values['__row']} could not be read: {raw}")
                yield Unreadable(path.name, values["__row"], raw, trace_id=trace.key)
                continue
            yield from _collect(trace, values["__row"], raw, path.name)
        yield trace


__all__ = [
    "ExportTrace",
    "Observation",
    "decoded",
    "export_traces",
    "first_number",
    "mapping",
    "number",
    "snake",
    "text_id",
]
