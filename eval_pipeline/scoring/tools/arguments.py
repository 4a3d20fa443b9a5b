"""Argument checks of each call: JSON Schema verdicts against the tool registry, then invalid and unnecessary calls."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import polars as pl
from jsonschema import exceptions as schema_exceptions
from jsonschema import validators as schema_validators

from eval_pipeline.scoring.tools.diffs import _with_argument_diffs
from eval_pipeline.scoring.tools.frames import T, _registry
from eval_pipeline.scoring.values import resolve_rules, strict_type_error

EMPTY_RESULTS = ("{}", "[]", '""', "null")

_SCHEMA_VERDICT_KEYS = ("tool", "args_json", "args_float_paths", "case_rules_json")


def _schema_verdicts(rows: Iterable[tuple[str, str, str | None, str | None]], registry: pl.DataFrame) -> pl.DataFrame:
    """(tool, args_json, args_float_paths, case_rules_json, schema_error) for distinct calls; schema_error is null
    when the args pass the tool's schema (and, under strict_types, hold no whole-number float for an integer)."""
    schemas = dict(zip(registry["name"].to_list(), registry["args_schema_json"].to_list(), strict=True))
    tool_rules = dict(zip(registry["name"].to_list(), registry["value_rules_json"].to_list(), strict=True))
    checkers: dict[str, tuple[Any, Any]] = {}
    out = []
    for tool, args_json, float_paths, case_rules in rows:
        error = _schema_error(tool, args_json, schemas, checkers)
        if error is None and float_paths and tool in schemas and resolve_rules(case_rules, tool_rules.get(tool), tool).strict_types:
            error = strict_type_error(json.loads(schemas[tool] or "{}"), float_paths)
        out.append((tool, args_json, float_paths, case_rules, error))
    schema = {**{k: pl.String for k in _SCHEMA_VERDICT_KEYS}, "schema_error": pl.String}
    return pl.DataFrame(out, schema=schema, orient="row")


def _schema_error(tool: str, args_json: str, schemas: dict[str, str], checkers: dict[str, tuple[Any, Any]]) -> str | None:
    if not schemas:
        return None
    if tool not in schemas:
        return f"tool {tool} is not in the tool registry"
    if tool not in checkers:
        schema = json.loads(schemas[tool] or "{}")
        cls = schema_validators.validator_for(schema)
        try:
            cls.check_schema(schema)
            checkers[tool] = (cls(schema), _fast_check(schema))
        except schema_exceptions.SchemaError as exc:
            checkers[tool] = (f"the registry schema of {tool} is invalid: {exc.message}", None)
    validator, fast = checkers[tool]
    if isinstance(validator, str):
        return validator
    instance = json.loads(args_json)
    # The fast check only ever says "valid"; anything it cannot vouch for goes to jsonschema, which has the last word.
    if (fast is not None and fast(instance)) or validator.is_valid(instance):
        return None
    error = schema_exceptions.best_match(validator.iter_errors(instance))
    where = "/".join(str(p) for p in error.absolute_path)
    return f"schema: {where + ': ' if where else ''}{error.message}"


_JSON_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}

_ANNOTATIONS = {"description", "title", "examples", "default"}

_MODERN_DRAFTS = ("draft-06", "draft-07", "2019-09", "2020-12")


def _fast_check(schema: Any) -> Any:
    """A plain-Python validity test for the common tool schema (typed, enum-of-strings properties; required;
    additionalProperties true/false), ~20x quicker than jsonschema; None when the schema uses anything else."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    if "$schema" in schema and not any(d in str(schema["$schema"]) for d in _MODERN_DRAFTS):
        return None  # draft 3/4 read integers differently: leave them to jsonschema
    if set(schema) - _ANNOTATIONS - {"type", "properties", "required", "additionalProperties", "$schema"}:
        return None
    extra_ok = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    if not isinstance(extra_ok, bool) or not isinstance(required, list) or not isinstance(properties, dict):
        return None
    checks: dict[str, tuple[tuple[Any, ...], frozenset[str] | None]] = {}
    for name, sub in properties.items():
        if not isinstance(sub, dict) or set(sub) - _ANNOTATIONS - {"type", "enum"}:
            return None
        types = sub.get("type", list(_JSON_TYPES))
        types = [types] if isinstance(types, str) else types
        enum = sub.get("enum")
        if not isinstance(types, list) or any(t not in _JSON_TYPES for t in types):
            return None
        if enum is not None and not (isinstance(enum, list) and all(isinstance(e, str) for e in enum)):
            return None
        checks[name] = (tuple(_JSON_TYPES[t] for t in types), frozenset(enum) if enum is not None else None)

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict) or any(name not in instance for name in required):
            return False
        for name, value in instance.items():
            rule = checks.get(name)
            if rule is None:
                if not extra_ok:
                    return False
                continue
            types, enum = rule
            if not any(t(value) for t in types) or (enum is not None and value not in enum):
                return False
        return True

    return check


def _call_verdicts(calls: pl.DataFrame, ref_t: pl.DataFrame, tools: pl.DataFrame) -> pl.DataFrame:
    """Calls with `invalid` (why the args fail, null when valid), `in_path` and `unnecessary`.

    A read-only call, or a call of a tool the path does not hold, needs only its schema; a call of a non-read-only
    path tool must also match one of that tool's path calls (SPEC §11)."""
    distinct = calls.filter(pl.col("tool").is_not_null()).select(*_SCHEMA_VERDICT_KEYS).unique()
    verdicts = _schema_verdicts(distinct.iter_rows(), _registry(tools))
    path_tools = ref_t.select(T, tool="ref_tool").unique().with_columns(in_path=pl.lit(True))
    good = ((pl.col("status") == "ok") & pl.col("result_json").is_not_null() & ~pl.col("result_json").is_in(EMPTY_RESULTS)).cast(pl.Int64)
    mismatch = pl.col("schema_error").is_null() & pl.col("in_path") & ~pl.col("read_only") & ~pl.col("args_match")
    out = (
        calls.join(verdicts, on=list(_SCHEMA_VERDICT_KEYS), how="left", nulls_equal=True)
        .join(path_tools, on=[T, "tool"], how="left")
        .with_columns(pl.col("in_path").fill_null(False))
        .sort(T, "pos")
    )
    out = _with_argument_diffs(out, ref_t, mismatch)
    return out.with_columns(
        invalid=pl.when(pl.col("schema_error").is_not_null())
        .then(pl.format("{} ({})", pl.col("key"), pl.col("schema_error")))
        .when(mismatch)
        .then(pl.format("{} (args match no reference call of {}{})", pl.col("key"), pl.col("tool"),
                        pl.col("args_diff").fill_null(""))),
        # a read-only repeat of an earlier call that returned ok with a non-empty result
        unnecessary=pl.col("read_only") & ((good.cum_sum().over(T, "key") - good) > 0),
    ).drop("args_diff")
