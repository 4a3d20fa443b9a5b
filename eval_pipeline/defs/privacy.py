"""What every domain shares to keep personal data out of what it writes.

The run's key, the id pseudonyms, the blocking no_personal_data check of every table that is not restricted, and the
privacy check of report files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks, deferred
from eval_pipeline.defs.fused import materializing_key
from eval_pipeline.defs.resources import RESTRICTED_METADATA_KEY, EvalConfig, table_of
from eval_pipeline.deid import Deidentifier, DeidKeyError, resolve_key
from eval_pipeline.deid.inputs import id_deidentifier
from eval_pipeline.quality import contracts as quality
from eval_pipeline.quality.contracts import NO_PERSONAL_DATA
from eval_pipeline.reporting.publish import ReportFile, publish

REPORT_PRIVACY_CHECK = "report_has_no_personal_data"


def run_key(eval_config: EvalConfig) -> bytes:
    """The run's HMAC key; a Failure naming what to set when there is none."""
    try:
        return resolve_key(eval_config.deid_key_source(), demo=eval_config.deid_demo)
    except DeidKeyError as exc:
        raise dg.Failure(description=str(exc)) from exc


def ids_deidentifier(eval_config: EvalConfig, locale: str | None) -> Callable[[], Deidentifier]:
    """The run's id Deidentifier (deid.inputs.id_deidentifier), made on first use: the key is resolved only when
    some value holds personal data."""
    made: list[Deidentifier] = []

    def get() -> Deidentifier:
        if not made:
            made.append(id_deidentifier(run_key(eval_config), locale))
        return made[0]

    return get


def privacy_spec(key: dg.AssetKey) -> dg.AssetCheckSpec:
    """The blocking no_personal_data check of one table."""
    return dg.AssetCheckSpec(
        NO_PERSONAL_DATA, asset=key, blocking=True, description=checks.CHECK_DESCRIPTIONS[NO_PERSONAL_DATA]
    )


def with_privacy_checks(build: Callable[[dict], Callable], options: dict) -> Callable:
    """A decorator building the asset with `build(options)`, plus a blocking no_personal_data check on each table it
    writes outside the restricted area that has none yet (materialized() then evaluates it)."""

    def decorate(fn: Callable) -> dg.AssetsDefinition:
        assets_def = build(options)(fn)
        missing = [
            key
            for key in assets_def.keys
            if not restricted(assets_def.metadata_by_key.get(key))
            and dg.AssetCheckKey(key, NO_PERSONAL_DATA) not in assets_def.check_keys
        ]
        if not missing:
            return assets_def
        specs = [*options.get("check_specs", []), *map(privacy_spec, missing)]
        return build({**options, "check_specs": specs})(fn)

    return decorate


def _checked(key: dg.AssetKey | None, verdict: quality.Verdict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=NO_PERSONAL_DATA,
        passed=verdict.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=verdict.description,
        metadata=verdict.metadata,
    )


def privacy_result(
    asset_key: str | dg.AssetKey | None, frame: pl.DataFrame, check_results: Sequence[dg.AssetCheckResult] | None
) -> list[dg.AssetCheckResult] | None:
    """The check results with the table's no_personal_data result added when the asset declares that check, it is
    selected and the caller did not evaluate it already."""
    given = list(check_results or [])
    try:
        context = dg.AssetExecutionContext.get()
    except dg.DagsterError:
        # Invoked directly (a test calling the asset function): a single-table asset built by run_table declares
        # the check unless restricted, and the restricted ones write batches, which never come here.
        if asset_key is None and not any(r.check_name == NO_PERSONAL_DATA for r in given):
            return [*given, _checked(None, quality.check_no_personal_data("table", frame))]
        return given if check_results is not None else None
    key = dg.AssetKey.from_coercible(asset_key) if asset_key is not None else materializing_key(context)
    check_key = dg.AssetCheckKey(key, NO_PERSONAL_DATA)
    later = deferred.current()
    if (
        check_key not in context.selected_asset_check_keys
        or any(r.check_name == NO_PERSONAL_DATA and (r.asset_key is None or r.asset_key == key) for r in given)
        or (later is not None and later.has(key, NO_PERSONAL_DATA))  # checks.results deferred it
    ):
        return given if check_results is not None else None

    def check() -> dg.AssetCheckResult:
        return _checked(key, quality.check_no_personal_data(table_of(key)[0], frame))

    if later is not None:  # answered before any member reads the table (defs.deferred)
        later.add_running(key, NO_PERSONAL_DATA, check)
        return given if check_results is not None else None
    return [*given, check()]


def report_spec(key: str | dg.AssetKey, what: str = "the report text") -> dg.AssetCheckSpec:
    """The blocking privacy check of a report asset's files."""
    return dg.AssetCheckSpec(REPORT_PRIVACY_CHECK, asset=key, blocking=True, description=f"No personal data in {what}.")


def published(key: str | dg.AssetKey, location, files: Sequence[ReportFile]) -> tuple[dg.AssetCheckResult, bool]:
    """Write report files through reporting.publish (temporary names, moved into place only when no personal data
    is found, nothing left otherwise): the privacy check's result, and whether they were written."""
    verdict = publish(location, files, dg.AssetKey.from_coercible(key).path[-1])
    return dg.AssetCheckResult(
        asset_key=dg.AssetKey.from_coercible(key),
        check_name=REPORT_PRIVACY_CHECK,
        passed=verdict.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=verdict.description,
        metadata=verdict.metadata,
    ), verdict.passed


def restricted(metadata: Mapping | None) -> bool:
    """Whether an asset's metadata marks it as kept in the restricted area."""
    return bool((metadata or {}).get(RESTRICTED_METADATA_KEY))
