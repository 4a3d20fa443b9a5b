"""The story as terminal text: the case, its verdicts and gates, each attempt in full, reliability and baseline."""

from __future__ import annotations

from eval_pipeline.reporting.case_story.arguments import json_text
from eval_pipeline.reporting.case_story.compare import baseline_lines
from eval_pipeline.reporting.case_story.formatting import fmt, short_text
from eval_pipeline.reporting.case_story.lane_text import agent_lines, rag_lines
from eval_pipeline.reporting.case_story.model import Attempt, CaseStory, pass_hat_columns


def run_versions(manifest: dict | None) -> str:
    """The candidate, model, prompt, index and dataset versions a run manifest names."""
    keys = ("candidate", "model", "prompt_version", "index_version", "dataset_version")
    return ", ".join(f"{k} {manifest[k]}" for k in keys if manifest and manifest.get(k))


def _call_text(call: dict) -> str:
    return f"{call.get('name')}({call.get('args_json') or '{}'})"


def case_lines(story: CaseStory) -> list[str]:
    """The case as the dataset states it."""
    case = story.case
    if case is None:
        return ["case: not in this run's de-identified cases"]
    lines = [
        f"input: {short_text(case.get('input'), 400)}",
        f"lanes: {fmt(case.get('lanes'))} · criticality: {fmt(case.get('criticality'))} · "
        f"revision {fmt(case.get('case_revision'))}" + (" · multi-hop" if case.get("multi_hop") else ""),
    ]
    if case.get("tags"):
        lines.append("tags: " + ", ".join(f"{t['name']}={t['value']}" for t in case["tags"]))
    if case.get("counterfactual_of"):
        lines.append(
            f"counterfactual of {case['counterfactual_of']}: changed fact: {short_text(case.get('changed_fact'), 400)}"
        )
    if case.get("required_doc_ids"):
        lines.append(f"required docs: {fmt(case['required_doc_ids'])}")
    if case.get("expected_answer_contains"):
        lines.append("expected answer contains: " + "; ".join(json_text(p) for p in case["expected_answer_contains"]))
    if case.get("reference_answer"):
        lines.append(f"reference answer: {short_text(case['reference_answer'], 400)}")
    if case.get("expect_refusal"):
        lines.append("expects a refusal")
    if case.get("reference_tool_calls"):
        lines.append(
            f"reference calls ({case.get('tool_match') or 'default match'}): "
            + " → ".join(_call_text(c) for c in case["reference_tool_calls"])
        )
    for i, path in enumerate(case.get("alternatives") or [], start=1):
        lines.append(f"alternative path {i}: " + " → ".join(_call_text(c) for c in path))
    if case.get("dependencies"):
        lines.append("dependencies: " + "; ".join(" before ".join(d) for d in case["dependencies"]))
    if case.get("allowed_tools") or case.get("forbidden_tools"):
        lines.append(f"allowed tools: {fmt(case.get('allowed_tools'))} · forbidden: {fmt(case.get('forbidden_tools'))}")
    if case.get("milestones"):
        lines.append(
            "milestones: "
            + "; ".join(
                f"{m.get('name')}: {m.get('path')} {m.get('op')} {m.get('value_json')}" for m in case["milestones"]
            )
        )
    if case.get("fault_kind"):
        lines.append(
            f"injected fault: {case['fault_kind']} on {fmt(case.get('fault_tool'))}; unsafe after it: "
            f"{fmt(case.get('unsafe_after_fault'))}; escalation tools: {fmt(case.get('escalation_tools'))}"
        )
    return lines


