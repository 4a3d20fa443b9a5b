"""Tables whose inputs did not change are not computed again: what a re-score leaves as it was, it does not touch.

An asset tagged `REUSE_TAG` is a pure function of its input tables (no resource, no file, no other run). When a
fused step computes it, the step records beside each of its tables a fingerprint of what it read (every input's
schema and content hash, the code versions, the run), the content hash of the rows it wrote and the table's check
results. The next time the step reaches it with the same fingerprint, and the run's rows in the warehouse still hash
as the rows it wrote, the tables are materialized again as they are: same data version, same check results (marked
as reused), no compute and no write. Anything else (a changed input, a changed code version, a table deleted or
rewritten since, a check not recorded) computes it as before.

A qrels bump that changes no score is the case this is for: retrieval and context scores are computed again (their
`qrels_version` changes), and the stage results, attribution, reliability and slices that read only their scores
are reused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
import polars as pl

from eval_pipeline.defs.resources import Reused
from eval_pipeline.io.fingerprints import content_hash

__all__ = [
    "REUSE_METADATA_KEY",
    "REUSE_TAG",
    "as_written",
    "inputs_fingerprint",
    "last_record",
    "recorded",
    "replaced",
    "replayed",
]

# Op tag of an asset whose tables depend only on its input tables: "inputs".
REUSE_TAG = "eval_pipeline/reuse"
# Materialization metadata: the fingerprint of the inputs, the data version and the check results of the table.
REUSE_METADATA_KEY = "eval_pipeline/reuse"
_REUSED_FROM = "reused_from_run"


def replaced(event: dg.MaterializeResult, **changes: Any) -> dg.MaterializeResult:
    """A copy of a MaterializeResult with some of its fields changed."""
    fields = ("asset_key", "metadata", "check_results", "data_version", "tags", "value")
    return dg.MaterializeResult(**{name: getattr(event, name) for name in fields} | changes)


def inputs_fingerprint(
    name: str, code_versions: Iterable[str | None], partition: str, arguments: Mapping[str, Any]
) -> str | None:
    """A hash of what a member computes from: its name, code versions, run and every input frame's schema and
    content; None when an input is not a frame (read in batches)."""
    digest = hashlib.sha256(json.dumps([name, sorted(map(str, code_versions)), partition]).encode())
    for parameter in sorted(arguments):
        frame = arguments[parameter]
        if not isinstance(frame, pl.DataFrame):
            return None
        digest.update(json.dumps([parameter, [[c, str(t)] for c, t in frame.schema.items()]]).encode())
        digest.update(content_hash(frame).encode())
    return digest.hexdigest()[:32]


def _plain(value: Any) -> Any:
    """A check's metadata value as JSON can hold it (text for anything that is not a number, flag or text)."""
    raw = getattr(value, "value", value)
    return raw if isinstance(raw, bool | int | float | str) or raw is None else str(raw)


def recorded(event: dg.MaterializeResult, key: dg.AssetKey, fingerprint: str) -> dg.MaterializeResult:
    """The materialization of table `key` with the fingerprint of its inputs, the content hash of its rows, its data
    version and its check results in its metadata (what replayed() needs); as it was for a table not held as one
    frame."""
    if not isinstance(event.value, pl.DataFrame):
        return event
    checks = [
        {
            "check": result.check_name,
            "asset": dg.AssetKey.from_coercible(result.asset_key or key).to_user_string(),
            "passed": result.passed,
            "severity": result.severity.value,
            "description": result.description,
            "metadata": {name: _plain(value) for name, value in (result.metadata or {}).items()},
        }
        for result in event.check_results or []
    ]
    record = {
        "fingerprint": fingerprint,
        "rows_hash": content_hash(event.value),
        "columns": event.value.columns,
        "data_version": event.data_version.value if event.data_version else None,
        "checks": checks,
    }
    return replaced(event, metadata={**(event.metadata or {}), REUSE_METADATA_KEY: dg.MetadataValue.json(record)})


@dataclass(frozen=True)
class _Previous:
    """The latest materialization of a table in a run, as recorded()."""

    run_id: str
    metadata: Mapping[str, Any]
    data_version: str | None
    rows_hash: str
    checks: list[dict]
    columns: list[str]


def last_record(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str, metadata_key: str
) -> tuple[str, dict[str, Any], dict] | None:
    """(its run, its metadata, the JSON record under `metadata_key`) of the latest materialization of a table in a
    run; None when there is none or it holds no such record."""
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    ).records
    if not found:
        return None
    materialization = found[0].asset_materialization
    metadata = dict(materialization.metadata) if materialization is not None else {}
    record = getattr(metadata.get(metadata_key), "value", None)
    return (found[0].run_id, metadata, record) if isinstance(record, dict) else None


def as_written(frame: pl.DataFrame | None, columns: list[str], rows_hash: str) -> pl.DataFrame | None:
    """A stored frame's `columns`, when it has them and they hash as `rows_hash` (the rows a materialization wrote);
    None otherwise (the table was rewritten, or is gone)."""
    if frame is None or not set(columns) <= set(frame.columns):
        return None
    kept = frame.select(columns)
    return kept if content_hash(kept) == rows_hash else None


def _previous(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str, fingerprint: str) -> _Previous | None:
    found = last_record(instance, key, partition, REUSE_METADATA_KEY)
    if found is None:
        return None
    run_id, metadata, record = found
    if record.get("fingerprint") != fingerprint or not record.get("rows_hash"):
        return None
    return _Previous(
        run_id=run_id,
        metadata=metadata,
        data_version=record.get("data_version"),
        rows_hash=record["rows_hash"],
        checks=list(record.get("checks") or []),
        columns=list(record.get("columns") or []),
    )


def _check_result(check: dict, run_id: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        asset_key=dg.AssetKey.from_user_string(check["asset"]),
        check_name=check["check"],
        passed=bool(check["passed"]),
        severity=dg.AssetCheckSeverity(check["severity"]),
        description=f"{check['description'] or ''} (reused: its table and inputs are those of run {run_id})".lstrip(),
        metadata={**check["metadata"], _REUSED_FROM: dg.MetadataValue.dagster_run(run_id)},
    )


def replayed(
    context: dg.AssetExecutionContext,
    keys: Iterable[dg.AssetKey],
    checks: Mapping[dg.AssetKey, frozenset[str]],
    fingerprint: str,
    stored: Any,
) -> list[dg.MaterializeResult] | None:
    """The materializations of `keys` again, as they were, when each was last materialized in this run from inputs
    with `fingerprint`, with a result for each of its `checks`, and `stored(key)` (the run's rows now in the
    warehouse, None if there are none) still hashes as the rows it wrote; else None (compute them)."""
    events = []
    for key in sorted(keys, key=lambda k: k.to_user_string()):
        previous = _previous(context.instance, key, context.partition_key, fingerprint)
        if previous is None or not checks.get(key, frozenset()) <= {c["check"] for c in previous.checks}:
            return None
        if as_written(stored(key), previous.columns, previous.rows_hash) is None:
            return None
        events.append(
            dg.MaterializeResult(
                asset_key=key,
                value=Reused(previous.run_id),
                data_version=dg.DataVersion(previous.data_version) if previous.data_version else None,
                metadata={**previous.metadata, _REUSED_FROM: dg.MetadataValue.dagster_run(previous.run_id)},
                check_results=[_check_result(check, previous.run_id) for check in previous.checks],
            )
        )
    return events
