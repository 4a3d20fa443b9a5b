"""Import τ-bench and τ²-bench results (`eval-pipeline import tau-bench`), told apart by content.

τ-bench (sierra-research/tau-bench, e.g. its historical_trajectories): a JSON array (or JSONL) of records
{task_id, trial, reward, info, traj}:
- each task becomes a case `<case_prefix><task_id>` (lanes [agent]) whose reference tool calls are the task's
  `info.task.actions` ({name, kwargs}), input its `info.task.instruction`, tool_match `unordered` by default
  (τ-bench checks the resulting database, not the order of calls);
- each trial becomes attempt `trial + 1` of that case, trace id `<run_id>:<case_id>#<attempt>`;
- `traj` (OpenAI chat messages) becomes the steps, as the openai-messages importer converts them;
- the reward becomes the outcome: the trace's final state is `{"tau_bench": {"reward": r, ...reward_info.info}}`
  and the case declares one milestone, `tau_bench_reward: {path: tau_bench.reward, gte: 0.999999}`, τ-bench's own
  success test (reward ≥ 1 − 1e-6). A record without a reward gets no final state, so its outcome is incomplete.

τ²-bench (sierra-research/tau2-bench): one results object {timestamp, info, tasks, simulations} per run:
- each simulated task (`tasks[].id`) becomes a case `<case_prefix><id>`: input the user scenario's instructions
  (a string, or the parts of structured instructions), reference calls the `evaluation_criteria.actions` whose
  requestor is the assistant ({name, arguments}); the user's own actions are the simulated user's, not the
  agent's, and are left out. A task without evaluation actions, or whose reward_basis names neither DB nor ACTION
  (τ²-bench then judges only the resulting state, e.g. telecom's ENV_ASSERTION tasks), is `goal_only`;
- each simulation becomes attempt `trial + 1`; its `messages` become the steps (the user's own tool calls and
  their results are not agent steps); `reward_info.reward` the outcome, as for τ-bench (final state
  `{"tau_bench": {...reward_info.info, "reward": r, "termination_reason": ...}}`, the same milestone);
  `agent_cost`, `duration` and the assistant messages' token usage the usage. A simulation that ended in an
  `infrastructure_error` (τ²-bench leaves those out of its metrics) has harness status `error`, so it is
  incomplete. A simulation of a task that is not among `tasks` is a reject;
- records are numbered by their simulation's position in `simulations`.

The registry: the data root's tools/<environment_version>/tools.yaml if present, else --tools, else inferred
from every tool called or named in actions ({"type": "object"} schemas), read_only from the τ-bench / τ²-bench
tool table (tau_tools.TAU_TOOL_ROLES, which also makes `transfer_to_human_agents` read-only and leaves its
`summary` uncompared), else guessed from names; `transfer_to_human_agents` is the cases' escalation tool when the
registry has it. Calls of tools missing from a given registry are ordinary calls (the pipeline fails them at
`tool_selection`, reason `unknown_tool`); task actions naming such tools make the record a reject.

Over 400 lines because both generations' records are read into one Trial shape here, so the import is said once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.importers.common import (
    ImportSummary,
    escalation_tools,
    finish_import,
    import_reject,
    registry_names,
    resolve_registry,
    same_case,
    start_import,
    unknown_tools_note,
    usage_record,
)
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.importers.openai_messages import UnreadableMessages, called_tools, messages_to_steps, trace_record
from eval_pipeline.importers.tau_tools import TAU_TOOL_ROLES

FORMAT = "tau-bench"
SUCCESS_THRESHOLD = 0.999999  # τ-bench counts a trial as a success when reward >= 1 - 1e-6
REWARD_MILESTONE = "tau_bench_reward"
TAU2_INCOMPLETE = {"infrastructure_error"}  # τ²-bench termination reasons its own metrics leave out
TAU2_INSTRUCTION_PARTS = (
    ("reason_for_call", "Reason for call"),
    ("known_info", "Known info"),
    ("unknown_info", "Unknown info"),
    ("task_instructions", "Task instructions"),
)


@dataclass
class Trial:
    """One attempt of one task, read from either generation."""

    number: int  # record number (τ-bench) or simulation number (τ²-bench), for reject rows
    task_id: str
    trial: int
    instruction: str
    actions: list[dict[str, Any]]  # the agent's reference calls, {name, args}
    goal_only: bool  # the benchmark does not judge the agent's calls
    steps: list[dict[str, Any]]
    defects: list[str]
    final_state: dict[str, Any] | None
    status: str = "ok"
    error: str | None = None
    usage: dict[str, Any] | None = None


def _whole(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _reward_problem(reward: Any) -> str | None:
    if reward is not None and (not isinstance(reward, int | float) or isinstance(reward, bool)):
        return f"reward is a {type(reward).__name__}, not a number"
    return None


def _reward_state(reward: Any, details: Any, **extra: Any) -> dict[str, Any] | None:
    """The world state the importer records for a trial: its reward and the benchmark's reward details."""
    if reward is None:
        return None
    return {
        "tau_bench": {
            **(details if isinstance(details, dict) else {}),
            **{k: v for k, v in extra.items() if v is not None},
            "reward": float(reward),
        }
    }


