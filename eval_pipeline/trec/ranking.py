"""Ranking primitives shared by the retrieval scorer, the qrels pool and trec_eval: gains, discounts, ideal DCG per
query, contiguous segments, and the long frames of logged retrieval rounds (rounds, ranked entries, first occurrences).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import polars as pl


def gain_expr(grade: pl.Expr, gain: str = "exponential") -> pl.Expr:
    """Gain of a graded doc: 2^g - 1 (exponential) or g (linear, trec_eval's ndcg_cut); 0 for grade <= 0 or unjudged."""
    if gain not in ("exponential", "linear"):
        raise ValueError(f"gain must be 'exponential' or 'linear', got {gain!r}")
    positive = grade.cast(pl.Float64)
    value = positive if gain == "linear" else pl.lit(2.0).pow(positive) - 1.0
    return pl.when(grade > 0).then(value).otherwise(0.0)


def discount_expr(rank: pl.Expr) -> pl.Expr:
    """DCG discount 1 / log2(rank + 1) of a 1-based rank."""
    return 1.0 / (rank.cast(pl.Float64) + 1.0).log(2)


class Segments:
    """The runs of equal keys in a column where each key's rows are contiguous: per run its key, first and last row.

    Per-group sums and running sums then come from one running sum over the whole column, with no hashing.
    """

    def __init__(self, grouped: pl.Series) -> None:
        runs = grouped.rle()
        lengths = runs.struct.field("len").cast(pl.Int64)
        self.grouped = grouped
        self.keys: pl.Series = runs.struct.field("value")
        self.last: pl.Series = lengths.cum_sum() - 1
        self.first: pl.Series = self.last - lengths + 1

    @classmethod
    def of(cls, grouped: pl.Series) -> Segments:
        """The segments of a column whose equal values are adjacent."""
        return cls(grouped)

    @cached_property
    def index(self) -> pl.Series:
        """The segment number of each row."""
        return self.grouped.rle_id()

    def _before(self, running: pl.Series) -> pl.Series:
        return pl.concat([pl.Series([0], dtype=running.dtype), running]).gather(self.first)

    def totals(self, values: pl.Series) -> pl.Series:
        """Sum of `values` over each segment."""
        running = values.cum_sum()
        return running.gather(self.last) - self._before(running)

    def running(self, values: pl.Series) -> pl.Series:
        """Running sum of `values` within each row's segment, per row."""
        running = values.cum_sum()
        return running - self._before(running).gather(self.index)


def contiguous(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    """The frame with each key's rows adjacent: as is when they already are (as in TREC files), else sorted by key."""
    return frame if frame.get_column(key).rle().struct.field("value").is_unique().all() else frame.sort(key)


def judged_stats(
    qrels: pl.DataFrame,
    key: str,
    level: int,
    cutoffs: Sequence[float | None] = (),
    gain: str = "exponential",
    prefix: str = "idcg",
    segments: Segments | None = None,
) -> pl.DataFrame:
    """Per query of the qrels (key, grade): num_rel (grade >= level), num_nonrel (0 <= grade < level) and the ideal DCG
    at each cutoff (`<prefix>@<k>`, `@all` for None) over every judged doc. Given `segments`, the rows are taken
    to be grouped by key already and those are its segments.

    The ideal ranking lists the docs grade by grade, so grade g holding ideal positions a+1..a+n adds
    gain(g) * (D[a+n] - D[a]), D being the running sum of discounts: per query only counts per grade are needed.
    """
    ordered = qrels if segments is not None else contiguous(qrels, key)
    segments = segments if segments is not None else Segments.of(ordered.get_column(key))
    grade = ordered.get_column("grade")
    stats = {
        key: segments.keys,
        "num_rel": segments.totals((grade >= level).cast(pl.Int64)),
        "num_nonrel": segments.totals(((grade >= 0) & (grade < level)).cast(pl.Int64)),
    }
    if cutoffs:
        positive = grade.filter(grade > 0).unique().sort(descending=True).to_list()
        counts = [segments.totals((grade == g).cast(pl.Int64)) for g in positive]
        longest = int(sum(c.max() or 0 for c in counts))
        discounts = pl.concat([pl.Series([0.0]), discount_expr(pl.int_range(1, longest + 1, eager=True)).cum_sum()])
        gains = pl.select(gain_expr(pl.lit(pl.Series(positive, dtype=pl.Int64)), gain)).to_series().to_list()
        zeros = pl.zeros(segments.keys.len(), dtype=pl.Int64, eager=True)
        for k in cutoffs:
            ideal, above = pl.zeros(segments.keys.len(), dtype=pl.Float64, eager=True), zeros
            for g, n in zip(gains, counts, strict=True):
                upto, start = (
                    (above + n, above)
                    if k is None
                    else ((above + n).clip(upper_bound=int(k)), above.clip(upper_bound=int(k)))
                )
                ideal = ideal + g * (discounts.gather(upto) - discounts.gather(start))
                above = above + n
            stats[f"{prefix}@{'all' if k is None else format(k, 'g')}"] = ideal
    return pl.DataFrame(stats)


# ---------------------------------------------------------------- long frames of the retrieval rounds


def retrieval_rounds(traces: pl.DataFrame) -> pl.DataFrame:
    """One row per logged retrieval round of each trace (`_tid` keyed).

    Columns: round_pos (0-based order), round, variant, query, candidates, hits.
    """
    return (
        traces.lazy()
        .select(
            "_tid", "retrieval", pl.int_ranges(0, pl.col("retrieval").list.len(), dtype=pl.Int64).alias("round_pos")
        )
        .filter(pl.col("retrieval").list.len() > 0)
        .explode(["retrieval", "round_pos"])
        .unnest("retrieval")
        .with_columns(round=pl.coalesce("round", pl.col("round_pos") + 1))
        .collect()
    )


def ranked_entries(rounds: pl.DataFrame, column: str) -> pl.DataFrame:
    """Every entry of the `column` lists (hits or candidates) in logged order.

    Columns: _tid, round_pos, round, variant, pos, doc_id, score.
    """
    return (
        rounds.lazy()
        .select(
            "_tid",
            "round_pos",
            "round",
            "variant",
            column,
            pl.int_ranges(0, pl.col(column).list.len(), dtype=pl.Int64).alias("pos"),
        )
        .filter(pl.col(column).list.len() > 0)
        .explode([column, "pos"])
        .unnest(column)
        .collect()
    )


def first_occurrences(hits: pl.DataFrame, key: Sequence[str] = ("_tid",)) -> pl.DataFrame:
    """The ranked list of docs/metrics.md#retrieval per `key`.

    Hits of every round in order, first occurrence of a doc_id wins, rank from 1.
    """
    keys = list(key)
    return hits.filter(pl.struct(*keys, "doc_id").is_first_distinct()).with_columns(
        rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(keys)
    )


def ranked_hits(traces: pl.DataFrame) -> pl.DataFrame:
    """The deduplicated ranked list of every trace (`_tid` keyed).

    Columns: _tid, rank, doc_id, score, round_pos, round, variant.
    """
    hits = ranked_entries(retrieval_rounds(traces), "hits")
    return first_occurrences(hits).select("_tid", "rank", "doc_id", "score", "round_pos", "round", "variant")
