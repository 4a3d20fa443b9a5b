"""Release gates: the candidate run against its baseline, and the gate report."""

import dagster as dg
import polars as pl

from eval_pipeline.defs.gates.checks import RELEASE_CHECK, RELEASE_CHECK_DESCRIPTION, release_check
from eval_pipeline.defs.gates.evidence_use import counterfactual_pairs
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.privacy import published, report_spec
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import (
    AGENT_COLUMNS,
    LANE_PREFIXES,
    RETRIEVAL_COLUMNS,
    EvalConfig,
    JudgeConfig,
    corpus_families,
    lane_key,
    traces_without,
)
from eval_pipeline.defs.run_assets import manifest_of, run_table
from eval_pipeline.defs.same_frames import lane_outcomes, slice_membership
from eval_pipeline.gating import comparable_baseline, compare
from eval_pipeline.reporting.case_pages import case_ids_worth_a_page, case_page_files
from eval_pipeline.reporting.case_story import CASE_TABLES, RUN_TABLES
from eval_pipeline.reporting.gate_report import gate_sections, release_verdict
from eval_pipeline.reporting.index import index_files
from eval_pipeline.reporting.publish import ReportFile
from eval_pipeline.reporting.render import render_html, render_markdown
from eval_pipeline.scoring.common import lane_traces
from eval_pipeline.scoring.gate_facts import RunFacts, baseline_of
from eval_pipeline.scoring.gate_table import exit_code
from eval_pipeline.scoring.pairwise import PAIRWISE_SCHEMA, pairwise_compare

GROUP = "gates"
CODE_VERSION = "gates-3"
CASE_PAGES_CODE_VERSION = "case-pages-1"
# pages are for the cases a person opens from a report; `show` tells the story of any other
CASE_PAGE_LIMIT = 300
PAIRWISE_CODE_VERSION = "pairwise-1"

GATE_INS = {
    "run_manifest": dg.AssetIn(),
    "deid_cases": dg.AssetIn(),
    # a segmented gate's slice: corpus families and tool risks (docs/slices.md)
    "deid_corpus": corpus_families(),
    "tools": dg.AssetIn(),
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
    "counterfactual_pairs": dg.AssetIn(),
}


@run_table(
    GROUP,
    CODE_VERSION,
    ins=GATE_INS,
    check_specs=[
        dg.AssetCheckSpec(RELEASE_CHECK, asset="gate_results", blocking=False, description=RELEASE_CHECK_DESCRIPTION)
    ],
)
def gate_results(context: dg.AssetExecutionContext, eval_config: EvalConfig, **tables: pl.DataFrame):
    """Each gate of policy/gates.yaml for this run against its baseline (baseline_run_id of its run.yaml, else of the
    policy; never itself): pass, fail, incomplete, incomparable, insufficient or not_applicable."""
    manifest = manifest_of(tables["run_manifest"])
    policy = eval_config.policy()
    # per lane, as each lane's members decided them (defs.same_frames): a (trace, lane) key never spans two lanes
    outcomes = pl.concat(
        [lane_outcomes(tables[f"{lane}_stage_results"]) for lane in ("rag", "agent")], how="vertical_relaxed"
    )
    candidate = RunFacts(
        run_id=context.partition_key,
        manifest=manifest,
        cases=tables["deid_cases"],
        outcomes=outcomes,
        retrieval=tables["retrieval_scores"],
        tools=tables["tool_scores"],
        grounding=tables["grounding_scores"],
        reliability=pl.concat([tables["rag_reliability"], tables["agent_reliability"]], how="diagonal_relaxed"),
        quarantine=pl.concat([tables["rag_quarantine"], tables["agent_quarantine"]], how="diagonal_relaxed"),
        calibration=tables["judge_calibration"],
        counterfactual=tables["counterfactual_pairs"],
        qrels_version=tables["qrels"]["qrels_version"][0] if tables["qrels"].height else None,
        slices=slice_membership(tables["deid_cases"], tables["deid_corpus"], tables["tools"]),
    )
    baseline = baseline_of(manifest, policy)
    other_runs = eval_config.other_runs(context)
    results = compare(policy, candidate, baseline, other_runs)
    results = with_versions(results, manifest, CODE_VERSION)
    statuses = dict(results.group_by("status").len().iter_rows())
    context.log.info(f"gates vs {f'baseline {baseline}' if baseline else 'no baseline'}: {statuses}")
    return materialized(
        results,
        versions=manifest,
        headline={"gates_failed": statuses.get("fail", 0), "exit_code": exit_code(results)},
        extra=other_runs.metadata(),
        check_results=[release_check("gate_results", results, context.partition_key)],
    )