def _converted(messages: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """messages_to_steps, with an unreadable list raised as the reason of a reject."""
    try:
        return messages_to_steps(messages)
    except UnreadableMessages as exc:
        raise ValueError(str(exc)) from exc


def _v1_trial(number: int, record: Any) -> Trial:
    """A τ-bench trajectory record as a Trial; ValueError says why it is not one."""
    if not isinstance(record, dict):
        raise ValueError(f"not a JSON object: a {type(record).__name__}")
    if not isinstance(record.get("task_id"), int | str) or isinstance(record.get("task_id"), bool):
        raise ValueError("no task_id")
    if not _whole(record.get("trial")):
        raise ValueError("no trial number (a whole number >= 0)")
    if not isinstance(record.get("traj"), list):
        raise ValueError("no traj message list")
    task = (record.get("info") or {}).get("task") if isinstance(record.get("info"), dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("actions"), list):
        raise ValueError("no info.task.actions: the task's ground-truth actions are missing")
    for action in task["actions"]:
        if not (
            isinstance(action, dict)
            and isinstance(action.get("name"), str)
            and isinstance(action.get("kwargs", {}), dict)
        ):
            raise ValueError(f"a task action is not {{name, kwargs}}: {str(action)[:80]}")
    problem = _reward_problem(record.get("reward"))
    if problem:
        raise ValueError(problem)
    steps, defects = _converted(record["traj"])
    details = (
        (record["info"].get("reward_info") or {}).get("info")
        if isinstance(record["info"].get("reward_info"), dict)
        else None
    )
    return Trial(
        number,
        str(record["task_id"]),
        record["trial"],
        task.get("instruction") if isinstance(task.get("instruction"), str) else "",
        [{"name": a["name"], "args": a.get("kwargs", {})} for a in task["actions"]],
        False,
        steps,
        defects,
        _reward_state(record.get("reward"), details),
    )


def is_tau2_results(record: Any) -> bool:
    """Whether a record is a τ²-bench results object ({info, tasks, simulations})."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("tasks"), list)
        and isinstance(record.get("simulations"), list)
    )


def _tau2_instruction(scenario: Any) -> str:
    """The user scenario's instructions as one text: a string as it is, structured instructions part by part."""
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, str):
        return instructions
    if isinstance(instructions, dict):
        return "\n".join(
            f"{label}: {instructions[key]}"
            for key, label in TAU2_INSTRUCTION_PARTS
            if isinstance(instructions.get(key), str) and instructions[key]
        )
    return ""


