"""Import Berkeley Function Calling Leaderboard items and model results (`eval-pipeline import bfcl`).

Input: a BFCL question file (JSON Lines `{"id", "question": [[messages]], "function": [{name, description,
parameters}]}`), its possible-answer file (`{"id", "ground_truth": [{FUNCTION: {PARAM: [accepted values]}}]}`,
`""` among the values = the parameter may be left out) and either BFCL's model result file (`--results`, JSONL
`{"id", "result", ...}`) or `--self-check` (one trace per item made of its first accepted answer).

- Each item becomes a case: `case_id` = the BFCL id, lanes [agent], input = the last user message,
  `tool_match: unordered` (BFCL checks parallel calls in any order), `allowed_tools` = the functions the item
  offers, one reference call per ground-truth entry: `args` = the first accepted value of each parameter (left
  out when that value is `""`, except for a parameter the function requires), `accepted` = every accepted value
  (BFCL's dict-of-lists answers of `dict` parameters, and lists of them, expanded into concrete values: a
  cartesian product, `""` = the key may be absent, at most `max_expansion` values a parameter), `optional` =
  the parameters whose list holds `""` and that the function does not require. No milestones: BFCL has no world
  state, so the outcome is not_applicable.
- The registry: one tool per function, BFCL's types written as JSON Schema (`dict` → object, `float` → number,
  `tuple` → array, `any` → no type; `properties`, `required`, `items`, `description` and `default` kept; the top
  level `additionalProperties: false`, BFCL's "unexpected parameter"), every tool `read_only: false` (BFCL
  checks every call, whatever its name says), `value_rules: bfcl` (strings compared as BFCL's checker
  compares them, an integer parameter given 2.0 is a type error). Three rules follow BFCL's checker rather
  than plain JSON Schema: `enum` is kept as the annotation `x-bfcl-enum`, not enforced (BFCL never checks it,
  and for 104 parameters of the live items the first accepted value lies outside the enum); a nested dict's
  `required` is kept as `x-bfcl-required` (BFCL checks nested keys against the answers only); a parameter whose
  first accepted value is of another type than the one declared (BFCL's "variable" rule: `number_of_rooms:
  "dontcare"`, `None`) gets that type too, in that item's definition only.
- A function name that items define differently (other parameters, or answers that widen a type: 191 of the
  528 names of the four live files, 161 within live_multiple alone, so one environment version per file does not
  avoid it) is registered once per definition, as `<name>@<first item defining it>`; the calls and reference
  calls of an item resolve to the definition that item offers, so every item is checked against its own
  function. `collisions="error"` refuses such a file instead, naming both items.
- Results: the prompting form (a string `"[f(a=1, b='x'), g(c=[1, 2])]"`, decoded with Python's `ast` as
  BFCL's decoder does, never evaluated) or the function-calling form (a list of `{name: {args}}` or
  `{name: "<JSON args>"}`, or of JSON strings of those, or OpenAI tool calls) becomes tool_call steps (status
  ok, result null). Lines of the same id are attempts 1, 2, ... in file order. A result that cannot be decoded
  is written as a trace whose only step is a `finish` step holding the raw output: no call, so
  tool_selection fails on the missing calls, which is how BFCL counts it (a decoder failure is a wrong answer,
  not a missing one).
"""

from __future__ import annotations

import ast
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jsonschema import validators as schema_validators

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.contracts.models import ToolRegistry
from eval_pipeline.importers.common import (
    DEFAULT_CORPUS_VERSION,
    ImporterError,
    ImportSummary,
    existing_registry,
    finish_import,
    import_reject,
    read_records,
    start_import,
)
from eval_pipeline.io.storage import open_location

FORMAT = "bfcl"
MAX_EXPANSION = 10_000  # concrete accepted values of one parameter, after expanding BFCL's nested answers
MAX_LISTED = 10  # item ids named in one summary note
BFCL_TYPES: dict[str, str | None] = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": None,
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
}
KEPT_KEYWORDS = ("description", "default")
_ABSENT = object()  # a nested key that may be left out


class DecodeError(ValueError):
    """A model result that is not a list of function calls."""


# ---------------------------------------------------------------- schemas


