"""Release gates (docs/gates.md): candidate vs baseline, each gate on its own, never averaged."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import polars as pl

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.contracts.models import DEFAULT_MIN_CASES, GatePolicy, GateSpec
from eval_pipeline.scoring.slices import segment_key, slice_cases

PASS, FAIL, INCOMPLETE, INCOMPARABLE, NOT_GATING = "pass", "fail", "incomplete", "incomparable", "not_gating"
# a segmented gate whose slice holds fewer complete cases than min_cases: undecided, never a pass (docs/slices.md)
INSUFFICIENT = "insufficient"
EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED = 0, 1, 2
DEFAULT_OWNERS = {"rag": "retrieval and generation", "agent": "agent", "all": "release"}
# Float noise must not turn a drop equal to the threshold into a failure.
_EPSILON = 1e-9
COUNT_METRICS = ("policy_violations", "no_new_failures", "evidence_ignored")
# Rate metrics are fractions in [0, 1]; their delta and threshold are in points (value × 100).
UNIT_FRACTION, UNIT_CASES = "fraction", "cases"

GATE_RESULTS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "gate": pl.String,
    "lane": pl.String,
    "metric": pl.String,
    "baseline_run_id": pl.String,
    "baseline_value": pl.Float64,
    "candidate_value": pl.Float64,
    "delta": pl.Float64,
    "threshold": pl.Float64,
    "status": pl.String,
    "blocking_cases": pl.List(pl.String),
    "owner": pl.String,
    "reason": pl.String,
    "n_cases": pl.Int64,
    "excluded_cases": pl.List(pl.String),
    "beside": pl.String,
    "unit": pl.String,
    "blocking_details": pl.List(pl.String),
    "segment": pl.String,
    "min_cases": pl.Int64,
}


def unit_of(metric: str) -> str:
    """`cases` for a count gate, `fraction` for a rate gate (its delta and threshold in points)."""
    return UNIT_CASES if metric in COUNT_METRICS else UNIT_FRACTION


@dataclass
class RunFacts:
    """Everything the gates read about one run; a missing table (None) makes the gates that need it incomplete."""

    run_id: str
    manifest: dict
    cases: pl.DataFrame
    outcomes: pl.DataFrame | None = None
    retrieval: pl.DataFrame | None = None
    tools: pl.DataFrame | None = None
    grounding: pl.DataFrame | None = None
    reliability: pl.DataFrame | None = None
    quarantine: pl.DataFrame | None = None
    calibration: pl.DataFrame | None = None
    counterfactual: pl.DataFrame | None = None
    qrels_version: str | None = None
    # (case_id, dimension, value) of scoring.slices.slice_membership; a segmented gate needs the candidate's
    slices: pl.DataFrame | None = None
    missing: list[str] = field(default_factory=list)


def restrict(facts: RunFacts, case_ids: list[str]) -> RunFacts:
    """The run's facts on these cases only: every frame of it with a case_id column keeps just their rows."""
    keep = pl.DataFrame({"case_id": case_ids}, schema={"case_id": pl.String})
    frames = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}
    return dataclasses.replace(
        facts,
        **{
            name: frame.join(keep, on="case_id", how="semi")
            for name, frame in frames.items()
            if isinstance(frame, pl.DataFrame) and "case_id" in frame.columns
        },
    )


def _flaky_cases(facts: RunFacts) -> set[str]:
    flaky = set()
    if facts.reliability is not None and facts.reliability.height:
        flaky |= set(facts.reliability.filter(pl.col("flaky").fill_null(False))["case_id"].to_list())
    if facts.quarantine is not None and facts.quarantine.height:
        flaky |= set(facts.quarantine["case_id"].to_list())
    return flaky


def _multi_hop(facts: RunFacts) -> set[str]:
    return set(facts.cases.filter(pl.col("multi_hop").fill_null(False))["case_id"].to_list())


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


def _case_passes(facts: RunFacts) -> dict[str, bool | None]:
    """Per case: True when every complete attempt passes every lane it has, False when one fails, None with no complete attempt."""
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


def _beside(facts: RunFacts, spec: GateSpec) -> dict:
    out = {}
    if "pass_hat_k" in spec.report_beside and facts.reliability is not None:
        lane = facts.reliability.filter(pl.col("lane") == spec.lane) if spec.lane != "all" else facts.reliability
        for column in sorted(c for c in lane.columns if c.startswith("pass_hat_")):
            value = lane[column].drop_nulls().mean()
            out[column] = round(value, 6) if value is not None else None
    return out


NOT_APPLICABLE = "not_applicable"