def _tau2_task(task: Any) -> tuple[str, list[dict[str, Any]], bool]:
    """(instruction, the agent's reference calls, goal_only) of a τ²-bench task; ValueError says what is wrong.

    goal_only when the task states no actions, or when its reward_basis names neither DB nor ACTION: τ²-bench then
    never judges the agent's calls (telecom's ENV_ASSERTION tasks), only the state they lead to."""
    criteria = task.get("evaluation_criteria")
    actions = criteria.get("actions") if isinstance(criteria, dict) else None
    if actions is not None and not isinstance(actions, list):
        raise ValueError("evaluation_criteria.actions is not a list")
    reference = []
    for action in actions or []:
        if not (
            isinstance(action, dict)
            and isinstance(action.get("name"), str)
            and isinstance(action.get("arguments", {}), dict)
        ):
            raise ValueError(f"an action is not {{name, arguments}}: {str(action)[:80]}")
        if action.get("requestor", "assistant") != "user":
            reference.append({"name": action["name"], "args": action.get("arguments", {})})
    basis = criteria.get("reward_basis") if isinstance(criteria, dict) else None
    judged = not isinstance(basis, list) or bool({"DB", "ACTION"} & set(map(str, basis)))  # τ²-bench's default: DB
    return _tau2_instruction(task.get("user_scenario")), reference, actions is None or not judged


def _tau2_usage(simulation: Mapping[str, Any], messages: list[Any]) -> dict[str, Any] | None:
    """agent_cost, duration (seconds) and the sum of the assistant messages' token usage."""
    tokens: dict[str, int | None] = {}
    for key in ("prompt_tokens", "completion_tokens"):
        counts = [
            m["usage"].get(key)
            for m in messages
            if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("usage"), dict)
        ]
        tokens[key] = sum(counts) if counts and all(_whole(c) for c in counts) else None
    cost, duration = simulation.get("agent_cost"), simulation.get("duration")
    number = (int, float)
    usage = usage_record(
        {
            **tokens,
            "cost_usd": cost if isinstance(cost, number) and not isinstance(cost, bool) else None,
            "latency_ms": duration * 1000.0
            if isinstance(duration, number) and not isinstance(duration, bool)
            else None,
        }
    )
    return usage if usage and any(v is not None for v in usage.values()) else None


def _tau2_trials(
    results: Mapping[str, Any], first_number: int
) -> tuple[list[Trial], list[tuple[int, str, str | None]]]:
    """The Trials of a τ²-bench results object, and (number, reason, task id) for simulations that are not one."""
    tasks: dict[str, Any] = {}
    for task in results["tasks"]:
        if isinstance(task, dict) and isinstance(task.get("id"), str | int) and not isinstance(task.get("id"), bool):
            tasks.setdefault(str(task["id"]), task)
    trials, bad = [], []
    for number, simulation in enumerate(results["simulations"], start=first_number):
        task_id = simulation.get("task_id") if isinstance(simulation, dict) else None
        task_id = str(task_id) if isinstance(task_id, str | int) and not isinstance(task_id, bool) else None
        try:
            trials.append(_tau2_trial(number, simulation, task_id, tasks))
        except ValueError as exc:
            bad.append((number, str(exc), task_id))
    return trials, bad


def _tau2_trial(number: int, simulation: Any, task_id: str | None, tasks: Mapping[str, Any]) -> Trial:
    if not isinstance(simulation, dict):
        raise ValueError(f"simulation is not a JSON object: a {type(simulation).__name__}")
    label = f"simulation {simulation.get('id')!r}" if isinstance(simulation.get("id"), str) else "simulation"
    if task_id is None:
        raise ValueError(f"{label}: no task_id")
    if task_id not in tasks:
        raise ValueError(f"{label}: task {task_id!r} is not among the tasks of the results file")
    if not _whole(simulation.get("trial")):
        raise ValueError(f"{label}: no trial number (a whole number >= 0)")
    if not isinstance(simulation.get("messages"), list):
        raise ValueError(f"{label}: no messages list (a full-duplex simulation keeps ticks, which are not read)")
    reward_info = simulation.get("reward_info") if isinstance(simulation.get("reward_info"), dict) else {}
    problem = _reward_problem(reward_info.get("reward"))
    try:
        if problem:
            raise ValueError(problem)
        instruction, actions, goal_only = _tau2_task(tasks[task_id])
        steps, defects = _converted(simulation["messages"])
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from exc
    termination = (
        simulation.get("termination_reason") if isinstance(simulation.get("termination_reason"), str) else None
    )
    incomplete = termination in TAU2_INCOMPLETE
    return Trial(
        number,
        task_id,
        simulation["trial"],
        instruction,
        actions,
        goal_only,
        steps,
        defects,
        _reward_state(reward_info.get("reward"), reward_info.get("info"), termination_reason=termination),
        status="error" if incomplete else "ok",
        error=f"τ²-bench termination_reason {termination}: the simulation did not run to an end"
        if incomplete
        else None,
        usage=_tau2_usage(simulation, simulation["messages"]),
    )


