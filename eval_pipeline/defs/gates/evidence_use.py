"""Counterfactual pairs: did the candidate's decision change with the decision-bearing fact (docs/evidence_use.md)?"""

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import in_batches, lane_key
from eval_pipeline.defs.run_assets import manifest_of, run_table
from eval_pipeline.io.warehouse import TableBatches
from eval_pipeline.quality import tables
from eval_pipeline.reporting.render import markdown_table
from eval_pipeline.scoring import counterfactual
from eval_pipeline.scoring.attribution import lane_outcomes

GROUP = "gates"
CODE_VERSION = "counterfactual-1"
_TRACE_COLUMNS = ("trace_id", "case_id", "attempt", "steps", "answer_text", "answer_refused")


def _rows_of(batches: TableBatches, case_ids: list[str], lane: str | None = None) -> pl.DataFrame | None:
    """The rows of the pairs' cases only: a dataset without pairs reads nothing, a large run reads batch by batch."""
    keep = pl.col("case_id").is_in(case_ids)
    if lane is not None:
        keep = keep & (pl.col("lane") == lane)
    parts = [batch.filter(keep) for batch in batches]
    return pl.concat(parts, how="vertical_relaxed") if parts else None


@run_table(
    GROUP,
    CODE_VERSION,
    ins={
        "deid_traces": in_batches("deid_traces"),
        "rag_stage_results": in_batches(lane_key("rag", "stage_results")),
        "agent_stage_results": in_batches(lane_key("agent", "stage_results")),
    },
    check_specs=checks.specs("counterfactual_pairs", tables.COUNTERFACTUAL_PAIRS),
)
def counterfactual_pairs(
    context: dg.AssetExecutionContext,
    run_manifest: pl.DataFrame,
    deid_cases: pl.DataFrame,
    deid_traces: TableBatches,
    rag_stage_results: TableBatches,
    agent_stage_results: TableBatches,
):
    """Each counterfactual case with its original: responsive, ignored (same behaviour although the \
expectations differ),
    broken or incomplete."""
    manifest = manifest_of(run_manifest)
    pairs = (
        deid_cases.filter(pl.col("counterfactual_of").is_not_null())
        if "counterfactual_of" in deid_cases.columns
        else deid_cases.clear()
    )
    case_ids = (
        sorted(set(pairs["case_id"].to_list()) | set(pairs["counterfactual_of"].to_list())) if pairs.height else []
    )
    if case_ids:
        traces = _rows_of(deid_traces.select(*_TRACE_COLUMNS), case_ids)
        stages = [
            _rows_of(batches, case_ids, lane)
            for lane, batches in (("rag", rag_stage_results), ("agent", agent_stage_results))
        ]
        stages = pl.concat([s for s in stages if s is not None], how="vertical_relaxed")
        frame = counterfactual.counterfactual_pairs(deid_cases, traces, lane_outcomes(stages), context.partition_key)
    else:
        frame = pl.DataFrame(schema=counterfactual.COUNTERFACTUAL_SCHEMA)
    frame = with_versions(frame, manifest, CODE_VERSION)
    counts = counterfactual.evidence_use_counts(frame)
    context.log.info(f"counterfactual pairs: {counts}")
    return materialized(
        frame,
        versions=manifest,
        headline={f"pairs_{value}": n for value, n in counts.items()},
        extra={
            "pairs": dg.MetadataValue.md(
                markdown_table(frame.select("case_id", "original_case_id", "evidence_use", "reason"))
            )
        },
        check_results=checks.results("counterfactual_pairs", tables.COUNTERFACTUAL_PAIRS, frame),
    )