def baseline_of(manifest: dict, policy: GatePolicy) -> str | None:
    """The run a run is gated against: its manifest's baseline_run_id, else the policy's."""
    return manifest.get("baseline_run_id") or policy.baseline_run_id


def not_gated_reason(manifest: dict) -> str | None:
    """Why a run is not gated at all (an exploratory run), or None."""
    if manifest.get("mode") == "exploratory":
        return (
            "exploratory run (mode: exploratory): not gated; to gate it, name a baseline of the same dataset "
            "(baseline_run_id in its run.yaml, or `eval-pipeline import … --baseline RUN`) and set mode: gate"
        )
    return None


def comparability(candidate: RunFacts, baseline: RunFacts) -> str | None:
    """Why two runs cannot be compared at all, or None."""
    if candidate.manifest.get("mode") == "exploratory" or baseline.manifest.get("mode") == "exploratory":
        return "an exploratory run (live tools) is never compared against a gate baseline"
    if candidate.manifest.get("dataset_version") != baseline.manifest.get("dataset_version"):
        return (
            f"dataset versions differ: baseline {baseline.manifest.get('dataset_version')}, "
            f"candidate {candidate.manifest.get('dataset_version')}"
        )
    return None


def qrels_mismatch(candidate: RunFacts, baseline: RunFacts) -> str:
    """Why recall is not comparable across qrels versions, and the command that makes it comparable."""
    return (
        f"qrels versions differ: baseline {baseline.run_id} was scored with {baseline.qrels_version}, candidate "
        f"{candidate.run_id} with {candidate.qrels_version}: re-score the baseline with the current judgments "
        f"(eval-pipeline run --run {baseline.run_id}), then gate again"
    )


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


def evaluate_gate(
    spec: GateSpec, candidate: RunFacts, baseline: RunFacts, may_gate: bool | None, min_cases: int = DEFAULT_MIN_CASES
) -> dict:
    """One gate_results row (`min_cases`: the policy's, for a segmented gate that sets none)."""
    if spec.segment:
        return _segmented_gate(spec, candidate, baseline, may_gate, spec.min_cases or min_cases)
    row = _undecided_row(spec, candidate, baseline)
    reason = _incomparable_reason(spec, candidate, baseline)
    if reason is not None:
        return {**row, "status": INCOMPARABLE, "reason": reason}
    excluded = _excluded_cases(spec, candidate, baseline)
    if spec.metric == "policy_violations":
        return _policy_gate(spec, row, candidate, baseline, excluded)
    if spec.metric == "no_new_failures":
        return _no_new_failures_gate(spec, row, candidate, baseline, excluded)
    if spec.metric == "evidence_ignored":
        return _evidence_ignored_gate(spec, row, candidate, baseline, excluded)
    return _regression_gate(spec, row, candidate, baseline, excluded, may_gate)


def _segmented_gate(
    spec: GateSpec, candidate: RunFacts, baseline: RunFacts, may_gate: bool | None, min_cases: int
) -> dict:
    """The gate on the candidate's slice only: both runs restricted to its cases, the same rules; fewer complete cases
    than min_cases make it insufficient, whatever the values say."""
    where = {"segment": segment_key(spec.segment), "min_cases": min_cases}
    if candidate.slices is None:
        return {
            **_undecided_row(spec, candidate, baseline),
            **where,
            "status": INCOMPLETE,
            "reason": f"slice {where['segment']}: the candidate's slice membership is missing (deid_cases, deid_corpus, tools)",
        }
    # the candidate's membership for both runs: the same cases are compared even if a tag or family moved
    members = slice_cases(candidate.slices, spec.segment)
    whole = spec.model_copy(update={"segment": None, "min_cases": None})
    row = {**evaluate_gate(whole, restrict(candidate, members), restrict(baseline, members), may_gate), **where}
    if row["status"] in (INCOMPARABLE, NOT_GATING):
        return row
    # an empty slice compares nothing; otherwise n_cases is null only when a table is missing (incomplete stays)
    n = row["n_cases"] if row["n_cases"] is not None else (0 if not members else None)
    if n is None or n >= min_cases:
        return row
    said = f"{row['status']}: {row['reason']}" if row["reason"] else row["status"]
    return {
        **row,
        "status": INSUFFICIENT,
        "n_cases": n,
        "reason": (
            f"slice {where['segment']} has {n} complete case(s), fewer than min_cases {min_cases}: not decided "
            f"(on these cases the gate says {said})"
        ),
    }