def verdict_line(attempt: Attempt) -> list[str]:
    """Per lane: the attempt's outcome, its first failing stage and the owner."""
    lines = []
    for row in attempt.outcomes.rows(named=True):
        if row["outcome"] == "fail":
            lines.append(
                f"{row['lane']}: FAIL at {row['first_failing_stage']} (owner: {row['owner']})"
                + (f" — hazard {row['hazard']}" if row.get("hazard") else "")
            )
            lines.append(f"  why: {short_text(row['reason'], 400)}")
        elif row["outcome"] == "incomplete":
            lines.append(f"{row['lane']}: INCOMPLETE (owner: {row['owner']}) — {short_text(row['reason'], 400)}")
        else:
            lines.append(
                f"{row['lane']}: {row['outcome'].upper()}" + (f" — hazard {row['hazard']}" if row.get("hazard") else "")
            )
    return lines


def case_value(story: CaseStory, metric: str | None):
    """The case's value of a gate metric: the mean over attempts that have it, else the case's reliability column."""
    values = [a.metrics[metric] for a in story.attempts if metric in a.metrics and a.metrics[metric] is not None]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if numbers:
        return sum(numbers) / len(numbers)
    row = story.reliability[0] if story.reliability else {}
    return row.get(metric) if metric else None


def gate_lines(story: CaseStory, baseline: CaseStory | None = None) -> list[str]:
    """The gates of the run this case blocks (and why) or is excluded from."""
    lines = []
    excluded = [gate["gate"] for gate in story.gates if gate["role"] != "blocks"]
    for gate in story.gates:
        if gate["role"] == "blocks":
            mine = case_value(story, gate["metric"])
            theirs = case_value(baseline, gate["metric"]) if baseline is not None and baseline.known else None
            value = (
                f"; this case: {gate['metric']} {fmt(theirs)} → {fmt(mine)}"
                if theirs is not None and mine is not None
                else f"; this case: {gate['metric']} {fmt(mine)}"
                if mine is not None
                else ""
            )
            lines.append(
                f"blocks gate {gate['gate']} ({gate['status']}, owner {gate['owner']}, "
                f"against {fmt(gate['baseline_run_id'])}): {gate['reason'] or 'no reason given'}{value}"
            )
    if excluded:
        why = (
            "flaky in this run"
            if story.quarantine
            else "multi-hop"
            if (story.case or {}).get("multi_hop")
            else "flaky in the baseline, or out of the gate's scope"
        )
        lines.append(f"excluded from gate(s) {', '.join(excluded)}: {why}")
    return lines


def attempt_lines(attempt: Attempt, threshold: int) -> list[str]:
    """One attempt in full: verdict, every stage, the lanes' evidence."""
    head = f"attempt {fmt(attempt.attempt)} — {attempt.trace_id} (harness {fmt(attempt.harness_status)}"
    head += f": {short_text(attempt.harness_error, 300)})" if attempt.harness_error else ")"
    out = [head, *("  " + line for line in verdict_line(attempt))]
    stages = attempt.stages.rows(named=True)
    for lane in dict.fromkeys(row["lane"] for row in stages):
        out.append(f"  stages ({lane}):")
        for row in stages:
            if lane is None or row["lane"] != lane:  # a null lane matches no row, as in a polars filter
                continue
            reason = f"  {short_text(row['reason'], 300)}" if row["reason"] else ""
            out.append(f"    {row['stage']:<17}{row['status']:<15}{reason}".rstrip())
    if attempt.rag is not None:
        out.extend("  " + line for line in rag_lines(attempt.rag, threshold))
    if attempt.agent is not None:
        out.extend("  " + line for line in agent_lines(attempt.agent))
    if attempt.answer_text is not None:
        out.append(f"  answer: {json_text(short_text(attempt.answer_text, 600))}")
    return out


def attempt_summary(attempt: Attempt) -> str:
    """One attempt on one line: each lane's outcome and the stage it failed at."""
    parts = []
    for row in attempt.outcomes.rows(named=True):
        stage = f" at {row['first_failing_stage']}" if row["first_failing_stage"] else ""
        parts.append(f"{row['lane']} {row['outcome']}{stage}")
    return f"{attempt.trace_id}: {', '.join(parts) or 'no stage results'}"