@run_table(GROUP, PAIRWISE_CODE_VERSION, ins={"deid_traces": traces_without(RETRIEVAL_COLUMNS, AGENT_COLUMNS)})
def pairwise_comparison(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    judge: JudgeConfig,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
):
    """Baseline vs candidate answers of each RAG case, judged twice with positions swapped; a win counts only \
in both orders."""
    manifest = manifest_of(run_manifest)
    other_runs = eval_config.other_runs(context)
    baseline = comparable_baseline(manifest, eval_config.policy(), other_runs)
    candidate = lane_traces(deid_traces, deid_cases, "rag").select(deid_traces.columns)
    baseline_traces = other_runs.read("deid_traces", baseline) if baseline else None
    if baseline_traces is None:
        pairs, summary = pl.DataFrame(schema=PAIRWISE_SCHEMA), {"n_pairs": 0}
        context.log.info("no comparable baseline run scored: nothing to compare pairwise")
    else:
        pairs, summary = pairwise_compare(
            baseline_traces.join(candidate.select("case_id").unique(), on="case_id", how="semi"),
            candidate,
            judge.make(eval_config.data_root),
        )
    pairs = with_versions(
        pairs.with_columns(pl.lit(baseline, dtype=pl.String).alias("baseline_run_id")), manifest, PAIRWISE_CODE_VERSION
    )
    return materialized(
        pairs,
        versions=manifest,
        headline={k: v for k, v in summary.items() if isinstance(v, int | float)},
        extra={
            "summary": dg.MetadataValue.json({k: v for k, v in summary.items() if v is not None}),
            **other_runs.metadata(),
        },
    )


@dg.asset(
    partitions_def=runs_partitions,
    group_name=GROUP,
    code_version=CODE_VERSION,
    kinds={"markdown", "html"},
    check_specs=[
        dg.AssetCheckSpec(RELEASE_CHECK, asset="gate_report", blocking=False, description=RELEASE_CHECK_DESCRIPTION),
        report_spec("gate_report", "the gate report and the index"),
    ],
    # the index across runs reads every run's manifest and gates, and the failed high-criticality cases; it links
    # the lane reports, so it is written after them (a fresh run's index equals a rerun's)
    deps=["run_manifest", *(lane_key(lane, name) for lane in LANE_PREFIXES for name in ("slice_rollup", "report"))],
    description="The gate report (Markdown and HTML) under reports/<run_id>/gate.*, and reports/index.html across runs",
)
def gate_report(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    gate_results: pl.DataFrame,
    pairwise_comparison: pl.DataFrame,
    counterfactual_pairs: pl.DataFrame,
):
    """Render the release verdict, the gate table with blocking cases and owners, and the pairwise comparison
    beside it."""
    run_id = context.partition_key
    baseline = gate_results["baseline_run_id"][0] if gate_results.height else None
    sections = gate_sections(gate_results, run_id, baseline, pairwise_comparison, counterfactual_pairs)
    verdict = release_verdict(gate_results, run_id, baseline)
    title = f"Release gates — run {run_id}"
    markdown = render_markdown(title, sections, verdict)
    reports = eval_config.reports()
    # each file is moved into place only once its privacy check passed (the index lists the gate files: it comes after)
    privacy, written = published(
        "gate_report",
        reports,
        [
            ReportFile((run_id, "gate.md"), markdown),
            ReportFile((run_id, "gate.html"), render_html(title, sections, verdict)),
        ],
    )
    other_runs = eval_config.other_runs(context)
    if written:
        privacy, written = published("gate_report", reports, index_files(other_runs, reports))
    statuses = gate_results["status"].to_list()
    # numbers, so the asset's plots draw the release decision over runs
    metadata = {
        "verdict": dg.MetadataValue.text(verdict.status),
        "exit_code": dg.MetadataValue.int(exit_code(gate_results)),
        "gates_failed": dg.MetadataValue.int(statuses.count("fail")),
        "gates_passed": dg.MetadataValue.int(statuses.count("pass")),
        **other_runs.metadata(),
    }
    if written:
        metadata |= {
            "report": dg.MetadataValue.md(markdown),
            "markdown_path": dg.MetadataValue.path(reports.uri_of(run_id, "gate.md")),
            "index_path": dg.MetadataValue.path(reports.uri_of("index.html")),
        }
    return dg.MaterializeResult(
        metadata=metadata, check_results=[release_check("gate_report", gate_results, run_id), privacy]
    )


