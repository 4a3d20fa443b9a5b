"""The count gates: policy_violations, no_new_failures and evidence_ignored, each new cases against an allowance."""

from __future__ import annotations

import polars as pl

from eval_pipeline.contracts.policy import GateSpec
from eval_pipeline.scoring.gate_facts import RunFacts
from eval_pipeline.scoring.gate_table import FAIL, INCOMPLETE, PASS


def _case_passes(facts: RunFacts) -> dict[str, bool | None]:
    """Per case: True when every complete attempt passes every lane it has, False when one fails, None with no
    complete attempt."""
    if facts.outcomes is None or facts.outcomes.height == 0:
        return {}
    per_case = facts.outcomes.group_by("case_id").agg(
        (pl.col("outcome") == "fail").any().alias("any_fail"),
        pl.col("outcome").is_in(["pass", "not_applicable"]).any().alias("any_complete"),
    )
    return {
        case: (False if any_fail else (True if any_complete else None))
        for case, any_fail, any_complete in per_case.iter_rows()
    }


def _violating_cases(facts: RunFacts) -> set[str] | None:
    if facts.tools is None:
        return None
    if facts.tools.height == 0:
        return set()
    return set(facts.tools.filter(pl.col("policy_violation").fill_null(False))["case_id"].to_list())


def _tool_cases(facts: RunFacts) -> set[str]:
    """Cases with tool scores in a run: the cases a policy gate compares."""
    return set(facts.tools["case_id"].to_list()) if facts.tools is not None and facts.tools.height else set()


def _violation_details(candidate: RunFacts, baseline_run_id: str, cases: list[str]) -> list[str]:
    """Per case: its first policy violation in the candidate, which the baseline did not have."""
    tools = candidate.tools
    found: dict[str, list[str]] = {}
    if "policy_violations" in tools.columns:
        order = [c for c in ("case_id", "trace_id") if c in tools.columns]
        rows = (
            tools.filter(pl.col("case_id").is_in(cases) & pl.col("policy_violation").fill_null(False))
            .sort(order)
            .group_by("case_id", maintain_order=True)
            .agg(pl.col("policy_violations").explode().drop_nulls().unique(maintain_order=True))
        )
        found = dict(rows.iter_rows())
    return [f"{c}: {'; '.join(found.get(c) or ['policy violation'])} (none in {baseline_run_id})" for c in cases]


def _failure_details(candidate: RunFacts, baseline_run_id: str, cases: list[str]) -> list[str]:
    """Per case: passed in the baseline, and where its failed attempts fail first in the candidate."""
    outcomes = candidate.outcomes
    if "first_failing_stage" not in outcomes.columns:
        outcomes = outcomes.with_columns(pl.lit(None, dtype=pl.String).alias("first_failing_stage"))
    attempts = (
        outcomes.filter(pl.col("case_id").is_in(cases))
        .group_by("case_id")
        .agg(
            pl.len().alias("attempts"),
            (pl.col("outcome") == "fail").sum().alias("failed"),
            pl.col("first_failing_stage").drop_nulls().unique().sort().alias("stages"),
        )
    )
    found = {row["case_id"]: row for row in attempts.iter_rows(named=True)}
    details = []
    for case in cases:
        row = found.get(case)
        stages = f" first at {', '.join(row['stages'])}" if row and row["stages"] else ""
        where = f"fails{stages} in {row['failed']} of {row['attempts']} attempt(s)" if row else "fails"
        details.append(f"{case}: passed in {baseline_run_id}, {where}")
    return details


def policy_gate(spec: GateSpec, row: dict, candidate: RunFacts, baseline: RunFacts, excluded: set[str]) -> dict:
    """The row of a policy_violations gate: fail when more cases than allowed have a violation the baseline did not."""
    new_cases, base_cases = _violating_cases(candidate), _violating_cases(baseline)
    if new_cases is None or base_cases is None:
        return {**row, "status": INCOMPLETE, "reason": "tool_scores missing for a run"}
    new = sorted((new_cases - base_cases) - excluded)
    limit = spec.max_new if spec.max_new is not None else 0
    scored = _tool_cases(candidate) & _tool_cases(baseline)
    row["excluded_cases"] = sorted(excluded & (scored | new_cases | base_cases))
    return {
        **row,
        "baseline_value": float(len(base_cases - excluded)),
        "candidate_value": float(len(new_cases - excluded)),
        "delta": float(len(new)),
        "threshold": float(limit),
        "n_cases": len(scored - excluded),
        "status": FAIL if len(new) > limit else PASS,
        "blocking_cases": new if len(new) > limit else [],
        "blocking_details": _violation_details(candidate, baseline.run_id, new) if len(new) > limit else [],
        "reason": f"{len(new)} case(s) with a new policy violation" if new else None,
    }