def json_schema(parameters: Mapping[str, Any], top: bool = True) -> dict[str, Any]:
    """A BFCL parameter schema (its own types) as JSON Schema."""
    out: dict[str, Any] = {}
    kind = parameters.get("type")
    if isinstance(kind, str):
        if kind not in BFCL_TYPES:
            raise ImporterError(f"unknown BFCL parameter type {kind!r}")
        if BFCL_TYPES[kind] is not None:
            out["type"] = BFCL_TYPES[kind]
    for key in KEPT_KEYWORDS:
        if key in parameters:
            out[key] = parameters[key]
    if "enum" in parameters:
        out["x-bfcl-enum"] = parameters["enum"]  # BFCL never checks enums; kept as an annotation
    if isinstance(parameters.get("properties"), dict):
        out["properties"] = {
            name: json_schema(spec, top=False) if isinstance(spec, dict) else {}
            for name, spec in parameters["properties"].items()
        }
    if isinstance(parameters.get("items"), dict):
        out["items"] = json_schema(parameters["items"], top=False)
    if isinstance(parameters.get("required"), list):
        # BFCL checks only the function's own required parameters; a nested dict's keys are checked by the answers
        out["required" if top else "x-bfcl-required"] = list(parameters["required"])
    if top:
        out["type"] = "object"
        out.setdefault("properties", {})
        out["additionalProperties"] = False
    return out


def json_type(value: Any) -> str:
    """The JSON Schema type of a value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _admits(declared: Any, kind: str) -> bool:
    kinds = [declared] if isinstance(declared, str) else list(declared)
    return kind in kinds or (kind == "integer" and "number" in kinds)


def widen(schema: dict[str, Any], extra_types: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The schema with each parameter's answer types added where its declared type does not admit them."""
    for name, kinds in extra_types.items():
        spec = schema.get("properties", {}).get(name)
        if not isinstance(spec, dict) or "type" not in spec:
            continue
        missing = sorted(k for k in kinds if not _admits(spec["type"], k))
        if missing:
            declared = [spec["type"]] if isinstance(spec["type"], str) else list(spec["type"])
            spec["type"] = declared + missing
    return schema


# ---------------------------------------------------------------- accepted values


def _expand_dict(answer: Mapping[str, list[Any]], where: str, cap: int) -> list[dict[str, Any]]:
    """Every concrete dict a dict-of-accepted-lists allows (`""` = the key may be absent, or given as "")."""
    options = []
    for key, values in answer.items():
        choices: list[Any] = []
        for value in values:
            choice = _ABSENT if value == "" else value
            if not any(
                choice is c
                or (choice is not _ABSENT and c is not _ABSENT and canonical_json(c) == canonical_json(choice))
                for c in choices
            ):
                choices.append(choice)
        if "" in values:
            choices.append("")  # BFCL's dict checker accepts the key given as "" too
        options.append((key, choices))
    size = math.prod(len(c) for _, c in options)
    if size > cap:
        raise ImporterError(
            f"{where}: the nested accepted values expand to {size} combinations, more than the cap "
            f"of {cap}; raise --max-expansion or trim the answer"
        )
    return [
        {key: value for (key, _), value in zip(options, combo, strict=True) if value is not _ABSENT}
        for combo in itertools.product(*(c for _, c in options))
    ]


def _lists_of_answers(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, list) for v in value.values())


def expand_accepted(values: Sequence[Any], spec: Mapping[str, Any], where: str, cap: int = MAX_EXPANSION) -> list[Any]:
    """Concrete accepted values of one parameter: BFCL's answers of a `dict` parameter (dicts of accepted lists)
    and of an array of dicts (lists of such dicts) expanded, one level deep as BFCL's checker reads them."""
    kind = spec.get("type")
    item_kind = spec.get("items", {}).get("type") if isinstance(spec.get("items"), dict) else None
    out: list[Any] = []
    for value in values:
        if kind == "dict" and _lists_of_answers(value):
            out.extend(_expand_dict(value, where, cap))
        elif (
            kind in ("array", "tuple")
            and item_kind == "dict"
            and isinstance(value, list)
            and value
            and all(_lists_of_answers(v) for v in value)
        ):
            per_item = [_expand_dict(v, f"{where}[{i}]", cap) for i, v in enumerate(value)]
            size = math.prod(len(p) for p in per_item)
            if size > cap:
                raise ImporterError(
                    f"{where}: the nested accepted values expand to {size} combinations, more than "
                    f"the cap of {cap}; raise --max-expansion or trim the answer"
                )
            out.extend(list(combo) for combo in itertools.product(*per_item))
        else:
            out.append(value)
        if len(out) > cap:
            raise ImporterError(f"{where}: more than {cap} accepted values; raise --max-expansion or trim the answer")
    seen: set[str] = set()
    unique = []
    for value in out:
        key = canonical_json(value)
        if key not in seen:
            seen.add(key)
            unique.append(value)
    return unique


