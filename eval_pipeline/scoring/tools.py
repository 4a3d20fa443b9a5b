"""Agent tool calls (SPEC §5 "Agent tool calls", §11 "Agent stages"): the `tool_scores` and `tool_call_diffs` tables.

Everything is scored from structured `tool_call` steps, never from prose. A call is identified by its canonical
key `name(args)` (frames.call_key). Metrics use the matched path: the reference or the alternative with the
highest tool_call_f1 (ties: the reference, then the earlier alternative). Failed and timed-out calls are calls.

Readings this module fixes where the SPEC leaves a choice (docs/agent_lane.md repeats them for users):
- precision = matched / calls (null without calls); recall = matched / path calls (null for an empty path);
  f1 = 2·matched / (calls + path calls), the harmonic mean where both are defined, null when both are empty
  (an empty path met by no calls ranks as a perfect match when choosing the path).
- A call matches a path call of its tool when its args match under the value rules (scoring/values.py): by
  default canonical JSON equality (key order and 49.0 vs 49 do not matter), with the BFCL form's per-argument
  accepted values and optional arguments where the case gives them. The k-th call of a class of identical path
  calls matches the k-th path call of that class; overlapping classes fall back to a maximum matching.
- Schema checks use the tool registry; with an empty registry only reference values are checked; a tool
  missing from a non-empty registry fails its schema check and is an `unknown_tool` at tool_selection (never a
  policy breach of allowed_tools, never incomplete). Read-only calls need only their schema.
- tool_selection counts calls per non-read-only tool against the matched path (a duplicate is a surplus);
  read-only path tools are optional (SPEC §11).
- `tool_order` is not_applicable for an `unordered` case without dependencies (nothing to order).
- For `strict_order`, the calls matched to path calls (k-th call of a key to the k-th path call of that key)
  must come in path order; extra calls and retries do not break the order.
- Scope: the case's `scope` maps an argument name to its allowed values (a list, or one value). Any argument
  of that name, at any depth of a call's args, holding another value is a policy violation.
- Fault facts used by outcome_scores are computed here because they are call-sequence facts that need the
  registry: the fault strikes the first call of `fault.tool`; a re-check is a later read-only call with
  status `ok`; an `unsafe_after_fault` call after the fault with no re-check in between is an unsafe action.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import polars as pl
from jsonschema import exceptions as schema_exceptions
from jsonschema import validators as schema_validators

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.scoring.common import harness_reason, lane_traces
from eval_pipeline.scoring.values import call_matches, resolve_rules, strict_type_error
from eval_pipeline.settings import ScoringSettings

T = "_t"  # row id of an agent-lane trace inside one scoring call
EMPTY_RESULTS = ("{}", "[]", '""', "null")
MAX_LISTED = 3  # how many offending calls a stage reason names before summarising the rest as a count

STR_LIST = pl.List(pl.String)

TOOL_SCORES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "tool_match": pl.String,
    "matched_path": pl.String,
    "n_calls": pl.Int64,
    "n_path_calls": pl.Int64,
    "tool_call_precision": pl.Float64,
    "tool_call_recall": pl.Float64,
    "tool_call_f1": pl.Float64,
    "missing_calls": STR_LIST,
    "unexpected_calls": STR_LIST,
    "strict_order_accuracy": pl.Float64,
    "args_valid_rate": pl.Float64,
    "invalid_calls": STR_LIST,
    "order_violations": STR_LIST,
    "unnecessary_call_rate": pl.Float64,
    "loop_detected": pl.Boolean,
    "loop_calls": STR_LIST,
    "policy_violation": pl.Boolean,
    "policy_violations": STR_LIST,
    "adapter_divergence": pl.String,
    "fault_call_index": pl.Int64,
    "unsafe_actions": STR_LIST,
    "escalated_after_fault": pl.Boolean,
    "status": pl.String,
    "reason": pl.String,
    "policy_stage": pl.String,
    "policy_reason": pl.String,
    "tool_selection_stage": pl.String,
    "tool_selection_reason": pl.String,
    "tool_arguments_stage": pl.String,
    "tool_arguments_reason": pl.String,
    "tool_order_stage": pl.String,
    "tool_order_reason": pl.String,
    "loop_stage": pl.String,
    "loop_reason": pl.String,
}

TOOL_CALL_DIFFS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "matched_path": pl.String,
    "position": pl.Int64,
    "actual_index": pl.Int64,
    "expected_index": pl.Int64,
    "expected_call": pl.String,
    "actual_call": pl.String,
    "actual_status": pl.String,
    "match": pl.String,
}

# Metric columns nulled on incomplete rows: a harness or adapter defect must not read as an agent score.
_METRICS = (
    "tool_call_precision",
    "tool_call_recall",
    "tool_call_f1",
    "missing_calls",
    "unexpected_calls",
    "strict_order_accuracy",
    "args_valid_rate",
    "invalid_calls",
    "order_violations",
    "unnecessary_call_rate",
    "loop_detected",
    "loop_calls",
    "policy_violation",
    "policy_violations",
    "fault_call_index",
    "unsafe_actions",
    "escalated_after_fault",
)


def call_key_expr(name: str = "tool", args: str = "args_json") -> pl.Expr:
    """The canonical call key `name(args)` of frames.call_key, as an expression."""
    return pl.format("{}({})", pl.col(name), pl.col(args).fill_null("{}"))


def _listing(items: pl.Expr) -> pl.Expr:
    """`a; b; c (+N more)` of a list column, naming at most MAX_LISTED entries."""
    head = items.list.head(MAX_LISTED).list.join("; ")
    extra = items.list.len().cast(pl.Int64) - MAX_LISTED
    return pl.when(extra > 0).then(pl.format("{} (+{} more)", head, extra)).otherwise(head)


def _per_trace_list(frame: pl.DataFrame, value: str, order: str, name: str) -> pl.DataFrame:
    """(T, name): the values of each trace collected as a list in `order`."""
    return frame.sort(T, order).group_by(T, maintain_order=True).agg(pl.col(value).alias(name))


# ---------------------------------------------------------------- registry and schema checks


def _registry(tools: pl.DataFrame) -> pl.DataFrame:
    """One row per tool name: read_only, its JSON Schema text and its value rules."""
    return tools.select("name", "read_only", "args_schema_json", "value_rules_json").unique("name", keep="first", maintain_order=True)


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


# ---------------------------------------------------------------- scope


def _allowed_values(scope_json: str) -> dict[str, set[str]]:
    """Argument name → canonical JSON of its allowed values, from a case's scope."""
    scope = json.loads(scope_json)
    if not isinstance(scope, dict):
        return {}
    return {name: {canonical_json(v) for v in (values if isinstance(values, list) else [values])} for name, values in scope.items()}


