"""Decoding BFCL model results into function calls, as BFCL's decoder reads them.

Two forms: the prompting form (a Python list of calls, read with `ast`, never evaluated) and the function-calling
form (JSON calls, OpenAI tool calls).
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any


class DecodeError(ValueError):
    """A model result that is not a list of function calls."""


def is_number(value: Any) -> bool:
    """Whether a JSON value is a number (an int or float, not a bool)."""
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
    """A Python literal of a prompting-form argument as a JSON value, read as BFCL's decoder reads it, never
    evaluated."""
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
        if is_number(operand):
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
            is_number(left)
            and is_number(right)
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
    """One call of the function-calling form: {name: {args}}, {name: "<JSON args>"}, an OpenAI tool call, or a JSON
    string of one."""
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


__all__ = ["DecodeError", "decode_prompting", "decode_result", "is_number"]