def reference_call(
    name: str, answer: Mapping[str, list[Any]], function: Mapping[str, Any], where: str, cap: int = MAX_EXPANSION
) -> dict[str, Any]:
    """The case's reference call of one ground-truth entry: canonical args, every accepted value, the optional ones."""
    parameters = function.get("parameters") if isinstance(function.get("parameters"), dict) else {}
    properties = parameters.get("properties") if isinstance(parameters.get("properties"), dict) else {}
    required = set(parameters.get("required") or ())
    args: dict[str, Any] = {}
    accepted: dict[str, list[Any]] = {}
    optional: list[str] = []
    for param, values in answer.items():
        if not isinstance(values, list):
            raise ValueError(f"the accepted values of {name}.{param} are not a list")
        spec = properties.get(param) if isinstance(properties.get(param), dict) else {}
        concrete = expand_accepted(values, spec, f"{where}: {name}.{param}", cap)
        accepted[param] = concrete
        given = [v for v in concrete if v != ""]
        if param in required:
            # BFCL checks required parameters before the answers: a required one is never optional
            if concrete:
                args[param] = given[0] if given else ""
        elif concrete and concrete[0] != "":
            args[param] = concrete[0]
        if ("" in values and param not in required) or not concrete:
            # an empty list accepts no value; marking it optional keeps the contract valid, and a required one
            # still fails its schema when left out (BFCL can never pass it either). The live data has empty lists
            # for required parameters only; one for a non-required parameter would pass when left out here.
            optional.append(param)
    return {"name": name, "args": args, "accepted": accepted, "optional": optional}


