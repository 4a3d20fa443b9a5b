"""Output-table contracts and their validation: Great Expectations suites, completeness and residual personal data."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from eval_pipeline.scoring.common import ROW_STATUSES, STAGE_STATUSES

SCHEMA, RANGES, COMPLETE, NO_PERSONAL_DATA = "schema", "value_ranges", "complete", "no_personal_data"


@dataclass(frozen=True)
class TableContract:
    """What a table must satisfy before anything downstream may read it."""

    columns: tuple[str, ...]
    unit_interval: tuple[str, ...] = ()
    non_negative: tuple[str, ...] = ()
    value_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unique: tuple[str, ...] = ()
    per_trace: bool = True
    scan_personal_data: bool = True
    # the second, independent residual scan: on de-identified inputs, where all personal data enters, and reports
    independent_scan: bool = False


def lane_table(
    *columns: str,
    stages: tuple[str, ...] = (),
    unit_interval: tuple[str, ...] = (),
    non_negative: tuple[str, ...] = (),
    value_sets: Mapping[str, tuple[str, ...]] | None = None,
) -> TableContract:
    """The contract of a per-trace lane table: keys, row status, stage columns and the given metric columns."""
    stage_columns = tuple(c for s in stages for c in (f"{s}_stage", f"{s}_reason"))
    sets = {"status": ROW_STATUSES, **{f"{s}_stage": STAGE_STATUSES for s in stages}, **(value_sets or {})}
    return TableContract(
        columns=("run_id", "trace_id", "case_id", "attempt", "status", "reason", *stage_columns, *columns),
        unit_interval=unit_interval,
        non_negative=non_negative,
        value_sets=sets,
        unique=("trace_id",),
    )


# Great Expectations' context, suites and its one batch definition are shared by every thread of the process (a fused
# step's concurrent chains validate at the same time where no validator process runs): built and used under this lock.
_GE_LOCK = threading.RLock()
# What a passing check's `failures` metadata says (words, not a placeholder: the UI shows it as is).
NO_FAILURE = "no failed expectation"


def prepare() -> None:
    """Import Great Expectations and build its context now (a validator process, before its first request)."""
    _ge_context()


_GE_CONTEXT: list = []


def _ge_context():
    """(great_expectations module, batch definition), built once per process."""
    with _GE_LOCK:
        if not _GE_CONTEXT:
            _GE_CONTEXT.append(_new_ge_context())
        return _GE_CONTEXT[0]


def _new_ge_context():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch = (
        context.data_sources.add_pandas("eval_pipeline")
        .add_dataframe_asset("table")
        .add_batch_definition_whole_dataframe("whole")
    )
    return gx, batch


_SUITES: dict[tuple, tuple] = {}


def _suites(name: str, contract: TableContract, present: set[str]):
    """The schema suite and the value-range suite of a contract (ranges only over present columns), built once per
    process for each table and set of columns."""
    key = (
        name,
        contract.columns,
        contract.unit_interval,
        contract.non_negative,
        tuple(contract.value_sets.items()),
        contract.unique,
        frozenset(present),
    )
    with _GE_LOCK:
        if key not in _SUITES:
            _SUITES[key] = _new_suites(name, contract, present)
        return _SUITES[key]


def _new_suites(name: str, contract: TableContract, present: set[str]):
    gx, _ = _ge_context()
    schema = gx.ExpectationSuite(name=f"{name}.{SCHEMA}")
    for column in contract.columns:
        schema.add_expectation(gx.expectations.ExpectColumnToExist(column=column))
    ranges = gx.ExpectationSuite(name=f"{name}.{RANGES}")
    for column in contract.unit_interval:
        if column in present:
            ranges.add_expectation(
                gx.expectations.ExpectColumnValuesToBeBetween(column=column, min_value=0.0, max_value=1.0)
            )
    for column in contract.non_negative:
        if column in present:
            ranges.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column=column, min_value=0))
    for column, values in contract.value_sets.items():
        if column in present:
            ranges.add_expectation(gx.expectations.ExpectColumnValuesToBeInSet(column=column, value_set=list(values)))
    for column in contract.unique:
        if column in present:
            ranges.add_expectation(gx.expectations.ExpectColumnValuesToBeUnique(column=column))
    return schema, ranges


def _ge_columns(contract: TableContract, present: set[str]) -> list[str]:
    wanted = [*contract.unit_interval, *contract.non_negative, *contract.value_sets, *contract.unique]
    return [c for c in dict.fromkeys(wanted) if c in present]


@dataclass
class Verdict:
    """One check's outcome: passed, a one-line description and metadata for the UI."""

    passed: bool
    description: str
    metadata: dict


