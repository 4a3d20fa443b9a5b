"""Per lane: stage results, first-failing-stage attribution, rollup, reliability, quarantine and the lane report."""

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.attribution.report_content import attach_baseline, lane_gates, render_lane_report
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.privacy import published, report_spec
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import ONLY_COLUMNS_METADATA_KEY, EvalConfig, corpus_families, lane_key
from eval_pipeline.defs.reuse import REUSE_TAG
from eval_pipeline.defs.run_assets import manifest_of, run_table, run_tables, table_out
from eval_pipeline.defs.same_frames import lane_outcomes, slice_membership
from eval_pipeline.quality import tables
from eval_pipeline.reporting.lane_data import LaneData
from eval_pipeline.reporting.publish import ReportFile
from eval_pipeline.scoring import attribution as attribution_scoring
from eval_pipeline.scoring import reliability as reliability_scoring
from eval_pipeline.scoring import slices as slice_scoring
from eval_pipeline.scoring.common import LANE_STAGES

GROUP = "attribution"
CODE_VERSION = "attribution-1"
REPORT_CODE_VERSION = "report-3"
SLICES_CODE_VERSION = "slices-1"

LANE_TABLES = {
    "rag": ("retrieval_scores", "context_scores", "grounding_scores", "citation_scores", "answer_scores"),
    "agent": ("tool_scores", "outcome_scores"),
}
# Stage results read the keys and the stage and reason columns of the lane's tables, nothing else: a qrels bump that
# changes scores but no stage's verdict leaves what they read as it was, so the stage results (and what reads only
# them) are reused, not computed again (defs.reuse).
STAGE_COLUMNS = {
    lane: ["run_id", "trace_id", "case_id", "attempt", *(f"{s}_{part}" for s in stages for part in ("stage", "reason"))]
    for lane, stages in LANE_STAGES.items()
}
# Stage results, attribution, reliability and slices depend on nothing but their input tables.
PURE = {REUSE_TAG: "inputs"}
REPORT_EXTRAS = {"rag": ("judge_calibration", "review_queue", "qrels"), "agent": ()}


def _lane_cases(cases: pl.DataFrame, lane: str) -> pl.DataFrame:
    """Cases whose reliability this lane reports: agent cases (also both-lane ones) or RAG-only cases."""
    has_agent = pl.col("lanes").list.contains("agent")
    return cases.filter(has_agent if lane == "agent" else ~has_agent)


def lane_stage_results(lane: str) -> dg.AssetsDefinition:
    """rag/rag_stage_results or agent/agent_stage_results: the union of the lane's stage columns."""
    stage_key = lane_key(lane, "stage_results")

    @run_table(
        GROUP,
        CODE_VERSION,
        key=stage_key,
        ins={"run_manifest": dg.AssetIn(), **lane_inputs(lane, only=STAGE_COLUMNS[lane])},
        check_specs=checks.specs(stage_key, tables.STAGE_RESULTS),
        op_tags=PURE,
        description=f"One row per ({lane} trace, stage): pass, fail, incomplete or not applicable, with the reason.",
    )
    def stage_results(run_manifest: pl.DataFrame, **lane_tables: pl.DataFrame):
        manifest = manifest_of(run_manifest)
        frame = attribution_scoring.stage_results(lane, [lane_tables[name] for name in LANE_TABLES[lane]])
        frame = with_versions(frame, manifest, CODE_VERSION)
        counts = frame.group_by("status").len()
        return materialized(
            frame,
            versions=manifest,
            headline={f"stages_{s}": n for s, n in counts.iter_rows()},
            check_results=checks.results(stage_key, tables.STAGE_RESULTS, frame),
        )

    return stage_results