def _scope_violations(tool: str, args_json: str, allowed: dict[str, set[str]]) -> list[str]:
    """Policy reasons for arguments of a call that fall outside the case scope."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                if name in allowed and canonical_json(inner) not in allowed[name]:
                    # allowed values are canonical JSON already: listed as they are, not encoded twice
                    found.append(
                        f"scope: {tool} called with {name}={canonical_json(inner)} outside the case scope "
                        f"({', '.join(sorted(allowed[name]))})"
                    )
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    if allowed:
        walk(json.loads(args_json))
    return found


def _scope_frame(calls: pl.DataFrame) -> pl.DataFrame:
    """(tool, args_json, scope_json, scope_violations) for each distinct scoped call."""
    distinct = calls.filter(pl.col("scope_json").is_not_null()).select("tool", "args_json", "scope_json").unique()
    scopes = {text: _allowed_values(text) for text in distinct["scope_json"].unique().to_list()}
    found = [_scope_violations(tool, args, scopes[scope]) for tool, args, scope in distinct.iter_rows()]
    return distinct.with_columns(scope_violations=pl.Series(found, dtype=STR_LIST))


# ---------------------------------------------------------------- the shared computation


def _paths(cases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Permitted paths per case (0 = reference, i = alternative i) and their calls with positions and keys."""
    ref = cases.select("case_id", pl.lit(0, dtype=pl.Int64).alias("path_idx"), pl.col("reference_tool_calls").alias("path"))
    alts = (
        cases.select("case_id", "alternatives")
        .explode("alternatives", keep_nulls=False)
        .with_columns(path_idx=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("case_id"))
        .select("case_id", "path_idx", pl.col("alternatives").alias("path"))
    )
    paths = pl.concat([ref, alts]).with_columns(
        n_ref=pl.col("path").list.len().cast(pl.Int64).fill_null(0),
        matched_path=pl.when(pl.col("path_idx") == 0).then(pl.lit("reference")).otherwise(pl.format("alternative:{}", pl.col("path_idx"))),
    )
    path_calls = (
        paths.select("case_id", "path_idx", "path")
        .explode("path", keep_nulls=False)
        .with_columns(ref_pos=pl.int_range(pl.len(), dtype=pl.Int64).over("case_id", "path_idx"))
        .unnest("path")
        .rename({"name": "ref_tool", "args_json": "ref_args_json"})
        .with_columns(
            ref_key=call_key_expr("ref_tool", "ref_args_json"),
            optional=pl.col("optional").fill_null(pl.lit([], dtype=STR_LIST)),
        )
        # path calls that state the same call are interchangeable: one class, named by the first of them
        .with_columns(
            cls=pl.col("ref_pos").min().over("case_id", "path_idx", "ref_tool", "ref_args_json", pl.col("accepted_json").fill_null(""), pl.col("optional").list.join("\x1f"))
        )
    )
    return paths.drop("path"), path_calls