def _run_suite(suite, frame: pl.DataFrame, result_format: str = "BASIC") -> Verdict:
    # BASIC still gives each failure's count and first values; SUMMARY's value counts double the time
    _, batch = _ge_context()
    data = frame.to_pandas()
    with _GE_LOCK:  # one batch definition serves every validation: two threads at once would swap their frames
        result = batch.get_batch(batch_parameters={"dataframe": data}).validate(suite, result_format=result_format)
    failed = []
    for item in result.results:
        if not item.success:
            config = item.expectation_config
            column = config.kwargs.get("column")
            count = (item.result or {}).get("unexpected_count")
            sample = (item.result or {}).get("partial_unexpected_list", [])[:5]
            failed.append(f"{config.type}({column}): {count if count is not None else 'failed'} unexpected {sample}")
    stats = result.statistics
    return Verdict(
        passed=bool(result.success),
        description=f"{stats['successful_expectations']}/{stats['evaluated_expectations']} expectations met",
        metadata={
            "suite": suite.name,
            "expectations": stats["evaluated_expectations"],
            "unsuccessful": stats["unsuccessful_expectations"],
            "failures": "\n".join(failed) or NO_FAILURE,
        },
    )


def check_schema_and_ranges(name: str, contract: TableContract, frame: pl.DataFrame) -> tuple[Verdict, Verdict]:
    """Great Expectations validation of the table's columns, value ranges, allowed values and keys.

    A table is first validated with the compact suites (one expectation per kind of check over the stacked columns,
    the same conditions as the per-column suites); only a table that fails them is validated column by column, for
    the messages. Great Expectations spends about 30 ms on each expectation whatever the table's size, so the
    per-column suites of a run's tables would cost seconds on every run. In this process; quality.remote sends it
    to the validator process when one runs."""
    return validated(*schema_and_ranges_request(name, contract, frame))


def schema_and_ranges_request(name: str, contract: TableContract, frame: pl.DataFrame) -> tuple:
    """The arguments of validated() for a table: its name, contract, columns (no rows) and checked columns."""
    return name, contract, frame.head(0), frame.select(_ge_columns(contract, set(frame.columns)))


def validated(
    name: str, contract: TableContract, empty: pl.DataFrame, checked: pl.DataFrame
) -> tuple[Verdict, Verdict]:
    """check_schema_and_ranges of a table given as its columns (`empty`, no rows) and the values of its checked
    columns (`checked`)."""
    present = set(empty.columns)
    schema, ranges = _suites(name, contract, present)
    compact_schema, compact_ranges = _compact_suites(name, contract, present)
    schema_frame = empty.select(sorted(present)) if empty.width else pl.DataFrame()
    if _passes(compact_schema, schema_frame):
        schema_verdict = _all_met(schema)
    else:
        # a column's existence has no counts to report
        schema_verdict = _run_suite(schema, schema_frame, result_format="BOOLEAN_ONLY")
    columns = _ge_columns(contract, present)
    if not columns or not len(ranges.expectations):
        return schema_verdict, Verdict(True, "no range expectation applies", {"suite": ranges.name, "expectations": 0})
    stacked = _stacked(contract, checked, present) if compact_ranges is not None else None
    if stacked is not None and _passes(compact_ranges, stacked):
        return schema_verdict, _with_not_a_number(_all_met(ranges), contract, checked)
    return schema_verdict, _with_not_a_number(_run_suite(ranges, checked.select(columns)), contract, checked)