def lane_attribution(lane: str) -> dg.AssetsDefinition:
    """The lane's failed traces with their first failing stage, and the rollup per stage."""
    attribution_key, rollup_key = lane_key(lane, "attribution"), lane_key(lane, "attribution_rollup")

    @run_tables(
        GROUP,
        CODE_VERSION,
        name=f"{lane}_attribution",
        ins={"run_manifest": dg.AssetIn(), "stage_results": dg.AssetIn(key=lane_key(lane, "stage_results"))},
        outs={
            "attribution": table_out(
                key=attribution_key,
                description=f"Each failed or incomplete {lane} trace with its one first failing stage and owner.",
            ),
            "attribution_rollup": table_out(
                key=rollup_key, description=f"{lane} failures per first failing stage, with shares that sum to 1."
            ),
        },
        check_specs=[*checks.specs(attribution_key, tables.ATTRIBUTION), *checks.specs(rollup_key, tables.ROLLUP)],
        op_tags=PURE,
    )
    def attribute(context: dg.AssetExecutionContext, run_manifest: pl.DataFrame, stage_results: pl.DataFrame):
        manifest = manifest_of(run_manifest)
        outcomes = lane_outcomes(stage_results)
        failed = with_versions(attribution_scoring.attribution(outcomes), manifest, CODE_VERSION)
        rollup = with_versions(attribution_scoring.rollup(outcomes, lane), manifest, CODE_VERSION)
        total, lane_failures = int(rollup["failures"].sum()), int(rollup["lane_failures"].max() or 0)
        context.log.info(f"{lane}: {lane_failures} failures, {rollup['lane_incomplete'].max()} incomplete")
        yield materialized(
            failed,
            asset_key=attribution_key,
            versions=manifest,
            headline={
                "failures": lane_failures,
                "incomplete": int(rollup["lane_incomplete"].max() or 0),
                "hazards": failed.filter(pl.col("hazard").is_not_null()).height,
            },
            check_results=checks.results(attribution_key, tables.ATTRIBUTION, failed),
        )
        rollup_checks = checks.results(rollup_key, tables.ROLLUP, rollup)
        if total != lane_failures:
            raise dg.Failure(f"{lane} stage counts sum to {total} but the lane has {lane_failures} failures")
        yield materialized(
            rollup,
            asset_key=rollup_key,
            versions=manifest,
            headline={f"failures_{s}": n for s, n in rollup.select("stage", "failures").iter_rows()},
            check_results=rollup_checks,
        )

    return attribute


def lane_reliability(lane: str) -> dg.AssetsDefinition:
    """pass@1 and pass^k of the lane's cases over repeated attempts, and the flaky ones quarantined."""
    reliability_key, quarantine_key = lane_key(lane, "reliability"), lane_key(lane, "quarantine")
    reliability_ins = {
        "run_manifest": dg.AssetIn(),
        "stage_results": dg.AssetIn(key=lane_key(lane, "stage_results")),
        "deid_cases": dg.AssetIn(),
    }
    if lane == "agent":
        reliability_ins["outcome_scores"] = dg.AssetIn()

    @run_tables(
        GROUP,
        CODE_VERSION,
        name=f"{lane}_reliability",
        ins=reliability_ins,
        outs={
            "reliability": table_out(
                key=reliability_key,
                description=f"pass@1 and pass^k over repeated attempts of {lane} cases; flaky flag.",
            ),
            "quarantine": table_out(
                key=quarantine_key, description=f"Flaky {lane} cases with the traces that flipped; they stop gating."
            ),
        },
        check_specs=checks.specs(reliability_key, tables.RELIABILITY),
        op_tags=PURE,
    )
    def reliability(run_manifest: pl.DataFrame, stage_results: pl.DataFrame, deid_cases: pl.DataFrame, **agent_tables):
        # only the agent lane has outcome_scores: a named parameter would make the RAG lane depend on it
        manifest = manifest_of(run_manifest)
        outcomes = lane_outcomes(stage_results)
        success = attribution_scoring.attempt_success(
            outcomes, _lane_cases(deid_cases, lane), agent_tables.get("outcome_scores")
        )
        success = success.filter(pl.col("lane") == lane).drop("lane")
        per_case = with_versions(reliability_scoring.reliability(success), manifest, CODE_VERSION)
        flaky = with_versions(reliability_scoring.quarantine(per_case, success), manifest, CODE_VERSION)
        suite = reliability_scoring.suite_reliability(per_case)
        yield materialized(
            per_case,
            asset_key=reliability_key,
            versions=manifest,
            headline={k: v for k, v in suite.items() if isinstance(v, int | float)},
            check_results=checks.results(reliability_key, tables.RELIABILITY, per_case),
        )
        yield materialized(flaky, asset_key=quarantine_key, versions=manifest, headline={"flaky_cases": flaky.height})

    return reliability


