"""What every importer shares: the summary, the tool registry, and writing the input files under a data root.

The input files are those of docs/inputs.md. Over 400 lines because the summary, source reading, registry
resolution and run writing are each small and used together by every importer; apart they would be modules of a
few functions each.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import BaseModel, ValidationError

from eval_pipeline.contracts.cases import Case, ToolRegistry
from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.contracts.identifiers import bounded_file_name, validate_identifier
from eval_pipeline.contracts.traces import RunManifest, Trace
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.io.loaders import describe_validation_error, load_manifest, reject
from eval_pipeline.io.storage import InputError, Location, open_location
from eval_pipeline.io.strict_yaml import load_yaml

DEFAULT_CORPUS_VERSION = "none"
REJECTS_FILE = "import_rejects.json"  # not .jsonl, so trace ingestion never reads it as traces

# Tools whose names say they only read: the registry an importer infers marks them read_only (the agent lane uses
# read_only for tool_selection, unnecessary calls and fault re-checks). Pass a real registry to override.
READ_ONLY_PREFIXES: tuple[str, ...] = (
    "get_",
    "search_",
    "list_",
    "find_",
    "lookup_",
    "check_",
    "read_",
    "fetch_",
    "query_",
    "view_",
    "show_",
    "describe_",
)
READ_ONLY_NAMES: tuple[str, ...] = ("calculate", "think")
ESCALATION_NAMES: tuple[str, ...] = ("transfer_to_human_agents", "escalate_to_human", "transfer_to_human")


class ImporterError(Exception):
    """The import cannot run (missing source, a run that already exists, a conflicting case); the message says why."""


# garbage-collector thresholds while an import reads and builds: its objects are freed by reference counting, and
# with the defaults the collector walked every live object ~30 times in a 10k-trace import (15-25 % of its time)
RARE_COLLECTIONS = (100_000, 50, 1000)
SHOWN = 10  # incomplete traces and rejects listed by name in the summary; the rest are counted


@dataclass
class ImportSummary:
    """What an import wrote, what it rejected and which traces it marked incomplete."""

    format: str
    source: str
    run_id: str
    data_root: str
    dataset_version: str
    environment_version: str
    corpus_version: str
    records: int = 0
    cases: int = 0
    traces: int = 0
    incomplete: list[dict[str, str]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    mode: str | None = None

    def lines(self) -> list[str]:
        """The human-readable summary the CLI prints."""
        out = [
            f"imported {self.format} {self.source} into run {self.run_id} under {self.data_root}",
            f"  records {self.records}, cases {self.cases}, traces {self.traces} "
            f"({len(self.incomplete)} incomplete), rejected {len(self.rejects)}",
            f"  dataset_version {self.dataset_version}, environment_version {self.environment_version}, "
            f"corpus_version {self.corpus_version}",
        ]
        out += [f"  wrote {name}" for name in self.files]
        out += [f"  incomplete {row['trace_id']}: {row['reason']}" for row in self.incomplete[:SHOWN]]
        if len(self.incomplete) > SHOWN:
            out.append(
                f"  ... and {len(self.incomplete) - SHOWN} more incomplete traces (status and error in the traces)"
            )
        out += [
            f"  rejected {row['source_file']} record {row['line']}: {row['reason']}" for row in self.rejects[:SHOWN]
        ]
        if len(self.rejects) > SHOWN:
            out.append(
                f"  ... and {len(self.rejects) - SHOWN} more rejected records "
                f"(all in traces/{self.run_id}/{REJECTS_FILE})"
            )
        out += [f"  note: {note}" for note in self.notes]
        return out


def slug(text: str) -> str:
    """A file-name-safe form of a label (letters, digits, '.', '_' and '-'; never '..')."""
    cleaned = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", text)).strip("-.")
    return cleaned or "import"


def guess_read_only(name: str) -> bool:
    """Whether an inferred tool is read-only, from its name (READ_ONLY_PREFIXES and READ_ONLY_NAMES)."""
    return name in READ_ONLY_NAMES or name.startswith(READ_ONLY_PREFIXES)


def inferred_tool(
    name: str,
    schema: Mapping[str, Any] | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    value_rules: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A registry entry for a tool the source only names (or defines without side-effect flags)."""
    tool = {
        "name": name,
        "description": description or "inferred by the importer from the calls it saw",
        "read_only": guess_read_only(name) if read_only is None else read_only,
        "destructive": False,
        "args": dict(schema) if schema else {"type": "object"},
    }
    if value_rules:
        tool["value_rules"] = copy.deepcopy(dict(value_rules))
    return tool