# ---------------------------------------------------------------- decoding results


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _value(node: ast.AST) -> Any:
    """A Python literal of a prompting-form argument as a JSON value, read as BFCL's decoder reads it, never evaluated."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is Ellipsis:
            return "..."
        if isinstance(value, float) and not math.isfinite(value):
            raise DecodeError(f"a non-finite number {ast.unparse(node)}")
        if value is None or isinstance(value, str | bool | int | float):
            return value
        raise DecodeError(f"a {type(value).__name__} literal is not a JSON value: {ast.unparse(node)}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _value(node.operand)
        if _number(operand):
            return -operand if isinstance(node.op, ast.USub) else operand
        raise DecodeError(f"a sign before a non-number: {ast.unparse(node)}")
    if isinstance(node, ast.List | ast.Tuple):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise DecodeError(f"a ** expansion in a dict: {ast.unparse(node)}")
            name = _value(key)
            if not isinstance(name, str):
                raise DecodeError(f"a dict key that is not a string: {ast.unparse(key)}")
            out[name] = _value(value)
        return out
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        # BFCL evaluates arithmetic; only numbers (and string concatenation) are computed here, nothing is run
        left, right = _value(node.left), _value(node.right)
        if (
            _number(left)
            and _number(right)
            or (isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str))
        ):
            try:
                result = _BINARY[type(node.op)](left, right)
            except ArithmeticError as exc:
                raise DecodeError(f"arithmetic that fails: {ast.unparse(node)} ({exc})") from exc
            if isinstance(result, float) and not math.isfinite(result):
                raise DecodeError(f"arithmetic without a finite result: {ast.unparse(node)}")
            return result
        raise DecodeError(f"arithmetic on non-numbers: {ast.unparse(node)}")
    if isinstance(node, ast.Name):
        return node.id  # BFCL reads a bare name (unit=celsius) as its text
    if isinstance(node, ast.Call):
        if not node.keywords:
            return ast.unparse(node)  # BFCL keeps a nested call without keywords as its source text
        name, args, _ = _call(node)
        return {name: args}
    if isinstance(node, ast.Subscript):
        return ast.unparse(node)
    raise DecodeError(f"unsupported expression {type(node).__name__}: {ast.unparse(node)[:80]}")


def _call(node: ast.Call) -> tuple[str, dict[str, Any], int]:
    """(dotted function name, keyword args, number of positional args) of a call."""
    parts = []
    func = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        raise DecodeError(f"a call of something that is not a (dotted) name: {ast.unparse(node.func)[:80]}")
    parts.append(func.id)
    args = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise DecodeError(f"a ** expansion in a call: {ast.unparse(node)[:80]}")
        args[keyword.arg] = _value(keyword.value)
    return ".".join(reversed(parts)), args, len(node.args)


def decode_prompting(text: str) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """(calls, positional args dropped) of BFCL's prompting form, cleaned as BFCL cleans it (backticks, newlines and
    spaces stripped, brackets added, wrapping quotes dropped). Positional arguments are dropped, as BFCL drops them."""
    cleaned = text.strip("`\n ")
    if not cleaned.startswith("["):
        cleaned = "[" + cleaned
    if not cleaned.endswith("]"):
        cleaned = cleaned + "]"
    cleaned = cleaned.strip().strip("'")
    try:
        tree = ast.parse(cleaned, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"not Python call syntax: {exc}") from exc
    body = tree.body
    nodes = (
        [body] if isinstance(body, ast.Call) else list(body.elts) if isinstance(body, ast.List | ast.Tuple) else None
    )
    if nodes is None:
        raise DecodeError(f"not a list of calls: a {type(body).__name__}")
    calls, dropped = [], 0
    for node in nodes:
        if not isinstance(node, ast.Call):
            raise DecodeError(f"an element that is not a call: {ast.unparse(node)[:80]}")
        name, args, positional = _call(node)
        calls.append((name, args))
        dropped += positional
    return calls, dropped


def _fc_call(item: Any) -> tuple[str, dict[str, Any]]:
    """One call of the function-calling form: {name: {args}}, {name: "<JSON args>"}, an OpenAI tool call, or a JSON string of one."""
    if isinstance(item, str):
        try:
            item = json.loads(item)
        except json.JSONDecodeError as exc:
            raise DecodeError(f"a call that is not JSON: {item[:80]!r}") from exc
    if not isinstance(item, dict):
        raise DecodeError(f"a call that is not an object: {json.dumps(item)[:80]}")
    if isinstance(item.get("function"), dict) and isinstance(item["function"].get("name"), str):
        name, args = item["function"]["name"], item["function"].get("arguments", {})  # an OpenAI tool call
    elif isinstance(item.get("name"), str) and ("arguments" in item or "args" in item):
        name, args = item["name"], item.get("arguments", item.get("args", {}))
    elif len(item) == 1:
        name, args = next(iter(item.items()))
    else:
        raise DecodeError(f"a call that is neither {{name: args}} nor a tool call: {json.dumps(item)[:80]}")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise DecodeError(f"arguments of {name} that are not JSON: {args[:80]!r}") from exc
    if not isinstance(args, dict):
        raise DecodeError(f"arguments of {name} that are not an object: {json.dumps(args)[:80]}")
    if not name:
        raise DecodeError("a call without a function name")
    return name, args


def decode_result(result: Any) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """(calls, positional args dropped) of one BFCL model result; DecodeError when it is not a list of calls."""
    if isinstance(result, str):
        stripped = result.strip()
        if stripped.startswith(("[{", '["', "{")) or stripped == "[]":
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, list):
                return [_fc_call(item) for item in value], 0
        return decode_prompting(result)
    if isinstance(result, list):
        calls: list[tuple[str, dict[str, Any]]] = []
        dropped = 0
        for item in result:
            if isinstance(item, str) and not item.strip().startswith("{"):
                found, positional = decode_prompting(item)
                calls += found
                dropped += positional
            else:
                calls.append(_fc_call(item))
        return calls, dropped
    raise DecodeError(f"a {type(result).__name__}, neither a prompting-form string nor a list of calls")


# ---------------------------------------------------------------- the import


def _last_user_text(question: Any) -> str:
    """The text of the last user message of BFCL's `question` (a list of turns, each a list of messages)."""
    messages = [m for turn in question if isinstance(turn, list) for m in turn] if isinstance(question, list) else []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def _item_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"not a JSON object: a {type(record).__name__}"
    if not isinstance(record.get("id"), str) or not record["id"]:
        return "no id"
    if "/" in record["id"]:
        return f"id {record['id']!r} holds '/', which a case id cannot"
    if not isinstance(record.get("question"), list):
        return "no question list"
    functions = record.get("function")
    if not isinstance(functions, list) or not all(
        isinstance(f, dict)
        and isinstance(f.get("name"), str)
        and f["name"]
        and isinstance(f.get("parameters", {}), dict)
        for f in functions
    ):
        return "no function list of {name, description, parameters}"
    names = [f["name"] for f in functions]
    if len(set(names)) != len(names):
        return "the item offers one function name twice"
    return None