def lane_slices(lane: str) -> dg.AssetsDefinition:
    """The lane's rollups by decision slice (docs/slices.md): per slice, counts, pass rate, pass@1 and failed cases,
    and the failures per first failing stage."""
    rollup_key, stages_key = lane_key(lane, "slice_rollup"), lane_key(lane, "slice_attribution_rollup")

    @run_tables(
        GROUP,
        SLICES_CODE_VERSION,
        name=f"{lane}_slices",
        ins={
            "run_manifest": dg.AssetIn(),
            "stage_results": dg.AssetIn(key=lane_key(lane, "stage_results")),
            "reliability": dg.AssetIn(key=lane_key(lane, "reliability")),
            "deid_cases": dg.AssetIn(),
            "tools": dg.AssetIn(),
            **slice_corpus(lane),
        },
        outs={
            "slice_rollup": table_out(
                key=rollup_key,
                description=(
                    f"{lane} traces and cases per decision slice (criticality, tags, corpus family, tool risk): "
                    "passed, failed, incomplete, pass rate, pass@1 and the failed cases."
                ),
            ),
            "slice_attribution_rollup": table_out(
                key=stages_key,
                description=(
                    f"{lane} failures per (decision slice, first failing stage), with shares that sum to 1 per slice."
                ),
            ),
        },
        check_specs=[
            *checks.specs(rollup_key, tables.SLICE_ROLLUP),
            *checks.specs(stages_key, tables.SLICE_ATTRIBUTION_ROLLUP),
        ],
        op_tags=PURE,
    )
    def slices(
        context: dg.AssetExecutionContext,
        run_manifest: pl.DataFrame,
        stage_results: pl.DataFrame,
        reliability: pl.DataFrame,
        deid_cases: pl.DataFrame,
        tools: pl.DataFrame,
        **corpus: pl.DataFrame,
    ):
        # only the rag lane has deid_corpus: a named parameter would make the agent lane depend on it
        manifest = manifest_of(run_manifest)
        membership = slice_membership(deid_cases, corpus.get("deid_corpus"), tools)
        table, stages = slice_scoring.slice_rollups(lane_outcomes(stage_results), membership, reliability, lane)
        table = with_versions(table, manifest, SLICES_CODE_VERSION)
        stages = with_versions(stages, manifest, SLICES_CODE_VERSION)
        # as for the lane's rollup: a slice's stage counts must sum to its failed traces
        sums = stages.group_by("slice").agg(pl.col("failures").sum().alias("stage_failures"))
        mismatched = table.join(sums, on="slice", how="left").filter(
            pl.col("stage_failures").fill_null(0) != pl.col("traces_failed")
        )
        if mismatched.height:
            raise dg.Failure(
                f"{lane} slices whose stage counts do not sum to their failures: "
                f"{', '.join(mismatched['slice'].to_list())}"
            )
        high = table.filter(pl.col("slice") == "criticality=high")
        failed_high = int(high["failed_case_ids"].list.len().sum()) if high.height else 0
        context.log.info(f"{lane}: {table.height} slices; {failed_high} failed high-criticality case(s)")
        yield materialized(
            table,
            asset_key=rollup_key,
            versions=manifest,
            headline={"slices": table.height, "failed_high_criticality_cases": failed_high},
            check_results=checks.results(rollup_key, tables.SLICE_ROLLUP, table),
        )
        yield materialized(
            stages,
            asset_key=stages_key,
            versions=manifest,
            headline={"rows": stages.height},
            check_results=checks.results(stages_key, tables.SLICE_ATTRIBUTION_ROLLUP, stages),
        )

    return slices


def slice_corpus(lane: str) -> dict[str, dg.AssetIn]:
    """The corpus families a lane's slices read: the rag lane's only (corpus_family is a dimension of its cases)."""
    return {"deid_corpus": corpus_families()} if lane == "rag" else {}


