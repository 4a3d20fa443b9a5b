"""`eval-pipeline import ragas FILE` and `import deepeval FILE`: flat evaluation rows that carry their own gold.

Each row is one attempt. Ragas `EvaluationDataset` rows are read as `to_jsonl` writes them (one sample a line), as a
JSON array of samples, or as `to_csv` writes them (list and dict cells are Python literals there, `str()` of the
value); a row whose `user_input` is a message list is a multi-turn sample. DeepEval rows are read as
`EvaluationDataset.save_as` writes them: JSON (an array of goldens; an object holding `test_cases`, `testCases` or
`goldens` is read too), JSONL, and CSV (`context` and `retrieval_context` joined with `|`, tool calls as a JSON list,
`additional_metadata` as a JSON object). The mapping of every field is in docs/importers.md.

The retrieved contexts become one retrieval round and the context the model saw; the reference contexts the case's
required documents (ids resolved by the shared writer, so a reference given only as text meets the identical
retrieved text); tool calls become OpenAI chat messages, which the writer turns into steps.

Over 400 lines because two row formats, each read from JSON, JSONL and CSV, share one reading of rows into attempts.
"""

from __future__ import annotations

import ast
import csv
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from eval_pipeline.importers.attempts import Matching, import_attempts
from eval_pipeline.importers.common import ImporterError, ImportSummary, read_records
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.importers.source import (
    SourceAttempt,
    SourceDoc,
    SourceRound,
    Unreadable,
)

CSV_FIELD_LIMIT = 1 << 27  # a CSV cell may hold every retrieved passage of a row; csv's default stops at 128 KiB
DEEPEVAL_DELIMITER = "|"  # how DeepEval's save_as joins context lists in CSV and JSONL cells
DEEPEVAL_SOURCE_MARK = "deepeval_source="  # DeepEval's marker of a retrieved context with its source
DEFAULT_MATCHING = Matching()
DEEPEVAL_CONTAINERS = ("test_cases", "testCases", "goldens")
# DeepEval reads its test cases under snake_case names and their camelCase aliases (LLMTestCase validation aliases)
DEEPEVAL_ALIASES = {
    "actual_output": "actualOutput",
    "expected_output": "expectedOutput",
    "retrieval_context": "retrievalContext",
    "tools_called": "toolsCalled",
    "expected_tools": "expectedTools",
    "additional_metadata": "additionalMetadata",
    "token_cost": "tokenCost",
    "completion_time": "completionTime",
}

Row = dict[str, Any]
RowReader = Callable[[Row, str, int, str], SourceAttempt]


class BadRow(ValueError):
    """A row field with the wrong type: the row becomes a reject with this reason."""


def _text(row: Mapping[str, Any], name: str) -> str | None:
    value = row.get(name)
    if value is None or isinstance(value, str):
        return value
    raise BadRow(f"{name} is a {type(value).__name__}, not a string")


def _texts(row: Mapping[str, Any], name: str) -> list[str] | None:
    value = row.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRow(f"{name} is not a list of strings")
    return value


def _ids(row: Mapping[str, Any], name: str, texts: list[str] | None) -> list[str] | None:
    """A list of context ids (strings or integers, as Ragas allows) as strings, as long as its texts when both given."""
    value = row.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
        raise BadRow(f"{name} is not a list of strings or integers")
    if texts is not None and len(texts) != len(value):
        raise BadRow(f"{name} has {len(value)} ids for {len(texts)} contexts")
    return [str(v) for v in value]


def _docs(texts: list[str] | None, ids: list[str] | None) -> list[SourceDoc] | None:
    """Documents from parallel lists of texts and ids, either of which may be absent."""
    if texts is None and ids is None:
        return None
    count = len(texts if texts is not None else ids or [])
    return [SourceDoc(id=ids[i] if ids else None, text=texts[i] if texts is not None else None) for i in range(count)]


def _case_key(row: Mapping[str, Any], key: str, metadata: Any = None) -> str | None:
    """The case key of a row: a field of that name, else the key in the row's metadata object."""
    value = row.get(key)
    if value is None and isinstance(metadata, Mapping):
        value = metadata.get(key)
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, str | int):
        raise BadRow(f"{key} is a {type(value).__name__}, not a string")
    return str(value)