CASE_PAGE_INS = {
    "run_manifest": dg.AssetIn(),
    "deid_cases": dg.AssetIn(),
    "gate_results": dg.AssetIn(),
    "review_queue": dg.AssetIn(),
    "rag_attribution": dg.AssetIn(key=lane_key("rag", "attribution")),
    "agent_attribution": dg.AssetIn(key=lane_key("agent", "attribution")),
}
# tables each lane writes its own rows of, under its own asset key (rag/rag_stage_results …)
LANE_OWNED_TABLES = ("stage_results", "attribution", "attribution_rollup", "reliability", "quarantine")


def case_page_sources() -> list[dg.AssetKey]:
    """The tables the case pages read from the warehouse (this run's and the baseline's), declared so the lineage
    shows them: every table of a case story that is not an input already."""
    inputs = {spec.key for spec in CASE_PAGE_INS.values() if spec.key} | {dg.AssetKey(name) for name in CASE_PAGE_INS}
    keys = []
    for table in (*CASE_TABLES, *RUN_TABLES):
        for key in (
            [lane_key(lane, table) for lane in LANE_PREFIXES] if table in LANE_OWNED_TABLES else [dg.AssetKey(table)]
        ):
            if key not in inputs:
                keys.append(key)
    return keys


@dg.asset(
    partitions_def=runs_partitions,
    group_name=GROUP,
    code_version=CASE_PAGES_CODE_VERSION,
    kinds={"html"},
    ins=CASE_PAGE_INS,
    deps=case_page_sources(),
    check_specs=[report_spec("case_pages", "the case pages")],
    description="One page per blocking, failed or review-queue case under reports/<run_id>/cases/, "
    "against the baseline",
)
def case_pages(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    deid_cases: pl.DataFrame,
    gate_results: pl.DataFrame,
    review_queue: pl.DataFrame,
    rag_attribution: pl.DataFrame,
    agent_attribution: pl.DataFrame,
):
    """The end-to-end story of every case a report row links to (the blocking ones first), as `eval-pipeline show`
    prints it."""
    manifest = manifest_of(run_manifest)
    # this run's and the baseline's tables, read from the warehouse for the cases that get a page
    tables = eval_config.other_runs(context)
    policy = eval_config.policy()
    wanted = case_ids_worth_a_page(
        gate_results, [rag_attribution, agent_attribution], review_queue, limit=CASE_PAGE_LIMIT + 1, cases=deid_cases
    )
    reports = eval_config.reports()
    files = case_page_files(
        tables,
        context.partition_key,
        wanted[:CASE_PAGE_LIMIT],
        baseline_run_id=comparable_baseline(manifest, policy, tables),
        relevance_threshold=policy.retrieval.relevance_threshold,
        reports=reports,
    )
    # the pages are moved into place only when none holds personal data; otherwise none is left on disk
    privacy, published_ok = published("case_pages", reports, files)
    written = [reports.uri_of(*f.parts) for f in files] if published_ok else []
    if len(wanted) > CASE_PAGE_LIMIT:
        context.log.info(
            f"case pages for the first {CASE_PAGE_LIMIT} cases by priority; `eval-pipeline show` tells any other"
        )
    return dg.MaterializeResult(
        metadata={
            "pages": len(written),
            "limit": CASE_PAGE_LIMIT,
            "first_pages": dg.MetadataValue.md(
                "\n".join(f"- {uri}" for uri in written[:10]) or "no page: no blocking, failed or review-queue case"
            ),
            **tables.metadata(),
        },
        check_results=[privacy],
    )


defs = dg.Definitions(assets=[counterfactual_pairs, gate_results, pairwise_comparison, gate_report, case_pages])
