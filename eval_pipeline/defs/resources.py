"""Resources: where inputs and the warehouse live, the judge, reads of other runs, and the Delta IO manager."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.contracts.traces import RunManifest
from eval_pipeline.deid import KEY_ENV_VAR
from eval_pipeline.io.loaders import load_manifest
from eval_pipeline.io.policy import load_gate_policy
from eval_pipeline.io.storage import (
    STORAGE_ENV_VARS,
    Location,
    inside_root,
    is_url,
    open_location,
    storage_options_from_env,
)
from eval_pipeline.io.warehouse import LINE_ORDER, FrameBatches, TableBatches, Warehouse
from eval_pipeline.judge import ENV_VARS as JUDGE_ENV_VARS
from eval_pipeline.judge import JudgeSettings, make_judge
from eval_pipeline.judge.base import JudgeConfigError
from eval_pipeline.judge.profile import JudgeProfile
from eval_pipeline.settings import ScoringSettings

RESTRICTED_METADATA_KEY = "eval_pipeline/restricted"
SKIP_COLUMNS_METADATA_KEY = "eval_pipeline/skip_columns"
# The columns an input reads, those of them a table has (the columns that order a table of input lines come along)
ONLY_COLUMNS_METADATA_KEY = "eval_pipeline/only_columns"
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


def environment(names: Iterable[str]) -> dict[str, str]:
    """The variables among `names` that are set and not empty, read through Dagster's EnvVar in this process (a step
    process reads its own: a step pod or worker may hold what the process that built the definitions lacks)."""
    return {name: value for name in names if (value := dg.EnvVar(name).get_value())}


def object_store_options() -> dict[str, str]:
    """Object-store credentials of a warehouse URL, from the standard AWS variables where this process runs."""
    return storage_options_from_env(environment(STORAGE_ENV_VARS))


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
        root = resolve_root(self.warehouse_root) if self.warehouse_root else self._under_data("warehouse")
        return Warehouse.at(root, object_store_options())

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
        upstream = MEMBER_UPSTREAM.get()
        keys = context.assets_def.dependency_keys if upstream is None else upstream
        declared = {table_of(key)[0] for key in keys}
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
                f"reads table {table} of other runs without declaring it as an input "
                f"(declared: {', '.join(sorted(self.declared))})"
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


JUDGE_DEFAULTS = JudgeSettings()


class JudgeConfig(dg.ConfigurableResource):
    """Which judge grades claims: JudgeSettings (judge/settings.py) as Dagster config, under the same names and with
    the same defaults, "" standing for a default that is none or not fixed here; `profile` overrides the gate
    policy's judge profile."""

    backend: str = JUDGE_DEFAULTS.backend
    profile: str = ""
    model_dir: str = JUDGE_DEFAULTS.model_dir
    model: str = JUDGE_DEFAULTS.model
    base_url: str = ""
    api_key_env: str = JUDGE_DEFAULTS.api_key_env
    prompt_version: str = ""
    concurrency: int = JUDGE_DEFAULTS.concurrency
    max_retries: int = JUDGE_DEFAULTS.max_retries
    timeout_s: float = JUDGE_DEFAULTS.timeout_s
    cache_path: str = ""
    price_input_per_1k: float = JUDGE_DEFAULTS.price_input_per_1k
    price_output_per_1k: float = JUDGE_DEFAULTS.price_output_per_1k
    seed: int = JUDGE_DEFAULTS.seed
    batch: bool = JUDGE_DEFAULTS.batch
    reuse_verdicts: bool = JUDGE_DEFAULTS.reuse_verdicts
    self_consistency_sample: int = JUDGE_DEFAULTS.self_consistency_sample

    @classmethod
    def from_settings(cls, settings: JudgeSettings) -> JudgeConfig:
        """The resource of `settings`: each setting that differs from JudgeSettings' default, the others left at the
        resource's defaults (so run config says "" where it always did)."""
        changed = {
            name: getattr(settings, name)
            for name in cls.model_fields
            if getattr(settings, name) != getattr(JUDGE_DEFAULTS, name)
        }
        return cls(**{name: "" if value is None else value for name, value in changed.items()})

    def settings(self) -> JudgeSettings:
        """These settings as JudgeSettings: "" (and None) is the default."""
        return JudgeSettings(**{k: v for k, v in self.model_dump().items() if v not in ("", None)})

    def make(self, data_root: str = "data", policy_profile: JudgeProfile | None = None):
        """The judge; the OpenAI backend caches verdicts under DATA/.judge_cache unless cache_path says otherwise, and
        gets its API key from the variable api_key_env names, read where the judge is made (a step pod or worker)."""
        settings = self.settings()
        if settings.backend in ("local", "model"):
            return make_judge(
                settings.backend, profile=settings.profile or policy_profile, **settings.backend_options()
            )
        options = settings.backend_options()
        if options.get("cache_path") is None:
            # under the data root's real path: a `.judge_cache` link out of the root is refused like any other
            options["cache_path"] = (
                f"{data_root.rstrip('/')}/.judge_cache/verdicts.sqlite"
                if is_url(data_root)
                else inside_root(data_root, ".judge_cache", "verdicts.sqlite")
            )
        return make_judge(settings.backend, api_key=dg.EnvVar(settings.api_key_env).get_value(), **options)

    def run_config(self) -> dict[str, Any]:
        """This configuration as run config of the `judge` resource (the API key's variable name, never its value)."""
        return self.model_dump()