def _all_met(suite) -> Verdict:
    n = len(suite.expectations)
    return Verdict(
        True,
        f"{n}/{n} expectations met",
        {"suite": suite.name, "expectations": n, "unsuccessful": 0, "failures": NO_FAILURE},
    )


def _passes(suite, frame: pl.DataFrame) -> bool:
    _, batch = _ge_context()
    data = frame.to_pandas()
    with _GE_LOCK:  # as in _run_suite
        return bool(
            batch.get_batch(batch_parameters={"dataframe": data}).validate(suite, result_format="BOOLEAN_ONLY").success
        )


# Column name and value in one text for the stacked set check: no column name holds this control character.
_MEMBER_SEPARATOR = "\x1f"


def _stackable(contract: TableContract, schema: Mapping[str, pl.DataType]) -> bool:
    """Whether every checked column has a type the stacked suite checks exactly as the per-column suite does."""
    bounded = [*contract.unit_interval, *contract.non_negative]
    return (
        all(schema[c].is_numeric() for c in bounded if c in schema)
        and all(schema[c] in (pl.String, pl.Categorical) for c in contract.value_sets if c in schema)
        and all(schema[c].is_numeric() or schema[c] in (pl.String, pl.Boolean) for c in contract.unique if c in schema)
    )


def _compact_suites(name: str, contract: TableContract, present: set[str]):
    """The compact schema suite (every contracted column present) and range suite (None when a column's type does
    not allow stacking, or nothing applies), cached as the per-column suites are."""
    key = (
        "compact",
        name,
        contract.columns,
        contract.unit_interval,
        contract.non_negative,
        tuple(contract.value_sets.items()),
        contract.unique,
        frozenset(present),
    )
    with _GE_LOCK:
        if key not in _SUITES:
            gx, _ = _ge_context()
            schema = gx.ExpectationSuite(name=f"{name}.{SCHEMA}.compact")
            schema.add_expectation(
                gx.expectations.ExpectTableColumnsToMatchSet(column_set=list(contract.columns), exact_match=False)
            )
            ranges = gx.ExpectationSuite(name=f"{name}.{RANGES}.compact")
            if any(c in present for c in contract.unit_interval):
                ranges.add_expectation(
                    gx.expectations.ExpectColumnValuesToBeBetween(column="unit", min_value=0.0, max_value=1.0)
                )
            if any(c in present for c in contract.non_negative):
                ranges.add_expectation(
                    gx.expectations.ExpectColumnValuesToBeBetween(column="non_negative", min_value=0)
                )
            members = [
                f"{c}{_MEMBER_SEPARATOR}{v}"
                for c, values in contract.value_sets.items()
                if c in present
                for v in values
            ]
            if any(c in present for c in contract.value_sets):
                ranges.add_expectation(gx.expectations.ExpectColumnValuesToBeInSet(column="member", value_set=members))
            for column in contract.unique:
                if column in present:
                    ranges.add_expectation(gx.expectations.ExpectColumnValuesToBeUnique(column=f"unique:{column}"))
            _SUITES[key] = (schema, ranges if len(ranges.expectations) else None)
        return _SUITES[key]


def _stacked(contract: TableContract, frame: pl.DataFrame, present: set[str]) -> pl.DataFrame | None:
    """The values the compact range suite checks: the distinct bounded values stacked into one column per bound, the
    distinct (column, value) texts of the set-valued columns, and the key columns as they are (missing values dropped:
    every expectation ignores them; a bound or a set holds for every value when it holds for every distinct one)."""
    if not _stackable(contract, frame.schema):
        return None
    parts = []
    for alias, columns in (("unit", contract.unit_interval), ("non_negative", contract.non_negative)):
        bounded = [frame.get_column(c).cast(pl.Float64) for c in dict.fromkeys(columns) if c in present]
        if bounded:
            parts.append(pl.concat(bounded).drop_nulls().unique().alias(alias).to_frame())
    sets = [c for c in contract.value_sets if c in present]
    if sets:
        parts.append(
            frame.select(
                pl.concat_list(pl.lit(f"{c}{_MEMBER_SEPARATOR}") + pl.col(c).cast(pl.String) for c in sets).alias(
                    "member"
                )
            )
            .explode("member")
            .drop_nulls()
            .unique()
        )
    keys = [c for c in dict.fromkeys(contract.unique) if c in present]
    if keys:
        parts.append(frame.select(pl.col(c).alias(f"unique:{c}") for c in keys))
    return pl.concat(parts, how="diagonal") if parts else None


