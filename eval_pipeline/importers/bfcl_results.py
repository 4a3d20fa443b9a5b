"""BFCL model result lines, or each item's first accepted answer (the self-check), as traces of the items' cases."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.importers.bfcl_decode import DecodeError, decode_result, is_number
from eval_pipeline.importers.bfcl_items import FORMAT, Names
from eval_pipeline.importers.common import ImportSummary, import_reject, read_records

MAX_LISTED = 10  # item ids named in one summary note


def note_ids(summary: ImportSummary, what: str, ids: Sequence[str]) -> None:
    """Add a summary note counting `ids` and naming the first MAX_LISTED of them, when there are any."""
    if ids:
        listed = ", ".join(ids[:MAX_LISTED]) + (f" (+{len(ids) - MAX_LISTED} more)" if len(ids) > MAX_LISTED else "")
        summary.notes.append(f"{len(ids)} {what}: {listed}")


def _steps(calls: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The tool_call steps of calls (status ok, no result)."""
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
        "latency_ms": float(latency) * 1000.0 if is_number(latency) else None,
    }
    return usage if any(v is not None for v in usage.values()) else None


def _trace(
    run_id: str, case: Mapping[str, Any], attempt: int, steps: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    """Attempt `attempt` of a case: an ok trace of these steps."""
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
    names: Names,
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


def self_check_traces(run_id: str, cases: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One trace per case whose calls are its reference calls' canonical args (the item's first accepted answer)."""
    return [
        _trace(run_id, case, 1, _steps((r["name"], r["args"]) for r in case["reference_tool_calls"]), None)
        for case in cases.values()
    ]


def result_traces(
    run_id: str,
    results_path: Path,
    cases: Mapping[str, dict[str, Any]],
    names: Names,
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
    note_ids(
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


__all__ = ["MAX_LISTED", "note_ids", "result_traces", "self_check_traces"]
