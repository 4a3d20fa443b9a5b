"""Loaders for every input of SPEC §2; bad lines become reject rows, unusable locations raise InputError."""

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
from eval_pipeline.contracts.models import (
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
        "trace_id": keys.get("trace_id"),
        "case_id": keys.get("case_id"),
    }


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
        raw, offset = raw[len(UTF8_BOM):], len(UTF8_BOM)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte offset {exc.start + offset}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at column {exc.colno + offset}"
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
        data = data[len(UTF8_BOM):]
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


# ---------------------------------------------------------------- corpus, tools, cases


def require_corpus(location: Location, corpus_version: str) -> tuple[str, str]:
    """The corpus folder of a version; InputError when there is none."""
    folder = ("corpus", corpus_version)
    if not location.is_dir(*folder):
        raise InputError(f"corpus version {corpus_version!r} not found: no directory {location.uri_of(*folder)}")
    return folder


def load_corpus(location: Location, corpus_version: str) -> Loaded:
    """corpus/<version>/docs.jsonl as a corpus frame; a doc_id given again is a reject (the first is kept)."""
    folder = require_corpus(location, corpus_version)
    records, rejects = _jsonl_records(location, folder, CorpusDoc, "corpus")
    rows, first = [], {}
    for source, number, record in records:
        earlier = first.setdefault(record.doc_id, (source, number))
        if earlier != (source, number):
            rejects.append(reject(None, "corpus", source, number, f"duplicate doc_id {record.doc_id!r} "
                                  f"(first occurrence kept: {earlier[0]} line {earlier[1]})"))
            continue
        rows.append({"corpus_version": corpus_version, **record.model_dump()})
    return Loaded(pl.DataFrame(rows, schema=frames.CORPUS_SCHEMA, strict=False), rejects)


def load_tool_registry(location: Location, environment_version: str) -> ToolRegistry:
    """tools/<version>/tools.yaml, strictly parsed and validated (unknown keys are errors)."""
    folder = ("tools", environment_version)
    name = next((n for n in ("tools.yaml", "tools.yml") if location.exists(*folder, n)), None)
    if name is None:
        raise InputError(f"tool registry {environment_version!r} not found: no {location.uri_of(*folder, 'tools.yaml')}")
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
    rows, rejects, seen = [], [], set()

    def accept(value: Any, source: str, line: int) -> None:
        if not isinstance(value, dict):
            rejects.append(reject(None, "case", source, line, f"not a mapping: a {type(value).__name__}"))
            return
        case, reason = _validate(Case, value)
        if case is None:
            rejects.append(reject(None, "case", source, line, reason or "invalid", case_id=value.get("case_id")))
        elif case.case_id in seen:
            rejects.append(reject(None, "case", source, line, f"duplicate case_id {case.case_id!r}", case_id=case.case_id))
        else:
            seen.add(case.case_id)
            rows.append(frames.case_row(case, dataset_version, source))

    def accept_line(raw: bytes, source: str, number: int) -> None:
        case = None
        # pydantic's JSON parser accepts NaN, Infinity and numbers beyond a double: such lines take the slow path
        if not raw.startswith(UTF8_BOM) and not may_break_limits(raw):
            try:
                case = Case.model_validate_json(raw)
            except ValidationError:
                case = None
        if case is None:
            # the slow path only for bad or suspicious lines, for a precise reason
            value, reason = parse_json_line(raw)
            if value is None:
                rejects.append(reject(None, "case", source, number, reason or "invalid"))
            else:
                accept(value, source, number)
            return
        if case.case_id in seen:
            rejects.append(reject(None, "case", source, number, f"duplicate case_id {case.case_id!r}", case_id=case.case_id))
        else:
            seen.add(case.case_id)
            rows.append(frames.case_row(case, dataset_version, source))

    with collector_paused():
        for name in location.files(*folder, suffixes=(".yaml", ".yml", ".jsonl")):
            source = "/".join([*folder, name])
            data = location.read_bytes(*folder, name)
            if name.endswith(".jsonl"):
                for number, raw in iter_lines(data):
                    if raw.strip():
                        accept_line(raw, source, number)
                continue
            try:
                value = parse_yaml(data, source).value
            except YamlError as exc:
                # a broken case file is bad data, not bad configuration: a reject row, and the run goes on
                rejects.append(reject(None, "case", source, exc.line, f"invalid YAML: {exc}"))
                continue
            accept(value, source, 1)
        return Loaded(frames.cases_frame(rows), rejects)


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
            rejects.append(reject(None, "qrels_label", source, number,
                                  f"grade {record.grade} is outside the grade scale {low}..{high} (retrieval.grades of the gate policy)"))
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
    """policy/gates.yaml; without one, the SPEC §8 defaults."""
    path = ("policy", "gates.yaml")
    if not location.exists(*path):
        return default_gate_policy()
    return parse_gate_policy(location.read_bytes(*path), location.uri_of(*path))


def default_gate_policy() -> GatePolicy:
    """The gates of SPEC §8."""
    return GatePolicy.model_validate(
        {
            "version": "spec-default",
            "gates": [
                {"name": "retrieval_recall", "lane": "rag", "metric": "recall_at_10", "max_regression_points": 2,
                 "exclude": ["multi_hop", "quarantined"], "owner": "retrieval"},
                {"name": "agent_args_valid", "lane": "agent", "metric": "args_valid_rate", "max_regression_points": 3,
                 "exclude": ["quarantined"], "owner": "agent"},
                {"name": "agent_pass_at_1", "lane": "agent", "metric": "pass_at_1", "max_regression_points": 5,
                 "exclude": ["quarantined"], "report_beside": ["pass_hat_k"], "owner": "agent"},
                {"name": "policy_violations", "lane": "agent", "metric": "policy_violations", "max_new": 0, "owner": "agent"},
                {"name": "no_new_failures", "lane": "all", "metric": "no_new_failures", "max_new_failures": 0,
                 "exclude": ["quarantined"], "owner": "release"},
                {"name": "grounding", "lane": "rag", "metric": "grounding_rate", "max_regression_points": 2,
                 "requires_calibrated_judge": True, "owner": "generation"},
            ],
        }
    )
