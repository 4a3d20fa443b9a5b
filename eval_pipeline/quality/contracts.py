"""Output-table contracts and their validation: Great Expectations suites plus completeness and residual personal data."""

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


def lane_table(*columns: str, stages: tuple[str, ...] = (), unit_interval: tuple[str, ...] = (),
               non_negative: tuple[str, ...] = (), value_sets: Mapping[str, tuple[str, ...]] | None = None) -> TableContract:
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


_GE_LOCK = threading.Lock()


def warm_up_in_background() -> None:
    """Import Great Expectations on a daemon thread: the first check needs it, and the import takes seconds."""
    threading.Thread(target=_ge_context, name="great-expectations-import", daemon=True).start()


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
    batch = context.data_sources.add_pandas("eval_pipeline").add_dataframe_asset("table").add_batch_definition_whole_dataframe("whole")
    return gx, batch


def _suites(name: str, contract: TableContract, present: set[str]):
    """The schema suite and the value-range suite of a contract (ranges only over present columns)."""
    gx, _ = _ge_context()
    schema = gx.ExpectationSuite(name=f"{name}.{SCHEMA}")
    for column in contract.columns:
        schema.add_expectation(gx.expectations.ExpectColumnToExist(column=column))
    ranges = gx.ExpectationSuite(name=f"{name}.{RANGES}")
    for column in contract.unit_interval:
        if column in present:
            ranges.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column=column, min_value=0.0, max_value=1.0))
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


def _run_suite(suite, frame: pl.DataFrame) -> Verdict:
    _, batch = _ge_context()
    result = batch.get_batch(batch_parameters={"dataframe": frame.to_pandas()}).validate(suite)
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
        metadata={"suite": suite.name, "expectations": stats["evaluated_expectations"],
                  "unsuccessful": stats["unsuccessful_expectations"], "failures": "\n".join(failed) or "none"},
    )


def check_schema_and_ranges(name: str, contract: TableContract, frame: pl.DataFrame) -> tuple[Verdict, Verdict]:
    """Great Expectations validation of the table's columns, value ranges, allowed values and keys."""
    present = set(frame.columns)
    schema, ranges = _suites(name, contract, present)
    schema_verdict = _run_suite(schema, frame.head(0).select(sorted(present)) if frame.width else pl.DataFrame())
    columns = _ge_columns(contract, present)
    if not columns or not len(ranges.expectations):
        return schema_verdict, Verdict(True, "no range expectation applies", {"suite": ranges.name, "expectations": 0})
    return schema_verdict, _with_not_a_number(_run_suite(ranges, frame.select(columns)), contract, frame)


def _with_not_a_number(verdict: Verdict, contract: TableContract, frame: pl.DataFrame) -> Verdict:
    """The range verdict failed for NaN in a bounded column: pandas reads NaN as missing, so the suite lets it pass
    (0/0 in polars is NaN, not null)."""
    bounded = [c for c in dict.fromkeys((*contract.unit_interval, *contract.non_negative))
               if c in frame.columns and frame.schema[c].is_float()]
    counts = frame.select(pl.col(c).is_nan().sum() for c in bounded).row(0, named=True) if bounded else {}
    found = [f"not_a_number({column}): {n} unexpected" for column, n in counts.items() if n]
    if not found:
        return verdict
    failures = [line for line in (verdict.metadata.get("failures"), *found) if line and line != "none"]
    nan_columns = ", ".join(c for c, n in counts.items() if n)
    return Verdict(passed=False, description=f"NaN (not a number) in {nan_columns}; the suite: {verdict.description}",
                   metadata={**verdict.metadata, "failures": "\n".join(failures)})


def check_complete(frame: pl.DataFrame, expected_traces: pl.DataFrame | None) -> Verdict:
    """Every expected trace has a row; every incomplete or not-applicable row says why."""
    if expected_traces is None:
        return Verdict(True, "table is not per trace", {})
    expected = expected_traces.select("trace_id").unique()
    missing = expected.join(frame.select("trace_id"), on="trace_id", how="anti")
    unexpected = frame.select("trace_id").join(expected, on="trace_id", how="anti")
    unexplained = frame.filter(pl.col("status").is_in(["incomplete", "not_applicable"]) & pl.col("reason").is_null()) \
        if {"status", "reason"} <= set(frame.columns) else frame.head(0)
    passed = missing.height == 0 and unexpected.height == 0 and unexplained.height == 0
    return Verdict(
        passed=passed,
        description=f"{frame.height} rows for {expected.height} expected traces",
        metadata={
            "expected_traces": expected.height,
            "missing_traces": missing.height,
            "missing_sample": ", ".join(missing["trace_id"].head(10).to_list()) or "none",
            "unexpected_traces": unexpected.height,
            "incomplete_without_reason": unexplained.height,
            "incomplete_rows": frame.filter(pl.col("status") == "incomplete").height if "status" in frame.columns else 0,
        },
    )


def check_no_personal_data(table: str, frame: pl.DataFrame, independent: bool = False) -> Verdict:
    """No detector of the de-identification step (and, with `independent`, of the independent scan) finds anything in
    any string column."""
    from eval_pipeline.deid import leak_summary, scan_frame

    findings = scan_frame(frame, table, independent=independent)
    # where the leak is (table, column, type, count), never the value nor an excerpt of it
    where = [f"{place} ×{count}" for place, count in leak_summary(findings).items()]
    return Verdict(
        passed=findings.height == 0,
        description=f"{findings.height} residual personal data finding(s)" + (f": {'; '.join(where[:10])}" if where else ""),
        metadata={"findings": findings.height, "where": "\n".join(where) or "none"},
    )
