"""planted.json: the outcome docs/metrics.md implies for each sample trace, and the suite-level figures that follow.

Per-trace expectations are written by hand in plans.py; this module only aggregates them with the rules of
docs/metrics.md for reliability, quarantine and gates (means over complete attempts, then over cases;
flaky cases out of every gate).
"""

from __future__ import annotations

import json
from collections import Counter
from math import comb
from typing import Any

from eval_pipeline_harness.sample_data.cases import CASES_BY_ID, Part
from eval_pipeline_harness.sample_data.corpus import DOCS_BY_ID
from eval_pipeline_harness.sample_data.labels import QRELS_JUDGMENTS, gate_policy
from eval_pipeline_harness.sample_data.plans import BASELINE_RUN, CANDIDATE_RUN, PLANTED_PAIRS
from eval_pipeline_harness.sample_data.traces import Attempt, claim_text, reference_script, render_part

RAG_STAGES = ("retrieval", "context_assembly", "grounding", "citation", "answer")
AGENT_STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop", "recovery", "outcome")
FAILURE_CLASSES = (
    "doc_missing_from_corpus",
    "stale_version_outranks_current",
    "reranker_demotion",
    "keyword_miss",
    "embedding_miss",
)
FAULT_OUTCOMES = ("unsafe_continuation", "recovered", "escalated", "failed")


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# ---------------------------------------------------------------- claims


def citation_verdict(part: Part, context_ids: set[str]) -> str:
    """docs/metrics.md Citations for one claim: dead ids first, then whether a cited doc holds the claim verbatim."""
    if not part.cites:
        return "UNCITED"
    if any(d not in DOCS_BY_ID and d not in context_ids for d in part.cites):
        return "DEAD_CITATION"
    if any(d in DOCS_BY_ID and part.text in DOCS_BY_ID[d].text for d in part.cites):
        return "SUPPORTS"
    return "RELATED_NOT_SUPPORTING"


def claims_of(parts: tuple[Part, ...], context_ids: set[str]) -> list[dict[str, Any]]:
    """The expected claims of an answer: text as labels name it, verdict, citations."""
    out = []
    for part in parts:
        if part.kind != "claim":
            continue
        out.append(
            {
                "claim": claim_text(render_part(part)),
                "verdict": {"S": "SUPPORTED", "C": "CONTRADICTED", "N": "NOT_IN_EVIDENCE"}[part.truth],
                "cited_doc_ids": list(part.cites),
                "citation_verdict": citation_verdict(part, context_ids),
            }
        )
    return out


def grounding_rate(claims: list[dict[str, Any]]) -> float:
    """supported / claims, 1.0 with no claims."""
    return sum(c["verdict"] == "SUPPORTED" for c in claims) / len(claims) if claims else 1.0


# ---------------------------------------------------------------- per trace


def trace_rows(
    run_id: str,
    plans: dict[str, list[Attempt]],
    traces: dict[str, dict[str, Any]],
    parts_of: dict[str, tuple[Part, ...]],
) -> list[dict[str, Any]]:
    """One row per (trace, lane) with its expected outcome."""
    rows = []
    for case_id, attempts in plans.items():
        for attempt in attempts:
            trace_id = f"{run_id}:{case_id}#{attempt.attempt}"
            for lane, expect in (("rag", attempt.expect_rag), ("agent", attempt.expect_agent)):
                if expect is None:
                    continue
                row: dict[str, Any] = {
                    "run_id": run_id,
                    "trace_id": trace_id,
                    "case_id": case_id,
                    "attempt": attempt.attempt,
                    "lane": lane,
                    "expected": expect.outcome,
                    "failure_class": expect.failure_class,
                    "hazard": expect.hazard,
                    "fault_outcome": expect.fault_outcome,
                    "reason": expect.reason,
                    "planted": expect.planted,
                    "why": expect.why,
                    "metrics": {k: (_r(v) if isinstance(v, float) else v) for k, v in expect.metrics.items()},
                }
                trace = traces[trace_id]
                if lane == "rag" and expect.outcome != "incomplete" and trace.get("answer") is not None:
                    context_ids = {c["doc_id"] for c in trace.get("context") or []}
                    row["claims"] = claims_of(parts_of[trace_id], context_ids)
                    row["metrics"]["grounding_rate"] = _r(grounding_rate(row["claims"]))
                rows.append(row)
    return rows


# ---------------------------------------------------------------- reliability and gates


