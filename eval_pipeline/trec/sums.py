"""Per-query sums over the ranked judged rows, added rank by rank in the order trec_eval's loops add them."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

from eval_pipeline.trec.ranking import Segments


class _Sequential:
    """Sums within each segment of a column (a segment's rows contiguous), added left to right as trec_eval's loops
    add them: numpy's add.accumulate is strictly sequential, and the segments are padded with zeros (x + 0.0 == x)
    into blocks of segments of similar length, so the padding never exceeds the rows themselves. (polars' sum adds
    pairwise, and a running sum over the whole column minus the one before a segment rounds differently.)"""

    def __init__(self, first: np.ndarray, length: np.ndarray) -> None:
        self.count, self.rows = len(first), int(length.sum())
        bucket = np.zeros(len(length), dtype=np.int64)
        long = length > 1
        bucket[long] = np.ceil(np.log2(length[long])).astype(np.int64)
        self.blocks = []
        for b in np.unique(bucket):
            segs = np.flatnonzero(bucket == b)
            offsets = np.arange(1 << int(b))
            index = first[segs, None] + offsets[None, :]
            valid = offsets[None, :] < length[segs, None]
            self.blocks.append((segs, np.minimum(index, max(self.rows - 1, 0)), valid, index[valid]))

    def _accumulated(self, values: np.ndarray) -> Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        for segs, index, valid, rows in self.blocks:
            yield segs, valid, rows, np.add.accumulate(np.where(valid, values[index], 0.0), axis=1)

    def totals(self, values: np.ndarray) -> np.ndarray:
        """The sum of each segment."""
        out = np.zeros(self.count)
        for segs, _, _, running in self._accumulated(values):
            out[segs] = running[:, -1]
        return out

    def running(self, values: np.ndarray) -> np.ndarray:
        """Each row's sum of its segment's rows up to and including it."""
        out = np.zeros(self.rows)
        for _, valid, rows, running in self._accumulated(values):
            out[rows] = running[valid]
        return out


class Sums:
    """Per-query aggregates of row expressions over the ranked judged rows of every query (rows in rank order).

    Float sums are accumulated row by row within each query, as trec_eval's loops add them (see `_Sequential`), so
    every value is the same double trec_eval computes; integer counts use running sums over the whole column.
    """

    def __init__(self, rows: pl.DataFrame, segments: Segments) -> None:
        self.rows, self.segments = rows, segments
        self.sequential = _Sequential(segments.first.to_numpy(), (segments.last - segments.first + 1).to_numpy())
        self.sums: dict[str, pl.Expr] = {}
        self.counts: dict[str, pl.Expr] = {}
        self.maxima: dict[str, pl.Expr] = {}
        self.minima: dict[str, pl.Expr] = {}

    def add_running(self, name: str, expr: pl.Expr) -> None:
        """Add to the rows the running sum of `expr` within each query, in rank order."""
        values = self.rows.select(expr.cast(pl.Float64).fill_null(0.0)).to_series().to_numpy()
        self.rows = self.rows.with_columns(pl.Series(name, self.sequential.running(values)))

    def collect(self) -> pl.DataFrame:
        """One row per query with rows (key `pos`): counts and sums (0 where no row adds), maxima and minima (null)."""
        seg = self.segments
        out = pl.DataFrame({"pos": seg.keys})
        if self.counts:
            counts = self.rows.select(**{n: e.cast(pl.Int64).fill_null(0) for n, e in self.counts.items()})
            out = out.with_columns(seg.totals(counts.get_column(n)).alias(n) for n in self.counts)
        if self.sums:
            sums = self.rows.select(**{n: e.cast(pl.Float64).fill_null(0.0) for n, e in self.sums.items()})
            out = out.with_columns(
                pl.Series(n, self.sequential.totals(sums.get_column(n).to_numpy())) for n in self.sums
            )
        extremes = {**{n: e.max() for n, e in self.maxima.items()}, **{n: e.min() for n, e in self.minima.items()}}
        if extremes:
            out = out.join(self.rows.group_by("pos").agg(**extremes), on="pos", how="left")
        return out

    def defaults(self) -> list[pl.Expr]:
        """Fill values for the queries without a judged retrieved doc: 0 for counts and sums."""
        return [pl.col(n).fill_null(0) for n in self.counts] + [pl.col(n).fill_null(0.0) for n in self.sums]
