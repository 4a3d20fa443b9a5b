"""Canonical polars frames for traces, cases, corpus, tools and labels, and their builders from validated records.

Free-form JSON is carried as JSON text with sorted keys and compact separators. Tool arguments, scopes and
milestone operands are canonical (integral floats written as integers), so equal arguments are equal strings and
call keys compare; results, state diffs, fixtures and the final state keep numbers as written (compared by value).
Over 400 lines because each frame's schema and the row builder that fills it change together, column for column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import polars as pl
import pyarrow as pa

from eval_pipeline.contracts.cases import Case, ToolRegistry
from eval_pipeline.contracts.traces import RunManifest, Trace


def normalize(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


# A run of 19 digits may be an integer beyond 64 bits, which orjson reads as a float and json as an int. It is found
# with every digit byte made "0" and every other byte "x" (a bytes search for 19 zeros): ten times faster than the
# regex [0-9]{19} it equals, and a run's JSON texts pass through here row after row.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_LONG_DIGIT_RUN = b"0" * 19


def holds_long_digit_run(text: str) -> bool:
    """Whether `text` holds 19 ASCII digits in a row (re.search("[0-9]{19}", text))."""
    return _LONG_DIGIT_RUN in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO)


def parse_json(text: str) -> Any:
    """json.loads(text), read by orjson (several times faster) wherever orjson gives the same value."""
    if isinstance(text, str) and not holds_long_digit_run(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # NaN, Infinity, a lone surrogate: json reads them
            pass
    return json.loads(text)


def json_bytes(value: Any) -> bytes:
    """JSON of a value as sorted_json writes it, in bytes: sorted keys, compact, numbers as written."""
    try:
        return orjson.dumps(value, option=_SORTED)
    except (orjson.JSONEncodeError, TypeError):
        # integers beyond 64 bits and other values orjson refuses
        return json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def canonical_json(value: Any) -> str:
    """Canonical JSON text of a value: sorted keys, compact, 49.0 written as 49."""
    text = json_bytes(value)
    # as canonical_args, without noting where the floats were
    if b".0" in text or b"e+" in text or b"E+" in text:
        return json_bytes(normalize(value)).decode()
    return text.decode()


def canonical_args(value: Any) -> tuple[str, str | None]:
    """(canonical JSON text, integral_float_paths) of a value, serialised once."""
    return canonical_args_of(json_bytes(value), value)


def canonical_args_of(text: bytes, value: Any) -> tuple[str, str | None]:
    """canonical_args(value), given the value's json_bytes (`text`): values with equal json_bytes have equal
    canonical texts."""
    # Only a text holding a written float can hold an integral one; the walk that rewrites them is skipped otherwise.
    if b".0" in text or b"e+" in text or b"E+" in text:
        found: list[str] = []
        normalized = _normalize_noting_floats(value, "", found)
        return json_bytes(normalized).decode(), json.dumps(found, ensure_ascii=False) if found else None
    return text.decode(), None


def _normalize_noting_floats(value: Any, path: str, found: list[str]) -> Any:
    """normalize(value), noting the dotted path of each whole-number float as integral_float_paths does (one walk)."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            found.append(path)
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {
            str(k): v
            if isinstance(v, str | int) or v is None
            else _normalize_noting_floats(v, f"{path}.{k}" if path else str(k), found)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            v
            if isinstance(v, str | int) or v is None
            else _normalize_noting_floats(v, f"{path}.{i}" if path else str(i), found)
            for i, v in enumerate(value)
        ]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def sorted_json(value: Any) -> str:
    """JSON text with sorted keys, compact; numbers as written (for large free-form values compared by value,
    not text)."""
    try:
        return orjson.dumps(value, option=_SORTED).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json_bytes(value).decode()


def integral_float_paths(value: Any) -> str | None:
    """JSON list of the dotted paths of whole-number floats in a value (`nights`, `rooms.0.count`), None when none.

    Canonical JSON writes 2.0 as 2; strict type checks (an integer argument given 2.0) need to know it was a float.
    """
    found: list[str] = []

    def walk(inner: Any, path: str) -> None:
        if isinstance(inner, float):
            if math.isfinite(inner) and inner.is_integer():
                found.append(path)
        elif isinstance(inner, Mapping):
            for key, item in inner.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(inner, list | tuple):
            for index, item in enumerate(inner):
                walk(item, f"{path}.{index}" if path else str(index))

    walk(value, "")
    return json.dumps(found, ensure_ascii=False) if found else None