def _answer_problem(answer: Any, offered: set[str]) -> str | None:
    if not isinstance(answer, dict) or not isinstance(answer.get("ground_truth"), list):
        return "its possible answer has no ground_truth list"
    for entry in answer["ground_truth"]:
        if not (isinstance(entry, dict) and len(entry) == 1 and isinstance(next(iter(entry.values())), dict)):
            return f"a ground-truth entry is not {{FUNCTION: {{PARAM: [values]}}}}: {json.dumps(entry)[:80]}"
        name = next(iter(entry))
        if name not in offered:
            return f"the ground truth calls {name}, which the item does not offer"
    return None


def answer_types(function: Mapping[str, Any], answers: Iterable[Mapping[str, list[Any]]]) -> dict[str, list[str]]:
    """{param: JSON types} that a function's declared types do not admit but its first accepted values have (BFCL's
    "variable" rule accepts a value of the answer's type: `number_of_rooms: "dontcare"` for an integer)."""
    schema = json_schema(function.get("parameters") or {})
    extra: dict[str, set[str]] = {}
    for answer in answers:
        for param, values in answer.items():
            spec = schema["properties"].get(param)
            given = [v for v in values if v != ""] if isinstance(values, list) else []
            if isinstance(spec, dict) and "type" in spec and given and not _admits(spec["type"], json_type(given[0])):
                extra.setdefault(param, set()).add(json_type(given[0]))
    return {param: sorted(kinds) for param, kinds in sorted(extra.items())}


def _registry_names(
    items: Sequence[tuple[int, dict[str, Any]]], extras: Mapping[tuple[str, str], dict[str, list[str]]], collisions: str
) -> dict[tuple[str, str], str]:
    """The registry name of each (item id, function): names that items define differently (other parameters, or
    answers of other types) are qualified `<name>@<first item defining it>`."""

    def identity(item: Mapping[str, Any], function: Mapping[str, Any]) -> tuple[str, str]:
        extra = extras.get((item["id"], function["name"]), {})
        return function["name"], canonical_json([function.get("parameters", {}), extra])

    first: dict[tuple[str, str], str] = {}
    variants: dict[str, list[str]] = {}
    for _, item in items:
        for function in item["function"]:
            key = identity(item, function)
            if key not in first:
                first[key] = item["id"]
                variants.setdefault(function["name"], []).append(item["id"])
    clashing = {name: ids for name, ids in variants.items() if len(ids) > 1}
    if clashing and collisions == "error":
        name, ids = sorted(clashing.items())[0]
        raise ImporterError(
            f"function {name} is defined differently by items {ids[0]} and {ids[1]} (other parameters or answer types) "
            f"({len(clashing)} function names clash in this file); import without --collisions error to register each "
            "definition as <name>@<first item>, or import the clashing items into another --environment-version"
        )
    names: dict[tuple[str, str], str] = {}
    for _, item in items:
        for function in item["function"]:
            defined_by = first[identity(item, function)]
            name = function["name"]
            names[(item["id"], name)] = f"{name}@{defined_by}" if name in clashing else name
    return names


def _steps(calls: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {"index": i, "kind": "tool_call", "tool": name, "args": args, "status": "ok", "result": None, "error": None}
        for i, (name, args) in enumerate(calls, start=1)
    ]


