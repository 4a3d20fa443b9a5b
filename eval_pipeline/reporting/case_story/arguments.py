"""Tool-call arguments and world-state values as compact JSON, and where a call differs from the reference."""

from __future__ import annotations

import json

ABSENT = "(absent)"


def parse_json(text: str | None):
    """The value a JSON text holds; the text itself when it is not JSON, None for none."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def json_text(value) -> str:
    """A value as compact JSON (strings quoted, so "88171" and 88171 read apart)."""
    if value is ABSENT:
        return ABSENT
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def split_call(call: str | None) -> tuple[str | None, object]:
    """(tool, arguments) of a canonical call key `name({...})`; arguments stay text when they are not JSON."""
    if call is None:
        return None, None
    name, bracket, rest = call.partition("(")
    if not bracket or not rest.endswith(")"):
        return call, None
    return name, parse_json(rest[:-1])


def _same_value(a, b) -> bool:
    # bool is an int in Python: True must not equal 1, nor 1 equal "1"
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def field_diffs(expected, actual, path: str = "") -> list[tuple[str, str, str]]:
    """(dotted path, expected JSON, actual JSON) of every leaf where two argument values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual), key=str):
            where = f"{path}.{key}" if path else str(key)
            out.extend(field_diffs(expected.get(key, ABSENT), actual.get(key, ABSENT), where))
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(field_diffs(e, a, f"{path}[{i}]"))
        return out
    if expected is ABSENT and actual is ABSENT:
        return []
    if expected is not ABSENT and actual is not ABSENT and _same_value(expected, actual):
        return []
    return [(path, json_text(expected), json_text(actual))]


def call_argument_diffs(expected_call: str | None, actual_call: str | None) -> list[tuple[str, str, str]]:
    """(tool.field, expected, actual) for a call whose arguments differ from the reference; the whole calls when no
    field differs as a value (the scorer's value rules, such as strict types, decided)."""
    expected_tool, expected_args = split_call(expected_call)
    actual_tool, actual_args = split_call(actual_call)
    tool = actual_tool or expected_tool or "call"
    if expected_tool != actual_tool:
        return [(f"{tool} (tool)", json_text(expected_tool), json_text(actual_tool))]
    diffs = field_diffs(expected_args, actual_args)
    if not diffs:
        return [(f"{tool} (arguments)", expected_call or ABSENT, actual_call or ABSENT)]
    return [(f"{tool}.{where}" if where else tool, e, a) for where, e, a in diffs]


def value_at_path(state, path: str | None):
    """The value at a dotted path of a world state (ABSENT when a key is missing)."""
    if state is None or path is None:
        return ABSENT
    value = state
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return ABSENT
    return value
