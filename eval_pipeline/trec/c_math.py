"""trec_eval's C arithmetic as polars expressions: the conversion to double, C log2 tables and DCG discount sums."""

from __future__ import annotations

import math
from functools import lru_cache

import polars as pl


def double(expr: pl.Expr) -> pl.Expr:
    """The expression as a double, as C converts longs before dividing."""
    return expr.cast(pl.Float64)


@lru_cache(maxsize=8)
def _log2_table(size: int) -> pl.Series:
    """log2(k) for k = 0..size-1 with the C library's log2, as trec_eval computes its discounts (log2(0) = -inf)."""
    return pl.Series([-math.inf, *(math.log2(k) for k in range(1, size))], dtype=pl.Float64)


def _table_size(n: int) -> int:
    """A power of two above n (at least 1024), so the cached log2 tables are few."""
    return 1 << max(10, int(n).bit_length())


def log2(argument: pl.Expr, below: int) -> pl.Expr:
    """C log2 of a non-negative integer expression whose values are below `below`."""
    return pl.lit(_log2_table(_table_size(below))).gather(argument.cast(pl.Int64))


def discount_sums(longest: int) -> pl.Series:
    """D[i] = sum of 1/log2(j + 1) for j = 1..i, i = 0..longest: ideal DCGs are differences of D."""
    logs = _log2_table(_table_size(longest + 2))
    return pl.concat([pl.Series([0.0]), (1.0 / logs.slice(2, longest)).cum_sum()])