def _lane_frames(traces: pl.DataFrame, cases: pl.DataFrame, tools: pl.DataFrame) -> tuple[pl.DataFrame, ...]:
    """(base, steps, calls): agent-lane traces with their case contract, every step, and the tool calls in order."""
    # only the columns scoring reads travel through the join: traces carry heavy RAG columns too
    base = (
        lane_traces(
            traces.select("run_id", "trace_id", "case_id", "attempt", "status", "error", "steps"),
            cases.select(
                "case_id",
                "lanes",
                "tool_match",
                "dependencies",
                "allowed_tools",
                "forbidden_tools",
                "scope_json",
                "fault_kind",
                "fault_tool",
                "unsafe_after_fault",
                "escalation_tools",
                pl.col("value_rules_json").alias("case_rules_json"),
            ),
            "agent",
        )
        .drop("lanes")
        .with_row_index(T)
    )
    steps = (
        base.select(T, "steps")
        .explode("steps", keep_nulls=False)
        .with_columns(step_pos=pl.int_range(pl.len(), dtype=pl.Int64).over(T))
        .unnest("steps")
    )
    calls = (
        steps.filter(pl.col("kind") == "tool_call")
        .with_columns(
            pos=pl.int_range(pl.len(), dtype=pl.Int64).over(T),
            key=call_key_expr(),
            args_json=pl.col("args_json").fill_null("{}"),
        )
        .join(base.select(T, "case_id", "case_rules_json"), on=T, how="left")
        .join(
            _registry(tools).select("name", "read_only", pl.col("value_rules_json").alias("tool_rules_json"), in_registry=pl.lit(True)),
            left_on="tool",
            right_on="name",
            how="left",
        )
        .with_columns(
            read_only=pl.col("read_only").fill_null(False),
            # with an empty registry nothing is known, so nothing is an unknown tool
            unknown_tool=pl.col("in_registry").is_null() & pl.lit(tools.height > 0),
        )
        .drop("in_registry")
        .sort(T, "pos")
    )
    return base, steps, calls


def _match_flags(pairs: pl.DataFrame) -> pl.Series:
    """Whether each (call, path call) pair of one tool matches: canonical keys under exact rules (columnar), else the
    value rules, once per distinct combination."""
    rule_keys = ["tool", "case_rules_json", "tool_rules_json"]
    rule_sets = pairs.select(rule_keys).unique()
    plain = rule_sets.with_columns(
        plain=pl.Series([resolve_rules(c, t, tool).plain for tool, c, t in rule_sets.iter_rows()], dtype=pl.Boolean)
    )
    # the flags line up with the rows of `pairs`, so every join keeps the left order
    pairs = pairs.join(plain, on=rule_keys, how="left", nulls_equal=True, maintain_order="left").with_columns(
        plain=pl.col("plain") & pl.col("accepted_json").is_null()
    )
    keys = ["tool", "args_json", "ref_args_json", "accepted_json", "optional", "case_rules_json", "tool_rules_json"]
    combos = pairs.filter(~pl.col("plain")).select(keys).unique()
    verdicts = [
        call_matches(json.loads(args_json), json.loads(ref_args_json), json.loads(accepted_json) if accepted_json else None,
                     optional, resolve_rules(case_rules, tool_rules, tool))
        for tool, args_json, ref_args_json, accepted_json, optional, case_rules, tool_rules in combos.iter_rows()
    ]
    flags = combos.with_columns(ruled=pl.Series(verdicts, dtype=pl.Boolean))
    return (
        pairs.join(flags, on=keys, how="left", nulls_equal=True, maintain_order="left")
        .select(pl.when(pl.col("plain")).then(pl.col("args_json") == pl.col("ref_args_json")).otherwise(pl.col("ruled")).alias("match"))
        .to_series()
    )


