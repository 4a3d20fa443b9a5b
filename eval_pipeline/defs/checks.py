"""Blocking ERROR checks attached to every table that feeds a report (the logic lives in eval_pipeline.quality)."""

import functools
from collections.abc import Callable

import dagster as dg
import polars as pl

from eval_pipeline.defs import deferred
from eval_pipeline.quality import contracts as quality
from eval_pipeline.quality import remote
from eval_pipeline.quality.contracts import COMPLETE, NO_PERSONAL_DATA, RANGES, SCHEMA, TableContract, Verdict

CHECK_DESCRIPTIONS = {
    SCHEMA: "Great Expectations: every contracted column exists.",
    RANGES: "Great Expectations: metrics in range, statuses from the allowed set, one row per key.",
    COMPLETE: "Every trace of the run in this lane has a row; incomplete rows give a reason.",
    NO_PERSONAL_DATA: "The de-identification detectors find no personal data in any string column.",
}


def _names(contract: TableContract) -> list[str]:
    names = [SCHEMA, RANGES]
    if contract.per_trace:
        names.append(COMPLETE)
    if contract.scan_personal_data:
        names.append(NO_PERSONAL_DATA)
    return names


def specs(asset: str | dg.AssetKey, contract: TableContract) -> list[dg.AssetCheckSpec]:
    """The blocking check specs of a table."""
    key = dg.AssetKey.from_coercible(asset)
    return [
        dg.AssetCheckSpec(name, asset=key, blocking=True, description=CHECK_DESCRIPTIONS[name])
        for name in _names(contract)
    ]


def _result(asset_key: dg.AssetKey, name: str, verdict: Verdict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        asset_key=asset_key,
        check_name=name,
        passed=verdict.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=verdict.description,
        metadata=verdict.metadata,
    )


def results(
    asset: str | dg.AssetKey, contract: TableContract, frame: pl.DataFrame, expected_traces: pl.DataFrame | None = None
) -> list[dg.AssetCheckResult]:
    """Evaluate every check of a table's contract; in a fused step with a validator process, the Great Expectations
    checks and the personal data scan are answered later (defs.deferred) and are not among the results returned."""
    key = dg.AssetKey.from_coercible(asset)
    table = key.path[-1]
    both = functools.cache(remote.schema_and_ranges_later(key.to_user_string(), contract, frame))
    answers: dict[str, Callable[[], Verdict]] = {SCHEMA: lambda: both()[0], RANGES: lambda: both()[1]}
    scan = None
    if contract.scan_personal_data:
        scan = functools.partial(quality.check_no_personal_data, table, frame, contract.independent_scan)
    later = deferred.current()
    if later is not None:
        for name in (SCHEMA, RANGES):
            later.add(key, name, functools.partial(_answered, key, name, answers.pop(name)))
        if scan is not None:
            later.add_running(key, NO_PERSONAL_DATA, functools.partial(_answered, key, NO_PERSONAL_DATA, scan))
            scan = None
    out = [_result(key, name, answer()) for name, answer in answers.items()]
    if contract.per_trace:
        out.append(_result(key, COMPLETE, quality.check_complete(frame, expected_traces)))
    if scan is not None:
        out.append(_result(key, NO_PERSONAL_DATA, scan()))
    return out


def _answered(key: dg.AssetKey, name: str, answer: Callable[[], Verdict]) -> dg.AssetCheckResult:
    return _result(key, name, answer())