def _trials(
    run_id: str, name: str, records: list[tuple[int, Any]], case_prefix: str
) -> tuple[list[Trial], list[dict[str, Any]], int]:
    """The Trials of every record (a τ²-bench results object holds many), reject rows, and how many records there
    were."""
    trials: list[Trial] = []
    rejects: list[dict[str, Any]] = []
    count = 0
    for number, record in records:
        if is_tau2_results(record):
            found, bad = _tau2_trials(record, count + 1)
            trials += found
            rejects += [
                import_reject(run_id, FORMAT, name, n, reason, case_id=task_id and f"{case_prefix}{task_id}")
                for n, reason, task_id in bad
            ]
            count += len(record["simulations"])
            continue
        count += 1
        if isinstance(record, dict) and isinstance(record.get("tasks"), list) and "simulations" not in record:
            rejects.append(
                import_reject(
                    run_id,
                    FORMAT,
                    name,
                    number,
                    "a τ²-bench results file without `simulations` "
                    "(the dir format keeps them in simulations/*.json, which is not read)",
                )
            )
            continue
        try:
            trials.append(_v1_trial(number, record))
        except ValueError as exc:
            rejects.append(import_reject(run_id, FORMAT, name, number, str(exc)))
    return trials, rejects, count


def import_tau_bench(
    source: str | Path, run: ImportRun, *, tool_match: str = "unordered", case_prefix: str = "tau-"
) -> ImportSummary:
    """Write the cases, traces, registry and run manifest of a τ-bench or τ²-bench results file under the run's data
    root."""
    run_id = run.run_id
    started = start_import(FORMAT, source, run)
    path, stem, summary, rejects = started.path, started.stem, started.summary, started.rejects
    trials, bad, count = _trials(run_id, path.name, started.records, case_prefix)
    summary.records = count + len(rejects)  # a τ²-bench results object counts its simulations
    rejects += bad

    called = [name for t in trials for name in called_tools(t.steps)]
    registry, known, origin = resolve_registry(
        run.data_root,
        summary.environment_version,
        run.tools,
        {},
        called + [a["name"] for t in trials for a in t.actions],
        TAU_TOOL_ROLES,
        "the τ-bench / τ²-bench tool table",
    )
    summary.notes.append(f"tool registry: {origin}")
    summary.notes += filter(None, [unknown_tools_note(called, known)])
    escalation = escalation_tools(registry_names(registry))

    cases: dict[str, dict[str, Any]] = {}
    traces: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    for t in trials:
        case_id = f"{case_prefix}{t.task_id}"
        attempt = t.trial + 1
        unknown = sorted({a["name"] for a in t.actions} - known) if known is not None else []
        case = {
            "case_id": case_id,
            "case_revision": 1,
            "lanes": ["agent"],
            "input": t.instruction,
            "reference_tool_calls": t.actions,
            "tool_match": "goal_only" if t.goal_only else tool_match,
            "milestones": {REWARD_MILESTONE: {"path": "tau_bench.reward", "gte": SUCCESS_THRESHOLD}},
            **({"escalation_tools": escalation} if escalation else {}),
        }
        reason = (
            f"task actions name tools missing from the registry: {', '.join(unknown)}"
            if unknown
            else f"duplicate trial {t.trial} of task {t.task_id}"
            if (case_id, attempt) in seen
            else f"task {t.task_id} differs from its first record (actions or instruction)"
            if case_id in cases and not same_case(cases[case_id], case)
            else None
        )
        if reason:
            rejects.append(import_reject(run_id, FORMAT, path.name, t.number, reason, case_id=case_id))
            continue
        cases.setdefault(case_id, case)
        seen.add((case_id, attempt))
        traces.append(
            trace_record(
                run_id,
                case_id,
                attempt,
                None,
                t.steps,
                t.defects,
                status=t.status,
                error=t.error,
                input_text=case["input"],
                final_state=t.final_state,
                usage=t.usage,
            )
        )
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