def call_key(name: str, args_json: str | None) -> str:
    """Canonical call key `name(args)` of docs/metrics.md#tool-calls."""
    return f"{name}({args_json if args_json is not None else '{}'})"


# ---------------------------------------------------------------- schemas

RANKED_DOC = pl.Struct({"doc_id": pl.String, "score": pl.Float64})
RETRIEVAL_ROUND = pl.Struct(
    {
        "round": pl.Int64,
        "tool": pl.String,
        "variant": pl.String,
        "query": pl.String,
        "candidates": pl.List(RANKED_DOC),
        "hits": pl.List(RANKED_DOC),
    }
)
CONTEXT_CHUNK = pl.Struct({"doc_id": pl.String, "text": pl.String, "tokens": pl.Int64})
CITATION = pl.Struct({"doc_id": pl.String, "quote": pl.String, "claim_index": pl.Int64})
STEP = pl.Struct(
    {
        "index": pl.Int64,
        "kind": pl.String,
        "tool": pl.String,
        "args_json": pl.String,
        "status": pl.String,
        "result_json": pl.String,
        "error": pl.String,
        "state_diff_json": pl.String,
        "dispatched_tool": pl.String,
        "dispatched_args_json": pl.String,
        "content": pl.String,
        "args_float_paths": pl.String,
    }
)

TRACES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "case_revision": pl.Int64,
    "attempt": pl.Int64,
    "status": pl.String,
    "error": pl.String,
    "input": pl.String,
    "retrieval": pl.List(RETRIEVAL_ROUND),
    "context": pl.List(CONTEXT_CHUNK),
    "has_answer": pl.Boolean,
    "answer_text": pl.String,
    "answer_refused": pl.Boolean,
    "citations": pl.List(CITATION),
    "steps": pl.List(STEP),
    "final_state_json": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "source_file": pl.String,
    "source_line": pl.Int64,
}

# accepted_json: {arg: [accepted values]} of the BFCL form (null when the call states its args only)
TOOL_CALL = pl.Struct(
    {"name": pl.String, "args_json": pl.String, "accepted_json": pl.String, "optional": pl.List(pl.String)}
)
MILESTONE = pl.Struct({"name": pl.String, "path": pl.String, "op": pl.String, "value_json": pl.String})
TAG = pl.Struct({"name": pl.String, "value": pl.String})

CASES_SCHEMA: dict[str, pl.DataType] = {
    "dataset_version": pl.String,
    "case_id": pl.String,
    "case_revision": pl.Int64,
    "lanes": pl.List(pl.String),
    "input": pl.String,
    "criticality": pl.String,
    "required_doc_ids": pl.List(pl.String),
    "expected_answer_contains": pl.List(pl.String),
    "reference_answer": pl.String,
    "expect_refusal": pl.Boolean,
    "multi_hop": pl.Boolean,
    "allowed_tools": pl.List(pl.String),
    "forbidden_tools": pl.List(pl.String),
    "reference_tool_calls": pl.List(TOOL_CALL),
    "tool_match": pl.String,
    "alternatives": pl.List(pl.List(TOOL_CALL)),
    "dependencies": pl.List(pl.List(pl.String)),
    "fixtures_json": pl.String,
    "clock": pl.String,
    "milestones": pl.List(MILESTONE),
    "fault_kind": pl.String,
    "fault_tool": pl.String,
    "unsafe_after_fault": pl.List(pl.String),
    "escalation_tools": pl.List(pl.String),
    "scope_json": pl.String,
    "value_rules_json": pl.String,
    "source_file": pl.String,
    "tags": pl.List(TAG),
    "counterfactual_of": pl.String,
    "changed_fact": pl.String,
}

CORPUS_SCHEMA: dict[str, pl.DataType] = {
    "corpus_version": pl.String,
    "doc_id": pl.String,
    "family": pl.String,
    "version": pl.String,
    "current": pl.Boolean,
    "indexed": pl.Boolean,
    "text": pl.String,
    "source": pl.String,
}

TOOLS_SCHEMA: dict[str, pl.DataType] = {
    "environment_version": pl.String,
    "name": pl.String,
    "description": pl.String,
    "read_only": pl.Boolean,
    "destructive": pl.Boolean,
    "args_schema_json": pl.String,
    "value_rules_json": pl.String,
}