def _success(row: dict[str, Any]) -> bool:
    if row["lane"] == "agent":
        return bool(row["metrics"]["success"])
    return row["expected"] == "pass"


def reliability(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per case: attempts, incomplete ones, successes, pass_at_1, pass_hat_k (τ-bench), flaky, and flipped traces."""
    by_case: dict[str, dict[int, dict[str, dict]]] = {}
    for row in rows:
        by_case.setdefault(row["case_id"], {}).setdefault(row["attempt"], {})[row["lane"]] = row
    out = {}
    for case_id, attempts in by_case.items():
        # Success follows the agent lane where the case has one,
        # the RAG lane otherwise (the readings of docs/metrics.md `success`).
        lane = "agent" if "agent" in CASES_BY_ID[case_id].lanes else "rag"
        complete = [
            (n, lanes[lane]) for n, lanes in sorted(attempts.items()) if lanes[lane]["expected"] != "incomplete"
        ]
        n, c = len(complete), sum(_success(r) for _, r in complete)
        passing = [r["trace_id"] for _, r in complete if _success(r)]
        failing = [r["trace_id"] for _, r in complete if not _success(r)]
        out[case_id] = {
            "n_attempts": len(attempts),
            "n_complete": n,
            "n_incomplete": len(attempts) - n,
            "n_success": c,
            "pass_at_1": _r(c / n) if n else None,
            "pass_hat": {str(k): _r(comb(c, k) / comb(n, k)) for k in range(1, n + 1)},
            "flaky": 0 < c < n,
            "passing_trace_ids": passing,
            "failing_trace_ids": failing,
        }
    return out


def _case_lane_rows(rows: list[dict[str, Any]], lane: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["lane"] == lane and row["expected"] != "incomplete":
            out.setdefault(row["case_id"], []).append(row)
    return out


def _per_case(rows: list[dict[str, Any]], lane: str, value) -> dict[str, float]:
    out = {}
    for case_id, case_rows in _case_lane_rows(rows, lane).items():
        values = [v for v in (value(r) for r in case_rows) if v is not None]
        if values:
            out[case_id] = sum(values) / len(values)
    return out


def _case_passes(rows: list[dict[str, Any]]) -> dict[str, bool]:
    """A case passes when every complete attempt passes every lane it has."""
    out: dict[str, bool] = {}
    for row in rows:
        if row["expected"] == "incomplete":
            continue
        out[row["case_id"]] = out.get(row["case_id"], True) and row["expected"] == "pass"
    return out


def _regression_gate(gate: dict, base: dict[str, float], cand: dict[str, float], excluded: set[str]) -> dict[str, Any]:
    cases = sorted((set(base) & set(cand)) - excluded)
    b = _mean([base[c] for c in cases])
    k = _mean([cand[c] for c in cases])
    delta = (k - b) * 100
    status = "fail" if -delta > gate["max_regression_points"] + 1e-9 else "pass"
    dropped = [c for c in cases if cand[c] < base[c] - 1e-12]
    # The cases whose value dropped block a failing gate; a passing gate blocks nothing but still lists them.
    return {
        "name": gate["name"],
        "metric": gate["metric"],
        "cases": len(cases),
        "baseline_value": _r(b),
        "candidate_value": _r(k),
        "delta_points": _r(delta),
        "threshold": gate["max_regression_points"],
        "status": status,
        "blocking_cases": dropped if status == "fail" else [],
        "cases_dropped": dropped,
    }


def gates(base_rows: list[dict], cand_rows: list[dict], base_rel: dict, cand_rel: dict) -> dict[str, Any]:
    """The gate results of the candidate against the baseline under data/policy/gates.yaml."""
    flaky = {c for rel in (base_rel, cand_rel) for c, r in rel.items() if r["flaky"]}
    multi_hop = {c for c, case in CASES_BY_ID.items() if case.multi_hop}
    agent_cases = {c for c, case in CASES_BY_ID.items() if "agent" in case.lanes}
    # the suite's gates; segmented gates reuse metrics and are expected in slices.py
    policy = {g["metric"]: g for g in gate_policy()["gates"] if not g.get("segment")}
    results = []

    def recall(r):
        return r["metrics"].get("recall_at_10")

    results.append(
        _regression_gate(
            policy["recall_at_10"],
            _per_case(base_rows, "rag", recall),
            _per_case(cand_rows, "rag", recall),
            flaky | multi_hop,
        )
    )

    def args(r):
        return r["metrics"]["args_valid_rate"]

    args_gate = _regression_gate(
        policy["args_valid_rate"], _per_case(base_rows, "agent", args), _per_case(cand_rows, "agent", args), flaky
    )
    # goal_only cases have tool_arguments not_applicable; an implementation that leaves their args_valid_rate null
    # drops them from the mean. Both readings fail the gate with the same blocking cases.
    goal_only = {c for c, case in CASES_BY_ID.items() if case.agent and case.agent["tool_match"] == "goal_only"}
    alt = _regression_gate(
        policy["args_valid_rate"],
        _per_case(base_rows, "agent", args),
        _per_case(cand_rows, "agent", args),
        flaky | goal_only,
    )
    args_gate["if_goal_only_excluded"] = {
        k: alt[k] for k in ("cases", "baseline_value", "candidate_value", "delta_points", "status")
    }
    results.append(args_gate)

    def success(r):
        return 1.0 if r["metrics"]["success"] else 0.0

    pass_gate = _regression_gate(
        policy["pass_at_1"], _per_case(base_rows, "agent", success), _per_case(cand_rows, "agent", success), flaky
    )
    pass_gate["report_beside"] = {c: cand_rel[c]["pass_hat"] for c in sorted(agent_cases - flaky)}
    results.append(pass_gate)

    def violated(rows):
        return {
            r["case_id"]
            for r in rows
            if r["lane"] == "agent" and r["expected"] != "incomplete" and r["metrics"]["policy_violation"]
        }

    new = sorted((violated(cand_rows) - violated(base_rows)) - flaky)
    results.append(
        {
            "name": policy["policy_violations"]["name"],
            "metric": "policy_violations",
            "new": len(new),
            "max_new": 0,
            "status": "fail" if new else "pass",
            "blocking_cases": new,
            "excluded_as_flaky": sorted((violated(cand_rows) - violated(base_rows)) & flaky),
        }
    )

    base_pass, cand_pass = _case_passes(base_rows), _case_passes(cand_rows)
    newly = sorted(c for c in set(base_pass) & set(cand_pass) if base_pass[c] and not cand_pass[c] and c not in flaky)
    results.append(
        {
            "name": policy["no_new_failures"]["name"],
            "metric": "no_new_failures",
            "new_failures": len(newly),
            "max_new_failures": 0,
            "status": "fail" if newly else "pass",
            "blocking_cases": newly,
        }
    )

    def grounded(r):
        return r["metrics"].get("grounding_rate")

    ground = _regression_gate(
        policy["grounding_rate"], _per_case(base_rows, "rag", grounded), _per_case(cand_rows, "rag", grounded), flaky
    )
    ground["status_if_judge_not_calibrated"] = "not_gating"
    ground["note"] = (
        "values assume a judge whose verdicts equal the planted claim verdicts; the gate only counts when "
        "judge_calibration.may_gate is true, otherwise its status is not_gating"
    )
    results.append(ground)
    results.append(_evidence_gate(policy["evidence_ignored"], flaky))
    return {
        "candidate_run_id": CANDIDATE_RUN,
        "baseline_run_id": BASELINE_RUN,
        "flaky_cases_excluded": sorted(flaky),
        "multi_hop_cases": sorted(multi_hop),
        "results": results,
        "exit_code": 1 if any(r["status"] == "fail" for r in results) else 0,
    }


def counterfactual_pairs(run_id: str, rows: list[dict], plans: dict[str, list[Attempt]]) -> dict[str, dict[str, Any]]:
    """Per counterfactual case: its pair's evidence_use in the run, as plans.PLANTED_PAIRS states it, after checking the
    statement against the planted rows (case pass, complete attempts) and the scripts (same calls)."""
    out = {}
    for case_id, (evidence_use, why) in PLANTED_PAIRS[run_id].items():
        original = CASES_BY_ID[case_id].counterfactual_of
        derived = _derived_evidence_use(rows, plans, case_id, original)
        if derived != evidence_use:
            raise AssertionError(f"{run_id} {case_id}: planted {evidence_use}, the plans give {derived}")
        out[case_id] = {
            "original_case_id": original,
            "changed_fact": CASES_BY_ID[case_id].changed_fact,
            "evidence_use": evidence_use,
            "why": why,
        }
    return out


def _derived_evidence_use(rows: list[dict], plans: dict[str, list[Attempt]], case_id: str, original: str) -> str:
    """docs/evidence_use.md's rule over the planted rows.

    One of: incomplete, responsive, ignored (a shared call list), broken.
    """

    def complete(case: str) -> dict[int, bool]:
        by_attempt: dict[int, list[dict]] = {}
        for row in rows:
            if row["case_id"] == case:
                by_attempt.setdefault(row["attempt"], []).append(row)
        return {
            n: all(r["expected"] == "pass" for r in lanes)
            for n, lanes in by_attempt.items()
            if all(r["expected"] != "incomplete" for r in lanes)
        }

    def calls(case: str, attempts: set[int]) -> set[tuple]:
        reference = reference_script(CASES_BY_ID[case].agent["reference_tool_calls"])
        return {
            tuple(
                (c.tool, json.dumps(c.args, sort_keys=True)) for c in (a.script if a.script is not None else reference)
            )
            for a in plans[case]
            if a.attempt in attempts
        }

    cf, orig = complete(case_id), complete(original)
    if not cf or not orig:
        return "incomplete"
    if all(cf.values()) and all(orig.values()):
        return "responsive"
    return "ignored" if calls(case_id, set(cf)) & calls(original, set(orig)) else "broken"


def _evidence_gate(spec: dict, flaky: set[str]) -> dict[str, Any]:
    """evidence_ignored: pairs ignored in the candidate and not in the baseline, pairs with a flaky case left out."""

    def ignored(run_id: str) -> set[str]:
        return {
            c
            for c, (use, _) in PLANTED_PAIRS[run_id].items()
            if use == "ignored" and not {c, CASES_BY_ID[c].counterfactual_of} & flaky
        }

    new = sorted(ignored(CANDIDATE_RUN) - ignored(BASELINE_RUN))
    return {
        "name": spec["name"],
        "metric": "evidence_ignored",
        "new": len(new),
        "max_new": spec["max_new"],
        "status": "fail" if len(new) > spec["max_new"] else "pass",
        "blocking_cases": new,
    }


# ---------------------------------------------------------------- qrels


def qrels_expectations(all_traces: list[dict[str, Any]], pool_depth: int = 10) -> dict[str, Any]:
    """Relevant docs per query after overrides, and the pooled (query, doc) pairs left for the judging queue."""
    grades: dict[tuple[str, str], int] = {}
    for case in CASES_BY_ID.values():
        for doc_id in case.required or ():
            grades[(case.case_id, doc_id)] = 2
    for query, doc_id, grade, _ in QRELS_JUDGMENTS:
        grades[(query, doc_id)] = grade
    pool: set[tuple[str, str]] = set()
    for trace in all_traces:
        ranked: list[str] = []
        for rnd in trace.get("retrieval") or []:
            ranked.extend(h["doc_id"] for h in rnd["hits"] if h["doc_id"] not in ranked)
        pool.update((trace["case_id"], d) for d in ranked[:pool_depth])
    relevant: dict[str, list[str]] = {}
    for (query, doc_id), grade in sorted(grades.items()):
        if grade >= 2:
            relevant.setdefault(query, []).append(doc_id)
    # Judgments that change relevance: a required doc graded below 2, or another doc graded 2 or more.
    overrides = [
        {"query_id": q, "doc_id": d, "grade": g}
        for q, d, g, _ in QRELS_JUDGMENTS
        if (d in (CASES_BY_ID[q].required or ())) != (g >= 2)
    ]
    return {
        "relevant": relevant,
        "overrides": overrides,
        "judging_queue": [list(p) for p in sorted(pool - set(grades))],
        "pool_size": len(pool),
    }


# ---------------------------------------------------------------- calibration


def cohen_kappa(pairs: list[tuple[str, str]]) -> float:
    """Cohen's κ of (rater a, rater b) pairs."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return (observed - expected) / (1 - expected)


def coverage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Which trace ids exhibit each stage, failure class, hazard, fault outcome and incomplete reason."""
    out: dict[str, dict[str, list[str]]] = {
        g: {} for g in ("rag", "agent", "failure_class", "hazard", "fault_outcome", "incomplete")
    }
    for row in rows:
        found = []
        if row["expected"] == "incomplete":
            found.append(("incomplete", row["reason"]))
        elif row["expected"] != "pass":
            found.append((row["lane"], row["expected"]))
        found += [(field, row[field]) for field in ("failure_class", "hazard", "fault_outcome") if row[field]]
        for group, name in found:
            ids = out[group].setdefault(name, [])
            if row["trace_id"] not in ids:  # a harness failure makes both lanes of a trace incomplete: list it once
                ids.append(row["trace_id"])
    return out