def judge_config_from_env(environ: Mapping[str, str] | None = None) -> JudgeConfig:
    """JudgeConfig from the EVAL_PIPELINE_JUDGE_* variables (JudgeSettings.from_env) of `environ`, by default read
    through Dagster's EnvVar in this process."""
    return JudgeConfig.from_settings(
        JudgeSettings.from_env(environment(JUDGE_ENV_VARS) if environ is None else environ)
    )


def make_run_judge(judge: JudgeConfig, eval_config: EvalConfig):
    """The judge of a run: the resource's backend with the profile it or the gate policy names."""
    return judge.make(eval_config.data_root, eval_config.judge_profile())


def lane_key(lane: str, name: str) -> dg.AssetKey:
    """The key of a lane's asset: rag/rag_stage_results (distinct names in the UI graph), stored in table
    stage_results."""
    return dg.AssetKey([lane, f"{lane}_{name}"])


def table_of(asset_key: dg.AssetKey) -> tuple[str, dict[str, str]]:
    """The warehouse table of an asset and the lane it owns in it (rag/rag_stage_results → stage_results, lane=rag)."""
    path = asset_key.path
    if len(path) == 2 and path[0] in LANE_PREFIXES:
        return path[1].removeprefix(f"{path[0]}_"), {"lane": path[0]}
    return path[-1], {}


# The tables the asset definition a fused step is computing reads (defs.fused sets it): there the context's asset
# definition is the whole step's, and a report compares what its own definition reads, not what the step's others do.
MEMBER_UPSTREAM: ContextVar[frozenset[dg.AssetKey] | None] = ContextVar("eval_pipeline_member_upstream", default=None)


@dataclass(frozen=True)
class Reused:
    """A table left as run `run_id` materialized it: its inputs did not change (defs.reuse); nothing is written."""

    run_id: str


@dataclass(frozen=True)
class Written:
    """A table a fused step's concurrent chain has already written (defs.fused): the output metadata of that write."""

    metadata: Mapping[str, Any]


class DeltaWarehouseIOManager(dg.ConfigurableIOManager):
    """Stores each asset partition as the run's rows of a Delta table; restricted assets go to the restricted area."""

    warehouse_root: str

    def _warehouse(self) -> Warehouse:
        return Warehouse.at(resolve_root(self.warehouse_root), object_store_options())

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | FrameBatches | Reused | Written) -> None:
        if isinstance(obj, Reused):
            return
        if isinstance(obj, Written):
            context.add_output_metadata(dict(obj.metadata))
            return
        restricted = bool((context.definition_metadata or {}).get(RESTRICTED_METADATA_KEY))
        context.add_output_metadata(self.write(context.asset_key, context.partition_key, obj, restricted=restricted))

    def write(
        self, asset_key: dg.AssetKey, run_id: str, obj: pl.DataFrame | FrameBatches, *, restricted: bool
    ) -> dict[str, Any]:
        """Write one run's rows of an asset's table; the output metadata of the write."""
        table, within = table_of(asset_key)
        if within and isinstance(obj, pl.DataFrame):
            obj = obj.with_columns(**{k: pl.lit(v) for k, v in within.items()})
        version = self._warehouse().write_partition(table, obj, run_id, restricted=restricted, within=within or None)
        # Text, not a number: a table version is an identifier, and the UI would plot a number as a metric.
        metadata: dict[str, Any] = {
            "delta_table": self._warehouse().uri(table, restricted),
            "delta_version": dg.MetadataValue.text(str(version)),
        }
        if isinstance(obj, FrameBatches):
            metadata["dagster/row_count"] = obj.rows
        return metadata

    def rows(self, asset_key: dg.AssetKey, run_id: str, *, restricted: bool) -> int | None:
        """One run's row count of an asset's table from its file statistics; None where it is not known."""
        table, within = table_of(asset_key)
        return None if within else self._warehouse().rows(table, run_id, restricted)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | TableBatches:
        upstream = context.upstream_output
        restricted = bool((upstream.definition_metadata or {}).get(RESTRICTED_METADATA_KEY)) if upstream else False
        return self.load(
            context.asset_key, context.asset_partition_key, restricted=restricted, metadata=context.definition_metadata
        )

    def load(
        self, asset_key: dg.AssetKey, run_id: str, *, restricted: bool, metadata: Mapping[str, Any] | None = None
    ) -> pl.DataFrame | TableBatches:
        """One run's rows of an asset's table, read as an input with `metadata` (batches, skipped columns) would be."""
        table, within = table_of(asset_key)
        warehouse = self._warehouse()
        batch_rows = (metadata or {}).get(BATCHES_METADATA_KEY)
        if batch_rows:
            return TableBatches(warehouse, table, run_id, restricted, batch_rows=int(batch_rows))
        skip = set((metadata or {}).get(SKIP_COLUMNS_METADATA_KEY, ()))
        only = (metadata or {}).get(ONLY_COLUMNS_METADATA_KEY)
        columns = None
        if skip or only is not None:
            names = warehouse.columns(table, restricted)
            # a table of input lines keeps the columns of its order, whatever the input names
            order = next((key for key in LINE_ORDER if set(key) <= set(names)), ())
            columns = [c for c in names if c not in skip and (only is None or c in only or c in order)]
        frame = warehouse.read(table, run_id, restricted=restricted, within=within or None, columns=columns)
        if frame is None:
            raise dg.Failure(f"table {table} has not been materialized for run {run_id}")
        return frame
