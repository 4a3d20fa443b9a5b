"""Read what the gates and reports need about one run back from the warehouse."""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.scoring.attribution import lane_outcomes
from eval_pipeline.scoring.gate_facts import RunFacts
from eval_pipeline.scoring.slices import slice_membership

# what slice membership reads beside deid_cases: corpus families and the tools' risk
SLICE_SOURCES = {"deid_corpus": ["doc_id", "family"], "tools": ["name", "read_only", "destructive"]}


def manifest_from_warehouse(warehouse: Warehouse, run_id: str) -> dict | None:
    """The run manifest row as materialized, None when the run was never scored."""
    runs = warehouse.read("run_manifest", run_id)
    return None if runs is None or runs.height == 0 else runs.row(0, named=True)


def run_facts(warehouse: Warehouse, run_id: str, tables: Collection[str] | None = None) -> RunFacts | None:
    """RunFacts of a scored run (tables that are missing stay None and make the gates needing them incomplete);
    `tables`: read only these (a lane's gates need only the lane's tables)."""
    manifest = manifest_from_warehouse(warehouse, run_id)
    if manifest is None:
        return None

    def read(table: str, **options) -> pl.DataFrame | None:
        return warehouse.read(table, run_id, **options) if tables is None or table in tables else None

    cases = read("deid_cases")
    stages = read("stage_results")
    qrels = read("qrels", columns=["qrels_version"])
    corpus, registry = (read(table, columns=columns) for table, columns in SLICE_SOURCES.items())
    facts = RunFacts(
        run_id=run_id,
        manifest=manifest,
        cases=cases if cases is not None else pl.DataFrame(schema={"case_id": pl.String, "multi_hop": pl.Boolean}),
        outcomes=lane_outcomes(stages) if stages is not None else None,
        retrieval=read("retrieval_scores"),
        tools=read("tool_scores"),
        grounding=read("grounding_scores"),
        reliability=read("reliability"),
        quarantine=read("quarantine"),
        calibration=read("judge_calibration"),
        counterfactual=read("counterfactual_pairs"),
        qrels_version=qrels["qrels_version"][0] if qrels is not None and qrels.height else None,
        # a segmented gate needs all three; a guess without families or tool risks would put cases in the wrong slice
        slices=slice_membership(cases, corpus, registry)
        if all(f is not None for f in (cases, corpus, registry))
        else None,
    )
    facts.missing = [name for name, value in (("stage_results", stages), ("deid_cases", cases)) if value is None]
    return facts


def scored_runs(warehouse: Warehouse) -> pl.DataFrame:
    """Every run in the warehouse with its manifest columns, newest first."""
    runs = warehouse.read("run_manifest")
    if runs is None:
        return pl.DataFrame(schema={"run_id": pl.String, "created_at": pl.String})
    return runs.sort(["created_at", "run_id"], descending=True, nulls_last=True)