def _usage(line: Mapping[str, Any]) -> dict[str, Any] | None:
    """BFCL's token counts and latency (seconds) of a result line, where they are plain numbers."""

    def count(key: str) -> int | None:
        value = line.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    latency = line.get("latency")
    usage = {
        "input_tokens": count("input_token_count"),
        "output_tokens": count("output_token_count"),
        "cost_usd": None,
        "latency_ms": float(latency) * 1000.0 if _number(latency) else None,
    }
    return usage if any(v is not None for v in usage.values()) else None


def _unsatisfiable(reference: Mapping[str, Any], schema: dict[str, Any], checkers: dict[str, Any], tool: str) -> bool:
    """Whether a reference call's own canonical args break its tool's schema (the ground truth contradicts the
    function: BFCL can pass no call)."""
    if tool not in checkers:
        checkers[tool] = schema_validators.validator_for(schema)(schema)
    required = set(schema.get("required", ()))
    empty = any(not values and name in required for name, values in reference["accepted"].items())
    return empty or not checkers[tool].is_valid(reference["args"])


def _note_ids(summary: ImportSummary, what: str, ids: Sequence[str]) -> None:
    if ids:
        listed = ", ".join(ids[:MAX_LISTED]) + (f" (+{len(ids) - MAX_LISTED} more)" if len(ids) > MAX_LISTED else "")
        summary.notes.append(f"{len(ids)} {what}: {listed}")


