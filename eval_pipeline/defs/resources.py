"""Resources: where inputs and the warehouse live, the judge, and the Delta IO manager."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl

from eval_pipeline.contracts.models import GatePolicy, RunManifest
from eval_pipeline.io.loaders import load_gate_policy, load_manifest
from eval_pipeline.io.storage import Location, is_url, open_location
from eval_pipeline.io.warehouse import FrameBatches, TableBatches, Warehouse
from eval_pipeline.judge.base import JudgeConfigError
from eval_pipeline.judge.profile import JudgeProfile
from eval_pipeline.settings import ScoringSettings

RESTRICTED_METADATA_KEY = "eval_pipeline/restricted"
SKIP_COLUMNS_METADATA_KEY = "eval_pipeline/skip_columns"
BATCHES_METADATA_KEY = "eval_pipeline/batch_rows"
LANE_PREFIXES = ("rag", "agent")

# The large columns of deid_traces; a scorer that does not read one leaves it on disk.
TEXT_COLUMNS = ("context", "answer_text", "citations", "input")
RETRIEVAL_COLUMNS = ("retrieval",)
AGENT_COLUMNS = ("steps", "final_state_json")


def in_batches(key: str, rows: int = 100_000) -> dg.AssetIn:
    """An input read batch by batch (a TableBatches), for tables too large to hold at once."""
    return dg.AssetIn(key=key, metadata={BATCHES_METADATA_KEY: rows})


def traces_without(*groups: tuple[str, ...]) -> dg.AssetIn:
    """An input of deid_traces that skips the given column groups (they are not read from the warehouse)."""
    return dg.AssetIn(key="deid_traces", metadata={SKIP_COLUMNS_METADATA_KEY: [c for group in groups for c in group]})


def resolve_root(path: str) -> str:
    return path if is_url(path) else str(Path(path).resolve())


class EvalConfig(dg.ConfigurableResource):
    """Where the inputs, the warehouse and the reports live, and how to de-identify."""

    data_root: str = "data"
    warehouse_root: str = ""
    reports_root: str = ""
    deid_demo: bool = False

    def location(self) -> Location:
        return open_location(resolve_root(self.data_root))

    def warehouse(self) -> Warehouse:
        return Warehouse.at(resolve_root(self.warehouse_root or f"{self.data_root.rstrip('/')}/warehouse"))

    def reports(self) -> Location:
        return open_location(resolve_root(self.reports_root or f"{self.data_root.rstrip('/')}/reports"))

    def manifest(self, run_id: str) -> RunManifest:
        return load_manifest(self.location(), run_id)

    def policy(self) -> GatePolicy:
        return load_gate_policy(self.location())

    def judge_profile(self) -> JudgeProfile | None:
        """The judge profile named by the gate policy (`judge: {profile: PATH}` inside the data root), if any."""
        name = self.policy().judge.profile
        if not name:
            return None
        location = self.location()
        if not location.exists(name):
            raise JudgeConfigError(f"policy/gates.yaml names judge profile {name}, which is not in the data root")
        return JudgeProfile.from_yaml(location.read_bytes(name).decode("utf-8"), f"{self.data_root.rstrip('/')}/{name}")

    def settings(self, manifest: dict | None = None) -> ScoringSettings:
        """Scoring settings from the gate policy, with the run's `citations: required` applied."""
        overrides = {"citations_required": manifest is not None and manifest.get("citations") == "required"}
        return ScoringSettings.from_policy(self.policy(), **overrides)


def lane_key(lane: str, name: str) -> dg.AssetKey:
    """The key of a lane's asset: rag/rag_stage_results (distinct names in the UI graph), stored in table stage_results."""
    return dg.AssetKey([lane, f"{lane}_{name}"])


def table_of(asset_key: dg.AssetKey) -> tuple[str, dict[str, str]]:
    """The warehouse table of an asset and the lane it owns in it (rag/rag_stage_results → stage_results, lane=rag)."""
    path = asset_key.path
    if len(path) == 2 and path[0] in LANE_PREFIXES:
        return path[1].removeprefix(f"{path[0]}_"), {"lane": path[0]}
    return path[-1], {}


class DeltaWarehouseIOManager(dg.ConfigurableIOManager):
    """Stores each asset partition as the run's rows of a Delta table; restricted assets go to the restricted area."""

    warehouse_root: str

    def _warehouse(self) -> Warehouse:
        return Warehouse.at(resolve_root(self.warehouse_root))

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | FrameBatches) -> None:
        table, within = table_of(context.asset_key)
        restricted = bool((context.definition_metadata or {}).get(RESTRICTED_METADATA_KEY))
        if within and isinstance(obj, pl.DataFrame):
            obj = obj.with_columns(**{k: pl.lit(v) for k, v in within.items()})
        version = self._warehouse().write_partition(
            table, obj, context.partition_key, restricted=restricted, within=within or None
        )
        # Text, not a number: a table version is an identifier, and the UI would plot a number as a metric.
        metadata = {"delta_table": self._warehouse().uri(table, restricted), "delta_version": dg.MetadataValue.text(str(version))}
        if isinstance(obj, FrameBatches):
            metadata["dagster/row_count"] = obj.rows
        context.add_output_metadata(metadata)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | TableBatches:
        upstream = context.upstream_output
        table, within = table_of(context.asset_key)
        restricted = bool((upstream.definition_metadata or {}).get(RESTRICTED_METADATA_KEY)) if upstream else False
        warehouse = self._warehouse()
        batch_rows = (context.definition_metadata or {}).get(BATCHES_METADATA_KEY)
        if batch_rows:
            return TableBatches(warehouse, table, context.asset_partition_key, restricted, batch_rows=int(batch_rows))
        skip = set((context.definition_metadata or {}).get(SKIP_COLUMNS_METADATA_KEY, ()))
        columns = [c for c in warehouse.columns(table, restricted) if c not in skip] if skip else None
        frame = warehouse.read(table, context.asset_partition_key, restricted=restricted, within=within or None, columns=columns)
        if frame is None:
            raise dg.Failure(f"table {table} has not been materialized for run {context.asset_partition_key}")
        return frame
