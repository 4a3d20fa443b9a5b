"""Import τ-bench trajectory files (`eval-pipeline import tau-bench`), e.g. sierra-research/tau-bench's historical_trajectories.

A τ-bench results file is a JSON array (a JSONL file is read too) of records {task_id, trial, reward, info, traj}:
- each task becomes a case `<case_prefix><task_id>` (lanes [agent]) whose reference tool calls are the task's
  `info.task.actions` ({name, kwargs}), input its `info.task.instruction`, tool_match `unordered` by default
  (τ-bench checks the resulting database, not the order of calls);
- each trial becomes attempt `trial + 1` of that case, trace id `<run_id>:<case_id>#<attempt>`;
- `traj` (OpenAI chat messages) becomes the steps, as the openai-messages importer converts them;
- the reward becomes the outcome: the trace's final state is `{"tau_bench": {"reward": r, ...reward_info.info}}`
  and the case declares one milestone, `tau_bench_reward: {path: tau_bench.reward, gte: 0.999999}`, τ-bench's own
  success test (reward ≥ 1 − 1e-6). A record without a reward gets no final state, so its outcome is incomplete.
- the registry: the data root's tools/<environment_version>/tools.yaml if present, else --tools, else inferred
  from every tool called or named in actions ({"type": "object"} schemas, read_only guessed from names);
  `transfer_to_human_agents` is the cases' escalation tool when the registry has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipeline.importers.common import (
    DEFAULT_CORPUS_VERSION,
    ImportSummary,
    escalation_tools,
    finish_import,
    import_reject,
    registry_names,
    resolve_registry,
    same_case,
    start_import,
)
from eval_pipeline.importers.openai_messages import tool_calls_of, trace_record

FORMAT = "tau-bench"
SUCCESS_THRESHOLD = 0.999999  # τ-bench counts a trial as a success when reward >= 1 - 1e-6
REWARD_MILESTONE = "tau_bench_reward"


def _shape_problem(record: Any) -> str | None:
    """Why a record is not a τ-bench trajectory record, or None."""
    if not isinstance(record, dict):
        return f"not a JSON object: a {type(record).__name__}"
    if not isinstance(record.get("task_id"), int | str) or isinstance(record.get("task_id"), bool):
        return "no task_id"
    if not isinstance(record.get("trial"), int) or isinstance(record.get("trial"), bool) or record["trial"] < 0:
        return "no trial number (a whole number >= 0)"
    if not isinstance(record.get("traj"), list):
        return "no traj message list"
    task = (record.get("info") or {}).get("task") if isinstance(record.get("info"), dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("actions"), list):
        return "no info.task.actions: the task's ground-truth actions are missing"
    for action in task["actions"]:
        if not (isinstance(action, dict) and isinstance(action.get("name"), str) and isinstance(action.get("kwargs", {}), dict)):
            return f"a task action is not {{name, kwargs}}: {str(action)[:80]}"
    reward = record.get("reward")
    if reward is not None and (not isinstance(reward, int | float) or isinstance(reward, bool)):
        return f"reward is a {type(reward).__name__}, not a number"
    return None


def _final_state(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The world state the importer records for a trial: its reward and τ-bench's reward details."""
    if record.get("reward") is None:
        return None
    details = (record["info"].get("reward_info") or {}).get("info")
    extra = details if isinstance(details, dict) else {}
    return {"tau_bench": {**extra, "reward": float(record["reward"])}}


def import_tau_bench(
    source: str | Path,
    run_id: str,
    data_root: str | Path,
    dataset_version: str | None = None,
    environment_version: str | None = None,
    corpus_version: str = DEFAULT_CORPUS_VERSION,
    tools: str | Path | None = None,
    tool_match: str = "unordered",
    candidate: str | None = None,
    model: str | None = None,
    mode: str = "gate",
    overwrite: bool = False,
    case_prefix: str = "tau-",
) -> ImportSummary:
    """Write the cases, traces, registry and run manifest of a τ-bench trajectory file under data_root."""
    started = start_import(FORMAT, source, run_id, data_root, dataset_version, environment_version, corpus_version)
    path, stem, summary, records, rejects = started.path, started.stem, started.summary, started.records, started.rejects
    usable = []
    for number, record in records:
        problem = _shape_problem(record)
        if problem:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, problem))
        else:
            usable.append((number, record))

    named = [name for _, r in usable for name in tool_calls_of(r["traj"])]
    named += [a["name"] for _, r in usable for a in r["info"]["task"]["actions"]]
    registry, known, origin = resolve_registry(data_root, summary.environment_version, tools, {}, named)
    summary.notes.append(f"tool registry: {origin}")
    escalation = escalation_tools(registry_names(registry))

    cases: dict[str, dict[str, Any]] = {}
    traces: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    for number, record in usable:
        case_id = f"{case_prefix}{record['task_id']}"
        attempt = record["trial"] + 1
        task = record["info"]["task"]
        unknown = sorted({a["name"] for a in task["actions"]} - known) if known is not None else []
        case = {
            "case_id": case_id,
            "case_revision": 1,
            "lanes": ["agent"],
            "input": task.get("instruction") if isinstance(task.get("instruction"), str) else "",
            "reference_tool_calls": [{"name": a["name"], "args": a.get("kwargs", {})} for a in task["actions"]],
            "tool_match": tool_match,
            "milestones": {REWARD_MILESTONE: {"path": "tau_bench.reward", "gte": SUCCESS_THRESHOLD}},
            **({"escalation_tools": escalation} if escalation else {}),
        }
        reason = (
            f"task actions name tools missing from the registry: {', '.join(unknown)}" if unknown
            else f"duplicate trial {record['trial']} of task {record['task_id']}" if (case_id, attempt) in seen
            else f"task {record['task_id']} differs from its first record (actions or instruction)"
            if case_id in cases and not same_case(cases[case_id], case) else None
        )
        if reason:
            rejects.append(import_reject(run_id, FORMAT, path.name, number, reason, case_id=case_id))
            continue
        cases.setdefault(case_id, case)
        seen.add((case_id, attempt))
        traces.append(trace_record(run_id, case_id, attempt, None, record["traj"], known,
                                   input_text=case["input"], final_state=_final_state(record)))
    return finish_import(summary, data_root, list(cases.values()), traces, registry, rejects,
                         candidate or path.stem, model, mode, f"{stem}.jsonl", overwrite)
