"""BFCL's function definitions as JSON Schema, and its ground-truth answers as reference calls.

A reference call holds every accepted value of each parameter; the rules are in the docstring of importers/bfcl.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.importers.common import ImporterError

MAX_EXPANSION = 10_000  # concrete accepted values of one parameter, after expanding BFCL's nested answers
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


__all__ = [
    "BFCL_TYPES",
    "MAX_EXPANSION",
    "answer_types",
    "expand_accepted",
    "json_schema",
    "json_type",
    "reference_call",
    "widen",
]
