"""Import chat-completions message lists with tool calls (`eval-pipeline import openai-messages`).

Input: a JSONL file (or a JSON array) with one record per attempt:

    {"messages": [...],                      required: chat-completions messages
     "case_id": "refund-1",                  optional: default <file stem>-<record number>
     "attempt": 2,                           optional: default 1 + earlier records of the same case
     "trace_id": "refund-1#2",               optional: default <case_id>#<attempt>; always prefixed "<run_id>:"
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],   optional
     "final_state": {...},                   optional: the verified world state after the attempt
     "success": true,                        optional: the harness's verdict, used when no milestones are declared
     "usage": {"input_tokens"|"prompt_tokens", "output_tokens"|"completion_tokens", "cost_usd", "latency_ms"},
     "status": "ok", "error": null,          optional: harness status of the attempt
     ... any agent-contract field of a case: input, criticality, allowed_tools, forbidden_tools,
         reference_tool_calls, tool_match, alternatives, dependencies, fixtures, clock, milestones,
         fault, unsafe_after_fault, escalation_tools, scope}

Messages become steps: an assistant text is a `message` step (the last one after the last tool call is the
`finish` step), every assistant tool call a `tool_call` step whose status, result and error come from the
`tool` message with its `tool_call_id`; user messages are `user` steps; system and developer messages are
not steps. A JSON-string `arguments` is parsed; a tool message whose content starts with "Error" is status
`error`. A record that cannot be read is a reject row; a record whose messages are defective (a tool message
with no matching call, arguments that are not a JSON object, a tool missing from the registry) is written as
a trace with harness status `error` naming every defect, so it is counted as incomplete, never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.contracts.models import Case, Trace
from eval_pipeline.importers.common import (
    DEFAULT_CORPUS_VERSION,
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
)

FORMAT = "openai-messages"
ERROR_RESULT = re.compile(r"^\s*error\b", re.IGNORECASE)
CASE_FIELDS = (
    "case_revision", "input", "criticality", "allowed_tools", "forbidden_tools", "reference_tool_calls", "tool_match",
    "alternatives", "dependencies", "fixtures", "clock", "milestones", "fault", "unsafe_after_fault", "escalation_tools",
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


def messages_to_steps(messages: Sequence[Any], known_tools: set[str] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """SPEC §2 steps from a chat-completions message list, and the defects found (empty when the list is sound)."""
    steps: list[dict[str, Any]] = []
    defects: list[str] = []
    pending: dict[str, dict[str, Any]] = {}

    def add(step: dict[str, Any]) -> dict[str, Any]:
        step = {"index": len(steps) + 1, **step}
        steps.append(step)
        return step

    for number, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            defects.append(f"message {number} is not an object")
            continue
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "user":
            add({"kind": "user", "content": _text(message.get("content"))})
        elif role == "assistant":
            text = _text(message.get("content"))
            if text:
                add({"kind": "message", "content": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                name = function.get("name") if isinstance(function, dict) else None
                if not isinstance(name, str) or not name:
                    defects.append(f"message {number}: a tool call without a function name")
                    continue
                args, problem = parse_arguments(function.get("arguments"))
                step = add({"kind": "tool_call", "tool": name, "args": args, "status": None, "result": None, "error": None})
                if problem:
                    defects.append(f"message {number}: call of {name}: {problem}")
                    step["error"] = problem
                if known_tools is not None and name not in known_tools:
                    defects.append(f"message {number}: unknown tool {name} (not in the tool registry)")
                call_id = call.get("id")
                if isinstance(call_id, str):
                    pending[call_id] = step
        elif role == "tool":
            call_id = message.get("tool_call_id")
            step = pending.pop(call_id, None) if isinstance(call_id, str) else None
            if step is None:
                defects.append(f"message {number}: tool message answers tool_call_id {call_id!r}, which no earlier call has open")
                continue
            content = _text(message.get("content"))
            step["result"] = _result(content)
            failed = content is not None and bool(ERROR_RESULT.match(content))
            if step["error"] is None:
                step["status"] = "error" if failed else "ok"
                step["error"] = content if failed else None
        else:
            defects.append(f"message {number}: unsupported role {role!r}")

    last_call = max((s["index"] for s in steps if s["kind"] == "tool_call"), default=0)
    last_message = max((s["index"] for s in steps if s["kind"] == "message"), default=0)
    if last_message > last_call:
        steps[last_message - 1]["kind"] = "finish"
    return steps, defects


def tool_calls_of(messages: Sequence[Any]) -> list[str]:
    """Names of every tool the assistant called in a message list."""
    names = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    names.append(function["name"])
    return names


def trace_record(run_id: str, case_id: str, attempt: int, trace_label: str | None, messages: Sequence[Any],
                 known_tools: set[str] | None, *, case_revision: int = 1, status: str = "ok", error: str | None = None,
                 input_text: str | None = None, final_state: dict[str, Any] | None = None,
                 usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A SPEC §2 trace from one message list; defects turn the harness status to `error` with every defect named."""
    steps, defects = messages_to_steps(messages, known_tools)
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


