"""Decision slices of the sample (docs/slices.md): each case's tags, and what planted.json expects per slice.

The expectations are derived from the hand-written per-trace plans (the rows of expectations.trace_rows) with plain
Python and the membership rules of docs/slices.md, independently of the pipeline's polars code: criticality, every tag,
the corpus family of each required document (the doc id when the corpus has none for it) and, for agent-lane cases,
the riskiest tool of the reference path and alternatives (destructive > write > read_only; a tool the registry does
not list is a write).
"""

from __future__ import annotations

from typing import Any

from eval_pipeline_harness.sample_data.cases import CASES_BY_ID, CaseDef
from eval_pipeline_harness.sample_data.corpus import DOCS_BY_ID
from eval_pipeline_harness.sample_data.expectations import (
    AGENT_STAGES,
    RAG_STAGES,
    _case_passes,
    _per_case,
    _r,
    _regression_gate,
)
from eval_pipeline_harness.sample_data.plans import BASELINE_RUN, CANDIDATE_RUN
from eval_pipeline_harness.sample_data.tools import TOOL_DEFINITIONS

LANE_STAGES = {"rag": RAG_STAGES, "agent": AGENT_STAGES}

# what the user wants → the business process it belongs to
WORKFLOW = {
    "refund": "billing",
    "billing": "billing",
    "payment_error": "billing",
    "shipping": "orders",
    "returns": "orders",
    "warranty": "orders",
    "cancellation": "account",
    "account_closure": "account",
    "account_security": "account",
    "identity_verification": "account",
    "privacy": "account",
    "address_change": "account",
    "plans": "support",
    "troubleshooting": "support",
    "ticket_update": "support",
}

# case → (intent, permission scope): what the user asks for, and what the assistant may touch to do it
_TAGGED: dict[str, tuple[str, str]] = {
    **{f"rag-{n:03d}": ("refund", "read") for n in (1, 2, 3, 4, 5, 40, 44)},
    **{f"rag-{n:03d}": ("shipping", "read") for n in (6, 7)},
    **{f"rag-{n:03d}": ("returns", "read") for n in (8, 9, 45)},
    **{f"rag-{n:03d}": ("warranty", "read") for n in (10, 11)},
    **{f"rag-{n:03d}": ("cancellation", "read") for n in (12, 13)},
    **{f"rag-{n:03d}": ("account_closure", "read") for n in (14, 15)},
    "rag-016": ("identity_verification", "read"),
    **{f"rag-{n:03d}": ("privacy", "read") for n in (17, 18, 19, 26, 46)},
    **{f"rag-{n:03d}": ("payment_error", "read") for n in (20, 47)},
    **{f"rag-{n:03d}": ("troubleshooting", "read") for n in (21, 28)},
    **{f"rag-{n:03d}": ("plans", "read") for n in (22, 23, 29, 30, 31, 38, 39, 41, 48)},
    **{f"rag-{n:03d}": ("account_security", "read") for n in (24, 25)},
    **{f"rag-{n:03d}": ("billing", "read") for n in (27, 32, 33, 34, 35, 37, 42, 43)},
    "rag-036": ("address_change", "read"),
    **{f"agent-{n:03d}": ("refund", "payments") for n in (1, 2, 6, 8, 9, 11, 12, 19)},
    **{f"agent-{n:03d}": ("cancellation", "subscription") for n in (3, 16)},
    **{f"agent-{n:03d}": ("address_change", "customer_record") for n in (4, 14, 21)},
    **{f"agent-{n:03d}": ("billing", "payments") for n in (5, 13)},
    **{f"agent-{n:03d}": ("account_security", "customer_record") for n in (7, 20)},
    "agent-010": ("shipping", "ticket"),
    "agent-015": ("ticket_update", "ticket"),
    "agent-017": ("returns", "orders"),
    "agent-018": ("ticket_update", "read"),
    "both-001": ("refund", "payments"),
    "both-002": ("returns", "orders"),
    "both-003": ("payment_error", "ticket"),
}


def case_tags(case_id: str) -> dict[str, str] | None:
    """The tags a sample case carries (a counterfactual case carries its original's), or None."""
    case = CASES_BY_ID.get(case_id)
    tagged = _TAGGED.get(case.counterfactual_of or case_id) if case is not None else _TAGGED.get(case_id)
    if tagged is None:
        return None
    intent, scope = tagged
    return {"intent": intent, "language": "en", "permission_scope": scope, "workflow": WORKFLOW[intent]}


