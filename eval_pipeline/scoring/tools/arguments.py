"""Argument checks of each call: JSON Schema verdicts against the tool registry, then invalid and unnecessary calls."""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl
from jsonschema import exceptions as schema_exceptions
from jsonschema import validators as schema_validators

from eval_pipeline.contracts.frames import parse_json
from eval_pipeline.scoring.tools.diffs import with_argument_diffs
from eval_pipeline.scoring.tools.frames import T, tool_registry
from eval_pipeline.scoring.values import resolve_rules, strict_type_error

EMPTY_RESULTS = ("{}", "[]", '""', "null")

_SCHEMA_VERDICT_KEYS = ("tool", "args_json", "args_float_paths", "case_rules_json")


def _schema_verdicts(calls: pl.DataFrame, registry: pl.DataFrame) -> pl.DataFrame:
    """(tool, args_json, args_float_paths, case_rules_json, schema_error) for distinct calls; schema_error is null
    when the args pass the tool's schema (and, under strict_types, hold no whole-number float for an integer)."""
    schemas = dict(zip(registry["name"].to_list(), registry["args_schema_json"].to_list(), strict=True))
    tool_rules = dict(zip(registry["name"].to_list(), registry["value_rules_json"].to_list(), strict=True))
    checkers: dict[str, tuple[Any, Any]] = {}
    distinct = calls.select(*_SCHEMA_VERDICT_KEYS).unique()
    # The schema verdict depends on the tool and its args only: each distinct pair is validated once.
    pairs = distinct.select("tool", "args_json").unique()
    errors = [
        _schema_error(tool, args, schemas, checkers)
        for tool, args in zip(pairs["tool"].to_list(), pairs["args_json"].to_list(), strict=True)
    ]
    verdicts = distinct.join(
        pairs.with_columns(schema_error=pl.Series(errors, dtype=pl.String)),
        on=["tool", "args_json"],
        how="left",
        nulls_equal=True,
    )
    strict = verdicts.filter(
        pl.col("schema_error").is_null()
        & pl.col("args_float_paths").is_not_null()
        & pl.col("tool").is_in(list(schemas))
    )
    typed = [
        (tool, args, paths, rules, strict_type_error(json.loads(schemas[tool] or "{}"), paths))
        for tool, args, paths, rules, _ in strict.iter_rows()
        if paths and resolve_rules(rules, tool_rules.get(tool), tool).strict_types
    ]
    typed = pl.DataFrame(
        typed, schema={**{k: pl.String for k in _SCHEMA_VERDICT_KEYS}, "_typed": pl.String}, orient="row"
    )
    return verdicts.join(typed, on=list(_SCHEMA_VERDICT_KEYS), how="left", nulls_equal=True).select(
        *_SCHEMA_VERDICT_KEYS, pl.coalesce("schema_error", "_typed").alias("schema_error")
    )


def _schema_error(
    tool: str, args_json: str, schemas: dict[str, str], checkers: dict[str, tuple[Any, Any]]
) -> str | None:
    if not schemas:
        return None
    if tool not in schemas:
        return f"tool {tool} is not in the tool registry"
    if tool not in checkers:
        schema = json.loads(schemas[tool] or "{}")
        cls = schema_validators.validator_for(schema)
        try:
            cls.check_schema(schema)
            checkers[tool] = (cls(schema), fast_check(schema))
        except schema_exceptions.SchemaError as exc:
            checkers[tool] = (f"the registry schema of {tool} is invalid: {exc.message}", None)
    validator, fast = checkers[tool]
    if isinstance(validator, str):
        return validator
    instance = parse_json(args_json)
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

# The Python types json.loads gives for each JSON type (a float is an integer only when whole: left to _JSON_TYPES).
_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}

_ANNOTATIONS = {"description", "title", "examples", "default"}

_MODERN_DRAFTS = ("draft-06", "draft-07", "2019-09", "2020-12")

