"""De-identification: every scorer and the judge read only these assets; raw data stays in the restricted area."""

import os

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.ingestion import manifest_of
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.recording import materialized
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.deid import DeidKeyError, deidentify, resolve_key
from eval_pipeline.quality.contracts import TableContract

GROUP = "deidentification"
CODE_VERSION = "deid-1"

DEID_TRACES_CONTRACT = TableContract(columns=("run_id", "trace_id", "case_id", "attempt", "status"), unique=("trace_id",),
                                     per_trace=False)
DEID_CASES_CONTRACT = TableContract(columns=("case_id", "case_revision", "lanes"), unique=("case_id",), per_trace=False)


@dg.multi_asset(
    partitions_def=runs_partitions,
    group_name=GROUP,
    code_version=CODE_VERSION,
    can_subset=True,
    outs={
        "deid_traces": dg.AssetOut(io_manager_key="warehouse_io", is_required=False, description="Traces with personal data replaced by keyed pseudonyms."),
        "deid_cases": dg.AssetOut(io_manager_key="warehouse_io", is_required=False, description="Cases (fixtures, reference calls) with the same pseudonyms."),
        "deid_corpus": dg.AssetOut(io_manager_key="warehouse_io", is_required=False, description="Corpus text with the same pseudonyms."),
        "deid_report": dg.AssetOut(io_manager_key="warehouse_io", is_required=False, description="Replacements counted by table, field and type."),
    },
    check_specs=[*checks.specs("deid_traces", DEID_TRACES_CONTRACT), *checks.specs("deid_cases", DEID_CASES_CONTRACT)],
)
def deidentified(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    corpus: pl.DataFrame,
):
    """Replace personal data everywhere with HMAC pseudonyms so equal values stay equal (joins and tool arguments survive)."""
    manifest = manifest_of(run_manifest)
    try:
        key = resolve_key(os.environ, demo=eval_config.deid_demo)
    except DeidKeyError as exc:
        raise dg.Failure(description=str(exc)) from exc
    result = deidentify(traces, cases, corpus, key)
    by_type = result.report.group_by("entity_type").agg(pl.col("replacements").sum()).sort("entity_type")
    context.log.info("replacements by type: " + ", ".join(f"{t}={n}" for t, n in by_type.iter_rows()))
    selected = context.selected_output_names
    if "deid_traces" in selected:
        yield materialized(result.traces, asset_key="deid_traces", versions=manifest, headline={"traces": result.traces.height},
                           check_results=checks.results("deid_traces", DEID_TRACES_CONTRACT, result.traces))
    if "deid_cases" in selected:
        yield materialized(result.cases, asset_key="deid_cases", versions=manifest, headline={"cases": result.cases.height},
                           check_results=checks.results("deid_cases", DEID_CASES_CONTRACT, result.cases))
    if "deid_corpus" in selected:
        yield materialized(result.corpus, asset_key="deid_corpus", versions=manifest, headline={"documents": result.corpus.height})
    if "deid_report" in selected:
        yield materialized(result.report, asset_key="deid_report", versions=manifest,
                           headline={"replacements": int(result.report["replacements"].sum()) if result.report.height else 0})


defs = dg.Definitions(assets=[deidentified])
