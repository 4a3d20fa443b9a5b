"""Loaders of a run's corpus, tool registry and cases (docs/inputs.md); a bad doc, case file or case line is a reject.

Case lines are read columnar first (case_columnar); a line that read cannot vouch for is validated on its own, as
every line once was, so the cases and rejects are those of the per-line validation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import Case, CorpusDoc, ToolRegistry
from eval_pipeline.io.case_columnar import columnar_cases
from eval_pipeline.io.columnar import jsonl_lines
from eval_pipeline.io.json_limits import UTF8_BOM, may_break_limits
from eval_pipeline.io.loaders import (
    Loaded,
    collector_paused,
    jsonl_records,
    parse_json_line,
    reject,
    validate_record,
    validated_config,
)
from eval_pipeline.io.storage import InputError, Location
from eval_pipeline.io.strict_yaml import YamlError, parse_yaml


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
    records, rejects = jsonl_records(location, folder, CorpusDoc, "corpus")
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
    return validated_config(ToolRegistry, document, "tool registry")


def load_tools(location: Location, environment_version: str | None) -> pl.DataFrame:
    """tools/<version>/tools.yaml as a tools frame (empty when the run names no environment)."""
    if not environment_version:
        return frames.empty(frames.TOOLS_SCHEMA)
    return frames.tools_frame_from_registry(load_tool_registry(location, environment_version))


def require_cases(location: Location, dataset_version: str) -> tuple[str, str]:
    """The cases folder of a dataset version; InputError when there is none."""
    folder = ("cases", dataset_version)
    if not location.is_dir(*folder):
        raise InputError(f"dataset version {dataset_version!r} not found: no directory {location.uri_of(*folder)}")
    return folder


def load_cases(location: Location, dataset_version: str) -> Loaded:
    """cases/<version>/*.yaml|*.jsonl as a cases frame; a bad case file or line is a reject."""
    folder = require_cases(location, dataset_version)
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
    case, reason = validate_record(Case, value)
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


def _jsonl_cases(
    location: Location, path: tuple[str, ...], dataset_version: str, seen: set[str]
) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """The cases of one JSONL file, columnar first, and its reject rows; `seen` holds the case_ids of earlier files."""
    source = "/".join(path)
    raw = pl.Series(jsonl_lines(location.read_bytes(*path)), dtype=pl.Binary)
    positions, columnar = columnar_cases(raw, dataset_version, source)
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