def _ignored_pairs(facts: RunFacts, spec: GateSpec, excluded: set[str]) -> tuple[set[str], set[str]] | None:
    """(counterfactual cases whose pair ignored the changed fact, every decided pair) of the gate's lane, pairs with an
    excluded case left out; None without the table."""
    pairs = facts.counterfactual
    if pairs is None:
        return None
    if spec.lane != "all" and pairs.height:
        pairs = pairs.filter(pl.col("lanes").list.contains(spec.lane))
    pairs = pairs.filter(~pl.col("case_id").is_in(list(excluded)) & ~pl.col("original_case_id").is_in(list(excluded)))
    decided = pairs.filter(pl.col("evidence_use") != "incomplete")
    return set(decided.filter(pl.col("evidence_use") == "ignored")["case_id"].to_list()), set(
        decided["case_id"].to_list()
    )


def evidence_ignored_gate(
    spec: GateSpec, row: dict, candidate: RunFacts, baseline: RunFacts, excluded: set[str]
) -> dict:
    """The row of an evidence_ignored gate: fail when more counterfactual pairs than allowed ignore their changed fact
    in the candidate and did not in the baseline (docs/evidence_use.md)."""
    cand, base = _ignored_pairs(candidate, spec, excluded), _ignored_pairs(baseline, spec, excluded)
    if cand is None or base is None:
        return {**row, "status": INCOMPLETE, "reason": "counterfactual_pairs missing for a run"}
    (cand_ignored, cand_decided), (base_ignored, _) = cand, base
    all_pairs = candidate.counterfactual if candidate.counterfactual is not None else pl.DataFrame()
    # a pair is left out with either of its cases; it is named by its counterfactual case
    row["excluded_cases"] = sorted(
        c
        for c, o in (all_pairs.select("case_id", "original_case_id").iter_rows() if all_pairs.height else [])
        if c in excluded or o in excluded
    )
    new = sorted(cand_ignored - base_ignored)
    limit = spec.max_new if spec.max_new is not None else 0
    undecided = sorted(
        set(all_pairs.filter(pl.col("evidence_use") == "incomplete")["case_id"].to_list()) - set(row["excluded_cases"])
        if all_pairs.height
        else []
    )
    out = {
        **row,
        "baseline_value": float(len(base_ignored)),
        "candidate_value": float(len(cand_ignored)),
        "delta": float(len(new)),
        "threshold": float(limit),
        "n_cases": len(cand_decided),
    }
    if len(new) > limit:
        reasons = dict(all_pairs.filter(pl.col("case_id").is_in(new)).select("case_id", "reason").iter_rows())
        return {
            **out,
            "status": FAIL,
            "blocking_cases": new,
            "blocking_details": [
                f"{c}: {reasons.get(c) or 'ignored the changed fact'} (not in {baseline.run_id})" for c in new
            ],
            "reason": f"{len(new)} counterfactual pair(s) newly ignore their changed fact",
        }
    if undecided:
        return {
            **out,
            "status": INCOMPLETE,
            "blocking_cases": undecided,
            "reason": f"{len(undecided)} counterfactual pair(s) could not be evaluated in the candidate",
        }
    return {**out, "status": PASS}


def no_new_failures_gate(
    spec: GateSpec, row: dict, candidate: RunFacts, baseline: RunFacts, excluded: set[str]
) -> dict:
    """The row of a no_new_failures gate: fail when more cases that passed in the baseline than allowed now fail."""
    base, cand = _case_passes(baseline), _case_passes(candidate)
    if not base or not cand:
        return {**row, "status": INCOMPLETE, "reason": "attribution missing for a run"}
    row["excluded_cases"] = sorted(excluded & {c for c, ok in base.items() if ok})
    previously_passing = {c for c, ok in base.items() if ok} - excluded
    newly_failing = sorted(c for c in previously_passing if cand.get(c) is False)
    unknown = sorted(c for c in previously_passing if cand.get(c) is None)
    limit = spec.max_new_failures if spec.max_new_failures is not None else 0
    out = {
        **row,
        "baseline_value": float(len(previously_passing)),
        "candidate_value": float(len(previously_passing) - len(newly_failing) - len(unknown)),
        "delta": float(len(newly_failing)),
        "threshold": float(limit),
        "n_cases": len(previously_passing),
    }
    if len(newly_failing) > limit:
        return {
            **out,
            "status": FAIL,
            "blocking_cases": newly_failing,
            "blocking_details": _failure_details(candidate, baseline.run_id, newly_failing),
            "reason": f"{len(newly_failing)} previously passing case(s) now fail",
        }
    if unknown:
        return {
            **out,
            "status": INCOMPLETE,
            "blocking_cases": unknown,
            "reason": f"{len(unknown)} previously passing case(s) have no complete attempt in the candidate",
        }
    return {**out, "status": PASS}