def lane_report(lane: str) -> dg.AssetsDefinition:
    """The lane report (Markdown and HTML) with its privacy check."""
    report_key = lane_key(lane, "report")
    report_ins = {
        "run_manifest": dg.AssetIn(),
        "stage_results": dg.AssetIn(key=lane_key(lane, "stage_results")),
        "attribution_rollup": dg.AssetIn(key=lane_key(lane, "attribution_rollup")),
        "reliability": dg.AssetIn(key=lane_key(lane, "reliability")),
        "quarantine": dg.AssetIn(key=lane_key(lane, "quarantine")),
        "slice_rollup": dg.AssetIn(key=lane_key(lane, "slice_rollup")),
        "tools": dg.AssetIn(),
        **slice_corpus(lane),
        "trace_rejects": dg.AssetIn(),
        "deid_cases": dg.AssetIn(),
        **lane_inputs(lane),
        **{name: dg.AssetIn() for name in REPORT_EXTRAS[lane]},
    }

    @dg.asset(
        key=report_key,
        partitions_def=runs_partitions,
        group_name=GROUP,
        code_version=REPORT_CODE_VERSION,
        ins=report_ins,
        deps=[lane_key(lane, "attribution")],
        kinds={"markdown", "html"},
        check_specs=[report_spec(report_key)],
        description=f"The {lane} lane report (Markdown and HTML) under reports/<run_id>/.",
    )
    def report(
        context: dg.AssetExecutionContext,
        eval_config: EvalConfig,
        run_manifest: pl.DataFrame,
        stage_results: pl.DataFrame,
        attribution_rollup: pl.DataFrame,
        reliability: pl.DataFrame,
        quarantine: pl.DataFrame,
        trace_rejects: pl.DataFrame,
        deid_cases: pl.DataFrame,
        slice_rollup: pl.DataFrame,
        tools: pl.DataFrame,
        **lane_tables: pl.DataFrame,
    ):
        corpus = lane_tables.pop("deid_corpus", None)
        run_id = context.partition_key
        data = LaneData(
            lane=lane,
            run_id=run_id,
            manifest=manifest_of(run_manifest),
            stage_results=stage_results,
            outcomes=lane_outcomes(stage_results),
            rollup=attribution_rollup,
            rejects=trace_rejects,
            reliability=reliability,
            quarantine=quarantine,
            tables=dict(lane_tables),
        )
        data.cases, data.slices = deid_cases, slice_rollup
        other_runs = eval_config.other_runs(context)
        attach_baseline(data, eval_config, other_runs)
        data.gates = lane_gates(
            lane,
            eval_config,
            data,
            deid_cases,
            other_runs,
            slices=slice_membership(deid_cases, corpus, tools),
        )
        markdown, html = render_lane_report(data, lane_tables)
        reports = eval_config.reports()
        # rendered to temporary names, moved into place only when no personal data is found; nothing left otherwise
        privacy, written = published(
            report_key,
            reports,
            [ReportFile((run_id, f"{lane}.md"), markdown), ReportFile((run_id, f"{lane}.html"), html)],
        )
        # a report that failed its check is neither on disk nor in the event log
        shown = (
            {
                "report": dg.MetadataValue.md(markdown),
                "markdown_path": dg.MetadataValue.path(reports.uri_of(run_id, f"{lane}.md")),
                "html_path": dg.MetadataValue.path(reports.uri_of(run_id, f"{lane}.html")),
            }
            if written
            else {}
        )
        return dg.MaterializeResult(
            metadata={
                **shown,
                "failures": int(attribution_rollup["lane_failures"].max() or 0) if attribution_rollup.height else 0,
                **other_runs.metadata(),
            },
            check_results=[privacy],
        )

    return report


def lane_inputs(lane: str, only: list[str] | None = None) -> dict[str, dg.AssetIn]:
    """The scorer tables a lane's stage results and report read (with `only`, just those of their columns)."""
    return {
        name: dg.AssetIn(key=name, metadata={ONLY_COLUMNS_METADATA_KEY: only} if only is not None else None)
        for name in LANE_TABLES[lane]
    }


def build_lane(lane: str) -> list[dg.AssetsDefinition]:
    """The stage results, attribution, reliability and report assets of one lane."""
    return [
        lane_stage_results(lane),
        lane_attribution(lane),
        lane_reliability(lane),
        lane_slices(lane),
        lane_report(lane),
    ]


defs = dg.Definitions(assets=[*build_lane("rag"), *build_lane("agent")])
