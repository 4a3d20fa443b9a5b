"""The rate gates (recall_at_10, args_valid_rate, grounding_rate, pass_at_1): the drop of a mean between two runs."""

from __future__ import annotations

import polars as pl

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.contracts.policy import GateSpec
from eval_pipeline.scoring.gate_facts import RunFacts
from eval_pipeline.scoring.gate_table import FAIL, INCOMPLETE, NOT_GATING, PASS

# Float noise must not turn a drop equal to the threshold into a failure.
_EPSILON = 1e-9


def _per_case_mean(frame: pl.DataFrame | None, column: str) -> dict[str, float]:
    """Mean of a metric over each case's complete (scored, non-null) attempts."""
    if frame is None or column not in frame.columns or frame.height == 0:
        return {}
    scored = frame.filter((pl.col("status") == "scored") & pl.col(column).is_not_null())
    means = scored.group_by("case_id").agg(pl.col(column).cast(pl.Float64).mean())
    return dict(means.iter_rows())


def _metric_values(facts: RunFacts, spec: GateSpec) -> tuple[dict[str, float] | None, str | None]:
    """Per-case values of a gate's metric, or (None, what is missing)."""
    if spec.metric == "recall_at_10":
        if facts.retrieval is None:
            return None, "retrieval_scores"
        return _per_case_mean(facts.retrieval, "recall_at_10"), None
    if spec.metric == "args_valid_rate":
        if facts.tools is None:
            return None, "tool_scores"
        return _per_case_mean(facts.tools, "args_valid_rate"), None
    if spec.metric == "grounding_rate":
        if facts.grounding is None:
            return None, "grounding_scores"
        return _per_case_mean(facts.grounding, "grounding_rate"), None
    if spec.metric == "pass_at_1":
        if facts.reliability is None:
            return None, "reliability"
        lane = facts.reliability.filter(pl.col("lane") == spec.lane) if spec.lane != "all" else facts.reliability
        rows = lane.filter(pl.col("pass_at_1").is_not_null()).select("case_id", "pass_at_1")
        return dict(rows.iter_rows()), None
    raise ValueError(f"metric {spec.metric} is not a regression metric")


def _beside(facts: RunFacts, spec: GateSpec) -> dict:
    out = {}
    if "pass_hat_k" in spec.report_beside and facts.reliability is not None:
        lane = facts.reliability.filter(pl.col("lane") == spec.lane) if spec.lane != "all" else facts.reliability
        for column in sorted(c for c in lane.columns if c.startswith("pass_hat_")):
            value = lane[column].drop_nulls().mean()
            out[column] = round(value, 6) if value is not None else None
    return out


def regression_gate(
    spec: GateSpec, row: dict, candidate: RunFacts, baseline: RunFacts, excluded: set[str], may_gate: bool | None
) -> dict:
    """The row of a rate gate, over the cases complete in both runs once the excluded ones are left out."""
    base_values, missing_base = _metric_values(baseline, spec)
    cand_values, missing_cand = _metric_values(candidate, spec)
    if base_values is None or cand_values is None:
        return {**row, "status": INCOMPLETE, "reason": f"{missing_base or missing_cand} missing"}
    row["excluded_cases"] = sorted(excluded & (set(base_values) | set(cand_values)))
    base_values = {c: v for c, v in base_values.items() if c not in excluded}
    cand_values = {c: v for c, v in cand_values.items() if c not in excluded}
    common = sorted(set(base_values) & set(cand_values))
    lost = sorted(set(base_values) - set(cand_values))
    beside = _beside(candidate, spec)
    row["beside"] = canonical_json({"candidate": beside, "baseline": _beside(baseline, spec)}) if beside else None
    if not common:
        return {
            **row,
            "status": INCOMPLETE,
            "reason": "no case has a complete value in both runs",
            "blocking_cases": lost,
        }
    return _rate_verdict(spec, row, base_values, cand_values, common, lost, may_gate)


def _rate_verdict(
    spec: GateSpec,
    row: dict,
    base_values: dict[str, float],
    cand_values: dict[str, float],
    common: list[str],
    lost: list[str],
    may_gate: bool | None,
) -> dict:
    """A rate gate decided: fail when the mean over `common` drops more points than allowed, incomplete when cases
    were `lost`."""
    base_mean = sum(base_values[c] for c in common) / len(common)
    cand_mean = sum(cand_values[c] for c in common) / len(common)
    delta_points = (cand_mean - base_mean) * 100
    threshold = spec.max_regression_points if spec.max_regression_points is not None else 0.0
    dropped = sorted(c for c in common if cand_values[c] < base_values[c] - _EPSILON)
    out = {
        **row,
        "baseline_value": base_mean,
        "candidate_value": cand_mean,
        "delta": delta_points,
        "threshold": threshold,
        "n_cases": len(common),
    }
    if spec.requires_calibrated_judge and not may_gate:
        return {
            **out,
            "status": NOT_GATING,
            "blocking_cases": [],
            "reason": "the judge is not calibrated (may_gate is false): grounding goes to the review queue",
        }
    if -delta_points > threshold + _EPSILON:
        return {
            **out,
            "status": FAIL,
            "blocking_cases": dropped,
            "blocking_details": [f"{c}: {spec.metric} {base_values[c]:.4f} → {cand_values[c]:.4f}" for c in dropped],
            "reason": f"{spec.metric} dropped {-delta_points:.2f} points (allowed {threshold:g})",
        }
    if lost:
        return {
            **out,
            "status": INCOMPLETE,
            "blocking_cases": lost,
            "reason": f"{len(lost)} case(s) have a baseline value but no complete attempt in the candidate",
        }
    return {**out, "status": PASS}