def _arguments(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRow(f"{what} are a {type(value).__name__}, not an object")
    return value


# Ragas


def _ragas_messages(turns: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Ragas messages as OpenAI chat messages: each AI tool call gets the id call_<n>, and the tool messages that
    follow answer the open calls in order (Ragas tool messages carry no call id); defects for tool messages left
    over."""
    messages: list[dict[str, Any]] = []
    defects: list[str] = []
    open_ids: list[str] = []
    calls = 0
    for number, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            raise BadRow(f"user_input message {number} is a {type(turn).__name__}, not an object")
        kind, content = turn.get("type"), turn.get("content")
        if not isinstance(content, str):
            raise BadRow(f"user_input message {number} has no string content")
        if kind == "human":
            messages.append({"role": "user", "content": content})
        elif kind == "ai":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            tool_calls = turn.get("tool_calls") or []
            if not isinstance(tool_calls, list):
                raise BadRow(f"user_input message {number}: tool_calls is not a list")
            for call in tool_calls:
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise BadRow(f"user_input message {number}: a tool call without a name")
                calls += 1
                open_ids.append(f"call_{calls}")
                message.setdefault("tool_calls", []).append(
                    {
                        "id": open_ids[-1],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": _arguments(call.get("args"), "tool call args")},
                    }
                )
            messages.append(message)
        elif kind == "tool":
            if not open_ids:
                defects.append(f"message {number}: a tool message with no tool call left to answer")
                continue
            messages.append({"role": "tool", "tool_call_id": open_ids.pop(0), "content": content})
        else:
            raise BadRow(f"user_input message {number} has type {kind!r}, not human, ai or tool")
    return messages, defects


def _reference_calls(value: Any, name: str, args_of: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in value):
        raise BadRow(f"{name} is not a list of tool calls with names")
    return [{"name": c["name"], "args": _arguments(args_of(c), f"{name} arguments")} for c in value]


def _ragas_multi_turn(row: Row, source_file: str, record: int, case_key: str) -> SourceAttempt:
    messages, defects = _ragas_messages(row["user_input"])
    inputs = [m["content"] for m in messages if m["role"] == "user"]
    if not inputs:
        raise BadRow("user_input has no human message")
    answers = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]
    calls = _reference_calls(row.get("reference_tool_calls"), "reference_tool_calls", lambda c: c.get("args"))
    return SourceAttempt(
        source_file,
        record,
        case_key=_case_key(row, case_key),
        input=inputs[0],
        messages=messages,
        answer=answers[-1] if answers else None,
        reference_answer=_text(row, "reference"),
        reference_tool_calls=calls,
        # Ragas ToolCallAccuracy compares the calls in order unless told otherwise (strict_order=True)
        tool_match="strict_order" if calls else None,
        defects=defects,
    )


def _ragas_single_turn(row: Row, source_file: str, record: int, case_key: str) -> SourceAttempt:
    retrieved = _texts(row, "retrieved_contexts")
    hits = _docs(retrieved, _ids(row, "retrieved_context_ids", retrieved))
    reference = _texts(row, "reference_contexts")
    _texts(row, "multi_responses")  # read to refuse a wrong type; one attempt has one response
    return SourceAttempt(
        source_file,
        record,
        case_key=_case_key(row, case_key),
        input=row["user_input"],
        rounds=[SourceRound(hits=hits)] if hits else [],
        context=hits,
        answer=_text(row, "response"),
        reference_answer=_text(row, "reference"),
        reference_docs=_docs(reference, _ids(row, "reference_context_ids", reference)),
    )


def ragas_attempt(row: Row, source_file: str, record: int, case_key: str = "case_id") -> SourceAttempt:
    """One Ragas sample as an attempt: a multi-turn one when user_input is a message list."""
    user_input = row.get("user_input")
    if user_input is None:
        raise BadRow("no user_input")
    if isinstance(user_input, list):
        return _ragas_multi_turn(row, source_file, record, case_key)
    if not isinstance(user_input, str):
        raise BadRow(f"user_input is a {type(user_input).__name__}, not a string or a message list")
    return _ragas_single_turn(row, source_file, record, case_key)


RAGAS_LITERALS = (
    "retrieved_contexts",
    "reference_contexts",
    "retrieved_context_ids",
    "reference_context_ids",
    "multi_responses",
    "rubrics",
    "reference_tool_calls",
    "reference_topics",
)


def _ragas_cell(name: str, cell: str) -> Any:
    """A Ragas CSV cell: `str()` of a list or dict is a Python literal there (JSON read too); text cells stay text,
    and user_input is a message list only when it reads as a list of objects."""
    if name not in (*RAGAS_LITERALS, "user_input") or not cell.lstrip().startswith(("[", "{")):
        return cell
    value = _literal(cell)
    if name == "user_input" and not (isinstance(value, list) and all(isinstance(m, dict) for m in value)):
        return cell
    return value


def _literal(cell: str) -> Any:
    """A JSON or Python literal, or the cell itself when it is neither (the field's type check then names it)."""
    try:
        return json.loads(cell)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(cell)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return cell


# DeepEval


def _deepeval_fields(row: Row) -> Row:
    """A DeepEval row under its snake_case names (its camelCase aliases read too)."""
    return {
        **row,
        **{name: row[alias] for name, alias in DEEPEVAL_ALIASES.items() if row.get(name) is None and alias in row},
    }


def _deepeval_list(row: Row, name: str) -> list[str] | None:
    """A context list: a list (JSON) or a `|`-joined string (CSV and JSONL, as save_as writes it)."""
    value = row.get(name)
    if isinstance(value, str):
        return value.split(DEEPEVAL_DELIMITER) if value else []
    return _texts(row, name)


def _retrieved(item: str) -> SourceDoc:
    """A retrieval_context item; `deepeval_source=S,deepeval_context=C` (a RetrievedContextData) keeps its source."""
    if item.startswith(DEEPEVAL_SOURCE_MARK):
        source, found, context = item[len(DEEPEVAL_SOURCE_MARK) :].partition(",deepeval_context=")
        if found:
            return SourceDoc(text=context, metadata={"source": source})
    return SourceDoc(text=item)


def _tool_calls(row: Row, name: str) -> list[dict[str, Any]] | None:
    """DeepEval ToolCalls: a list of objects, or the JSON list a CSV cell holds."""
    value = row.get(name)
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except (json.JSONDecodeError, RecursionError) as exc:
            raise BadRow(f"{name} is not a JSON list of tool calls") from exc
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in value):
        raise BadRow(f"{name} is not a list of tool calls with names")
    return value


def _parameters(call: dict[str, Any]) -> Any:
    return call.get("input_parameters", call.get("inputParameters"))


def _deepeval_messages(input_text: str, called: list[dict[str, Any]], answer: str | None) -> list[dict[str, Any]]:
    """The conversation a DeepEval row implies: the input, one assistant turn with every tool call (ids call_<n>),
    each call's output as its tool message, and the actual output."""
    tool_calls, results = [], []
    for number, call in enumerate(called, start=1):
        call_id = f"call_{number}"
        arguments = _arguments(_parameters(call), f"tools_called {call['name']} input_parameters")
        tool_calls.append(
            {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": arguments}}
        )
        output = call.get("output")
        if output is not None:
            content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            results.append({"role": "tool", "tool_call_id": call_id, "content": content})
    messages: list[dict[str, Any]] = [{"role": "user", "content": input_text}]
    messages += [{"role": "assistant", "content": None, "tool_calls": tool_calls}, *results]
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return messages


def _usage(row: Row) -> dict[str, Any] | None:
    """Cost and latency of a test case (token_cost in dollars, completion_time in seconds), when it has them."""

    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    cost, seconds = number(row.get("token_cost")), number(row.get("completion_time"))
    usage = {"cost_usd": cost, "latency_ms": seconds * 1000 if seconds is not None else None}
    return {k: v for k, v in usage.items() if v is not None} or None


def deepeval_attempt(row: Row, source_file: str, record: int, case_key: str = "case_id") -> SourceAttempt:
    """One DeepEval test case (or golden) as an attempt."""
    if row.get("scenario") or (row.get("turns") and row.get("input") is None):
        raise BadRow(
            "a conversational golden or test case (scenario, turns): import deepeval reads single-turn test cases"
        )
    row = _deepeval_fields(row)
    input_text = row.get("input")
    if input_text is None:
        raise BadRow("no input")
    if not isinstance(input_text, str):
        raise BadRow(f"input is a {type(input_text).__name__}, not a string")
    answer = _text(row, "actual_output")
    retrieved = _deepeval_list(row, "retrieval_context")
    hits = [_retrieved(item) for item in retrieved] if retrieved is not None else None
    ideal = _deepeval_list(row, "context")
    called, expected = _tool_calls(row, "tools_called"), _tool_calls(row, "expected_tools")
    metadata = row.get("additional_metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRow("additional_metadata is not an object")
    references = _reference_calls(expected, "expected_tools", _parameters)
    return SourceAttempt(
        source_file,
        record,
        key=_text(row, "name"),
        case_key=_case_key(row, case_key, metadata),
        input=input_text,
        rounds=[SourceRound(hits=hits)] if hits else [],
        context=hits,
        answer=answer,
        messages=_deepeval_messages(input_text, called, answer) if called else None,
        usage=_usage(row),
        reference_answer=_text(row, "expected_output"),
        reference_docs=[SourceDoc(text=t) for t in ideal] if ideal is not None else None,
        reference_tool_calls=references,
        # DeepEval's ToolCorrectnessMetric ignores the order of calls unless told (should_consider_ordering=False)
        tool_match="unordered" if references else None,
    )


def _deepeval_cell(name: str, cell: str) -> Any:
    """A DeepEval CSV cell: metadata columns are JSON objects there; each field's reader parses the lists."""
    if name in ("additional_metadata", "custom_column_key_values") and cell.lstrip().startswith("{"):
        return _literal(cell)
    return cell


# Files


def _csv_rows(path: Path, cell: Callable[[str, str], Any]) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    """(line the row starts on, row) of a CSV file with a header, an empty cell an absent field; and the rows with
    more cells than the header, which cannot be read."""
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    rows: list[tuple[int, Any]] = []
    bad: list[tuple[int, str]] = []
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            start = 2
            for row in reader:
                extra = row.pop(None, None)  # DictReader keeps the cells beyond the header under None
                if extra:
                    bad.append((start, f"the row has {len(extra)} cells more than the header"))
                else:
                    rows.append((start, {k: cell(k, v) for k, v in row.items() if v not in (None, "")}))
                start = reader.line_num + 1
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ImporterError(f"cannot read {path} as CSV: {exc}") from exc
    return rows, bad


def _is_csv(path: Path) -> bool:
    """A file is CSV when its first character is not a JSON array or object."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            head = handle.read(4096).lstrip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ImporterError(f"cannot read {path}: {exc}") from exc
    return bool(head) and head[0] not in "[{"


def _records(path: Path, cell: Callable[[str, str], Any]) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    if _is_csv(path):
        return _csv_rows(path, cell)
    records, bad = read_records(path)
    if len(records) == 1 and isinstance(records[0][1], dict):
        container = next(
            (records[0][1][k] for k in DEEPEVAL_CONTAINERS if isinstance(records[0][1].get(k), list)), None
        )
        if container is not None:
            return list(enumerate(container, start=1)), bad
    return records, bad


def _read(
    path: str | Path, convert: RowReader, cell: Callable[[str, str], Any], case_key: str
) -> Iterator[SourceAttempt | Unreadable]:
    """The attempts of a file's rows; the file is read (and refused, when it cannot be) before the first is asked
    for."""
    path = Path(path)
    if not path.is_file():
        raise ImporterError(f"no such file: {path}")
    records, bad = _records(path, cell)
    return _attempts(str(path), records, bad, convert, case_key)


def _attempts(
    name: str, records: list[tuple[int, Any]], bad: list[tuple[int, str]], convert: RowReader, case_key: str
) -> Iterator[SourceAttempt | Unreadable]:
    yield from (Unreadable(name, number, reason) for number, reason in bad)
    for number, row in records:
        if not isinstance(row, dict):
            yield Unreadable(name, number, f"the row is a {type(row).__name__}, not an object")
        else:
            try:
                yield convert(row, name, number, case_key)
            except BadRow as exc:
                yield Unreadable(name, number, str(exc))
            except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
                # a value of a shape this reader does not expect: this row is a reject, the import goes on
                yield Unreadable(name, number, f"the row could not be read: {type(exc).__name__}: {exc}")


def read_ragas(path: str | Path, *, case_key: str = "case_id") -> Iterator[SourceAttempt | Unreadable]:
    """The attempts of a Ragas EvaluationDataset file (JSONL, a JSON array, or CSV), one per sample."""
    return _read(path, ragas_attempt, _ragas_cell, case_key)


def read_deepeval(path: str | Path, *, case_key: str = "case_id") -> Iterator[SourceAttempt | Unreadable]:
    """The attempts of a DeepEval test-case file (JSON, JSONL or CSV as save_as writes them), one per test case."""
    return _read(path, deepeval_attempt, _deepeval_cell, case_key)


def import_ragas(source: str | Path, run: ImportRun, matching: Matching = DEFAULT_MATCHING) -> ImportSummary:
    """Import a Ragas EvaluationDataset as one run, with cases from its references when no golden cases exist."""
    return import_attempts("ragas", [Path(source)], read_ragas(source, case_key=matching.case_key), run, matching)


def import_deepeval(source: str | Path, run: ImportRun, matching: Matching = DEFAULT_MATCHING) -> ImportSummary:
    """Import DeepEval test cases as one run, with cases from their expectations when no golden cases exist."""
    return import_attempts("deepeval", [Path(source)], read_deepeval(source, case_key=matching.case_key), run, matching)


__all__ = ["deepeval_attempt", "import_deepeval", "import_ragas", "ragas_attempt", "read_deepeval", "read_ragas"]
