"""Import chat-completions message lists with tool calls (`eval-pipeline import openai-messages`).

Input: a JSONL file (or a JSON array) with one record per attempt:

    {"messages": [...],                      required: the conversation (any of the message shapes below)
     "case_id": "refund-1",                  optional: default <file stem>-<record number>
     "attempt": 2,                           optional: default 1 + earlier records of the same case
     "trace_id": "refund-1#2",               optional: default <case_id>#<attempt>; always prefixed "<run_id>:"
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],   optional; also
               Anthropic {"name", "description", "input_schema"} and a legacy "functions": [{"name", "parameters"}]
     "final_state": {...},                   optional: the verified world state after the attempt
     "success": true,                        optional: the harness's verdict, used when no milestones are declared
     "usage": {"input_tokens"|"prompt_tokens", "output_tokens"|"completion_tokens", "cost_usd", "latency_ms"},
     "status": "ok", "error": null,          optional: harness status of the attempt
     ... any agent-contract field of a case: input, criticality, allowed_tools, forbidden_tools,
         reference_tool_calls, tool_match, alternatives, dependencies, fixtures, clock, milestones,
         fault, unsafe_after_fault, escalation_tools, scope}

Records are read by content (common.read_records): a JSON array, one pretty-printed object or JSONL.
Messages become steps, each message read by its own shape (messages_to_steps): OpenAI chat-completions
(`tool_calls` of `{id, function: {name, arguments}}`, `tool` messages with `tool_call_id`), τ²-bench
(`tool_calls` of `{id, name, arguments, requestor}`, `tool` messages with `id` and `error`; the simulated
user's own calls, requestor "user", and their results are not agent steps), legacy OpenAI (`function_call`,
`function` messages answering the latest open call of that name) and Anthropic content blocks (`text` and
`tool_use` blocks of assistant messages, `tool_result` blocks of user messages with `is_error`; a user message
of only tool results is not a user step). An assistant text is a `message` step (the last one after the last
tool call is the `finish` step), every agent tool call a `tool_call` step whose status, result and error come
from its result; user messages are `user` steps; system and developer messages are not steps. A JSON-string
`arguments` is parsed; a result flagged as an error, or else whose content starts with "Error", is status
`error`. A call of a tool missing from the registry is an ordinary call (the pipeline fails it at
`tool_selection`, reason `unknown_tool`) and is named in a summary note. A record that cannot be read (not an
object, no messages, a message that is not an object or has an unknown role) is a reject row; a record whose
messages are defective (a result answering no open call, arguments that are not a JSON object, a call without a
name) is written as a trace with harness status `error` naming every defect, so it is counted as incomplete,
never dropped.

Over 400 lines because the four message shapes' conversion to steps, which tau-bench and the trace importers reuse,
lives with the importer that defines it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.contracts.cases import Case
from eval_pipeline.contracts.traces import Trace
from eval_pipeline.importers.common import (
    ImportSummary,
    contract_problem,
    escalation_tools,
    finish_import,
    import_reject,
    inferred_tool,
    registry_names,
    resolve_registry,
    same_case,
    start_import,
    unknown_tools_note,
    usage_record,
)
from eval_pipeline.importers.import_run import ImportRun

FORMAT = "openai-messages"
ERROR_RESULT = re.compile(r"^\s*error\b", re.IGNORECASE)
CASE_FIELDS = (
    "case_revision",
    "input",
    "criticality",
    "allowed_tools",
    "forbidden_tools",
    "reference_tool_calls",
    "tool_match",
    "alternatives",
    "dependencies",
    "fixtures",
    "clock",
    "milestones",
    "fault",
    "unsafe_after_fault",
    "escalation_tools",
    "scope",
)
SUCCESS_MILESTONE = "reported_success"  # the milestone an importer declares when the source only says success or not


def _text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of a content-part list."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return json.dumps(content, ensure_ascii=False)


def _result(content: str | None) -> Any:
    """A tool message's content as a JSON value when it parses as an object or list, else the text itself."""
    if content is None:
        return None
    try:
        value = json.loads(content)
    except (json.JSONDecodeError, RecursionError):
        return content
    return value if isinstance(value, dict | list) else content