def _max_matching(edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A maximum matching of calls to path calls (Kuhn's augmenting paths; calls in order, path calls in order)."""
    options: dict[int, list[int]] = {}
    for pos, ref_pos in sorted(edges):
        options.setdefault(pos, []).append(ref_pos)
    owner: dict[int, int] = {}

    def place(pos: int, seen: set[int]) -> bool:
        for ref_pos in options[pos]:
            if ref_pos in seen:
                continue
            seen.add(ref_pos)
            if ref_pos not in owner or place(owner[ref_pos], seen):
                owner[ref_pos] = pos
                return True
        return False

    for pos in options:
        place(pos, set())
    return sorted((pos, ref_pos) for ref_pos, pos in owner.items())


def _assignment(pairs: pl.DataFrame, path_calls: pl.DataFrame) -> pl.DataFrame:
    """(T, path_idx, pos, ref_pos): which path call each call is matched to, per permitted path.

    The k-th call of a class of interchangeable path calls goes to the k-th path call of that class; a trace whose
    call matches path calls of two classes is matched by maximum matching instead."""
    classes = pairs.select(T, "path_idx", "pos", "cls").unique()
    ambiguous = classes.group_by(T, "path_idx", "pos").agg(n=pl.len()).filter(pl.col("n") > 1).select(T, "path_idx").unique()
    plain = classes.join(ambiguous, on=[T, "path_idx"], how="anti").with_columns(
        occ=pl.col("pos").rank("ordinal").cast(pl.Int64).over(T, "path_idx", "cls")
    )
    slots = path_calls.select("case_id", "path_idx", "cls", "ref_pos").with_columns(
        occ=pl.col("ref_pos").rank("ordinal").cast(pl.Int64).over("case_id", "path_idx", "cls")
    )
    aligned = (
        plain.join(pairs.select(T, "case_id").unique(), on=T)
        .join(slots, on=["case_id", "path_idx", "cls", "occ"])
        .select(T, "path_idx", "pos", "ref_pos")
    )
    rows: list[tuple[int, int, int, int]] = []
    hard = pairs.join(ambiguous, on=[T, "path_idx"]).sort(T, "path_idx", "pos", "ref_pos")
    for (t, path_idx), group in hard.group_by([T, "path_idx"], maintain_order=True):
        edges = list(zip(group["pos"].to_list(), group["ref_pos"].to_list(), strict=True))
        rows += [(t, path_idx, pos, ref_pos) for pos, ref_pos in _max_matching(edges)]
    matched = pl.DataFrame(rows, schema={T: aligned.schema[T], "path_idx": pl.Int64, "pos": pl.Int64, "ref_pos": pl.Int64}, orient="row")
    return pl.concat([aligned, matched])


def _match_paths(base: pl.DataFrame, calls: pl.DataFrame, cases: pl.DataFrame) -> tuple[pl.DataFrame, ...]:
    """(calls with ref_pos and args_match, ref_t: the matched path's calls per trace with matched_pos, best: the
    matched path and its scores)."""
    paths, path_calls = _paths(cases.filter(pl.col("case_id").is_in(base["case_id"].unique().implode())))
    n_calls = (
        base.select(T, "case_id")
        .join(calls.group_by(T).agg(n_calls=pl.len().cast(pl.Int64)), on=T, how="left")
        .with_columns(pl.col("n_calls").fill_null(0))
    )
    pairs = calls.select(T, "case_id", "pos", "tool", "args_json", "case_rules_json", "tool_rules_json").join(
        path_calls.select("case_id", "path_idx", "ref_pos", "cls", "ref_tool", "ref_args_json", "accepted_json", "optional"),
        left_on=["case_id", "tool"],
        right_on=["case_id", "ref_tool"],
    )
    if pairs.height:
        pairs = pairs.filter(_match_flags(pairs))
    assignment = _assignment(pairs, path_calls)
    overlap = assignment.group_by(T, "path_idx").agg(matched=pl.len().cast(pl.Int64))
    total = pl.col("n_calls") + pl.col("n_ref")
    candidates = (
        n_calls.join(paths, on="case_id", how="left")
        .join(overlap, on=[T, "path_idx"], how="left")
        .with_columns(matched=pl.col("matched").fill_null(0))
        .with_columns(
            tool_call_precision=pl.when(pl.col("n_calls") > 0).then(pl.col("matched") / pl.col("n_calls")),
            tool_call_recall=pl.when(pl.col("n_ref") > 0).then(pl.col("matched") / pl.col("n_ref")),
            tool_call_f1=pl.when(total > 0).then(2 * pl.col("matched") / total),
        )
    )
    best = candidates.sort([T, pl.col("tool_call_f1").fill_null(1.0), "path_idx"], descending=[False, True, False]).unique(
        T, keep="first", maintain_order=True
    )
    chosen = best.select(T, "path_idx")
    used = assignment.join(chosen, on=[T, "path_idx"]).drop("path_idx")
    ref_t = (
        best.select(T, "case_id", "path_idx")
        .join(path_calls, on=["case_id", "path_idx"])
        .join(used.rename({"pos": "matched_pos"}), on=[T, "ref_pos"], how="left")
        .sort(T, "ref_pos")
    )
    best_pairs = pairs.join(chosen, on=[T, "path_idx"])
    matching_args = best_pairs.select(T, "pos").unique().with_columns(args_match=pl.lit(True))
    same_position = best_pairs.filter(pl.col("pos") == pl.col("ref_pos")).group_by(T).agg(same=pl.len())
    calls = (
        calls.join(used, on=[T, "pos"], how="left")
        .join(matching_args, on=[T, "pos"], how="left")
        .with_columns(pl.col("args_match").fill_null(False))
        .sort(T, "pos")
    )
    return calls, ref_t, best.join(same_position, on=T, how="left")


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


def _with_argument_diffs(calls: pl.DataFrame, ref_t: pl.DataFrame, mismatch: pl.Expr) -> pl.DataFrame:
    """Calls with `args_diff`: for a path call whose arguments match no reference call, the fields that differ from the closest one."""
    wrong = calls.filter(mismatch).select(T, "pos", "tool", "args_json")
    if wrong.height == 0:
        return calls.with_columns(args_diff=pl.lit(None, dtype=pl.String))
    references = ref_t.group_by(T, "ref_tool").agg(pl.col("ref_args_json").unique().sort())
    wrong = wrong.join(references, left_on=[T, "tool"], right_on=[T, "ref_tool"], how="left")
    # few distinct (arguments, references) pairs even in large runs: one diff per distinct pair
    distinct = wrong.select("args_json", "ref_args_json").unique()
    diffs = pl.DataFrame(
        {"args_json": distinct["args_json"], "ref_args_json": distinct["ref_args_json"],
         "args_diff": [_closest_diff(args, refs or []) for args, refs in distinct.iter_rows()]},
        schema={"args_json": pl.String, "ref_args_json": pl.List(pl.String), "args_diff": pl.String},
    )
    wrong = wrong.join(diffs, on=["args_json", "ref_args_json"], how="left", nulls_equal=True).select(T, "pos", "args_diff")
    return calls.join(wrong, on=[T, "pos"], how="left")


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path → leaf value of a JSON value (list items by index)."""
    if isinstance(value, dict) and value:
        return {k: v for name, inner in value.items() for k, v in _leaves(inner, f"{prefix}{name}.").items()}
    if isinstance(value, list) and value:
        return {k: v for i, inner in enumerate(value) for k, v in _leaves(inner, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def _closest_diff(args_json: str, reference_jsons: list[str]) -> str | None:
    """`: amount 89, expected 79; reason missing` against the reference call with the fewest differing fields."""
    try:
        actual = _leaves(json.loads(args_json))
        references = [_leaves(json.loads(r)) for r in reference_jsons]
    except (TypeError, ValueError):
        return None
    best: list[str] | None = None
    for expected in references:
        parts = []
        for path in sorted(set(actual) | set(expected)):
            if path not in actual:
                parts.append(f"{path} missing, expected {canonical_json(expected[path])}")
            elif path not in expected:
                parts.append(f"{path} {canonical_json(actual[path])} not expected")
            elif canonical_json(actual[path]) != canonical_json(expected[path]):
                parts.append(f"{path} {canonical_json(actual[path])}, expected {canonical_json(expected[path])}")
        if parts and (best is None or len(parts) < len(best)):
            best = parts
    return f": {'; '.join(best)}" if best else None


def _policy(calls: pl.DataFrame, base: pl.DataFrame) -> pl.DataFrame:
    """(T, policy_violations): tools outside allowed_tools, forbidden tools and out-of-scope arguments, in call order."""
    frame = calls.join(base.select(T, "allowed_tools", "forbidden_tools", "scope_json"), on=T, how="left")
    # a tool that does not exist is not a permission breach but a wrong choice: tool_selection's unknown_tool
    outside = frame.filter(
        pl.col("allowed_tools").is_not_null() & ~pl.col("allowed_tools").list.contains(pl.col("tool")) & ~pl.col("unknown_tool")
    ).select(
        T, "pos", kind_order=pl.lit(0, dtype=pl.Int32), violation=pl.format("tool {} is not in allowed_tools", pl.col("tool"))
    )
    forbidden = frame.filter(pl.col("forbidden_tools").list.contains(pl.col("tool"))).select(
        T, "pos", kind_order=pl.lit(1, dtype=pl.Int32), violation=pl.format("tool {} is forbidden", pl.col("tool"))
    )
    scoped = (
        frame.filter(pl.col("scope_json").is_not_null())
        .join(_scope_frame(frame), on=["tool", "args_json", "scope_json"])
        .select(T, "pos", kind_order=pl.lit(2, dtype=pl.Int32), violation="scope_violations")
        .explode("violation", keep_nulls=False)
    )
    return (
        pl.concat([outside, forbidden, scoped])
        .sort(T, "pos", "kind_order")
        .group_by(T, maintain_order=True)
        .agg(policy_violations=pl.col("violation").unique(maintain_order=True))
    )


def _order(calls: pl.DataFrame, base: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(T, order_violations): dependency events; (T, path_order_break): the first call matched out of path order."""
    first_pos = calls.group_by(T, "tool").agg(first=pl.col("pos").min())
    edges = (
        base.select(T, "dependencies")
        .explode("dependencies", keep_nulls=False)
        .with_columns(edge_idx=pl.int_range(pl.len()).over(T), a=pl.col("dependencies").list.get(0), b=pl.col("dependencies").list.get(1))
    )
    events = (
        edges.join(first_pos.rename({"tool": "b", "first": "first_b"}), on=[T, "b"])
        .join(first_pos.rename({"tool": "a", "first": "first_a"}), on=[T, "a"], how="left")
        .filter(pl.col("first_a").is_null() | (pl.col("first_a") > pl.col("first_b")))
        .with_columns(event=pl.format("{}->{}", pl.col("a"), pl.col("b")))
    )
    inversions = (
        calls.filter(pl.col("ref_pos").is_not_null())
        .with_columns(prev_max=pl.col("ref_pos").cum_max().shift(1).over(T))
        .filter(pl.col("ref_pos") < pl.col("prev_max"))
        .unique(T, keep="first", maintain_order=True)
        .select(
            T,
            path_order_break=pl.format(
                "{} (path call {}) came after path call {}", pl.col("key"), pl.col("ref_pos") + 1, pl.col("prev_max") + 1
            ),
        )
    )
    return _per_trace_list(events, "event", "edge_idx", "order_violations"), inversions


def _loops(calls: pl.DataFrame, threshold: int) -> pl.DataFrame:
    """(T, loop_calls): keys called `threshold` times or more, in order of first call."""
    loops = (
        calls.group_by(T, "key")
        .agg(n=pl.len(), first=pl.col("pos").min())
        .filter(pl.col("n") >= threshold)
        .with_columns(loop=pl.format("{} x{}", pl.col("key"), pl.col("n")))
    )
    return _per_trace_list(loops, "loop", "first", "loop_calls")


def _faults(calls: pl.DataFrame, base: pl.DataFrame) -> pl.DataFrame:
    """(T, fault_call_index, escalated_after_fault, unsafe_actions) for traces of fault cases that made calls."""
    frame = (
        calls.join(
            base.filter(pl.col("fault_tool").is_not_null()).select(T, "fault_kind", "fault_tool", "unsafe_after_fault", "escalation_tools"),
            on=T,
        )
        .with_columns(fault_pos=pl.col("pos").filter(pl.col("tool") == pl.col("fault_tool")).min().over(T))
        .with_columns(after=pl.col("pos") > pl.col("fault_pos"))
        .sort(T, "pos")
    )
    recheck = (pl.col("after") & pl.col("read_only") & (pl.col("status") == "ok")).fill_null(False).cast(pl.Int64)
    frame = frame.with_columns(rechecks_before=recheck.cum_sum().over(T) - recheck)
    unsafe = frame.filter(
        pl.col("after") & pl.col("unsafe_after_fault").list.contains(pl.col("tool")) & (pl.col("rechecks_before") == 0)
    ).with_columns(
        event=pl.format(
            "{} at call {} after the {} fault at call {} with no re-check",
            pl.col("key"),
            pl.col("pos") + 1,
            pl.col("fault_kind"),
            pl.col("fault_pos") + 1,
        )
    )
    return (
        frame.group_by(T)
        .agg(
            fault_call_index=(pl.col("fault_pos").first() + 1),
            escalated_after_fault=(pl.col("after") & pl.col("escalation_tools").list.contains(pl.col("tool"))).any(),
        )
        .join(_per_trace_list(unsafe, "event", "pos", "unsafe_actions"), on=T, how="left")
    )


def _harness_defects(steps: pl.DataFrame, calls: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(T, adapter_divergence): the first difference between dispatch records and evaluated calls; (T, malformed)."""
    evaluated = pl.col("kind") == "tool_call"
    dispatched = pl.col("dispatched_tool").is_not_null()
    difference = (
        pl.when(evaluated & ~dispatched)
        .then(pl.format("step {}: evaluated call {} has no dispatch record", pl.col("index"), call_key_expr()))
        .when(~evaluated & dispatched)
        .then(
            pl.format(
                "step {}: dispatched {} was not evaluated as a tool call",
                pl.col("index"),
                call_key_expr("dispatched_tool", "dispatched_args_json"),
            )
        )
        .when(evaluated & pl.col("tool").ne_missing(pl.col("dispatched_tool")))
        .then(pl.format("step {}: dispatched {}, evaluated {}", pl.col("index"), pl.col("dispatched_tool"), pl.col("tool")))
        .when(evaluated & (pl.col("args_json").fill_null("{}") != pl.col("dispatched_args_json").fill_null("{}")))
        .then(
            pl.format(
                "step {}: {} dispatched with {}, evaluated with {}",
                pl.col("index"),
                pl.col("tool"),
                pl.col("dispatched_args_json").fill_null("{}"),
                pl.col("args_json").fill_null("{}"),
            )
        )
    )
    # only a trace that logs dispatch records can diverge from them
    divergence = (
        steps.filter(dispatched.any().over(T))
        .sort(T, "step_pos")
        .group_by(T)
        .agg(first=difference.drop_nulls().first(), n_dispatched=dispatched.sum(), n_evaluated=evaluated.sum())
        .filter(pl.col("first").is_not_null())
        .select(T, adapter_divergence=pl.format("{} (dispatched {} calls, evaluated {})", "first", "n_dispatched", "n_evaluated"))
    )
    malformed = (
        calls.filter(pl.col("tool").is_null())
        .group_by(T)
        .agg(pl.col("index").min())
        .select(T, malformed=pl.format("step {}: tool_call without a tool name", pl.col("index")))
    )
    return divergence, malformed


def _analyse(traces: pl.DataFrame, cases: pl.DataFrame, tools: pl.DataFrame, settings: ScoringSettings) -> dict[str, pl.DataFrame]:
    """Every intermediate frame tool_scores and tool_call_diffs are built from."""
    base, steps, calls = _lane_frames(traces, cases, tools)
    calls, ref_t, best = _match_paths(base, calls, cases)
    calls = _call_verdicts(calls, ref_t, tools)
    order_events, inversions = _order(calls, base)
    divergence, malformed = _harness_defects(steps, calls)
    return {
        "tools": tools,
        "base": base,
        "calls": calls,
        "ref_t": ref_t,
        "best": best,
        "violations": _policy(calls, base),
        "order_events": order_events,
        "inversions": inversions,
        "loops": _loops(calls, settings.loop_threshold),
        "faults": _faults(calls, base),
        "divergence": divergence,
        "malformed": malformed,
    }


def _selection_counts(calls: pl.DataFrame, ref_t: pl.DataFrame, tools: pl.DataFrame) -> pl.DataFrame:
    """(T, never_called, short_called, surplus_called): non-read-only path tools called never, fewer times than the
    path holds them (`f (1 of 2 made)`), or more (`f (3 made, the path holds 2)`); read-only path tools are optional (SPEC §11)."""
    held = ref_t.group_by(T, tool="ref_tool").agg(held=pl.len().cast(pl.Int64), first=pl.col("ref_pos").min())
    made = calls.group_by(T, "tool").agg(made=pl.len().cast(pl.Int64))
    read_only = _registry(tools).select(tool="name", read_only="read_only")
    counts = (
        held.join(made, on=[T, "tool"], how="left")
        .join(read_only, on="tool", how="left")
        .with_columns(pl.col("made").fill_null(0))
        .filter(~pl.col("read_only").fill_null(False))
        .sort(T, "first")
    )
    return counts.group_by(T, maintain_order=True).agg(
        never_called=pl.col("tool").filter(pl.col("made") == 0),
        short_called=pl.format("{} ({} of {} made)", "tool", "made", "held").filter((pl.col("made") > 0) & (pl.col("made") < pl.col("held"))),
        surplus_called=pl.format("{} ({} made, the path holds {})", "tool", "made", "held").filter(pl.col("made") > pl.col("held")),
    )


def _per_trace_metrics(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per trace with every metric and helper column before stages are decided."""
    calls, ref_t = parts["calls"], parts["ref_t"]
    call_stats = calls.group_by(T).agg(
        n_valid=pl.col("invalid").is_null().sum(),
        n_unnecessary=pl.col("unnecessary").sum(),
        invalid_calls=pl.col("invalid").drop_nulls(),
        unexpected_calls=pl.col("key").filter(pl.col("ref_pos").is_null()),
        unknown_tools=pl.col("tool").filter(pl.col("unknown_tool")).unique(maintain_order=True),
        extra_writes=pl.col("tool").filter(~pl.col("in_path") & ~pl.col("read_only") & ~pl.col("unknown_tool")).unique(maintain_order=True),
    )
    ref_stats = ref_t.group_by(T).agg(missing_calls=pl.col("ref_key").filter(pl.col("matched_pos").is_null()))
    frame = (
        parts["base"]
        .join(parts["best"].drop("case_id"), on=T, how="left")
        .join(call_stats, on=T, how="left")
        .join(ref_stats, on=T, how="left")
        .join(_selection_counts(calls, ref_t, parts["tools"]), on=T, how="left")
    )
    for name in ("violations", "order_events", "inversions", "loops", "faults", "divergence", "malformed"):
        frame = frame.join(parts[name], on=T, how="left")
    empty = pl.lit([], dtype=STR_LIST)
    longest = pl.max_horizontal("n_calls", "n_ref")
    return frame.with_columns(
        *(
            pl.col(c).fill_null(empty)
            for c in (
                "invalid_calls",
                "unexpected_calls",
                "extra_writes",
                "missing_calls",
                "never_called",
                "short_called",
                "surplus_called",
                "unknown_tools",
                "policy_violations",
                "order_violations",
                "loop_calls",
            )
        ),
        strict_order_accuracy=pl.when(longest > 0).then(pl.col("same").fill_null(0) / longest),
        args_valid_rate=pl.when(pl.col("n_calls") > 0).then(pl.col("n_valid") / pl.col("n_calls")),
        unnecessary_call_rate=pl.when(pl.col("n_calls") > 0).then(pl.col("n_unnecessary") / pl.col("n_calls")),
    ).with_columns(
        unsafe_actions=pl.when(pl.col("fault_tool").is_not_null()).then(pl.col("unsafe_actions").fill_null(pl.lit([], dtype=STR_LIST))),
        escalated_after_fault=pl.when(pl.col("fault_tool").is_not_null()).then(pl.col("escalated_after_fault").fill_null(False)),
        loop_detected=pl.col("loop_calls").list.len() > 0,
        policy_violation=pl.col("policy_violations").list.len() > 0,
    )


def _stage(
    incomplete: pl.Expr, not_applicable: pl.Expr | None, na_reason: pl.Expr | None, failed: pl.Expr, fail_reason: pl.Expr, name: str
) -> list[pl.Expr]:
    """`<name>_stage` and `<name>_reason` from the stage's conditions, checked in that order."""
    status = pl.when(incomplete).then(pl.lit("incomplete"))
    reason = pl.when(incomplete).then(pl.col("reason"))
    if not_applicable is not None:
        status = status.when(not_applicable).then(pl.lit("not_applicable"))
        reason = reason.when(not_applicable).then(na_reason)
    status = status.when(failed).then(pl.lit("fail")).otherwise(pl.lit("pass"))
    reason = reason.when(failed).then(fail_reason).otherwise(pl.lit(None, dtype=pl.String))
    return [status.alias(f"{name}_stage"), reason.alias(f"{name}_reason")]


def _joined(*parts: tuple[pl.Expr, pl.Expr]) -> pl.Expr:
    """`label: items; label: items` over the non-empty list columns given as (condition, text) pairs."""
    texts = [pl.when(cond).then(text) for cond, text in parts]
    return pl.concat_str(texts, separator="; ", ignore_nulls=True)


def score_tools(
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    tools: pl.DataFrame,
    settings: ScoringSettings | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(tool_scores, tool_call_diffs) for every trace of an agent-lane case."""
    settings = settings or ScoringSettings()
    parts = _analyse(traces, cases, tools, settings)
    frame = _per_trace_metrics(parts)

    goal_only = pl.col("tool_match") == "goal_only"
    reason = pl.coalesce(
        harness_reason(),
        pl.when(pl.col("steps").is_null()).then(pl.lit("trace has no steps: the agent lane needs the trajectory")),
        pl.col("malformed"),
        pl.format("adapter_divergence: {}", pl.col("adapter_divergence")),
    )
    frame = frame.with_columns(reason=reason).with_columns(
        status=pl.when(pl.col("reason").is_not_null()).then(pl.lit("incomplete")).otherwise(pl.lit("scored")),
    )
    incomplete = pl.col("status") == "incomplete"
    never, extra = pl.col("never_called"), pl.col("extra_writes")
    short, surplus, unknown = pl.col("short_called"), pl.col("surplus_called"), pl.col("unknown_tools")
    order_na = (pl.col("tool_match") == "unordered") & (pl.col("dependencies").list.len().fill_null(0) == 0)
    strict_break = (pl.col("tool_match") == "strict_order") & pl.col("path_order_break").is_not_null()
    events = pl.col("order_violations")
    frame = frame.with_columns(
        *_stage(
            incomplete,
            None,
            None,
            pl.col("policy_violation"),
            pl.format("policy_violation: {}", _listing(pl.col("policy_violations"))),
            "policy",
        ),
        *_stage(
            incomplete,
            goal_only,
            pl.lit("tool_match goal_only: scored on the outcome only"),
            (unknown.list.len() > 0) | (never.list.len() > 0) | (short.list.len() > 0) | (surplus.list.len() > 0) | (extra.list.len() > 0),
            _joined(
                (unknown.list.len() > 0, pl.format("unknown_tool: {} (not in the tool registry)", unknown.list.join(", "))),
                (never.list.len() > 0, pl.format("path tools never called: {}", never.list.join(", "))),
                (short.list.len() > 0, pl.format("path calls not made: {}", short.list.join(", "))),
                (surplus.list.len() > 0, pl.format("surplus calls: {}", surplus.list.join(", "))),
                (extra.list.len() > 0, pl.format("non-read-only tools outside the path called: {}", extra.list.join(", "))),
            ),
            "tool_selection",
        ),
        *_stage(
            incomplete,
            goal_only,
            pl.lit("tool_match goal_only: scored on the outcome only"),
            pl.col("invalid_calls").list.len() > 0,
            pl.format("invalid calls: {}", _listing(pl.col("invalid_calls"))),
            "tool_arguments",
        ),
        *_stage(
            incomplete,
            goal_only | order_na,
            pl.when(goal_only)
            .then(pl.lit("tool_match goal_only: scored on the outcome only"))
            .otherwise(pl.lit("tool_match unordered and no dependencies declared")),
            (events.list.len() > 0) | strict_break,
            _joined(
                (events.list.len() > 0, pl.format("dependency events: {}", events.list.join(", "))),
                (strict_break, pl.format("path order: {}", pl.col("path_order_break"))),
            ),
            "tool_order",
        ),
        *_stage(
            incomplete, None, None, pl.col("loop_detected"), pl.format("loop_detected: {}", pl.col("loop_calls").list.join("; ")), "loop"
        ),
    )
    frame = frame.with_columns(
        *(pl.when(incomplete).then(None).otherwise(pl.col(c)).alias(c) for c in _METRICS),
        n_path_calls=pl.col("n_ref"),
    )
    tool_scores = frame.select(*(pl.col(c).cast(dtype) for c, dtype in TOOL_SCORES_SCHEMA.items())).sort(
        "run_id", "case_id", "attempt", "trace_id"
    )
    return tool_scores, _diffs(parts)


def _diffs(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """tool_call_diffs: each actual call in order (same, args_differ, unexpected), then the path calls never made."""
    calls, ref_t, best = parts["calls"], parts["ref_t"], parts["best"]
    unmatched = calls.filter(pl.col("ref_pos").is_null()).with_columns(rank=pl.int_range(pl.len()).over(T, "tool"))
    missing = ref_t.filter(pl.col("matched_pos").is_null()).with_columns(rank=pl.int_range(pl.len()).over(T, "ref_tool"))
    paired = unmatched.join(
        missing.select(T, "rank", tool="ref_tool", paired_pos="ref_pos", paired_key="ref_key"),
        on=[T, "tool", "rank"],
        how="left",
    )
    # a call matched through accepted values or value rules may differ from the path call's canonical args
    matched_rows = calls.filter(pl.col("ref_pos").is_not_null()).join(ref_t.select(T, "ref_pos", "ref_key"), on=[T, "ref_pos"], how="left").select(
        T,
        "pos",
        "ref_pos",
        pl.col("ref_key").alias("expected_call"),
        pl.col("key").alias("actual_call"),
        pl.col("status").alias("actual_status"),
        pl.lit("same").alias("match"),
    )
    unmatched_rows = paired.select(
        T,
        "pos",
        pl.col("paired_pos").alias("ref_pos"),
        pl.col("paired_key").alias("expected_call"),
        pl.col("key").alias("actual_call"),
        pl.col("status").alias("actual_status"),
        pl.when(pl.col("paired_pos").is_not_null()).then(pl.lit("args_differ")).otherwise(pl.lit("unexpected")).alias("match"),
    )
    used = paired.filter(pl.col("paired_pos").is_not_null()).select(T, pl.col("paired_pos").alias("ref_pos"))
    missing_rows = missing.join(used, on=[T, "ref_pos"], how="anti").select(
        T,
        pl.lit(None, dtype=pl.Int64).alias("pos"),
        "ref_pos",
        pl.col("ref_key").alias("expected_call"),
        pl.lit(None, dtype=pl.String).alias("actual_call"),
        pl.lit(None, dtype=pl.String).alias("actual_status"),
        pl.lit("missing").alias("match"),
    )
    rows = pl.concat([matched_rows, unmatched_rows, missing_rows], how="vertical_relaxed")
    keys = parts["base"].select(T, "run_id", "trace_id", "case_id", "attempt").join(best.select(T, "matched_path"), on=T, how="left")
    return (
        rows.with_columns(group=pl.col("pos").is_null(), order=pl.coalesce("pos", "ref_pos"))
        .sort(T, "group", "order")
        .with_columns(position=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(T))
        .join(keys, on=T, how="left")
        .with_columns(actual_index=pl.col("pos") + 1, expected_index=pl.col("ref_pos") + 1)
        .select(*(pl.col(c).cast(dtype) for c, dtype in TOOL_CALL_DIFFS_SCHEMA.items()))
        .sort("run_id", "case_id", "attempt", "trace_id", "position")
    )