def import_bfcl(
    source: str | Path,
    run_id: str,
    data_root: str | Path,
    answers: str | Path | None = None,
    results: str | Path | None = None,
    self_check: bool = False,
    dataset_version: str | None = None,
    environment_version: str | None = None,
    corpus_version: str = DEFAULT_CORPUS_VERSION,
    tools: str | Path | None = None,
    tool_match: str = "unordered",
    candidate: str | None = None,
    model: str | None = None,
    mode: str | None = None,
    baseline_run_id: str | None = None,
    overwrite: bool = False,
    collisions: str = "qualify",
    underscore_to_dot: bool = False,
    max_expansion: int = MAX_EXPANSION,
) -> ImportSummary:
    """Write the cases, registry, traces and run manifest of a BFCL question file and its results under data_root.

    `source` is the question file; `answers` its possible-answer file (default: `possible_answer/<same name>` beside
    it, BFCL's layout). Exactly one of `results` (BFCL's model result file) and `self_check` gives the traces.
    `underscore_to_dot`: a called name that is an offered name with '.' written '_' is that function (BFCL's flag
    for models whose API forbids '.' in function names).
    """
    if tools is not None:
        raise ImporterError("bfcl builds its registry from the items' function definitions; --tools does not apply")
    if (results is None) == (not self_check):
        raise ImporterError("give exactly one of --results FILE (BFCL's model result file) and --self-check")
    if collisions not in ("qualify", "error"):
        raise ImporterError(f"collisions must be qualify or error, not {collisions!r}")
    started = start_import(FORMAT, source, run_id, data_root, dataset_version, environment_version, corpus_version)
    path, summary, records, rejects = started.path, started.summary, started.records, started.rejects
    answers_path = Path(answers) if answers is not None else path.parent / "possible_answer" / path.name
    if not answers_path.is_file():
        raise ImporterError(f"no possible-answer file {answers_path}; give it with --answers")
    answer_records, unreadable = read_records(answers_path)
    if unreadable:
        number, reason = unreadable[0]
        raise ImporterError(f"{answers_path} line {number}: {reason}")
    by_id = {a["id"]: a for _, a in answer_records if isinstance(a, dict) and isinstance(a.get("id"), str)}

    items: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    for number, record in records:
        problem = _item_problem(record)
        if problem is None and record["id"] in seen:
            problem = f"duplicate id {record['id']}"
        if problem is None and record["id"] not in by_id:
            problem = f"no possible answer for {record['id']} in {answers_path.name}"
        if problem is None:
            problem = _answer_problem(by_id[record["id"]], {f["name"] for f in record["function"]})
        if problem:
            case_id = record.get("id") if isinstance(record, dict) and isinstance(record.get("id"), str) else None
            rejects.append(
                import_reject(run_id, FORMAT, path.name, number, problem, **({"case_id": case_id} if case_id else {}))
            )
            continue
        seen.add(record["id"])
        items.append((number, record))

    extras: dict[tuple[str, str], dict[str, list[str]]] = {}
    for _, item in items:
        offered = {f["name"]: f for f in item["function"]}
        called: dict[str, list[Mapping[str, list[Any]]]] = {}
        for entry in by_id[item["id"]]["ground_truth"]:
            name, answer = next(iter(entry.items()))
            called.setdefault(name, []).append(answer)
        for name, answers in called.items():
            extra = answer_types(offered[name], answers)
            if extra:
                extras[(item["id"], name)] = extra
    names = _registry_names(items, extras, collisions)
    functions: dict[
        str, tuple[dict[str, Any], dict[str, list[str]]]
    ] = {}  # registry name -> BFCL function, answer types
    cases: dict[str, dict[str, Any]] = {}
    for number, item in items:
        offered = {f["name"]: f for f in item["function"]}
        for function in item["function"]:
            functions.setdefault(
                names[(item["id"], function["name"])], (function, extras.get((item["id"], function["name"]), {}))
            )
        references = []
        try:
            for entry in by_id[item["id"]]["ground_truth"]:
                name, answer = next(iter(entry.items()))
                references.append(
                    reference_call(names[(item["id"], name)], answer, offered[name], item["id"], max_expansion)
                )
        except ValueError as exc:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, str(exc), case_id=item["id"]))
            continue
        cases[item["id"]] = {
            "case_id": item["id"],
            "case_revision": 1,
            "lanes": ["agent"],
            "input": _last_user_text(item["question"]),
            "allowed_tools": [names[(item["id"], f["name"])] for f in item["function"]],
            "reference_tool_calls": references,
            "tool_match": tool_match,
        }

    tool_entries = []
    for name in sorted(functions):
        function, extra = functions[name]
        schema = widen(json_schema(function.get("parameters") or {}), extra)
        tool_entries.append(
            {
                "name": name,
                "description": function.get("description") if isinstance(function.get("description"), str) else "",
                "read_only": False,  # BFCL checks every call, whatever its name suggests
                "destructive": False,
                "args": schema,
            }
        )
    registry = {"environment_version": summary.environment_version, "value_rules": "bfcl", "tools": tool_entries}
    _check_existing_registry(data_root, registry)
    qualified = sorted(name for name in functions if "@" in name)
    if qualified:
        clashing = sorted({name.split("@", 1)[0] for name in qualified})
        summary.notes.append(
            f"{len(clashing)} function names are defined differently by different items: "
            f"registered as {len(qualified)} tools <name>@<first item defining it> "
            f"(e.g. {qualified[0]}); each item's calls resolve to the definition it offers"
        )
    schemas = {t["name"]: t["args"] for t in tool_entries}
    checkers: dict[str, Any] = {}
    _note_ids(
        summary,
        "items whose ground truth breaks their own function's schema (BFCL can pass no call for them)",
        [
            cid
            for cid, case in cases.items()
            if any(_unsatisfiable(r, schemas[r["name"]], checkers, r["name"]) for r in case["reference_tool_calls"])
        ],
    )

    traces: list[dict[str, Any]] = []
    if self_check:
        for case in cases.values():
            traces.append(
                _trace(run_id, case, 1, _steps((r["name"], r["args"]) for r in case["reference_tool_calls"]), None)
            )
        trace_file, default_candidate = "self-check.jsonl", "bfcl-self-check"
    else:
        results_path = Path(results)  # type: ignore[arg-type]
        traces, result_rejects = _result_traces(run_id, results_path, cases, names, underscore_to_dot, summary)
        rejects += result_rejects
        trace_file, default_candidate = f"{results_path.stem}.jsonl", results_path.stem
        attempted = {t["case_id"] for t in traces}
        _note_ids(
            summary, "items have no result line (no case written for them)", [c for c in cases if c not in attempted]
        )
        cases = {cid: case for cid, case in cases.items() if cid in attempted}
    return finish_import(
        summary,
        data_root,
        list(cases.values()),
        traces,
        registry,
        rejects,
        candidate or default_candidate,
        model,
        mode,
        trace_file,
        overwrite,
        baseline_run_id=baseline_run_id,
    )