def parse_arguments(arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(args, None) for a JSON-object arguments string (or object), else (None, why not)."""
    if arguments is None or arguments == "":
        return {}, None
    if isinstance(arguments, dict):
        return arguments, None
    if not isinstance(arguments, str):
        return None, f"arguments are a {type(arguments).__name__}, not a JSON string"
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(value, dict):
        return None, f"arguments are JSON but not an object: {arguments[:80]}"
    return value, None


class UnreadableMessages(ValueError):
    """A message list the importer cannot read: the record is a reject, never a trace."""


class _Conversion:
    """Steps built from one message list, the calls still open, and the defects found."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.defects: list[str] = []
        self.open: list[tuple[str | None, dict[str, Any]]] = []  # (call id, step) of the agent's unanswered calls
        self.user_calls: set[str] = set()  # ids of the simulated user's own calls (τ²-bench requestor "user")

    def add(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"index": len(self.steps) + 1, **step}
        self.steps.append(step)
        return step

    def text(self, kind: str, content: str | None) -> None:
        self.add({"kind": kind, "content": content})

    def call(self, number: int, call_id: Any, name: Any, arguments: Any) -> None:
        """An agent tool call: a tool_call step, open until a result answers it."""
        if not isinstance(name, str) or not name:
            self.defects.append(f"message {number}: a tool call without a function name")
            return
        args, problem = parse_arguments(arguments)
        step = self.add(
            {"kind": "tool_call", "tool": name, "args": args, "status": None, "result": None, "error": None}
        )
        if problem:
            self.defects.append(f"message {number}: call of {name}: {problem}")
            step["error"] = problem
        self.open.append((call_id if isinstance(call_id, str) else None, step))

    def answer(self, number: int, call_id: Any, name: Any, content: Any, failed: Any, what: str) -> None:
        """A tool result: it answers the latest open call with its id (or, without an id, with its name)."""
        if isinstance(call_id, str) and call_id in self.user_calls:
            return
        key, wanted = ("id", call_id) if call_id is not None else ("name", name)
        for position in range(len(self.open) - 1, -1, -1):
            open_id, step = self.open[position]
            if (open_id if key == "id" else step["tool"]) == wanted:
                del self.open[position]
                break
        else:
            self.defects.append(f"message {number}: {what} {wanted!r}, which no earlier call has open")
            return
        text = _text(content)
        step["result"] = _result(text)
        if not isinstance(failed, bool):
            failed = text is not None and bool(ERROR_RESULT.match(text))
        if step["error"] is None:
            step["status"] = "error" if failed else "ok"
            step["error"] = (text or "the tool reported an error") if failed else None


def _tool_call_fields(call: Any) -> tuple[Any, Any, Any, Any]:
    """(id, name, arguments, requestor) of an OpenAI `{id, function: {name, arguments}}` or a τ²-bench
    `{id, name, arguments, requestor}` tool call."""
    if not isinstance(call, dict):
        return None, None, None, None
    function = call.get("function")
    if isinstance(function, dict):
        return call.get("id"), function.get("name"), function.get("arguments"), call.get("requestor")
    return call.get("id"), call.get("name"), call.get("arguments", call.get("input")), call.get("requestor")


def _blocks(content: Any, kind: str) -> list[dict[str, Any]]:
    """The content blocks of one type (Anthropic `tool_use`, `tool_result`) of a content list."""
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind] if isinstance(content, list) else []


def _message(conversion: _Conversion, content: Any) -> None:
    """A `message` step for assistant content that holds text."""
    text = _text(content)
    if text:
        conversion.text("message", text)


def _assistant(conversion: _Conversion, number: int, message: Mapping[str, Any]) -> None:
    content = message.get("content")
    if _blocks(content, "tool_use"):
        # Anthropic: text and tool_use blocks in their order; each run of text blocks is one message step
        run: list[dict[str, Any]] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                _message(conversion, run)
                run = []
                conversion.call(number, block.get("id"), block.get("name"), block.get("input"))
            elif isinstance(block, dict) and block.get("type", "text") == "text":
                run.append(block)
        _message(conversion, run)
    else:
        _message(conversion, content)
    for call in message.get("tool_calls") or []:
        call_id, name, arguments, requestor = _tool_call_fields(call)
        if requestor == "user":
            if isinstance(call_id, str):
                conversion.user_calls.add(call_id)
        else:
            conversion.call(number, call_id, name, arguments)
    function_call = message.get("function_call")
    if isinstance(function_call, dict):  # the legacy OpenAI form: no id, answered by a `function` message
        conversion.call(number, None, function_call.get("name"), function_call.get("arguments"))


