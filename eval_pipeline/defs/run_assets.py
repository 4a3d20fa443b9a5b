"""The header every table of one evaluation run shares: partitioned by run, stored in the Delta warehouse."""

from __future__ import annotations

import dagster as dg
import polars as pl

from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.privacy import with_privacy_checks
from eval_pipeline.scoring.common import lane_traces

WAREHOUSE_IO = "warehouse_io"
TABLE_KINDS = frozenset({"polars", "deltalake"})


def run_table(group: str, code_version: str, **options) -> dg.AssetsDefinition:
    """@dg.asset for one table of a run (partitioned by run, written by the warehouse IO manager), with a blocking
    no_personal_data check unless it is restricted."""
    options.setdefault("kinds", set(TABLE_KINDS))
    return with_privacy_checks(
        lambda opts: dg.asset(
            partitions_def=runs_partitions,
            group_name=group,  # type: ignore[return-value]
            code_version=code_version,
            io_manager_key=WAREHOUSE_IO,
            **opts,
        ),
        options,
    )


def table_out(description: str, **options) -> dg.AssetOut:
    """One output table of a multi-asset, written by the warehouse IO manager."""
    return dg.AssetOut(io_manager_key=WAREHOUSE_IO, description=description, **options)


def run_tables(group: str, code_version: str, outs: dict[str, dg.AssetOut], **options) -> dg.AssetsDefinition:
    """@dg.multi_asset for several tables of a run computed together, each with a blocking no_personal_data check
    unless it is restricted."""
    return with_privacy_checks(
        lambda opts: dg.multi_asset(
            partitions_def=runs_partitions,
            group_name=group,  # type: ignore[return-value]
            code_version=code_version,
            outs=outs,
            **opts,
        ),
        options,
    )


def manifest_of(run_manifest: pl.DataFrame) -> dict:
    """The run manifest row as a dict."""
    return run_manifest.row(0, named=True)


def expected_traces(deid_traces: pl.DataFrame, deid_cases: pl.DataFrame, lane: str) -> pl.DataFrame:
    """The trace ids a lane table of this run must cover."""
    return lane_traces(deid_traces.select("trace_id", "case_id"), deid_cases.select("case_id", "lanes"), lane).select(
        "trace_id"
    )
