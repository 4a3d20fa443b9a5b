"""The lane report's content: the run's baseline, the lane's gates, and the report rendered as Markdown and HTML."""

import polars as pl

from eval_pipeline.defs.resources import EvalConfig, OtherRuns
from eval_pipeline.gating import baseline_or_reason, compare
from eval_pipeline.reporting.lane_agent import agent_sections
from eval_pipeline.reporting.lane_data import LaneData
from eval_pipeline.reporting.lane_gates import lane_verdict
from eval_pipeline.reporting.lane_rag import rag_sections
from eval_pipeline.reporting.render import render_html, render_markdown
from eval_pipeline.scoring import attribution as attribution_scoring
from eval_pipeline.scoring import outcome as outcome_scoring
from eval_pipeline.scoring.gate_facts import RunFacts, baseline_of


def render_lane_report(data: LaneData, lane_tables: dict[str, pl.DataFrame]) -> tuple[str, str]:
    """The lane's report as (markdown, html), for reports/<run_id>/<lane>.md and .html."""
    lane, run_id = data.lane, data.run_id
    if lane == "rag":
        sections = rag_sections(data)
    else:
        outcomes = lane_tables["outcome_scores"]
        sections = agent_sections(data, outcome_scoring.fault_rates(outcomes), outcome_scoring.efficiency(outcomes))
    title = f"{lane.upper() if lane == 'rag' else 'Agent'} lane report — run {run_id}"
    verdict = lane_verdict(data)
    return render_markdown(title, sections, verdict), render_html(title, sections, verdict)


def attach_baseline(data: LaneData, eval_config: EvalConfig, other_runs: OtherRuns) -> None:
    """Add the run's baseline (scored, another run, same dataset) for the comparison sections, or say why there
    is none."""
    from eval_pipeline.scoring.attribution import rollup

    baseline, data.baseline_note = baseline_or_reason(data.manifest, eval_config.policy(), other_runs)
    if baseline is None:
        if data.baseline_note == "this run is the baseline":
            data.baseline_note = None
        return
    stages = other_runs.read("stage_results", baseline, within={"lane": data.lane})
    if stages is None:
        data.baseline_note = f"baseline run {baseline} has no {data.lane} stage results"
        return
    data.baseline_run_id = baseline
    data.baseline_outcomes = attribution_scoring.lane_outcomes(stages)
    data.baseline_rollup = rollup(data.baseline_outcomes, data.lane)


def lane_gates(
    lane: str,
    eval_config: EvalConfig,
    data: LaneData,
    cases: pl.DataFrame,
    other_runs: OtherRuns,
    slices: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """This lane's gates of the policy, computed by the gating use case from this lane's tables (as gate_results
    does)."""
    policy = eval_config.policy()
    lane_policy = policy.model_copy(update={"gates": [g for g in policy.gates if g.lane == lane]})
    t = data.tables
    qrels = t.get("qrels")
    candidate = RunFacts(
        run_id=data.run_id,
        manifest=data.manifest,
        cases=cases,
        outcomes=data.outcomes,
        retrieval=t.get("retrieval_scores"),
        tools=t.get("tool_scores"),
        grounding=t.get("grounding_scores"),
        reliability=data.reliability,
        quarantine=data.quarantine,
        calibration=t.get("judge_calibration"),
        qrels_version=qrels["qrels_version"][0] if qrels is not None and qrels.height else None,
        slices=slices,
    )
    # the baseline's tables this report takes as inputs: the lane's gates need no other lane's
    return compare(lane_policy, candidate, baseline_of(data.manifest, policy), other_runs, tables=other_runs.declared)
