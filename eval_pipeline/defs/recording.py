"""What every materialization records: versions on each row, row count, column schema, a preview, headline metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
import polars as pl

from eval_pipeline.contracts.column_docs import describe
from eval_pipeline.defs.fused import materializing_key
from eval_pipeline.defs.privacy import privacy_result
from eval_pipeline.defs.resources import table_of
from eval_pipeline.io.fingerprints import content_hash
from eval_pipeline.io.warehouse import FrameBatches

VERSION_COLUMNS = (
    "dataset_version",
    "corpus_version",
    "environment_version",
    "index_version",
    "candidate",
    "model",
    "prompt_version",
)


def with_versions(frame: pl.DataFrame, manifest: Mapping[str, Any], code_version: str) -> pl.DataFrame:
    """The frame with its run id, the run's versions and the scorer's code version on every row (existing columns
    kept)."""
    stamps = {
        c: pl.lit(manifest.get(c), dtype=pl.String) for c in ("run_id", *VERSION_COLUMNS) if c not in frame.columns
    }
    stamps["code_version"] = pl.lit(code_version, dtype=pl.String)
    return frame.with_columns(**stamps)


def table_schema(schema: dict, table: str | None = None) -> dg.TableSchema:
    """Columns as a Dagster table schema, each with its meaning in `table`."""
    return dg.TableSchema(
        columns=[dg.TableColumn(name=n, type=str(t), description=describe(table, n)) for n, t in schema.items()]
    )


def _table_name(asset_key: str | dg.AssetKey | None) -> str | None:
    """The warehouse table an asset writes: from its key, else from the asset being materialized."""
    if asset_key is None:
        try:
            asset_key = materializing_key(dg.AssetExecutionContext.get())
        except dg.DagsterError:
            # Called outside a materialization (a scorer test): column meanings without per-table overrides.
            return None
    return table_of(dg.AssetKey.from_coercible(asset_key))[0]


def _cell(value: Any, width: int = 40) -> str:
    text = "" if value is None else str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def markdown_preview(frame: pl.DataFrame, rows: int = 5, columns: int = 8) -> str:
    """A small Markdown table of the first rows and columns."""
    shown = frame.columns[:columns]
    lines = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    for row in frame.select(shown).head(rows).iter_rows():
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if frame.width > columns:
        lines.append(f"\n{frame.width - columns} more columns")
    return "\n".join(lines)


def _versions_and_headline(versions: Mapping[str, Any] | None, headline: Mapping[str, Any] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if versions:
        metadata["versions"] = dg.MetadataValue.json({k: v for k, v in versions.items() if v is not None})
    for name, value in (headline or {}).items():
        if value is not None:
            metadata[name] = plottable(value)
    return metadata


def plottable(value: Any) -> Any:
    """A headline number as typed metadata, so Dagster's asset plots draw it over partitions and runs: counts as
    MetadataValue.int, rates and means as MetadataValue.float; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return dg.MetadataValue.int(value) if isinstance(value, int) else dg.MetadataValue.float(value)


def materialized(
    frame: pl.DataFrame | FrameBatches,
    *,
    asset_key: str | dg.AssetKey | None = None,
    versions: Mapping[str, Any] | None = None,
    headline: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    check_results: list[dg.AssetCheckResult] | None = None,
    preview: bool = True,
):
    """A MaterializeResult carrying the frame and what the UI should show about it (no preview of restricted data).

    Batches are counted by the IO manager as it writes them, so their row count comes from it."""
    table = _table_name(asset_key)
    if isinstance(frame, FrameBatches):
        return dg.MaterializeResult(
            asset_key=asset_key,
            value=frame,
            check_results=check_results,
            metadata={
                "dagster/column_schema": table_schema(frame.schema, table),
                **_versions_and_headline(versions, headline),
                **(extra or {}),
            },
        )
    # every table outside the restricted area declares a blocking no_personal_data check (run_assets)
    check_results = privacy_result(asset_key, frame, check_results)
    metadata: dict[str, Any] = {
        "dagster/row_count": frame.height,
        "dagster/column_schema": table_schema(dict(frame.schema), table),
        **_versions_and_headline(versions, headline),
    }
    if preview:
        metadata["preview"] = dg.MetadataValue.md(markdown_preview(frame))
    metadata.update(extra or {})
    return dg.MaterializeResult(
        asset_key=asset_key,
        value=frame,
        metadata=metadata,
        data_version=dg.DataVersion(content_hash(frame)),
        check_results=check_results,
    )