JUDGMENTS_SCHEMA: dict[str, pl.DataType] = {
    "query_id": pl.String,
    "doc_id": pl.String,
    "grade": pl.Int64,
    "source": pl.String,
    "annotator": pl.String,
    "source_file": pl.String,
    "source_line": pl.Int64,
}

GROUNDING_LABELS_SCHEMA: dict[str, pl.DataType] = {
    "trace_id": pl.String,
    "claim": pl.String,
    "verdict": pl.String,
    "answer_grounded": pl.Boolean,
    "source_file": pl.String,
    "source_line": pl.Int64,
}

REJECTS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "input_kind": pl.String,
    "source_file": pl.String,
    "line": pl.Int64,
    "reason": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
}

MANIFEST_COLUMNS: tuple[str, ...] = (
    "run_id",
    "candidate",
    "model",
    "prompt_version",
    "index_version",
    "corpus_version",
    "environment_version",
    "dataset_version",
    "mode",
    "created_at",
    "citations",
    "locale",
    "baseline_run_id",
)


def empty(schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """An empty frame with the given schema."""
    return pl.DataFrame(schema=dict(schema))


# ---------------------------------------------------------------- rows from validated models


def _ranked(docs: list | None) -> list[dict] | None:
    if docs is None:
        return None
    return [{"doc_id": d.doc_id, "score": d.score} for d in docs]


def trace_row(trace: Trace, run_id: str, source_file: str = "", source_line: int = 0) -> dict[str, Any]:
    """The canonical frame row of a validated trace."""
    answer = trace.answer
    steps = None
    if trace.steps is not None:
        steps = [
            {
                "index": s.index,
                "kind": s.kind,
                "tool": s.tool,
                "args_json": canonical_args(s.args)[0] if s.args is not None else None,
                "status": s.status,
                "result_json": sorted_json(s.result) if s.result is not None else None,
                "error": s.error,
                "state_diff_json": sorted_json([c.model_dump() for c in s.state_diff])
                if s.state_diff is not None
                else None,
                "dispatched_tool": s.dispatched.tool if s.dispatched is not None else None,
                "dispatched_args_json": canonical_json(s.dispatched.args) if s.dispatched is not None else None,
                "content": s.content,
                "args_float_paths": canonical_args(s.args)[1] if s.args is not None else None,
            }
            for s in trace.steps
        ]
    usage = trace.usage
    return {
        "run_id": run_id,
        "trace_id": trace.trace_id,
        "case_id": trace.case_id,
        "case_revision": trace.case_revision,
        "attempt": trace.attempt,
        "status": trace.status,
        "error": trace.error,
        "input": trace.input,
        "retrieval": None
        if trace.retrieval is None
        else [
            {
                "round": r.round,
                "tool": r.tool,
                "variant": r.variant,
                "query": r.query,
                "candidates": _ranked(r.candidates),
                "hits": _ranked(r.hits),
            }
            for r in trace.retrieval
        ],
        "context": None
        if trace.context is None
        else [{"doc_id": c.doc_id, "text": c.text, "tokens": c.tokens} for c in trace.context],
        "has_answer": answer is not None,
        "answer_text": answer.text if answer is not None else None,
        "answer_refused": answer.refused if answer is not None else None,
        "citations": []
        if answer is None
        else [{"doc_id": c.doc_id, "quote": c.quote, "claim_index": c.claim_index} for c in answer.citations],
        "steps": steps,
        "final_state_json": sorted_json(trace.final_state) if trace.final_state is not None else None,
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "cost_usd": usage.cost_usd if usage else None,
        "latency_ms": usage.latency_ms if usage else None,
        "source_file": source_file,
        "source_line": source_line,
    }


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    # pyarrow fills plain string and list arrays from Python values several times faster than large or view ones
    if pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return pa.string()
    if pa.types.is_large_list(arrow_type) or pa.types.is_list(arrow_type):
        return pa.list_(_plain(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([(f.name, _plain(f.type)) for f in arrow_type])
    return arrow_type


def _arrow_schema(schema: Mapping[str, pl.DataType]) -> pa.Schema:
    arrow = pl.DataFrame(schema=dict(schema)).to_arrow().schema
    return pa.schema([(f.name, _plain(f.type)) for f in arrow])


def frame_from_rows(rows: Iterable[Mapping[str, Any]], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """A frame of the given schema from row dicts (through Arrow, several times faster than from dicts for nested
    rows)."""
    return pl.from_arrow(pa.Table.from_pylist(list(rows), schema=_arrow_schema(schema))).cast(dict(schema))


def traces_frame(rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """A traces frame from canonical rows."""
    return frame_from_rows(rows, TRACES_SCHEMA)


def _calls(calls: list) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "args_json": canonical_json(c.args),
            "accepted_json": canonical_json(c.accepted) if c.accepted is not None else None,
            "optional": list(c.optional),
        }
        for c in calls
    ]


def value_rules_json(*levels: Any) -> str | None:
    """Canonical JSON of value rules merged over levels, the first level most specific; None when no level sets any."""
    merged: dict[str, Any] = {"args": {}}
    for rules in reversed([r for r in levels if r is not None]):
        dumped = rules.model_dump(mode="json", exclude_none=True)
        merged["args"].update(dumped.pop("args", {}))
        merged.update(dumped)
    if merged == {"args": {}}:
        return None
    return canonical_json(merged)


def case_row(case: Case, dataset_version: str, source_file: str = "") -> dict[str, Any]:
    """The canonical frame row of a validated case."""
    return {
        "dataset_version": dataset_version,
        "case_id": case.case_id,
        "case_revision": case.case_revision,
        "lanes": list(case.lanes),
        "input": case.input,
        "criticality": case.criticality,
        "required_doc_ids": list(case.required_doc_ids),
        "expected_answer_contains": list(case.expected_answer_contains),
        "reference_answer": case.reference_answer,
        "expect_refusal": case.expect_refusal,
        "multi_hop": case.multi_hop,
        "allowed_tools": list(case.allowed_tools) if case.allowed_tools is not None else None,
        "forbidden_tools": list(case.forbidden_tools),
        "reference_tool_calls": _calls(case.reference_tool_calls),
        "tool_match": case.tool_match,
        "alternatives": [_calls(path) for path in case.alternatives],
        "dependencies": [list(edge) for edge in case.dependencies],
        "fixtures_json": sorted_json(case.fixtures),
        "clock": case.clock,
        "milestones": [
            {"name": name, "path": m.path, "op": m.operator, "value_json": canonical_json(m.operand)}
            for name, m in case.milestones.items()
        ],
        "fault_kind": case.fault.kind if case.fault else None,
        "fault_tool": case.fault.tool if case.fault else None,
        "unsafe_after_fault": list(case.unsafe_after_fault),
        "escalation_tools": list(case.escalation_tools),
        "scope_json": canonical_json(case.scope) if case.scope is not None else None,
        "value_rules_json": value_rules_json(case.value_rules),
        "source_file": source_file,
        "tags": [{"name": name, "value": case.tags[name]} for name in sorted(case.tags)],
        "counterfactual_of": case.counterfactual_of,
        "changed_fact": case.changed_fact,
    }


def cases_frame(rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """A cases frame from canonical rows."""
    return frame_from_rows(rows, CASES_SCHEMA)


def tools_frame_from_registry(registry: ToolRegistry) -> pl.DataFrame:
    """A tools frame from a validated registry."""
    rows = [
        {
            "environment_version": registry.environment_version,
            "name": t.name,
            "description": t.description,
            "read_only": t.read_only,
            "destructive": t.destructive,
            "args_schema_json": canonical_json(t.args),
            "value_rules_json": value_rules_json(t.value_rules, registry.value_rules),
        }
        for t in registry.tools
    ]
    return pl.DataFrame(rows, schema=TOOLS_SCHEMA, strict=False)


def manifest_row(manifest: RunManifest) -> dict[str, Any]:
    """The manifest as one flat row (candidate as `system@version`)."""
    return {
        "run_id": manifest.run_id,
        "candidate": manifest.candidate_label,
        "model": manifest.model,
        "prompt_version": manifest.prompt_version,
        "index_version": manifest.index_version,
        "corpus_version": manifest.corpus_version,
        "environment_version": manifest.environment_version,
        "dataset_version": manifest.dataset_version,
        "mode": manifest.mode,
        "created_at": manifest.created_at,
        "citations": manifest.citations,
        "locale": manifest.locale,
        "baseline_run_id": manifest.baseline_run_id,
    }
