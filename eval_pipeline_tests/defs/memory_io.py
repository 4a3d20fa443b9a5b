"""A warehouse IO manager over a dict, for fused steps built from toy assets: what was written, what was read."""

import dagster as dg
import polars as pl

from eval_pipeline.defs.resources import SKIP_COLUMNS_METADATA_KEY, Reused, Written

TABLES: dict[dg.AssetKey, pl.DataFrame] = {}
# (table, run, skipped columns) of each read through `load`, and the tables written, in order
READS: list[tuple] = []
WRITES: list[str] = []


class MemoryIO(dg.ConfigurableIOManager):
    """Tables in TABLES, as the warehouse IO manager keeps them: a reused table is not written, a missing one fails."""

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        if isinstance(obj, Reused):
            return
        if isinstance(obj, Written):  # a concurrent chain wrote it (defs.fused): its write's metadata, as the real one
            context.add_output_metadata(dict(obj.metadata))
            return
        context.add_output_metadata(self.write(context.asset_key, context.partition_key, obj, restricted=False))

    def write(self, asset_key, run_id, obj, *, restricted) -> dict:
        WRITES.append(asset_key.to_user_string())
        TABLES[asset_key] = obj
        return {"rows_written": obj.height}

    def rows(self, asset_key, run_id, *, restricted):
        return TABLES[asset_key].height if asset_key in TABLES else None

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        return TABLES[context.asset_key]

    def load(self, asset_key, run_id, *, restricted, metadata=None):
        skip = sorted((metadata or {}).get(SKIP_COLUMNS_METADATA_KEY, []))
        READS.append((asset_key.to_user_string(), run_id, skip))
        if asset_key not in TABLES:
            raise dg.Failure(f"table {asset_key.to_user_string()} has not been materialized for run {run_id}")
        frame = TABLES[asset_key]
        return frame.select([c for c in frame.columns if c not in skip])


def forget() -> None:
    """Empty TABLES, READS and WRITES."""
    TABLES.clear()
    READS.clear()
    WRITES.clear()
