"""BFCL question and possible-answer files read into items, and the items into cases and a tool registry.

The rules (which items are read, how a function defined differently by two items is named, what a case holds) are
in the docstring of importers/bfcl.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.importers.bfcl_schema import answer_types, json_schema, reference_call, widen
from eval_pipeline.importers.common import ImporterError, import_reject, read_records

FORMAT = "bfcl"
Item = tuple[int, dict[str, Any]]  # (record number, question item)
Names = Mapping[tuple[str, str], str]  # (item id, function name) -> registry name
Extras = Mapping[tuple[str, str], dict[str, list[str]]]  # (item id, function name) -> {param: answer types}


# ---------------------------------------------------------------- reading the files


def read_answers(path: Path) -> dict[str, dict[str, Any]]:
    """The possible answers of a BFCL possible-answer file by item id; ImporterError when it is missing or a line
    cannot be read."""
    if not path.is_file():
        raise ImporterError(f"no possible-answer file {path}; give it with --answers")
    answer_records, unreadable = read_records(path)
    if unreadable:
        number, reason = unreadable[0]
        raise ImporterError(f"{path} line {number}: {reason}")
    return {a["id"]: a for _, a in answer_records if isinstance(a, dict) and isinstance(a.get("id"), str)}


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


def usable_items(
    run_id: str,
    source_name: str,
    records: Sequence[tuple[int, Any]],
    answers: Mapping[str, dict[str, Any]],
    answers_name: str,
) -> tuple[list[Item], list[dict[str, Any]]]:
    """The records that are items with a possible answer, in file order, and a reject for each other record."""
    items: list[Item] = []
    rejects: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, record in records:
        problem = _item_problem(record)
        if problem is None and record["id"] in seen:
            problem = f"duplicate id {record['id']}"
        if problem is None and record["id"] not in answers:
            problem = f"no possible answer for {record['id']} in {answers_name}"
        if problem is None:
            problem = _answer_problem(answers[record["id"]], {f["name"] for f in record["function"]})
        if problem:
            case_id = record.get("id") if isinstance(record, dict) and isinstance(record.get("id"), str) else None
            rejects.append(
                import_reject(run_id, FORMAT, source_name, number, problem, **({"case_id": case_id} if case_id else {}))
            )
            continue
        seen.add(record["id"])
        items.append((number, record))
    return items, rejects


# ---------------------------------------------------------------- the functions' registry names


def answer_extras(
    items: Sequence[Item], answers: Mapping[str, dict[str, Any]]
) -> dict[tuple[str, str], dict[str, list[str]]]:
    """The answer types each item's ground truth gives a function beyond its declared ones (answer_types), by (item
    id, function name); functions without such types are left out."""
    extras: dict[tuple[str, str], dict[str, list[str]]] = {}
    for _, item in items:
        offered = {f["name"]: f for f in item["function"]}
        called: dict[str, list[Mapping[str, list[Any]]]] = {}
        for entry in answers[item["id"]]["ground_truth"]:
            name, answer = next(iter(entry.items()))
            called.setdefault(name, []).append(answer)
        for name, answered in called.items():
            extra = answer_types(offered[name], answered)
            if extra:
                extras[(item["id"], name)] = extra
    return extras


def function_names(items: Sequence[Item], extras: Extras, collisions: str) -> dict[tuple[str, str], str]:
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


# ---------------------------------------------------------------- cases and registry


def _last_user_text(question: Any) -> str:
    """The text of the last user message of BFCL's `question` (a list of turns, each a list of messages)."""
    messages = [m for turn in question if isinstance(turn, list) for m in turn] if isinstance(question, list) else []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def item_cases(
    run_id: str,
    source_name: str,
    items: Sequence[Item],
    answers: Mapping[str, dict[str, Any]],
    names: Names,
    tool_match: str,
    max_expansion: int,
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The case of each item by id, and a reject for each item whose ground truth is no reference call."""
    cases: dict[str, dict[str, Any]] = {}
    rejects: list[dict[str, Any]] = []
    for number, item in items:
        offered = {f["name"]: f for f in item["function"]}
        references = []
        try:
            for entry in answers[item["id"]]["ground_truth"]:
                name, answer = next(iter(entry.items()))
                references.append(
                    reference_call(names[(item["id"], name)], answer, offered[name], item["id"], max_expansion)
                )
        except ValueError as exc:
            rejects.append(import_reject(run_id, FORMAT, source_name, number, str(exc), case_id=item["id"]))
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
    return cases, rejects


def item_registry(items: Sequence[Item], names: Names, extras: Extras, environment_version: str) -> dict[str, Any]:
    """The tool registry of the items' functions: one tool per registry name, from the first item defining it."""
    functions: dict[str, tuple[dict[str, Any], dict[str, list[str]]]] = {}  # registry name -> function, answer types
    for _, item in items:
        for function in item["function"]:
            functions.setdefault(
                names[(item["id"], function["name"])], (function, extras.get((item["id"], function["name"]), {}))
            )
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
    return {"environment_version": environment_version, "value_rules": "bfcl", "tools": tool_entries}


__all__ = [
    "FORMAT",
    "Extras",
    "Item",
    "Names",
    "answer_extras",
    "function_names",
    "item_cases",
    "item_registry",
    "read_answers",
    "usable_items",
]