def first_user_text(messages: Sequence[Any]) -> str:
    """The first user message's text, the natural input of a conversation."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return _text(message.get("content")) or ""
    return ""


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


def _usage(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    usage = {
        "input_tokens": value.get("input_tokens", value.get("prompt_tokens")),
        "output_tokens": value.get("output_tokens", value.get("completion_tokens")),
        "cost_usd": value.get("cost_usd"),
        "latency_ms": value.get("latency_ms"),
    }
    if isinstance(usage["cost_usd"], int) and not isinstance(usage["cost_usd"], bool):
        usage["cost_usd"] = float(usage["cost_usd"])
    if isinstance(usage["latency_ms"], int) and not isinstance(usage["latency_ms"], bool):
        usage["latency_ms"] = float(usage["latency_ms"])
    return usage


def _definitions(records: Sequence[tuple[int, Any]]) -> dict[str, dict[str, Any]]:
    """Registry entries from the OpenAI tool definitions of the records (first definition of a name wins)."""
    found: dict[str, dict[str, Any]] = {}
    for _, record in records:
        for tool in (record.get("tools") or []) if isinstance(record, dict) else []:
            spec = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(spec, dict) and isinstance(spec.get("name"), str) and spec["name"] not in found:
                schema = spec.get("parameters") if isinstance(spec.get("parameters"), dict) else None
                read_only = spec.get("read_only") if isinstance(spec.get("read_only"), bool) else None
                found[spec["name"]] = inferred_tool(spec["name"], schema, spec.get("description"), read_only)
    return found


def import_openai_messages(
    source: str | Path,
    run_id: str,
    data_root: str | Path,
    dataset_version: str | None = None,
    environment_version: str | None = None,
    corpus_version: str = DEFAULT_CORPUS_VERSION,
    tools: str | Path | None = None,
    tool_match: str | None = None,
    candidate: str | None = None,
    model: str | None = None,
    mode: str = "gate",
    overwrite: bool = False,
) -> ImportSummary:
    """Write the cases, traces, registry and run manifest of a chat-completions message file under data_root."""
    started = start_import(FORMAT, source, run_id, data_root, dataset_version, environment_version, corpus_version)
    path, stem, summary, records, rejects = started.path, started.stem, started.summary, started.records, started.rejects
    environment_version = summary.environment_version

    usable = []
    for number, record in records:
        if not isinstance(record, dict):
            rejects.append(import_reject(run_id, FORMAT, path.name, number, f"not a JSON object: a {type(record).__name__}"))
        elif not isinstance(record.get("messages"), list):
            rejects.append(import_reject(run_id, FORMAT, path.name, number, "no `messages` list"))
        else:
            usable.append((number, record))
    called = [name for _, record in usable for name in tool_calls_of(record["messages"])]
    called += [c.get("name") for _, r in usable for c in (r.get("reference_tool_calls") or [])
               if isinstance(c, dict) and isinstance(c.get("name"), str)]
    registry, known, origin = resolve_registry(data_root, environment_version, tools, _definitions(usable), called)
    summary.notes.append(f"tool registry: {origin}")
    escalation = escalation_tools(registry_names(registry))

    cases: dict[str, dict[str, Any]] = {}
    traces: list[dict[str, Any]] = []
    attempts: dict[str, set[int]] = {}
    trace_ids: set[str] = set()
    for number, record in usable:
        case_id = record.get("case_id") if isinstance(record.get("case_id"), str) and record.get("case_id") else f"{stem}-{number}"
        taken = attempts.setdefault(case_id, set())
        attempt = record.get("attempt") if isinstance(record.get("attempt"), int) else max(taken, default=0) + 1
        if attempt in taken:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, f"duplicate attempt {attempt} of case {case_id!r}",
                                         case_id=case_id))
            continue
        try:
            case = _case(record, case_id, tool_match, escalation)
        except ValueError as exc:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, str(exc), case_id=case_id))
            continue
        if case_id in cases and not same_case(cases[case_id], case):
            rejects.append(import_reject(run_id, FORMAT, path.name, number,
                                         f"the case fields differ from the first record of case {case_id!r}", case_id=case_id))
            continue
        final_state = record.get("final_state") if isinstance(record.get("final_state"), dict) else None
        if isinstance(record.get("success"), bool) and not record.get("milestones"):
            final_state = {**(final_state or {}), "imported": {"success": record["success"]}}
        status = record.get("status") if record.get("status") in ("ok", "error", "timeout") else "ok"
        trace = trace_record(
            run_id, case_id, attempt, record.get("trace_id") if isinstance(record.get("trace_id"), str) else None,
            record["messages"], known, status=status, error=record.get("error") if isinstance(record.get("error"), str) else None,
            case_revision=case["case_revision"], input_text=case["input"], final_state=final_state, usage=_usage(record.get("usage")),
        )
        duplicate = f"duplicate trace_id {trace['trace_id']!r}" if trace["trace_id"] in trace_ids else None
        problem = contract_problem(Trace, trace) or duplicate
        if problem:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, problem, case_id=case_id, trace_id=trace["trace_id"]))
            continue
        cases.setdefault(case_id, case)
        taken.add(attempt)
        trace_ids.add(trace["trace_id"])
        traces.append(trace)
    return finish_import(summary, data_root, list(cases.values()), traces, registry, rejects,
                         candidate or path.stem, model, mode, f"{stem}.jsonl", overwrite)


def _case(record: Mapping[str, Any], case_id: str, tool_match: str | None, escalation: list[str]) -> dict[str, Any]:
    """The case a record states: its contract fields, defaults for the rest."""
    case: dict[str, Any] = {"case_id": case_id, "case_revision": 1, "lanes": ["agent"]}
    case.update({k: record[k] for k in CASE_FIELDS if k in record and record[k] is not None})
    case["input"] = case.get("input") or first_user_text(record["messages"])
    references = case.get("reference_tool_calls", [])
    if not isinstance(references, list):
        raise ValueError("reference_tool_calls is not a list")
    case["reference_tool_calls"] = [_reference_call(c) for c in references]
    case["tool_match"] = case.get("tool_match") or tool_match or ("unordered" if case["reference_tool_calls"] else "goal_only")
    if "escalation_tools" not in case and escalation:
        case["escalation_tools"] = escalation
    if not case.get("milestones") and isinstance(record.get("success"), bool):
        case["milestones"] = {SUCCESS_MILESTONE: {"path": "imported.success", "equals": True}}
    problem = contract_problem(Case, case)
    if problem:
        raise ValueError(f"the record's case fields break the case contract: {problem}")
    return case


__all__ = ["import_openai_messages", "messages_to_steps", "parse_arguments", "trace_record"]
