"""What every input loader shares (reject rows, JSON lines, validated records), and a run's manifest and files.

Bad lines become reject rows, unusable locations raise InputError (docs/inputs.md): the helpers here read JSON lines
and configuration files that way. The loaders of the other inputs live beside this module: corpus, tools and cases
in inputs, labels in labels, the gate policy in policy.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from pydantic import BaseModel, ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.identifiers import text_id_problem
from eval_pipeline.contracts.traces import RunManifest
from eval_pipeline.io.json_limits import MAX_JSON_DEPTH, UTF8_BOM, limit_breach, may_break_limits
from eval_pipeline.io.storage import InputError, Location
from eval_pipeline.io.strict_yaml import YamlDocument, parse_yaml

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


def validate_record(model: type[BaseModel], value: Any) -> tuple[BaseModel | None, str | None]:
    try:
        return model.model_validate(value), None
    except ValidationError as exc:
        return None, describe_validation_error(exc)


def validated_config(model: type[BaseModel], document: YamlDocument, what: str) -> BaseModel:
    """A configuration file validated against its model; InputError at file:line:column of the first bad field."""
    if not isinstance(document.value, dict):
        found = "an empty file" if document.value is None else f"a {type(document.value).__name__}"
        raise InputError(f"{document.where(())}: not a valid {what}: expected a mapping, found {found}")
    try:
        return model.model_validate(document.value)
    except ValidationError as exc:
        first = exc.errors()[0].get("loc", ()) if exc.errors() else ()
        raise InputError(f"{document.where(first)}: not a valid {what}: {describe_validation_error(exc)}") from exc


def jsonl_records(
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
                record, reason = validate_record(model, value)
                if record is not None:
                    records.append((source, number, record))
                    continue
            rejects.append(reject(None, kind, source, number, reason or "invalid"))
    return records, rejects


# ---------------------------------------------------------------- runs


def list_runs(location: Location) -> list[str]:
    """Run ids: folders under traces/ that hold a run.yaml."""
    return [run for run in location.subdirs("traces") if location.exists("traces", run, "run.yaml")]


def load_manifest(location: Location, run_id: str) -> RunManifest:
    """traces/<run_id>/run.yaml, validated; its run_id must match the folder."""
    path = ("traces", run_id, "run.yaml")
    if not location.exists(*path):
        raise InputError(f"run {run_id!r} has no manifest: {location.uri_of(*path)} does not exist")
    manifest = validated_config(
        RunManifest, parse_yaml(location.read_bytes(*path), location.uri_of(*path)), "run manifest"
    )
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