def _user(conversion: _Conversion, number: int, message: Mapping[str, Any]) -> None:
    content = message.get("content")
    results = _blocks(content, "tool_result")
    for block in results:
        conversion.answer(
            number,
            block.get("tool_use_id"),
            None,
            block.get("content"),
            block.get("is_error"),
            "tool_result answers tool_use_id",
        )
    own_calls = [_tool_call_fields(c)[0] for c in message.get("tool_calls") or []]
    conversion.user_calls.update(c for c in own_calls if isinstance(c, str))
    text = _text([b for b in content if b not in results]) if isinstance(content, list) else _text(content)
    if text or not (results or own_calls):
        conversion.text("user", text)


def _tool(conversion: _Conversion, number: int, message: Mapping[str, Any]) -> None:
    if message.get("requestor") == "user":  # τ²-bench: the result of the simulated user's own call
        return
    call_id = message.get("tool_call_id", message.get("id"))
    if call_id is None and isinstance(message.get("name"), str):
        conversion.answer(
            number,
            None,
            message["name"],
            message.get("content"),
            message.get("error"),
            "tool message answers a call of",
        )
    else:
        conversion.answer(
            number, call_id, None, message.get("content"), message.get("error"), "tool message answers tool_call_id"
        )


def messages_to_steps(messages: Sequence[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Trace steps (docs/inputs.md#traces) from a message list, and the defects found (empty when the list is sound).

    Read per message, by content: OpenAI chat-completions (`tool_calls` with `function`, `tool` messages with
    `tool_call_id`), τ²-bench (`tool_calls` of `{id, name, arguments, requestor}`, tool messages with `id` and an
    `error` flag, the simulated user's own calls and their results left out), legacy OpenAI (`function_call`,
    `function` messages answering the latest open call of that name) and Anthropic content blocks (`tool_use`,
    and `tool_result` blocks in user messages, `is_error` for failures). A tool call's status is `error` when its
    result says so (the flag, or else content starting with "Error"). A call without a name, arguments that are
    not a JSON object and a result answering no open call are defects; a message that is not an object or has a
    role the importer does not read makes the list unreadable (UnreadableMessages).
    """
    conversion = _Conversion()
    for number, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            raise UnreadableMessages(f"message {number} is not an object")
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "user":
            _user(conversion, number, message)
        elif role == "assistant":
            _assistant(conversion, number, message)
        elif role == "tool" and isinstance(message.get("tool_messages"), list):  # τ²-bench MultiToolMessage
            for part in message["tool_messages"]:
                if not isinstance(part, dict):
                    raise UnreadableMessages(f"message {number}: a tool message part is not an object")
                _tool(conversion, number, part)
        elif role == "tool":
            _tool(conversion, number, message)
        elif role == "function":
            conversion.answer(
                number, None, message.get("name"), message.get("content"), None, "function message answers a call of"
            )
        else:
            raise UnreadableMessages(f"message {number} has role {role!r}, which the importer does not read")

    steps = conversion.steps
    last_call = max((s["index"] for s in steps if s["kind"] == "tool_call"), default=0)
    last_message = max((s["index"] for s in steps if s["kind"] == "message"), default=0)
    if last_message > last_call:
        steps[last_message - 1]["kind"] = "finish"
    return steps, conversion.defects


def called_tools(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of every tool called in a step list, one per call."""
    return [s["tool"] for s in steps if s["kind"] == "tool_call"]


def trace_record(
    run_id: str,
    case_id: str,
    attempt: int,
    trace_label: str | None,
    steps: list[dict[str, Any]],
    defects: Sequence[str],
    *,
    case_revision: int = 1,
    status: str = "ok",
    error: str | None = None,
    input_text: str | None = None,
    final_state: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A trace (docs/inputs.md#traces) from converted messages; defects turn the harness status to `error` with
    every defect named."""
    if defects:
        status = "error"
        error = "; ".join(filter(None, [error, "import: " + "; ".join(defects)]))
    return {
        "trace_id": f"{run_id}:{trace_label or f'{case_id}#{attempt}'}",
        "case_id": case_id,
        "case_revision": case_revision,
        "attempt": attempt,
        "status": status,
        "error": error,
        "input": input_text,
        "steps": steps,
        "final_state": final_state,
        "usage": usage,
    }


def first_user_text(steps: Sequence[Mapping[str, Any]]) -> str:
    """The first user step's text, the natural input of a conversation."""
    return next((s["content"] for s in steps if s["kind"] == "user" and s.get("content")), "")


def _reference_call(call: Any) -> dict[str, Any]:
    """A reference call given as {name, args} or as an OpenAI tool call {function: {name, arguments}}."""
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        args, problem = parse_arguments(call["function"].get("arguments"))
        if problem:
            raise ValueError(f"reference call {call['function'].get('name')}: {problem}")
        return {"name": call["function"].get("name"), "args": args}
    if isinstance(call, dict) and "arguments" in call and "args" not in call:
        args, problem = parse_arguments(call["arguments"])
        if problem:
            raise ValueError(f"reference call {call.get('name')}: {problem}")
        return {"name": call.get("name"), "args": args}
    return call


def _definitions(records: Sequence[tuple[int, Any]]) -> dict[str, dict[str, Any]]:
    """Registry entries from the tool definitions of the records: OpenAI `tools` ({function: {name, parameters}}),
    legacy `functions` ({name, parameters}) and Anthropic `tools` ({name, input_schema}); the first of a name wins."""
    found: dict[str, dict[str, Any]] = {}
    for _, record in records:
        for tool in (
            [*(record.get("tools") or []), *(record.get("functions") or [])] if isinstance(record, dict) else []
        ):
            spec = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("name"), str) and spec["name"] not in found:
                schema = next((spec[k] for k in ("parameters", "input_schema") if isinstance(spec.get(k), dict)), None)
                read_only = spec.get("read_only") if isinstance(spec.get("read_only"), bool) else None
                found[spec["name"]] = inferred_tool(spec["name"], schema, spec.get("description"), read_only)
    return found


def _readable(
    run_id: str, name: str, records: Sequence[tuple[int, Any]]
) -> tuple[list[tuple[int, dict[str, Any], list[dict[str, Any]], list[str]]], list[dict[str, Any]]]:
    """(number, record, steps, defects) of the records whose messages can be read, and reject rows for the others."""
    usable, rejects = [], []
    for number, record in records:
        if not isinstance(record, dict):
            problem = f"not a JSON object: a {type(record).__name__}"
        elif isinstance(record.get("simulations"), list) and isinstance(record.get("tasks"), list):
            problem = "a τ²-bench results file, not a message record: import it with `eval-pipeline import tau-bench`"
        elif not isinstance(record.get("messages"), list):
            problem = "no `messages` list"
        else:
            try:
                steps, defects = messages_to_steps(record["messages"])
            except UnreadableMessages as exc:
                problem = str(exc)
            else:
                usable.append((number, record, steps, defects))
                continue
        rejects.append(import_reject(run_id, FORMAT, name, number, problem))
    return usable, rejects


def import_openai_messages(source: str | Path, run: ImportRun, *, tool_match: str | None = None) -> ImportSummary:
    """Write the cases, traces, registry and run manifest of a chat-completions message file under the run's data
    root."""
    run_id = run.run_id
    started = start_import(FORMAT, source, run)
    path, stem, summary, records, rejects = (
        started.path,
        started.stem,
        started.summary,
        started.records,
        started.rejects,
    )
    environment_version = summary.environment_version

    usable, unreadable = _readable(run_id, path.name, records)
    rejects += unreadable
    called = [name for _, _, steps, _ in usable for name in called_tools(steps)]
    named = called + [
        c.get("name")
        for _, r, _, _ in usable
        for c in (r.get("reference_tool_calls") or [])
        if isinstance(c, dict) and isinstance(c.get("name"), str)
    ]
    registry, known, origin = resolve_registry(
        run.data_root, environment_version, run.tools, _definitions([(n, r) for n, r, _, _ in usable]), named
    )
    summary.notes.append(f"tool registry: {origin}")
    summary.notes += filter(None, [unknown_tools_note(called, known)])
    escalation = escalation_tools(registry_names(registry))

    cases: dict[str, dict[str, Any]] = {}
    traces: list[dict[str, Any]] = []
    attempts: dict[str, set[int]] = {}
    trace_ids: set[str] = set()
    for number, record, steps, defects in usable:
        case_id = (
            record.get("case_id")
            if isinstance(record.get("case_id"), str) and record.get("case_id")
            else f"{stem}-{number}"
        )
        taken = attempts.setdefault(case_id, set())
        attempt = record.get("attempt") if isinstance(record.get("attempt"), int) else max(taken, default=0) + 1
        if attempt in taken:
            rejects.append(
                import_reject(
                    run_id,
                    FORMAT,
                    path.name,
                    number,
                    f"duplicate attempt {attempt} of case {case_id!r}",
                    case_id=case_id,
                )
            )
            continue
        try:
            case = _case(record, steps, case_id, tool_match, escalation)
        except ValueError as exc:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, str(exc), case_id=case_id))
            continue
        if case_id in cases and not same_case(cases[case_id], case):
            rejects.append(
                import_reject(
                    run_id,
                    FORMAT,
                    path.name,
                    number,
                    f"the case fields differ from the first record of case {case_id!r}",
                    case_id=case_id,
                )
            )
            continue
        final_state = record.get("final_state") if isinstance(record.get("final_state"), dict) else None
        if isinstance(record.get("success"), bool) and not record.get("milestones"):
            final_state = {**(final_state or {}), "imported": {"success": record["success"]}}
        status = record.get("status") if record.get("status") in ("ok", "error", "timeout") else "ok"
        trace = trace_record(
            run_id,
            case_id,
            attempt,
            record.get("trace_id") if isinstance(record.get("trace_id"), str) else None,
            steps,
            defects,
            status=status,
            error=record.get("error") if isinstance(record.get("error"), str) else None,
            case_revision=case["case_revision"],
            input_text=case["input"],
            final_state=final_state,
            usage=usage_record(record.get("usage")),
        )
        duplicate = f"duplicate trace_id {trace['trace_id']!r}" if trace["trace_id"] in trace_ids else None
        problem = contract_problem(Trace, trace) or duplicate
        if problem:
            rejects.append(
                import_reject(run_id, FORMAT, path.name, number, problem, case_id=case_id, trace_id=trace["trace_id"])
            )
            continue
        cases.setdefault(case_id, case)
        taken.add(attempt)
        trace_ids.add(trace["trace_id"])
        traces.append(trace)
    return finish_import(
        summary,
        run,
        list(cases.values()),
        traces,
        registry,
        rejects,
        trace_file=f"{stem}.jsonl",
        default_candidate=path.stem,
    )


def _case(
    record: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
    case_id: str,
    tool_match: str | None,
    escalation: list[str],
) -> dict[str, Any]:
    """The case a record states: its contract fields, defaults for the rest."""
    case: dict[str, Any] = {"case_id": case_id, "case_revision": 1, "lanes": ["agent"]}
    case.update({k: record[k] for k in CASE_FIELDS if k in record and record[k] is not None})
    case["input"] = case.get("input") or first_user_text(steps)
    references = case.get("reference_tool_calls", [])
    if not isinstance(references, list):
        raise ValueError("reference_tool_calls is not a list")
    case["reference_tool_calls"] = [_reference_call(c) for c in references]
    case["tool_match"] = (
        case.get("tool_match") or tool_match or ("unordered" if case["reference_tool_calls"] else "goal_only")
    )
    if "escalation_tools" not in case and escalation:
        case["escalation_tools"] = escalation
    if not case.get("milestones") and isinstance(record.get("success"), bool):
        case["milestones"] = {SUCCESS_MILESTONE: {"path": "imported.success", "equals": True}}
    problem = contract_problem(Case, case)
    if problem:
        raise ValueError(f"the record's case fields break the case contract: {problem}")
    return case


__all__ = [
    "UnreadableMessages",
    "called_tools",
    "import_openai_messages",
    "messages_to_steps",
    "parse_arguments",
    "trace_record",
]