# ---------------------------------------------------------------- membership

_RISK = {
    name: ("destructive" if destructive else "read_only" if read_only else "write")
    for name, _, read_only, destructive, _ in TOOL_DEFINITIONS
}
_RISK_ORDER = ("read_only", "write", "destructive")


def tool_risk(case: CaseDef) -> str | None:
    """destructive, write or read_only for an agent-lane case (its path's riskiest tool), None for a RAG-only one."""
    if case.agent is None:
        return None
    tools = [c["name"] for c in case.agent["reference_tool_calls"]] + [
        c["name"] for alt in case.agent["alternatives"] for c in alt
    ]
    tools = tools or list(case.agent.get("allowed_tools") or [])
    return max((_RISK.get(t, "write") for t in tools), key=_RISK_ORDER.index, default="read_only")


def membership(case: CaseDef) -> list[tuple[str, str]]:
    """Every (dimension, value) slice of a case."""
    out = [("criticality", case.criticality)]
    risk = tool_risk(case)
    if risk:
        out.append(("tool_risk", risk))
    out += [(f"tags.{k}", v) for k, v in sorted((case_tags(case.case_id) or {}).items())]
    families = [DOCS_BY_ID[d].family if d in DOCS_BY_ID else d for d in case.required or ()]
    out += [("corpus_family", f) for f in sorted(set(families))]
    return out


def slice_cases(segment: dict[str, str]) -> set[str]:
    """The cases in every (dimension, value) of a segment."""
    return {c for c, case in CASES_BY_ID.items() if all(item in membership(case) for item in segment.items())}


# ---------------------------------------------------------------- rollups


def rollup(
    rows: list[dict[str, Any]], reliability: dict[str, dict[str, Any]], run_id: str, lane: str
) -> list[dict[str, Any]]:
    """slice_rollup of one run and lane: per slice with traces in the lane, counts, pass rate, pass@1, failed cases and
    failures per first failing stage."""
    lane_rows = [r for r in rows if r["run_id"] == run_id and r["lane"] == lane]
    by_slice: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in lane_rows:
        for item in membership(CASES_BY_ID[row["case_id"]]):
            # the agent lane reads no corpus: its cases are not sliced by corpus family
            if not (lane == "agent" and item[0] == "corpus_family"):
                by_slice.setdefault(item, []).append(row)
    out = []
    for (dimension, value), members in sorted(by_slice.items()):
        passed = sum(r["expected"] == "pass" for r in members)
        incomplete = sum(r["expected"] == "incomplete" for r in members)
        failed = [r for r in members if r["expected"] not in ("pass", "incomplete")]
        cases = sorted({r["case_id"] for r in members})
        # this lane's reliability holds agent cases in the agent lane and RAG-only cases in the RAG lane
        own = [c for c in cases if ("agent" in CASES_BY_ID[c].lanes) == (lane == "agent")]
        rates = [reliability[c]["pass_at_1"] for c in own if reliability[c]["pass_at_1"] is not None]
        stages = {s: sum(r["expected"] == s for r in failed) for s in LANE_STAGES[lane]}
        out.append(
            {
                "lane": lane,
                "dimension": dimension,
                "value": value,
                "slice": f"{dimension}={value}",
                "n_cases": len(cases),
                "n_traces": len(members),
                "traces_passed": passed,
                "traces_failed": len(failed),
                "traces_incomplete": incomplete,
                "pass_rate": _r(passed / (passed + len(failed))) if passed + len(failed) else None,
                "pass_at_1": _r(sum(rates) / len(rates)) if rates else None,
                "pass_at_1_cases": len(rates),
                "failed_case_ids": sorted({r["case_id"] for r in failed}),
                "failures_by_stage": {s: n for s, n in stages.items() if n},
            }
        )
    return out


# ---------------------------------------------------------------- segmented gates