def _trace(
    run_id: str, case: Mapping[str, Any], attempt: int, steps: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "trace_id": f"{run_id}:{case['case_id']}#{attempt}",
        "case_id": case["case_id"],
        "case_revision": case["case_revision"],
        "attempt": attempt,
        "status": "ok",
        "error": None,
        "input": case["input"],
        "steps": steps,
        "final_state": None,
        "usage": usage,
    }


def _resolve(
    name: str,
    item_id: str,
    names: Mapping[tuple[str, str], str],
    underscore_to_dot: bool,
    offered: Mapping[str, list[str]],
) -> str:
    """The registry name of a called function in an item: the definition that item offers, else the name as called."""
    if (item_id, name) in names:
        return names[(item_id, name)]
    if underscore_to_dot:
        for function in offered.get(item_id, ()):
            if function.replace(".", "_") == name:
                return names[(item_id, function)]
    return name


def _result_traces(
    run_id: str,
    results_path: Path,
    cases: Mapping[str, dict[str, Any]],
    names: Mapping[tuple[str, str], str],
    underscore_to_dot: bool,
    summary: ImportSummary,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Traces of BFCL's model result lines, and rejects for the lines that are not results of an imported item."""
    records, unreadable = read_records(results_path)
    summary.records += len(records) + len(unreadable)
    rejects = [import_reject(run_id, FORMAT, results_path.name, number, reason) for number, reason in unreadable]
    offered: dict[str, list[str]] = {}
    for item_id, function in names:
        offered.setdefault(item_id, []).append(function)
    traces: list[dict[str, Any]] = []
    attempts: dict[str, int] = {}
    undecodable: list[str] = []
    dropped_positional = 0
    for number, line in records:
        if not isinstance(line, dict) or not isinstance(line.get("id"), str):
            rejects.append(import_reject(run_id, FORMAT, results_path.name, number, "not a result line {id, result}"))
            continue
        item_id = line["id"]
        if item_id not in cases:
            rejects.append(
                import_reject(
                    run_id,
                    FORMAT,
                    results_path.name,
                    number,
                    f"result of {item_id}, which is not an imported item",
                    case_id=item_id,
                )
            )
            continue
        if "result" not in line:
            rejects.append(import_reject(run_id, FORMAT, results_path.name, number, "no result", case_id=item_id))
            continue
        attempt = attempts[item_id] = attempts.get(item_id, 0) + 1
        try:
            calls, positional = decode_result(line["result"])
        except (DecodeError, RecursionError) as exc:
            raw = line["result"] if isinstance(line["result"], str) else json.dumps(line["result"], ensure_ascii=False)
            steps = [{"index": 1, "kind": "finish", "content": raw}]
            undecodable.append(f"{run_id}:{item_id}#{attempt} ({exc})")
        else:
            dropped_positional += positional
            steps = _steps((_resolve(name, item_id, names, underscore_to_dot, offered), args) for name, args in calls)
        traces.append(_trace(run_id, cases[item_id], attempt, steps, _usage(line)))
    _note_ids(
        summary,
        "results could not be decoded as function calls (written as a finish step with the raw output "
        "and no call: tool_selection fails, as BFCL counts a decoder failure)",
        undecodable,
    )
    if dropped_positional:
        summary.notes.append(
            f"{dropped_positional} positional arguments dropped (BFCL's decoder reads keyword arguments only)"
        )
    return traces, rejects


def _check_existing_registry(data_root: str | Path, registry: dict[str, Any]) -> None:
    """Refuse to import against a tools/<environment_version>/tools.yaml that holds other tools than these items define."""
    existing = existing_registry(open_location(data_root), registry["environment_version"])
    if existing is None:
        return
    built = ToolRegistry.model_validate(registry).model_dump(mode="json")
    if canonical_json(existing) != canonical_json(built):
        raise ImporterError(
            f"tools/{registry['environment_version']}/tools.yaml exists with other tools than these items define; "
            "import this question file into another --environment-version (one per BFCL file)"
        )


__all__ = ["decode_prompting", "decode_result", "expand_accepted", "import_bfcl", "json_schema", "reference_call"]