def _undecided_row(spec: GateSpec, candidate: RunFacts, baseline: RunFacts) -> dict:
    """The gate's row before it is decided: which gate, runs and owner, with no values and no status."""
    return {
        "unit": unit_of(spec.metric),
        "blocking_details": [],
        "run_id": candidate.run_id,
        "gate": spec.name,
        "lane": spec.lane,
        "metric": spec.metric,
        "baseline_run_id": baseline.run_id,
        "baseline_value": None,
        "candidate_value": None,
        "delta": None,
        "threshold": None,
        "status": None,
        "blocking_cases": [],
        "owner": spec.owner or DEFAULT_OWNERS[spec.lane],
        "reason": None,
        "n_cases": None,
        "excluded_cases": [],
        "beside": None,
        "segment": None,
        "min_cases": None,
    }


def _incomparable_reason(spec: GateSpec, candidate: RunFacts, baseline: RunFacts) -> str | None:
    """Why this gate cannot compare the two runs (see comparability; recall also needs one qrels version), or None."""
    reason = comparability(candidate, baseline)
    if reason is None and spec.metric == "recall_at_10" and candidate.qrels_version != baseline.qrels_version:
        reason = qrels_mismatch(candidate, baseline)
    return reason


def _excluded_cases(spec: GateSpec, candidate: RunFacts, baseline: RunFacts) -> set[str]:
    """Cases the gate leaves out: flaky or quarantined in either run, and the candidate's multi-hop cases when excluded."""
    excluded = _flaky_cases(candidate) | _flaky_cases(baseline)
    if "multi_hop" in spec.exclude:
        excluded |= _multi_hop(candidate)
    return excluded


def _policy_gate(spec: GateSpec, row: dict, candidate: RunFacts, baseline: RunFacts, excluded: set[str]) -> dict:
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


def _evidence_ignored_gate(
    spec: GateSpec, row: dict, candidate: RunFacts, baseline: RunFacts, excluded: set[str]
) -> dict:
    """The row of an evidence_ignored gate: fail when more counterfactual pairs than allowed ignore their changed fact in
    the candidate and did not in the baseline (docs/evidence_use.md)."""
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


def _no_new_failures_gate(
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


def _regression_gate(
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
    """A rate gate decided: fail when the mean over `common` drops more points than allowed, incomplete when cases were `lost`."""
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


def judge_may_gate(calibration: pl.DataFrame | None) -> bool:
    """Whether the candidate's judge is calibrated at claim level."""
    if calibration is None or calibration.height == 0 or "may_gate" not in calibration.columns:
        return False
    claim = calibration.filter(pl.col("level") == "claim") if "level" in calibration.columns else calibration
    return bool(claim.height) and bool(claim["may_gate"].all())


def evaluate_gates(policy: GatePolicy, candidate: RunFacts, baseline: RunFacts) -> pl.DataFrame:
    """gate_results for a candidate against a baseline: one row per gate of the policy."""
    may_gate = judge_may_gate(candidate.calibration)
    rows = [evaluate_gate(spec, candidate, baseline, may_gate, policy.min_cases) for spec in policy.gates]
    return pl.DataFrame(rows, schema=GATE_RESULTS_SCHEMA)


def undecided_gates(
    policy: GatePolicy, candidate_run_id: str, baseline_run_id: str | None, status: str, reason: str
) -> pl.DataFrame:
    """gate_results where no comparison could run (no baseline, the run is its own baseline, tables missing)."""
    rows = [
        {
            "run_id": candidate_run_id,
            "gate": g.name,
            "lane": g.lane,
            "metric": g.metric,
            "baseline_run_id": baseline_run_id,
            "status": status,
            "blocking_cases": [],
            "owner": g.owner or DEFAULT_OWNERS[g.lane],
            "reason": reason,
            "excluded_cases": [],
            "unit": unit_of(g.metric),
            "blocking_details": [],
            "segment": segment_key(g.segment),
            "min_cases": (g.min_cases or policy.min_cases) if g.segment else None,
        }
        for g in policy.gates
    ]
    return pl.DataFrame(rows, schema=GATE_RESULTS_SCHEMA)


def exit_code(gate_results: pl.DataFrame) -> int:
    """0 when every gate passes (not_gating included), 1 when one fails, 2 when one is incomplete, incomparable or
    insufficient."""
    statuses = set(gate_results["status"].to_list())
    if FAIL in statuses:
        return EXIT_FAIL
    if statuses & {INCOMPLETE, INCOMPARABLE, INSUFFICIENT, "not_applicable"} or not statuses:
        return EXIT_UNDECIDED
    return EXIT_PASS


def overall_status(gate_results: pl.DataFrame) -> str:
    """pass, fail or undecided for the whole gate table."""
    return {EXIT_PASS: PASS, EXIT_FAIL: FAIL, EXIT_UNDECIDED: INCOMPLETE}[exit_code(gate_results)]
