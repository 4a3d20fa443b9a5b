"""Value rules of tool arguments (docs/agent_lane.md "Value rules"): how argument values match a reference call's.

How a call's argument values are compared with a reference call's, and the strict type check of whole-number floats.

Rules come from three levels, most specific first: the case's `value_rules`, the tool's, the registry's (the tool
and registry levels are merged when the registry is loaded, frames.value_rules_json). Per argument the rule is the
first of: the case's `args["<tool>.<arg>"]`, the case's `args["<arg>"]`, the tool's `args["<arg>"]`, the case's
`match`, the tool's `match`; else `exact`.

- `exact`: canonical JSON equality (49 = 49.0; `true` is not 1).
- `normalized`: strings at any depth compared as BFCL's checker does (lower-case; whitespace and `,./-_*^` removed;
  `'` read as `"`); everything else exact.
- `numeric`: numbers at any depth equal within `tolerance` (absolute, default 1e-9); everything else exact.
- `any`: every value is accepted (free text such as a hand-off summary); whether it is given still counts.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

DEFAULT_TOLERANCE = 1e-9
_BFCL_STRIPPED = re.compile(r"[\s,./\-_*^]")


def normalized_text(text: str) -> str:
    """A string as the `normalized` rule compares it."""
    return _BFCL_STRIPPED.sub("", text).lower().replace("'", '"')


@dataclass(frozen=True)
class Rules:
    """The resolved value rules of one tool in one case."""

    match: str = "exact"
    tolerance: float = DEFAULT_TOLERANCE
    strict_types: bool = False
    args: dict[str, tuple[str, float]] = field(default_factory=dict)

    def for_arg(self, name: str) -> tuple[str, float]:
        """(rule, tolerance) of one argument."""
        return self.args.get(name, (self.match, self.tolerance))

    @property
    def plain(self) -> bool:
        """Whether every argument is compared exactly (then canonical call keys decide)."""
        return self.match == "exact" and all(rule == "exact" for rule, _ in self.args.values())


def _arg_rules(args: dict[str, Any], tolerance: float) -> dict[str, tuple[str, float]]:
    out = {}
    for name, rule in args.items():
        if isinstance(rule, str):
            out[name] = (rule, tolerance)
        else:
            out[name] = (rule["match"], rule.get("tolerance", tolerance))
    return out


@lru_cache(maxsize=4096)
def resolve_rules(case_rules_json: str | None, tool_rules_json: str | None, tool: str) -> Rules:
    """The rules of `tool` in a case, from the case's and the tool's (registry-merged) value_rules JSON."""
    case = json.loads(case_rules_json) if case_rules_json else {}
    tool_level = json.loads(tool_rules_json) if tool_rules_json else {}
    tolerance = case.get("tolerance", tool_level.get("tolerance", DEFAULT_TOLERANCE))
    args = _arg_rules(tool_level.get("args", {}), tolerance)
    case_args = case.get("args", {})
    args.update(_arg_rules({k: v for k, v in case_args.items() if "." not in k}, tolerance))
    prefix = f"{tool}."
    args.update(_arg_rules({k[len(prefix) :]: v for k, v in case_args.items() if k.startswith(prefix)}, tolerance))
    return Rules(
        match=case.get("match", tool_level.get("match", "exact")),
        tolerance=tolerance,
        strict_types=bool(case.get("strict_types", tool_level.get("strict_types", False))),
        args=args,
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def values_equal(actual: Any, expected: Any, rule: str, tolerance: float = DEFAULT_TOLERANCE) -> bool:
    """Whether an argument value equals an expected value under a rule."""
    if rule == "any":
        return True
    if isinstance(actual, str) and isinstance(expected, str):
        return normalized_text(actual) == normalized_text(expected) if rule == "normalized" else actual == expected
    if _number(actual) and _number(expected):
        if rule == "numeric":
            return math.isclose(actual, expected, rel_tol=0.0, abs_tol=tolerance)
        return actual == expected
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(
            values_equal(a, e, rule, tolerance) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            values_equal(actual[k], expected[k], rule, tolerance) for k in actual
        )
    # different JSON types (true vs 1, null vs "") never match; bool == bool and null == null do
    return type(actual) is type(expected) and actual == expected


def call_matches(
    args: dict[str, Any],
    ref_args: dict[str, Any],
    accepted: dict[str, list[Any]] | None,
    optional: list[str] | None,
    rules: Rules,
) -> bool:
    """Whether a call's args match a reference call: every given argument is a reference argument with an accepted
    value, and every reference argument not optional is given."""
    expected = {name: [value] for name, value in ref_args.items()}
    if accepted:
        expected.update(accepted)
    optional_names = set(optional or ())
    if any(name not in expected for name in args):
        return False
    for name, values in expected.items():
        if name not in args:
            if name not in optional_names:
                return False
            continue
        rule, tolerance = rules.for_arg(name)
        if not any(values_equal(args[name], value, rule, tolerance) for value in values):
            return False
    return True


def _schema_type_at(schema: Any, path: list[str]) -> Any:
    """The `type` a JSON Schema gives the value at a path of properties / items, or None when it says nothing."""
    node = schema
    for part in path:
        if not isinstance(node, dict):
            return None
        if part.isdigit() and isinstance(node.get("items"), dict):
            node = node["items"]
        elif isinstance(node.get("properties"), dict) and part in node["properties"]:
            node = node["properties"][part]
        else:
            return None
    return node.get("type") if isinstance(node, dict) else None


def strict_type_error(schema: Any, float_paths_json: str | None) -> str | None:
    """Why args break strict types (an `integer` argument written as a whole-number float), or None.

    As BFCL's checker: an argument itself or an item of a list argument; deeper values (inside an object argument)
    are compared by value only."""
    if not float_paths_json:
        return None
    for path in json.loads(float_paths_json):
        parts = path.split(".")
        if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            continue
        kind = _schema_type_at(schema, parts)
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        if "integer" in kinds and "number" not in kinds:
            return (
                f"schema: {path.replace('.', '/')}: a whole-number float where the schema wants an integer "
                "(strict_types)"
            )
    return None
