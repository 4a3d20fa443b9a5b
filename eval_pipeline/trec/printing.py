"""trec_eval's output lines: per-query and `all` values printed exactly as trec_eval 10.0 prints them."""

from __future__ import annotations

import itertools
import math

import polars as pl

from eval_pipeline.trec.measures import Evaluation, Measure


def format_results(evaluation: Evaluation, per_query: bool = False, summary: bool = True) -> list[str]:
    """Output lines exactly as trec_eval prints them: `%-22s\\t%s\\t%6.4f` (integers as %ld, relstring quoted, a `Z`
    before the name of z-scores), each query's lines (in query order) before the `all` ones."""
    lines: list[str] = []
    shown = [(s.measure, col) for s in evaluation.selected if not s.measure.summary_only for col in s.columns()]
    if per_query and shown and evaluation.per_query.height:
        query_ids = evaluation.per_query.get_column("query_id")
        # One column of lines per measure value, then query by query: each query's lines in measure order.
        columns = []
        for measure, col in shown:
            texts = pl.Series(_texts(measure, evaluation.per_query.get_column(col), evaluation.zscore), dtype=pl.String)
            head = f"{'Z' if evaluation.zscore and measure.aggregate != 'none' else ''}{col:<22}\t"
            columns.append(pl.select(pl.concat_str(pl.lit(head), query_ids, pl.lit("\t"), texts)).to_series().to_list())
        lines.extend(itertools.chain.from_iterable(zip(*columns, strict=True)))
    if summary:
        for s in evaluation.selected:
            if s.measure.aggregate == "none":
                continue
            lines.extend(
                _line(s.measure, col, "all", evaluation.summary[col], evaluation.zscore) for col in s.columns()
            )
    return lines


def _texts(measure: Measure, values: pl.Series, zscore: bool) -> list[str]:
    """The printed values of one per-query column."""
    if measure.aggregate == "none":
        return [f"'{v}'" for v in values.to_list()]
    if measure.integer and not zscore:
        return [str(v) for v in values.cast(pl.Int64).to_list()]
    floats = values.cast(pl.Float64)
    # Python's %-formatting rounds the exact binary value, half to even, as glibc's printf does.
    texts = ["%6.4f" % v for v in floats.to_list()]  # noqa: UP031 (printf semantics are the point)
    if floats.is_nan().any():
        texts = [_printf_6_4f(v) for v in floats.to_list()]
    return texts


def _line(measure: Measure, name: str, query_id: str, value: object, zscore: bool = False) -> str:
    """One output line as trec_eval's print functions write it."""
    if measure.aggregate == "runid":
        return f"{'runid':<22}\t{query_id}\t{value}"
    if measure.aggregate == "none":
        return f"{name:<22}\t{query_id}\t'{value}'"
    if measure.integer and not zscore:
        text = str(int(value))  # type: ignore[call-overload]
    else:
        text = _printf_6_4f(float(value))  # type: ignore[arg-type]
    return f"{'Z' if zscore else ''}{name:<22}\t{query_id}\t{text}"


def _printf_6_4f(value: float) -> str:
    """C printf's %6.4f of a double: Python's float formatting rounds the exact binary value half to even, as glibc
    does; NaN from trec_eval's 0/0 prints as -nan."""
    if math.isnan(value):
        return "  -nan"
    return f"{value:6.4f}"
