"""Resources: where inputs and the warehouse live, the judge, reads of other runs, and the Delta IO manager."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from eval_pipeline.contracts.models import GatePolicy, RunManifest
from eval_pipeline.deid import KEY_ENV_VAR
from eval_pipeline.io.loaders import load_gate_policy, load_manifest
from eval_pipeline.io.storage import Location, inside_root, is_url, open_location
from eval_pipeline.io.warehouse import FrameBatches, TableBatches, Warehouse
from eval_pipeline.judge import judge_options_from_env, make_judge
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


def corpus_families() -> dg.AssetIn:
    """An input of deid_corpus without its text: the doc ids and families decision slices read."""
    return dg.AssetIn(key="deid_corpus", metadata={SKIP_COLUMNS_METADATA_KEY: ["text"]})


def resolve_root(path: str) -> str:
    return path if is_url(path) else str(Path(path).resolve())


class EvalConfig(dg.ConfigurableResource):
    """Where the inputs, the warehouse and the reports live, and how to de-identify."""

    data_root: str = "data"
    warehouse_root: str = ""
    reports_root: str = ""
    deid_demo: bool = False
    # The HMAC key of pseudonyms: bound to EVAL_PIPELINE_DEID_KEY as a Dagster EnvVar, so no run config holds it.
    deid_key: str = ""

    @classmethod
    def from_environment(cls) -> EvalConfig:
        """The configuration the EVAL_PIPELINE_* variables describe (DATA, WAREHOUSE, REPORTS, DEID_DEMO, DEID_KEY)."""
        demo = (dg.EnvVar("EVAL_PIPELINE_DEID_DEMO").get_value("") or "").lower() in {"1", "true", "yes"}
        return cls(
            data_root=dg.EnvVar("EVAL_PIPELINE_DATA").get_value("data") or "data",
            warehouse_root=dg.EnvVar("EVAL_PIPELINE_WAREHOUSE").get_value("") or "",
            reports_root=dg.EnvVar("EVAL_PIPELINE_REPORTS").get_value("") or "",
            deid_demo=demo,
            deid_key=deid_key_from_environment(),
        )

    def deid_key_source(self) -> dict[str, str]:
        """The key as resolve_key reads it: the bound key, else EVAL_PIPELINE_DEID_KEY where the step runs (a step pod
        or worker may hold the secret that the process which built the definitions lacks); empty when neither is set."""
        key = self.deid_key or dg.EnvVar(KEY_ENV_VAR).get_value()
        return {KEY_ENV_VAR: key} if key else {}

    def run_config(self) -> dict[str, Any]:
        """This configuration as run config of the `eval_config` resource. A key bound as an EnvVar travels as the
        reference to its variable; a key value never enters a run record (unbound, each step reads the variable)."""
        config: dict[str, Any] = {
            "data_root": self.data_root,
            "warehouse_root": self.warehouse().root,
            "reports_root": self.reports().uri,
            "deid_demo": self.deid_demo,
        }
        if isinstance(self.deid_key, dg.EnvVar):
            config["deid_key"] = {"env": self.deid_key.env_var_name}
        return config

    def location(self) -> Location:
        return open_location(resolve_root(self.data_root))

    def warehouse(self) -> Warehouse:
        return Warehouse.at(resolve_root(self.warehouse_root) if self.warehouse_root else self._under_data("warehouse"))

    def reports(self) -> Location:
        return open_location(resolve_root(self.reports_root) if self.reports_root else self._under_data("reports"))

    def _under_data(self, name: str) -> str:
        """A folder of the data root: its real path, which a link may not take out of the root (OutsideRootError)."""
        if is_url(self.data_root):
            return f"{self.data_root.rstrip('/')}/{name}"
        return inside_root(self.data_root, name)

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

    def other_runs(self, context: dg.AssetExecutionContext, own_tables: tuple[str, ...] = ()) -> OtherRuns:
        """Reads of other runs' rows (baseline, sibling runs) of the tables this asset takes as inputs, and of
        `own_tables` it writes (earlier runs' verdicts)."""
        declared = {table_of(key)[0] for key in context.assets_def.dependency_keys}
        return OtherRuns(self.warehouse(), context.partition_key, frozenset(declared | set(own_tables)))


def deid_key_from_environment() -> str:
    """EVAL_PIPELINE_DEID_KEY as a Dagster EnvVar when it is set, else no key."""
    return dg.EnvVar(KEY_ENV_VAR) if dg.EnvVar(KEY_ENV_VAR).get_value() else ""


@dataclass
class OtherRuns:
    """The warehouse as an asset may read it for runs other than its own: only tables it declares as inputs (or
    writes), and each read of another run is listed in `reads`, which the materialization records."""

    warehouse: Warehouse
    own_run: str
    declared: frozenset[str]
    reads: list[str] = field(default_factory=list)

    def _declared(self, table: str, run_id: str | None) -> None:
        if table not in self.declared:
            raise dg.DagsterInvariantViolationError(
                f"reads table {table} of other runs without declaring it as an input (declared: {', '.join(sorted(self.declared))})"
            )
        if run_id != self.own_run:
            read = f"{table}[{run_id or 'all runs'}]"
            if read not in self.reads:
                self.reads.append(read)

    def read(self, table: str, run_id: str | None = None, **options) -> pl.DataFrame | None:
        self._declared(table, run_id)
        return self.warehouse.read(table, run_id, **options)

    def scan(self, table: str) -> pl.LazyFrame | None:
        self._declared(table, None)
        return self.warehouse.scan(table)

    def runs(self, table: str) -> list[str]:
        self._declared(table, self.own_run)
        return self.warehouse.runs(table)

    @property
    def root(self) -> str:
        return self.warehouse.root

    def exists(self, table: str) -> bool:
        return self.warehouse.exists(table)

    def columns(self, table: str, restricted: bool = False) -> list[str]:
        return self.warehouse.columns(table, restricted)

    def metadata(self) -> dict[str, dg.MetadataValue]:
        """`other_runs_read`: the other runs' tables this materialization read, for the UI."""
        return {"other_runs_read": dg.MetadataValue.text(", ".join(self.reads) or "no other run")}


class JudgeConfig(dg.ConfigurableResource):
    """Which judge grades claims: the offline local judge (default), an NLI model in a local folder, or any
    OpenAI-compatible server; `profile` overrides the gate policy's judge profile."""

    backend: str = "local"
    profile: str = ""
    model_dir: str = ""
    model: str = ""
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    prompt_version: str = ""
    concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 60.0
    cache_path: str = ""
    price_input_per_1k: float = 0.0
    price_output_per_1k: float = 0.0
    seed: int = 0
    batch: bool = False
    reuse_verdicts: bool = True
    self_consistency_sample: int = 50

    def make(self, data_root: str = "data", policy_profile: JudgeProfile | None = None):
        """The judge; the OpenAI backend caches verdicts under DATA/.judge_cache unless cache_path says otherwise."""
        profile = self.profile or policy_profile
        if self.backend == "local":
            return make_judge("local", profile=profile)
        if self.backend == "model":
            return make_judge("model", profile=profile, model_dir=self.model_dir)
        skip = ("backend", "reuse_verdicts", "profile", "model_dir", "self_consistency_sample")
        options = {k: v for k, v in self.model_dump().items() if k not in skip and v not in ("", None)}
        if "cache_path" not in options:
            # under the data root's real path: a `.judge_cache` link out of the root is refused like any other
            options["cache_path"] = (
                f"{data_root.rstrip('/')}/.judge_cache/verdicts.sqlite"
                if is_url(data_root)
                else inside_root(data_root, ".judge_cache", "verdicts.sqlite")
            )
        return make_judge(self.backend, **options)

    def run_config(self) -> dict[str, Any]:
        """This configuration as run config of the `judge` resource."""
        return self.model_dump()


def judge_config_from_env(environ=None) -> JudgeConfig:
    """JudgeConfig from the EVAL_PIPELINE_JUDGE_* variables (backend, profile, model folder, model, base URL, cache)."""
    backend, profile, options = judge_options_from_env(environ)
    fields = {k: v for k, v in options.items() if k in JudgeConfig.model_fields and v is not None}
    return JudgeConfig(backend=backend, profile=profile or "", **fields)


def make_run_judge(judge: JudgeConfig, eval_config: EvalConfig):
    """The judge of a run: the resource's backend with the profile it or the gate policy names."""
    return judge.make(eval_config.data_root, eval_config.judge_profile())


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
        metadata = {
            "delta_table": self._warehouse().uri(table, restricted),
            "delta_version": dg.MetadataValue.text(str(version)),
        }
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
        frame = warehouse.read(
            table, context.asset_partition_key, restricted=restricted, within=within or None, columns=columns
        )
        if frame is None:
            raise dg.Failure(f"table {table} has not been materialized for run {context.asset_partition_key}")
        return frame
