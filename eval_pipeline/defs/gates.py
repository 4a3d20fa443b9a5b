"""Release gates: the candidate run against its baseline, and the gate report."""

import dagster as dg
import polars as pl

from eval_pipeline.defs.ingestion import manifest_of
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.generation import JudgeConfig
from eval_pipeline.defs.resources import AGENT_COLUMNS, lane_key, RETRIEVAL_COLUMNS, EvalConfig, traces_without
from eval_pipeline.io.facts import run_facts
from eval_pipeline.reporting.gate_report import gate_sections
from eval_pipeline.reporting.render import render_html, render_markdown
from eval_pipeline.scoring import gates as gate_scoring
from eval_pipeline.scoring.attribution import lane_outcomes
from eval_pipeline.scoring.common import lane_traces
from eval_pipeline.scoring.pairwise import PAIRWISE_SCHEMA, pairwise_compare

GROUP = "gates"
CODE_VERSION = "gates-1"
PAIRWISE_CODE_VERSION = "pairwise-1"

GATE_INS = {
    "run_manifest": dg.AssetIn(),
    "deid_cases": dg.AssetIn(),
    "qrels": dg.AssetIn(),
    "retrieval_scores": dg.AssetIn(),
    "tool_scores": dg.AssetIn(),
    "grounding_scores": dg.AssetIn(),
    "judge_calibration": dg.AssetIn(),
    "rag_stage_results": dg.AssetIn(key=lane_key("rag", "stage_results")),
    "agent_stage_results": dg.AssetIn(key=lane_key("agent", "stage_results")),
    "rag_reliability": dg.AssetIn(key=lane_key("rag", "reliability")),
    "agent_reliability": dg.AssetIn(key=lane_key("agent", "reliability")),
    "rag_quarantine": dg.AssetIn(key=lane_key("rag", "quarantine")),
    "agent_quarantine": dg.AssetIn(key=lane_key("agent", "quarantine")),
}


def compare(policy, candidate: gate_scoring.RunFacts, baseline_run_id: str | None, warehouse) -> pl.DataFrame:
    """gate_results of a candidate against a baseline run read from the warehouse."""
    if not baseline_run_id:
        return gate_scoring.undecided_gates(policy, candidate.run_id, None, gate_scoring.INCOMPLETE,
                                            "no baseline: set baseline_run_id in policy/gates.yaml or pass --baseline")
    if baseline_run_id == candidate.run_id:
        return gate_scoring.undecided_gates(policy, candidate.run_id, baseline_run_id, "not_applicable",
                                            "this run is the baseline")
    baseline = run_facts(warehouse, baseline_run_id)
    if baseline is None or baseline.outcomes is None:
        return gate_scoring.undecided_gates(policy, candidate.run_id, baseline_run_id, gate_scoring.INCOMPLETE,
                                            f"baseline run {baseline_run_id} has not been scored")
    return gate_scoring.evaluate_gates(policy, candidate, baseline)


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=CODE_VERSION, io_manager_key="warehouse_io",
          ins=GATE_INS, kinds={"polars", "deltalake"})
def gate_results(context: dg.AssetExecutionContext, eval_config: EvalConfig, **tables: pl.DataFrame):
    """Each gate of policy/gates.yaml for this run against the policy's baseline run: pass, fail, incomplete, incomparable."""
    manifest = manifest_of(tables["run_manifest"])
    policy = eval_config.policy()
    stages = pl.concat([tables["rag_stage_results"], tables["agent_stage_results"]], how="vertical_relaxed")
    candidate = gate_scoring.RunFacts(
        run_id=context.partition_key, manifest=manifest, cases=tables["deid_cases"], outcomes=lane_outcomes(stages),
        retrieval=tables["retrieval_scores"], tools=tables["tool_scores"], grounding=tables["grounding_scores"],
        reliability=pl.concat([tables["rag_reliability"], tables["agent_reliability"]], how="diagonal_relaxed"),
        quarantine=pl.concat([tables["rag_quarantine"], tables["agent_quarantine"]], how="diagonal_relaxed"),
        calibration=tables["judge_calibration"],
        qrels_version=tables["qrels"]["qrels_version"][0] if tables["qrels"].height else None,
    )
    results = compare(policy, candidate, policy.baseline_run_id, eval_config.warehouse())
    results = with_versions(results, manifest, CODE_VERSION)
    statuses = dict(results.group_by("status").len().iter_rows())
    context.log.info(f"gates vs {policy.baseline_run_id}: {statuses}")
    return materialized(results, versions=manifest,
                        headline={"gates_failed": statuses.get("fail", 0), "exit_code": gate_scoring.exit_code(results)})


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=PAIRWISE_CODE_VERSION, io_manager_key="warehouse_io",
          kinds={"polars", "deltalake"}, ins={"deid_traces": traces_without(RETRIEVAL_COLUMNS, AGENT_COLUMNS)})
def pairwise_comparison(context: dg.AssetExecutionContext, eval_config: EvalConfig, judge: JudgeConfig,
                        run_manifest: pl.DataFrame, deid_traces: pl.DataFrame, deid_cases: pl.DataFrame):
    """Baseline vs candidate answers of each RAG case, judged twice with positions swapped; a win counts only in both orders."""
    manifest = manifest_of(run_manifest)
    baseline = eval_config.policy().baseline_run_id
    candidate = lane_traces(deid_traces, deid_cases, "rag").select(deid_traces.columns)
    warehouse = eval_config.warehouse()
    baseline_traces = warehouse.read("deid_traces", baseline) if baseline and baseline != context.partition_key else None
    if baseline_traces is None:
        pairs, summary = pl.DataFrame(schema=PAIRWISE_SCHEMA), {"n_pairs": 0}
        context.log.info("no other baseline run scored: nothing to compare pairwise")
    else:
        pairs, summary = pairwise_compare(baseline_traces.join(candidate.select("case_id").unique(), on="case_id", how="semi"),
                                          candidate, judge.make(eval_config.data_root))
    pairs = with_versions(pairs.with_columns(pl.lit(baseline, dtype=pl.String).alias("baseline_run_id")), manifest,
                          PAIRWISE_CODE_VERSION)
    return materialized(pairs, versions=manifest, headline={k: v for k, v in summary.items() if isinstance(v, int | float)},
                        extra={"summary": dg.MetadataValue.json({k: v for k, v in summary.items() if v is not None})})


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=CODE_VERSION, kinds={"markdown", "html"},
          description="The gate report (Markdown and HTML) under reports/<run_id>/gate.*")
def gate_report(context: dg.AssetExecutionContext, eval_config: EvalConfig, gate_results: pl.DataFrame,
                pairwise_comparison: pl.DataFrame):
    """Render the gate table with blocking cases and owners, and the pairwise answer comparison beside it."""
    run_id = context.partition_key
    baseline = gate_results["baseline_run_id"][0] if gate_results.height else None
    sections = gate_sections(gate_results, run_id, baseline, pairwise_comparison)
    title = f"Release gates — run {run_id}"
    markdown = render_markdown(title, sections)
    reports = eval_config.reports()
    reports.write_bytes(markdown.encode(), run_id, "gate.md")
    reports.write_bytes(render_html(title, sections).encode(), run_id, "gate.html")
    return dg.MaterializeResult(metadata={"report": dg.MetadataValue.md(markdown),
                                          "markdown_path": dg.MetadataValue.path(reports.uri_of(run_id, "gate.md")),
                                          "exit_code": gate_scoring.exit_code(gate_results)})


defs = dg.Definitions(assets=[gate_results, pairwise_comparison, gate_report])