def _with_not_a_number(verdict: Verdict, contract: TableContract, frame: pl.DataFrame) -> Verdict:
    """The range verdict failed for NaN in a bounded column: pandas reads NaN as missing, so the suite lets it pass
    (0/0 in polars is NaN, not null)."""
    bounded = [
        c
        for c in dict.fromkeys((*contract.unit_interval, *contract.non_negative))
        if c in frame.columns and frame.schema[c].is_float()
    ]
    counts = frame.select(pl.col(c).is_nan().sum() for c in bounded).row(0, named=True) if bounded else {}
    found = [f"not_a_number({column}): {n} unexpected" for column, n in counts.items() if n]
    if not found:
        return verdict
    failures = [line for line in (verdict.metadata.get("failures"), *found) if line and line != NO_FAILURE]
    nan_columns = ", ".join(c for c, n in counts.items() if n)
    return Verdict(
        passed=False,
        description=f"NaN (not a number) in {nan_columns}; the suite: {verdict.description}",
        metadata={**verdict.metadata, "failures": "\n".join(failures)},
    )


def check_complete(frame: pl.DataFrame, expected_traces: pl.DataFrame | None) -> Verdict:
    """Every expected trace has a row; every incomplete or not-applicable row says why."""
    if expected_traces is None:
        return Verdict(True, "table is not per trace", {})
    expected = expected_traces.select("trace_id").unique()
    missing = expected.join(frame.select("trace_id"), on="trace_id", how="anti")
    unexpected = frame.select("trace_id").join(expected, on="trace_id", how="anti")
    unexplained = (
        frame.filter(pl.col("status").is_in(["incomplete", "not_applicable"]) & pl.col("reason").is_null())
        if {"status", "reason"} <= set(frame.columns)
        else frame.head(0)
    )
    passed = missing.height == 0 and unexpected.height == 0 and unexplained.height == 0
    return Verdict(
        passed=passed,
        description=f"{frame.height} rows for {expected.height} expected traces",
        metadata={
            "expected_traces": expected.height,
            "missing_traces": missing.height,
            "missing_sample": ", ".join(missing["trace_id"].head(10).to_list()) or "no trace missing",
            "unexpected_traces": unexpected.height,
            "incomplete_without_reason": unexplained.height,
            "incomplete_rows": frame.filter(pl.col("status") == "incomplete").height
            if "status" in frame.columns
            else 0,
        },
    )


def check_no_personal_data(table: str, frame: pl.DataFrame, independent: bool | None = None) -> Verdict:
    """No detector of the de-identification step (and, with `independent`, of the independent scan) finds anything in
    any string column. Unset, `independent` holds for the de-identified inputs (`deid_*`): de-identification replaced
    what either detector found there, so a finding of either is a value that survived both passes."""
    from eval_pipeline.deid import leak_summary, scan_frame

    findings = scan_frame(frame, table, independent=table.startswith("deid_") if independent is None else independent)
    # where the leak is (table, column, type, count), never the value nor an excerpt of it
    where = [f"{place} ×{count}" for place, count in leak_summary(findings).items()]
    return Verdict(
        passed=findings.height == 0,
        description=f"{findings.height} residual personal data finding(s)"
        + (f": {'; '.join(where[:10])}" if where else ""),
        metadata={"findings": findings.height, "where": "\n".join(where) or "nothing found"},
    )
