"""What the gates read about a run (RunFacts), whether a run is gated, and whether two runs can be compared."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import polars as pl

from eval_pipeline.contracts.policy import GatePolicy


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


def judge_may_gate(calibration: pl.DataFrame | None) -> bool:
    """Whether the candidate's judge is calibrated at claim level."""
    if calibration is None or calibration.height == 0 or "may_gate" not in calibration.columns:
        return False
    claim = calibration.filter(pl.col("level") == "claim") if "level" in calibration.columns else calibration
    return bool(claim.height) and bool(claim["may_gate"].all())