def load_registry_file(path: str | Path) -> dict[str, Any]:
    """A tools.yaml given on the command line, validated."""
    try:
        value = load_yaml(Path(path).read_bytes(), str(path))
    except OSError as exc:
        raise ImporterError(f"cannot read the tool registry {path}: {exc}") from exc
    except InputError as exc:
        raise ImporterError(str(exc)) from exc
    return _registry(value, str(path))


def _registry(value: Any, source: str) -> dict[str, Any]:
    try:
        return ToolRegistry.model_validate(value).model_dump(mode="json")
    except ValidationError as exc:
        raise ImporterError(f"{source} is not a valid tool registry: {describe_validation_error(exc)}") from exc


def existing_registry(location: Location, environment_version: str) -> dict[str, Any] | None:
    """tools/<environment_version>/tools.yaml when the data root already has it."""
    if not location.exists("tools", environment_version, "tools.yaml"):
        return None
    source = location.uri_of("tools", environment_version, "tools.yaml")
    try:
        value = load_yaml(location.read_bytes("tools", environment_version, "tools.yaml"), source)
    except InputError as exc:
        raise ImporterError(str(exc)) from exc
    return _registry(value, source)


def read_records(path: Path) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    """(record number, value) of the records of a file, and (number, reason) for the records that cannot be read.

    Decided by content, not by name: a file that parses as one JSON value is a JSON array (one record per element,
    numbered from 1) or a single record (a pretty-printed object, numbered by the line it starts on); otherwise it
    is JSONL, one record per non-blank line numbered by line, when its first line is a JSON value, when at least
    half of its lines are, or when it has one line. Anything else (a broken JSON array or pretty-printed object)
    raises ImporterError naming where the JSON breaks.
    """
    try:
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImporterError(f"cannot read {path}: {exc}") from exc
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return _json_lines(path, text, exc)
    except RecursionError as exc:
        raise ImporterError(f"{path} is not valid JSON: nested too deeply") from exc
    if isinstance(value, list):
        return list(enumerate(value, start=1)), []
    return [(text[: len(text) - len(text.lstrip())].count("\n") + 1, value)], []