def segmented_gates() -> list[dict[str, Any]]:
    """The gates of the sample policy computed on one slice (labels.gate_policy adds them after the suite's gates)."""
    return [
        # few but critical: two of the four complete high-criticality agent cases never succeed in the candidate
        {
            "name": "agent_pass_at_1_high_criticality",
            "lane": "agent",
            "metric": "pass_at_1",
            "max_regression_points": 5,
            "exclude": ["quarantined"],
            "segment": {"criticality": "high"},
            "min_cases": 4,
            "owner": "agent",
        },
        {
            "name": "no_new_failures_refunds",
            "lane": "all",
            "metric": "no_new_failures",
            "max_new_failures": 0,
            "exclude": ["quarantined"],
            "segment": {"tags.intent": "refund"},
            "owner": "billing",
        },
        # two account-closure cases are too few to decide anything: insufficient, never a pass
        {
            "name": "recall_account_closure",
            "lane": "rag",
            "metric": "recall_at_10",
            "max_regression_points": 0,
            "exclude": ["multi_hop", "quarantined"],
            "segment": {"corpus_family": "policy/account-closure"},
            "owner": "retrieval",
        },
    ]


MIN_CASES = 5


def _gate(spec: dict[str, Any], base_rows: list[dict], cand_rows: list[dict], flaky: set[str]) -> dict[str, Any]:
    """One segmented gate on its slice's rows.

    With the rules of docs/metrics.md that expectations.gates applies to the whole suite.
    """
    inside = slice_cases(spec["segment"])
    base = [r for r in base_rows if r["case_id"] in inside]
    cand = [r for r in cand_rows if r["case_id"] in inside]
    excluded = set(flaky)
    if "multi_hop" in spec["exclude"]:
        excluded |= {c for c, case in CASES_BY_ID.items() if case.multi_hop}
    if spec["metric"] == "no_new_failures":
        base_pass, cand_pass = _case_passes(base), _case_passes(cand)
        previously = sorted(c for c, ok in base_pass.items() if ok and c not in excluded)
        newly = [c for c in previously if cand_pass.get(c) is False]
        status = "fail" if len(newly) > spec["max_new_failures"] else "pass"
        out = {
            "n_cases": len(previously),
            "baseline_value": float(len(previously)),
            "candidate_value": float(len(previously) - len(newly)),
            "delta": float(len(newly)),
            "blocking_cases": newly if status == "fail" else [],
            "status": status,
        }
    else:

        def value(r):
            if spec["metric"] == "pass_at_1":
                return 1.0 if r["metrics"]["success"] else 0.0
            return r["metrics"].get(spec["metric"])

        gate = _regression_gate(
            spec, _per_case(base, spec["lane"], value), _per_case(cand, spec["lane"], value), excluded
        )
        out = {
            "n_cases": gate["cases"],
            "baseline_value": gate["baseline_value"],
            "candidate_value": gate["candidate_value"],
            "delta": gate["delta_points"],
            "blocking_cases": gate["blocking_cases"],
            "status": gate["status"],
        }
    needed = spec.get("min_cases", MIN_CASES)
    decided = out["status"]
    if out["n_cases"] < needed:
        out["status"] = "insufficient"
    return {
        "name": spec["name"],
        "lane": spec["lane"],
        "metric": spec["metric"],
        "segment": ", ".join(f"{k}={v}" for k, v in sorted(spec["segment"].items())),
        "min_cases": needed,
        "cases": sorted(inside),
        **out,
        "values_say": decided,
    }


def expectations(base_rows: list[dict], cand_rows: list[dict], base_rel: dict, cand_rel: dict) -> dict[str, Any]:
    """planted.json's "slices": each case's slices, the slice rollups of both runs and lanes, the failed
    high-criticality cases and the segmented gates of the candidate."""
    flaky = {c for rel in (base_rel, cand_rel) for c, r in rel.items() if r["flaky"]}
    rows = base_rows + cand_rows
    rollups = {
        run: {lane: rollup(rows, rel, run, lane) for lane in ("rag", "agent")}
        for run, rel in ((BASELINE_RUN, base_rel), (CANDIDATE_RUN, cand_rel))
    }
    high = {
        run: {
            lane: next((s["failed_case_ids"] for s in slices if s["slice"] == "criticality=high"), [])
            for lane, slices in lanes.items()
        }
        for run, lanes in rollups.items()
    }
    return {
        "about": (
            "Decision slices (docs/slices.md): membership per case, slice_rollup per run and lane, and the "
            "segmented gates of the policy, derived from the planted traces."
        ),
        "membership": {c: [list(item) for item in membership(case)] for c, case in sorted(CASES_BY_ID.items())},
        "rollup": rollups,
        "failed_high_criticality": high,
        "gates": [_gate(spec, base_rows, cand_rows, flaky) for spec in segmented_gates()],
        "min_cases": MIN_CASES,
    }