_OBJECT_KEYWORDS = {"type", "properties", "required", "additionalProperties"}
_STRING_KEYWORDS = ("pattern", "minLength", "maxLength")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def fast_check(schema: Any) -> Any:
    """A plain-Python validity test for the common tool schema (an object of typed properties with enums of strings,
    patterns, length and numeric bounds, nested objects; required; additionalProperties true/false), ~20x quicker
    than jsonschema; None when the schema uses anything else."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    if "$schema" in schema and not any(d in str(schema["$schema"]) for d in _MODERN_DRAFTS):
        return None  # draft 3/4 read integers and exclusive bounds differently: leave them to jsonschema
    if set(schema) - _ANNOTATIONS - _OBJECT_KEYWORDS - {"$schema"}:
        return None
    return _object_check(schema)


def _object_check(schema: dict) -> Any:
    """The test of an object schema (type, properties, required, additionalProperties), None when not covered."""
    extra_ok = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    if not isinstance(extra_ok, bool) or not isinstance(required, list) or not isinstance(properties, dict):
        return None
    checks = {name: _value_check(sub) for name, sub in properties.items()}
    if any(check is None for check in checks.values()) or not all(isinstance(name, str) for name in required):
        return None
    needed = frozenset(required)

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict) or not needed <= instance.keys():
            return False
        for name, value in instance.items():
            rule = checks.get(name)
            if rule is None:
                if not extra_ok:
                    return False
                continue
            if not rule(value):
                return False
        return True

    return check


def _value_check(sub: Any) -> Any:
    """The test of a property schema, read as jsonschema reads each keyword; None when not covered."""
    if not isinstance(sub, dict):
        return None
    keywords = set(sub) - _ANNOTATIONS
    if sub.get("type") == "object" and keywords - {"type"}:
        return _object_check(sub) if keywords <= _OBJECT_KEYWORDS else None
    if keywords - {"type", "enum", *_STRING_KEYWORDS, *_NUMBER_KEYWORDS}:
        return None
    types = sub.get("type", list(_JSON_TYPES))
    types = [types] if isinstance(types, str) else types
    enum = sub.get("enum")
    if not isinstance(types, list) or any(t not in _JSON_TYPES for t in types):
        return None
    if enum is not None and not (isinstance(enum, list) and all(isinstance(e, str) for e in enum)):
        return None
    bounds = [sub[k] for k in (*_NUMBER_KEYWORDS, "minLength", "maxLength") if k in sub]
    if not all(_is_number(b) for b in bounds):
        return None
    try:
        pattern = re.compile(sub["pattern"]) if "pattern" in sub else None
    except (re.error, TypeError):
        return None
    type_checks = tuple(_JSON_TYPES[t] for t in types)
    # Exact built-in types (what json.loads returns) are answered by one set lookup; others by the full tests.
    exact = frozenset(kind for t in types for kind in _EXACT_TYPES[t])
    allowed = frozenset(enum) if enum is not None else None
    min_length, max_length = sub.get("minLength"), sub.get("maxLength")
    minimum, maximum = sub.get("minimum"), sub.get("maximum")
    above, below = sub.get("exclusiveMinimum"), sub.get("exclusiveMaximum")
    string_rules = pattern is not None or min_length is not None or max_length is not None
    number_rules = minimum is not None or maximum is not None or above is not None or below is not None

    def check(value: Any) -> bool:
        if type(value) not in exact and not any(t(value) for t in type_checks):
            return False
        if allowed is not None and not (isinstance(value, str) and value in allowed):
            return False
        # Each keyword applies to its own kind of value only, as in jsonschema (a bound says nothing of a string).
        if string_rules and isinstance(value, str):
            return (
                (pattern is None or pattern.search(value) is not None)
                and (min_length is None or len(value) >= min_length)
                and (max_length is None or len(value) <= max_length)
            )
        if number_rules and isinstance(value, int | float) and not isinstance(value, bool):
            return (
                (minimum is None or not value < minimum)
                and (maximum is None or not value > maximum)
                and (above is None or not value <= above)
                and (below is None or not value >= below)
            )
        return True

    return check


def call_verdicts(calls: pl.DataFrame, ref_t: pl.DataFrame, tools: pl.DataFrame) -> pl.DataFrame:
    """Calls with `invalid` (why the args fail, null when valid), `in_path` and `unnecessary`.

    A read-only call, or a call of a tool the path does not hold, needs only its schema; a call of a non-read-only
    path tool must also match one of that tool's path calls (docs/agent_lane.md)."""
    verdicts = _schema_verdicts(calls.filter(pl.col("tool").is_not_null()), tool_registry(tools))
    path_tools = ref_t.select(T, tool="ref_tool").unique().with_columns(in_path=pl.lit(True))
    good = (
        (pl.col("status") == "ok") & pl.col("result_json").is_not_null() & ~pl.col("result_json").is_in(EMPTY_RESULTS)
    ).cast(pl.Int64)
    mismatch = pl.col("schema_error").is_null() & pl.col("in_path") & ~pl.col("read_only") & ~pl.col("args_match")
    out = (
        calls.join(verdicts, on=list(_SCHEMA_VERDICT_KEYS), how="left", nulls_equal=True)
        .join(path_tools, on=[T, "tool"], how="left")
        .with_columns(pl.col("in_path").fill_null(False))
        .sort(T, "pos")
    )
    out = with_argument_diffs(out, ref_t, mismatch)
    return out.with_columns(
        invalid=pl.when(pl.col("schema_error").is_not_null())
        .then(pl.format("{} ({})", pl.col("key"), pl.col("schema_error")))
        .when(mismatch)
        .then(
            pl.format(
                "{} (args match no reference call of {}{})",
                pl.col("key"),
                pl.col("tool"),
                pl.col("args_diff").fill_null(""),
            )
        ),
        # a read-only repeat of an earlier call that returned ok with a non-empty result
        unnecessary=pl.col("read_only") & ((good.cum_sum().over(T, "key") - good) > 0),
    ).drop("args_diff")