def _json_lines(
    path: Path, text: str, whole: json.JSONDecodeError
) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    """The records of a file that is not one JSON value, read as JSONL; ImporterError when it is not JSONL either."""
    records: list[tuple[int, Any]] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            bad.append((number, f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"))
        except RecursionError:
            bad.append((number, "invalid JSON: nested too deeply"))
    first_ok = bool(records) and (not bad or records[0][0] < bad[0][0])
    broken_array = not first_ok and text.lstrip().startswith("[")
    if not broken_array and (first_ok or len(records) >= len(bad) or len(records) + len(bad) == 1):
        return records, bad
    what = "is not a valid JSON array" if broken_array else "is neither valid JSON nor JSONL"
    raise ImporterError(
        f"{path} {what}: {whole.msg.removesuffix(' at')} at line {whole.lineno} column {whole.colno} "
        f"({len(bad)} of {len(records) + len(bad)} lines are not JSON values on their own either)"
    )


@dataclass
class Started:
    """An import under way: its source, summary so far, the records read and the rejects found reading them."""

    path: Path
    stem: str
    summary: ImportSummary
    records: list[tuple[int, Any]]
    rejects: list[dict[str, Any]]


def start_import(fmt: str, source: str | Path, run: ImportRun) -> Started:
    """Read the source and settle the versions (dataset `<fmt>-<source stem>`, environment = dataset, corpus
    DEFAULT_CORPUS_VERSION, by default)."""
    run_id, data_root, environment_version = run.run_id, run.data_root, run.environment_version
    corpus_version = DEFAULT_CORPUS_VERSION if run.corpus_version is None else run.corpus_version
    path = Path(source)
    stem = slug(path.stem)
    dataset_version = run.dataset_version or f"{fmt}-{stem}"
    # these name folders under the data root: a path here would write outside it (docs/inputs.md#identifiers)
    try:
        validate_identifier(run_id, "run id")
        validate_identifier(dataset_version, "dataset version")
        if environment_version is not None:
            validate_identifier(environment_version, "environment version")
        validate_identifier(corpus_version, "corpus version")
    except ValueError as exc:
        raise ImporterError(str(exc)) from exc
    summary = ImportSummary(
        fmt, str(path), run_id, str(data_root), dataset_version, environment_version or dataset_version, corpus_version
    )
    records, unreadable = read_records(path)
    summary.records = len(records) + len(unreadable)
    rejects = [import_reject(run_id, fmt, path.name, number, reason) for number, reason in unreadable]
    return Started(path, stem, summary, records, rejects)


def contract_problem(model: type[BaseModel], value: Mapping[str, Any]) -> str | None:
    """Why a record breaks its input contract (docs/inputs.md), or None when it holds."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return describe_validation_error(exc)
    return None


def _validated(model: type[BaseModel], value: Mapping[str, Any], what: str) -> None:
    try:
        model.model_validate(value)
    except ValidationError as exc:
        # The importer built this record itself: failing its own contract is a bug, not bad input.
        raise ImporterError(
            f"internal error: the {what} built by the importer breaks its contract: {describe_validation_error(exc)}"
        ) from exc


@dataclass
class RunFiles:
    """Everything one import writes: the run manifest, its cases, traces, registry and rejects."""

    manifest: dict[str, Any]
    cases: list[dict[str, Any]]
    traces: list[dict[str, Any]]
    registry: dict[str, Any]
    trace_file: str
    rejects: list[dict[str, Any]]
    # trace lines already encoded and held to the trace contract, written instead of `traces` (an importer that
    # makes rejects of the traces that break it and keeps the others as bytes, not dicts, to stay small)
    encoded_traces: Iterable[bytes] | None = None
    # docs.jsonl of the new corpus version the run names, holding texts the source brought (written with the run)
    corpus_lines: bytes | None = None


def write_run(data_root: str | Path, files: RunFiles, overwrite: bool = False) -> list[str]:
    """Validate every record against the input contracts (docs/inputs.md) and write them under data_root; the
    written paths."""
    location = open_location(data_root)
    manifest = files.manifest
    run_id, dataset_version = manifest["run_id"], manifest["dataset_version"]
    environment_version, corpus_version = manifest["environment_version"], manifest["corpus_version"]
    _validated(RunManifest, manifest, "run manifest")
    _validated(ToolRegistry, files.registry, "tool registry")
    for case in files.cases:
        _validated(Case, case, f"case {case.get('case_id')}")
    for trace in files.traces:
        _validated(Trace, trace, f"trace {trace.get('trace_id')}")

    if location.exists("traces", run_id, "run.yaml") and not overwrite:
        raise ImporterError(
            f"run {run_id!r} already exists at {location.uri_of('traces', run_id)}; "
            "choose another --run or pass --force to replace it"
        )
    case_files = [(bounded_file_name(f"{slug(case['case_id'])}.yaml"), _yaml(case)) for case in files.cases]
    by_name: dict[str, str] = {}
    for case, (name, _) in zip(files.cases, case_files, strict=True):
        other = by_name.setdefault(name, case["case_id"])
        if other != case["case_id"]:
            raise ImporterError(
                f"cases {other!r} and {case['case_id']!r} would both be written to {name}; "
                "rename one of them in the source"
            )
    for name, text in case_files:
        if (
            location.exists("cases", dataset_version, name)
            and location.read_text("cases", dataset_version, name) != text
        ):
            raise ImporterError(
                f"{location.uri_of('cases', dataset_version, name)} exists with other content; "
                "import into another --dataset-version"
            )

    written: list[str] = []

    def put(text: str, *parts: str) -> None:
        location.write_bytes(text.encode("utf-8"), *parts)
        written.append("/".join(parts))

    if overwrite:
        for name in location.files("traces", run_id, suffixes=(".jsonl",)):
            location.fs.delete_file(location.join("traces", run_id, name))
        if location.exists("traces", run_id, REJECTS_FILE):  # the rejects of the run replaced, not of this import
            location.fs.delete_file(location.join("traces", run_id, REJECTS_FILE))
    for name, text in case_files:
        put(text, "cases", dataset_version, name)
    if not location.exists("tools", environment_version, "tools.yaml"):
        put(_yaml(files.registry), "tools", environment_version, "tools.yaml")
    if files.corpus_lines is not None:
        location.write_bytes(files.corpus_lines, "corpus", corpus_version, "docs.jsonl")
        written.append(f"corpus/{corpus_version}/docs.jsonl")
    elif not location.is_dir("corpus", corpus_version):
        # agent-only runs still name a corpus version; an empty one lets the pipeline load it like any other
        put("", "corpus", corpus_version, "docs.jsonl")
    lines = files.encoded_traces if files.encoded_traces is not None else map(json_line, files.traces)
    location.write_chunks(_batched(lines), "traces", run_id, files.trace_file)
    written.append(f"traces/{run_id}/{files.trace_file}")
    if files.rejects:
        put(json.dumps(files.rejects, indent=2, ensure_ascii=False) + "\n", "traces", run_id, REJECTS_FILE)
    put(_yaml(manifest), "traces", run_id, "run.yaml")
    return written


def _batched(lines: Iterable[bytes], size: int = 1 << 20) -> Iterator[bytes]:
    """Lines joined into chunks of about `size` bytes (fewer, larger writes)."""
    batch: list[bytes] = []
    held = 0
    for line in lines:
        batch.append(line)
        held += len(line)
        if held >= size:
            yield b"".join(batch)
            batch, held = [], 0
    if batch:
        yield b"".join(batch)


def parses_as_json(text: str | bytes) -> bool:
    """Whether the text is one JSON value (how the importers tell JSONL from one document spanning lines)."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def json_line(value: Any) -> bytes:
    """One JSONL line; orjson for speed, json for what orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value) + b"\n"
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode("utf-8") + b"\n"


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=120)


def manifest(
    run_id: str,
    candidate: str,
    dataset_version: str,
    environment_version: str,
    corpus_version: str,
    model: str | None,
    mode: str,
    baseline_run_id: str | None = None,
) -> dict[str, Any]:
    """The run.yaml of an imported run."""
    baseline = {"baseline_run_id": baseline_run_id} if baseline_run_id else {}
    return {
        "run_id": run_id,
        "candidate": candidate,
        "model": model,
        "corpus_version": corpus_version,
        "environment_version": environment_version,
        "dataset_version": dataset_version,
        "mode": mode,
        **baseline,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def import_mode(data_root: str | Path, dataset_version: str, mode: str | None, baseline_run_id: str | None) -> str:
    """An imported run is exploratory (never gated) unless it names a baseline run of the same dataset."""
    if baseline_run_id is None:
        return mode or "exploratory"
    location = open_location(str(data_root))
    if not location.exists("traces", baseline_run_id, "run.yaml"):
        raise ImporterError(f"baseline run {baseline_run_id} is not under {location.uri_of('traces')}")
    baseline = load_manifest(location, baseline_run_id)
    if baseline.dataset_version != dataset_version:
        raise ImporterError(
            f"baseline run {baseline_run_id} is of dataset {baseline.dataset_version}, this import of "
            f"{dataset_version}: a run is gated only against a baseline of the same dataset"
        )
    if mode == "exploratory":
        raise ImporterError("--baseline gates the run; it cannot be combined with --mode exploratory")
    return "gate"


def import_reject(run_id: str, fmt: str, source: str, number: int, reason: str, **keys: Any) -> dict[str, Any]:
    """A reject row (the trace_rejects columns) for a record the importer could not turn into a trace."""
    return reject(run_id, f"import:{fmt}", source, number, reason, **keys)


def same_case(first: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two case dicts state the same contract."""
    return canonical_json(first) == canonical_json(other)


def registry_names(registry: Mapping[str, Any]) -> set[str]:
    """Names of the tools of a registry dict."""
    return {tool["name"] for tool in registry["tools"]}


def escalation_tools(names: Iterable[str]) -> list[str]:
    """The registry's tools that hand the conversation to a human (ESCALATION_NAMES)."""
    return sorted(set(names) & set(ESCALATION_NAMES))


def resolve_registry(
    location_root: str | Path,
    environment_version: str,
    tools_file: str | Path | None,
    defined: Mapping[str, dict[str, Any]],
    called: Sequence[str],
    roles: Mapping[str, Mapping[str, Any]] | None = None,
    roles_origin: str = "",
) -> tuple[dict[str, Any], set[str] | None, str]:
    """(registry, its tool names or None when it was inferred from every called tool, where the registry came from).

    Precedence: the data root's tools/<environment_version>/tools.yaml, then --tools, then the source's own tool
    definitions; with none of these the registry is inferred from the calls: a tool's fields come from `roles`
    (name -> read_only, value_rules) when it is there, else read_only is guessed from its name.
    """
    existing = existing_registry(open_location(location_root), environment_version)
    if existing is not None:
        return existing, registry_names(existing), f"the existing tools/{environment_version}/tools.yaml"
    if tools_file is not None:
        registry = load_registry_file(tools_file)
        registry["environment_version"] = environment_version
        return registry, registry_names(registry), str(tools_file)
    if defined:
        return (
            {"environment_version": environment_version, "tools": list(defined.values())},
            set(defined),
            "the source's tool definitions",
        )
    roles = roles or {}
    tools = [inferred_tool(name, **roles.get(name, {})) for name in sorted(set(called))]
    how = f"read_only from {roles_origin}, else guessed from names" if roles else "read_only guessed from names"
    return {"environment_version": environment_version, "tools": tools}, None, f"inferred from the calls ({how})"


def unknown_tools_note(called: Iterable[str], known: set[str] | None) -> str | None:
    """The summary note naming the called tools that the registry lacks (an agent failure the pipeline scores), or
    None."""
    missing = Counter(name for name in called if known is not None and name not in known)
    if not missing:
        return None
    listed = ", ".join(f"{name} ({count} call{'s' if count > 1 else ''})" for name, count in sorted(missing.items()))
    return (
        f"calls of tools missing from the tool registry, imported as calls (the pipeline fails them at tool_selection, "
        f"reason unknown_tool): {listed}"
    )


def usage_record(value: Any) -> dict[str, Any] | None:
    """The trace `usage` (docs/inputs.md#traces) of an attempt from a dict with input_tokens|prompt_tokens,
    output_tokens|completion_tokens, cost_usd and latency_ms (whole numbers of dollars or milliseconds become
    floats)."""
    if not isinstance(value, dict):
        return None
    usage = {
        "input_tokens": value.get("input_tokens", value.get("prompt_tokens")),
        "output_tokens": value.get("output_tokens", value.get("completion_tokens")),
        "cost_usd": value.get("cost_usd"),
        "latency_ms": value.get("latency_ms"),
    }
    for key in ("cost_usd", "latency_ms"):
        if isinstance(usage[key], int) and not isinstance(usage[key], bool):
            usage[key] = float(usage[key])
    return usage


def finish_import(
    summary: ImportSummary,
    run: ImportRun,
    cases: list[dict[str, Any]],
    traces: list[dict[str, Any]],
    registry: dict[str, Any],
    rejects: list[dict[str, Any]],
    *,
    trace_file: str,
    default_candidate: str,
) -> ImportSummary:
    """Write what an importer built and complete its summary (the run's candidate, else `default_candidate`)."""
    mode = import_mode(run.data_root, summary.dataset_version, run.mode, run.baseline_run_id)
    rejects = sorted(rejects, key=lambda r: r["line"])
    if not traces:
        summary.rejects = rejects
        summary.notes.append("nothing written: no record could be imported")
        return summary
    run_manifest = manifest(
        summary.run_id,
        run.candidate or default_candidate,
        summary.dataset_version,
        summary.environment_version,
        summary.corpus_version,
        run.model,
        mode,
        run.baseline_run_id,
    )
    summary.mode = mode
    summary.files = write_run(
        run.data_root, RunFiles(run_manifest, cases, traces, registry, trace_file, rejects), run.overwrite
    )
    summary.cases, summary.traces, summary.rejects = len(cases), len(traces), rejects
    summary.incomplete = [
        {"trace_id": t["trace_id"], "reason": t["error"] or t["status"]} for t in traces if t["status"] != "ok"
    ]
    return summary