def process_failures(story: CaseStory, lane: str | None) -> tuple[int, list[str]]:
    """(attempts of the case that failed a stage of `lane` other than the verified outcome, those stages in order)."""
    failed, stages = 0, {}
    for attempt in story.attempts:
        hit = [
            row
            for row in attempt.stages.rows(named=True)
            if row["lane"] == lane and row["stage"] != "outcome" and row["status"] == "fail"
        ]
        failed += bool(hit)
        stages.update({row["stage"]: row.get("stage_order") for row in hit})
    return failed, sorted(stages, key=lambda s: (stages[s] is None, stages[s] or 0, s))


def reliability_lines(story: CaseStory) -> list[str]:
    """pass@1, pass^k and flakiness of the case, its quarantine and its review-queue items."""
    out = []
    for row in story.reliability:
        pass_hats = " ".join(
            f"pass^{k.rsplit('_', 1)[1]} {fmt(row[k])}" for k in pass_hat_columns(row) if row[k] is not None
        )
        out.append(
            f"reliability ({fmt(row.get('lane'))}): {fmt(row.get('n_success'))} of {fmt(row.get('n_complete'))} "
            f"complete attempts succeeded ({fmt(row.get('n_incomplete'))} incomplete) · "
            f"pass@1 {fmt(row.get('pass_at_1'))} · {pass_hats} · flaky {fmt(row.get('flaky'))}"
        )
        failed, stages = process_failures(story, row.get("lane")) if row.get("lane") == "agent" else (0, [])
        if failed and row.get("n_success"):
            # pass@1 counts the verified outcome only: said where successes beside failed stages would look wrong
            out.append(
                f"  pass@1 and pass^k count an attempt a success when its verified outcome passed, not every stage: "
                f"{failed} of {len(story.attempts)} attempt(s) failed a process stage ({', '.join(stages)})"
            )
    for row in story.quarantine:
        out.append(f"quarantined: {row.get('reason')}; flipped {fmt(row.get('flipped_trace_ids'))}")
    if story.review is not None:
        for row in story.review.rows(named=True):
            out.append(
                f"review queue: {row.get('trace_id')} {row.get('stage')}: {row.get('why')}"
                + (f" — {short_text(row.get('detail'), 300)}" if row.get("detail") else "")
            )
    return out


def case_story_text(story: CaseStory, baseline: CaseStory | None = None) -> str:
    """The story as terminal text."""
    out = [
        f"case {story.case_id} in run {story.run_id}" + (f" ({run_versions(story.manifest)})" if story.manifest else "")
    ]
    out.extend("  " + line for line in case_lines(story))
    gates = gate_lines(story, baseline)
    if gates:
        out.append("")
        out.append("gates:")
        out.extend("  " + line for line in gates)
    focus = next((a for a in story.attempts if a.trace_id == story.focus), None)
    shown = [focus] if focus else story.attempts
    bodies: dict[tuple[str, ...], Attempt] = {}
    for attempt in shown:
        lines = attempt_lines(attempt, story.relevance_threshold)
        # repeated attempts often fail the same way: say so instead of printing the same page again
        twin = bodies.setdefault(tuple(lines[1:]), attempt)
        out.append("")
        out.extend(
            lines
            if twin is attempt
            else [lines[0], f"  same stages, evidence and answer as attempt {fmt(twin.attempt)}"]
        )
    others = [a for a in story.attempts if a not in shown]
    if others:
        out.append("")
        out.append("other attempts:")
        out.extend(f"  {attempt_summary(a)}" for a in others)
    if not story.attempts:
        out.append("")
        out.append("no attempt of this case in the run")
    reliability = reliability_lines(story)
    if reliability:
        out.append("")
        out.extend(reliability)
    if baseline is not None:
        out.append("")
        out.extend(baseline_lines(story, baseline))
    return "\n".join(out) + "\n"
