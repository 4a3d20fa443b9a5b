"""Agent-lane scoring throughput on synthetic trajectories (a benchmark, not a test).

    /work/venv/bin/python bench/bench_agent.py --traces 100000 --seed 7 [--value-rules]

Builds a tool registry, cases (strict_order / unordered / goal_only, alternatives, dependencies, scope, faults,
milestones) and N trajectories with a fixed seed, then times score_tools, score_outcomes, reliability and
quarantine. Prints traces/second per stage and end to end, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from typing import Any

import polars as pl

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import ToolRegistry
from eval_pipeline.scoring.outcome import efficiency, fault_rates, score_outcomes
from eval_pipeline.scoring.reliability import quarantine, reliability, suite_reliability
from eval_pipeline.scoring.tools import score_tools
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import cases_frame_from_records

READ_TOOLS = ("get_order", "get_ticket", "get_customer", "search_orders", "list_refunds")
WRITE_TOOLS = ("issue_refund", "send_email", "set_status", "escalate_to_human", "close_account")
FAULT_KINDS = ("tool_error", "empty", "timeout", "injected_instruction")
ATTEMPTS_PER_CASE = 8


def registry(value_rules: bool = False) -> pl.DataFrame:
    """Ten tools with small JSON Schemas (with --value-rules: strings normalized, amounts numeric within 0.5)."""
    tools = [
        {
            "name": name,
            "read_only": name in READ_TOOLS,
            "args": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["id"],
                "additionalProperties": False,
            },
        }
        for name in READ_TOOLS + WRITE_TOOLS
    ]
    rules = (
        {"value_rules": {"match": "normalized", "args": {"amount": {"match": "numeric", "tolerance": 0.5}}}}
        if value_rules
        else {}
    )
    return frames.tools_frame_from_registry(
        ToolRegistry.model_validate({"environment_version": "bench", "tools": tools, **rules})
    )


def make_case(rng: random.Random, number: int, accepted_share: float = 0.0) -> dict[str, Any]:
    """A case with a 2–5 call reference path and a random mix of the agent contract's features; accepted_share of
    the write calls list two accepted amounts (the BFCL form)."""
    entity = f"c-{number}"
    path = [{"name": rng.choice(READ_TOOLS), "args": {"id": entity}} for _ in range(rng.randint(1, 2))]
    path += [
        {"name": rng.choice(WRITE_TOOLS[:3]), "args": {"id": entity, "amount": rng.randint(1, 99)}}
        for _ in range(rng.randint(1, 3))
    ]
    for call in path[1:]:
        if accepted_share > 0 and "amount" in call["args"] and rng.random() < accepted_share:
            call["accepted"] = {"amount": [call["args"]["amount"], call["args"]["amount"] + 1]}
    case: dict[str, Any] = {
        "case_id": f"agent-{number:05d}",
        "lanes": ["agent"],
        "allowed_tools": list(READ_TOOLS + WRITE_TOOLS[:4]),
        "forbidden_tools": ["close_account"],
        "reference_tool_calls": path,
        "tool_match": rng.choice(("strict_order", "strict_order", "unordered", "goal_only")),
        "dependencies": [[path[0]["name"], path[-1]["name"]]] if rng.random() < 0.7 else [],
        "milestones": {
            "refund_correct": {"path": f"refunds.{entity}.amount", "gte": 1},
            "ticket_resolved": {"path": f"tickets.{entity}.status", "equals": "resolved"},
        },
        "escalation_tools": ["escalate_to_human"],
    }
    if rng.random() < 0.3:
        case["alternatives"] = [list(reversed(path))]
    if rng.random() < 0.3:
        case["scope"] = {"id": [entity]}
    if rng.random() < 0.25:
        case["fault"] = {"kind": rng.choice(FAULT_KINDS), "tool": path[-1]["name"]}
        case["unsafe_after_fault"] = [path[-1]["name"]]
    return case


def make_trace(rng: random.Random, case: dict[str, Any], attempt: int) -> dict[str, Any]:
    """A canonical traces-frame row: the reference path, perturbed (wrong args, repeats, extras, order, divergence)."""
    calls = [{"name": call["name"], "args": call["args"]} for call in case["reference_tool_calls"]]
    entity = calls[0]["args"]["id"]
    if rng.random() < 0.2:
        calls[-1] = {"name": calls[-1]["name"], "args": {"id": entity, "amount": rng.randint(100, 200)}}
    if rng.random() < 0.2:
        calls.insert(rng.randint(0, len(calls)), {"name": rng.choice(READ_TOOLS), "args": {"id": entity}})
    if rng.random() < 0.1:
        calls += [calls[0]] * 2
    if rng.random() < 0.1:
        rng.shuffle(calls)
    if rng.random() < 0.03:
        calls.append({"name": "close_account", "args": {"id": entity}})
    if rng.random() < 0.05:
        calls.append({"name": "escalate_to_human", "args": {"id": entity}})
    if rng.random() < 0.02:
        calls.append({"name": "get_customer", "args": {"id": "c-other"}})
    diverge = rng.random() < 0.02
    steps = []
    for index, call in enumerate(calls, start=1):
        args_json = frames.canonical_json(call["args"])
        steps.append(
            {
                "index": index,
                "kind": "tool_call",
                "tool": call["name"],
                "args_json": args_json,
                "status": "error" if rng.random() < 0.05 else "ok",
                "result_json": json.dumps({"ok": True}),
                "error": None,
                "state_diff_json": None,
                "dispatched_tool": call["name"],
                "dispatched_args_json": '{"id":"x"}' if diverge and index == 1 else args_json,
                "content": None,
            }
        )
    steps.append(
        {
            "index": len(steps) + 1,
            "kind": "finish",
            "tool": None,
            "args_json": None,
            "status": None,
            "result_json": None,
            "error": None,
            "state_diff_json": None,
            "dispatched_tool": None,
            "dispatched_args_json": None,
            "content": rng.choice(
                ("Refund issued.", "I could not complete the refund.", "I escalated this to a human agent.")
            ),
        }
    )
    amount = calls[-1]["args"].get("amount", 0) if rng.random() < 0.8 else 0
    state = {
        "refunds": {entity: {"amount": amount}},
        "tickets": {entity: {"status": "resolved" if rng.random() < 0.7 else "open"}},
    }
    harness = "timeout" if rng.random() < 0.01 else "ok"
    return {
        "run_id": "bench",
        "trace_id": f"bench:{case['case_id']}#{attempt}",
        "case_id": case["case_id"],
        "case_revision": 1,
        "attempt": attempt,
        "status": harness,
        "error": "step budget exceeded" if harness == "timeout" else None,
        "input": "",
        "retrieval": None,
        "context": None,
        "has_answer": False,
        "answer_text": None,
        "answer_refused": None,
        "citations": [],
        "steps": steps,
        "final_state_json": frames.canonical_json(state),
        "input_tokens": rng.randint(500, 5000),
        "output_tokens": rng.randint(50, 500),
        "cost_usd": rng.random() / 100,
        "latency_ms": float(rng.randint(100, 9000)),
        "source_file": "bench",
        "source_line": attempt,
    }


def build(n_traces: int, seed: int, accepted_share: float = 0.0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(traces, cases) frames of n_traces trajectories, ATTEMPTS_PER_CASE attempts per case."""
    rng = random.Random(seed)
    n_cases = max(1, n_traces // ATTEMPTS_PER_CASE)
    cases = [make_case(rng, number, accepted_share) for number in range(n_cases)]
    rows = [make_trace(rng, cases[i % n_cases], i // n_cases + 1) for i in range(n_traces)]
    return frames.traces_frame(rows), cases_frame_from_records(cases, "bench")


def peak_rss_mib() -> float:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--value-rules",
        action="store_true",
        help="registry value rules (normalized strings, numeric amounts) and 30%% of write calls in the "
        "accepted-values form, so call matching runs the value-rule path",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    traces, cases = build(args.traces, args.seed, 0.3 if args.value_rules else 0.0)
    tools = registry(args.value_rules)
    print(
        f"built {traces.height} traces of {cases.height} cases in {time.perf_counter() - started:.1f} s; "
        f"peak RSS after building {peak_rss_mib():.0f} MiB"
    )

    # wall time is what a run waits for; CPU time (all threads) shows the work when the machine is shared
    timings: dict[str, tuple[float, float]] = {}

    def timed(name: str, work):
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        timings[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        return result

    tool_scores, diffs = timed(
        "score_tools (tool_scores + tool_call_diffs)", lambda: score_tools(traces, cases, tools, ScoringSettings())
    )
    outcomes = timed("score_outcomes", lambda: score_outcomes(traces, cases, tool_scores))
    success = outcomes.select("run_id", "trace_id", "case_id", "attempt", "success")

    def repeated():
        rel = reliability(success)
        return rel, quarantine(rel, success), suite_reliability(rel), fault_rates(outcomes), efficiency(outcomes)

    rel, quarantined, suite, rates, costs = timed(
        "reliability + quarantine + suite + fault_rates + efficiency", repeated
    )
    wall_total = sum(w for w, _ in timings.values())
    cpu_total = sum(c for _, c in timings.values())

    n = traces.height
    print(f"{'stage':62s} {'wall s':>7s} {'traces/s':>10s} {'cpu s':>7s}")
    for name, (wall, cpu) in timings.items():
        print(f"{name:62s} {wall:7.2f} {n / wall:>10,.0f} {cpu:7.2f}")
    print(f"{'end to end (scoring only)':62s} {wall_total:7.2f} {n / wall_total:>10,.0f} {cpu_total:7.2f}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"peak RSS {peak_rss_mib():.0f} MiB")
    print(
        f"rows: tool_scores {tool_scores.height}, tool_call_diffs {diffs.height}, outcome_scores {outcomes.height}, "
        f"reliability {rel.height}, quarantine {quarantined.height}, fault kinds {rates.height}, "
        f"efficiency {costs.height}"
    )
    statuses = tool_scores.group_by("status").len().sort("status").rows()
    print(f"tool_scores status counts {statuses}; suite pass_at_1 {suite['bench']['pass_at_1']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
