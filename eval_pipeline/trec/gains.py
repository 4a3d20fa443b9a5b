"""trec_eval's gains and ideal rankings, and the measures built on them: the DCG family, G, rbp and rbp_resid."""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from eval_pipeline.trec.c_math import double, log2
from eval_pipeline.trec.measures import Options, Selected
from eval_pipeline.trec.sums import Sums

# The measures whose per-row sums use the ideal ranking, and the gain their defaults take (G and rbp keep the grade).
DCG_FAMILY = ("dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "G", "ndcg_cut")


def _glibc_msort(items: list, compare: Callable[[object, object], int]) -> list:
    """Merge sort as glibc's qsort does it (split n/2, stable merge): trec_eval sorts gain levels with a comparator
    that truncates gain differences to int, so levels whose gains differ by less than 1 keep this algorithm's order."""
    if len(items) <= 1:
        return list(items)
    half = len(items) // 2
    left, right = _glibc_msort(items[:half], compare), _glibc_msort(items[half:], compare)
    out, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if compare(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return [*out, *left[i:], *right[j:]]


def valid_level(name: str) -> bool:
    """Whether a gain parameter's name is a relevance level (trec_eval's valid_int), not e.g. rbp's p."""
    return re.fullmatch(r"[+-]?\d+", name) is not None


def _default_gain(level: int, gain: str) -> float:
    """The gain of a level no parameter sets: the level itself, or 2^level - 1."""
    return float(level) if gain == "linear" else 2.0**level - 1.0


class Gains:
    """trec_eval's gains for one parameter list: the gain of each relevance code, and per query the ideal ranking as
    slots of equal gain in ideal order (per-query columns `<prefix>g<s>`, the slot's gain, and `<prefix>a<s>`, the
    ideal positions filled by the end of slot s; a slot past the end of the ideal ranking adds no position).

    trec_eval lists the levels given as parameters (in order), then the query's levels 0..max not given, sorts them by
    gain with a comparator that truncates differences to int, and fills the ideal ranking from the highest gain down,
    stopping at the first level with documents and a gain <= 0.
    """

    def __init__(self, prefix: str, pairs: dict[str, float], gain: str, per: pl.DataFrame) -> None:
        self.prefix, self.gain = prefix, gain
        self.given = {int(name): value for name, value in pairs.items() if valid_level(name)}
        levels = _levels(per)
        if not self.given:
            # Default gains grow with the level: the ideal ranking is the levels >= 1 from the highest down.
            order = [lv for lv in sorted(levels, reverse=True) if lv >= 1]
            gains, counts, top_ok = (
                [pl.lit(_default_gain(lv, gain)) for lv in order],
                [pl.col(f"_n{lv}") for lv in order],
                pl.lit(True),
            )
        else:
            gains, counts, top_ok = self._walks(per, set(levels))
        self.gains, self.counts, self.top_ok = gains, counts, top_ok
        self.slots = len(gains)

    def add_columns(self, per: pl.DataFrame) -> pl.DataFrame:
        """`per` with this model's slot columns; the walk's state is a column per step, so expressions stay flat."""
        prefix, stopped = self.prefix, pl.col(f"{self.prefix}stop")
        per = per.with_columns(~self.top_ok.alias(f"{prefix}stop"))
        end = pl.lit(0, dtype=pl.Int64)
        for s, (g, n) in enumerate(zip(self.gains, self.counts, strict=True)):
            per = per.with_columns(g.cast(pl.Float64).alias(f"{prefix}g{s}"), n.cast(pl.Int64).alias(f"{prefix}n{s}"))
            g, n = pl.col(f"{prefix}g{s}"), pl.col(f"{prefix}n{s}")
            per = per.with_columns((end + pl.when(~stopped & (g > 0)).then(n).otherwise(0)).alias(f"{prefix}a{s}"))
            per = per.with_columns((stopped | ((n > 0) & (g <= 0))).alias(f"{prefix}stop"))
            end = pl.col(f"{prefix}a{s}")
        return per

    def _walks(self, per: pl.DataFrame, present: set[int]) -> tuple[list[pl.Expr], list[pl.Expr], pl.Expr]:
        """Slot gains and document counts per query, from the walk of each highest-grade group of queries."""
        top = pl.col("_maxlevel")
        walks = {}
        for m in per.get_column("_maxlevel").unique().to_list():
            listed = [
                *self.given.items(),
                *((lv, _default_gain(lv, self.gain)) for lv in range(m + 1) if lv not in self.given),
            ]
            walks[m] = _glibc_msort(listed, lambda a, b: int(a[1] - b[1]))[::-1]
        top_ok: pl.Expr = pl.lit(False)
        for m, walk in walks.items():
            top_ok = pl.when(top == m).then(pl.lit(bool(walk) and walk[0][1] > 0)).otherwise(top_ok)
        gains, counts = [], []
        for s in range(max((len(w) for w in walks.values()), default=0)):
            g, n = pl.lit(0.0), pl.lit(0, dtype=pl.Int64)
            for m, walk in walks.items():
                if s < len(walk):
                    level, value = walk[s]
                    count = pl.col(f"_n{level}") if 0 <= level <= m and level in present else pl.lit(0, dtype=pl.Int64)
                    g, n = (
                        pl.when(top == m).then(pl.lit(value)).otherwise(g),
                        pl.when(top == m).then(count).otherwise(n),
                    )
            gains.append(g)
            counts.append(n)
        return gains, counts, top_ok

    def code_gain(self, code: pl.Expr) -> pl.Expr:
        """Gain of a ranked doc from its relevance code (grade, -2 pooled but unjudged, -1 outside the pool)."""
        value = double(code) if self.gain == "linear" else pl.lit(2.0).pow(double(code)) - 1.0
        out = pl.when(code >= 0).then(value).otherwise(0.0)
        for level, g in self.given.items():
            out = pl.when(code == level).then(pl.lit(g)).otherwise(out)
        return out

    def end(self, s: int) -> pl.Expr:
        """Ideal positions filled by the end of slot s (the whole ideal ranking for the last)."""
        return pl.col(f"{self.prefix}a{s}") if self.slots else pl.lit(0, dtype=pl.Int64)

    def length(self) -> pl.Expr:
        """Length of the ideal ranking: the documents with a positive gain it holds."""
        return self.end(self.slots - 1)

    def at(self, cut: pl.Expr, discounts: pl.Series) -> pl.Expr:
        """Ideal DCG over the first `cut` positions: each slot's gain times the discounts of its positions."""
        total, start, table = pl.lit(0.0), pl.lit(0, dtype=pl.Int64), pl.lit(discounts)
        for s in range(self.slots):
            lo, hi = pl.min_horizontal(start, cut), pl.min_horizontal(self.end(s), cut)
            total = total + pl.col(f"{self.prefix}g{s}") * (table.gather(hi) - table.gather(lo))
            start = self.end(s)
        return total

    def total_gain(self) -> pl.Expr:
        """Sum of the gains of the ideal ranking (G's normalizer)."""
        total, start = pl.lit(0.0), pl.lit(0, dtype=pl.Int64)
        for s in range(self.slots):
            total = total + pl.col(f"{self.prefix}g{s}") * double(self.end(s) - start)
            start = self.end(s)
        return total

    def cost(self, rank: pl.Expr) -> pl.Expr:
        """G's cost at `rank`: one per position plus what the ideal gains above 1 add over the first `rank`
        positions."""
        total, start = double(rank), pl.lit(0, dtype=pl.Int64)
        for s in range(self.slots):
            width = pl.min_horizontal(self.end(s), rank) - pl.min_horizontal(start, rank)
            total = total + pl.max_horizontal(pl.col(f"{self.prefix}g{s}") - 1.0, pl.lit(0.0)) * double(width)
            start = self.end(s)
        return total


def _levels(per: pl.DataFrame) -> list[int]:
    """The grades >= 0 the qrels hold, from the per-query count columns."""
    return sorted(int(c[2:]) for c in per.columns if re.fullmatch(r"_n\d+", c))


def gain_models(names: dict[str, Selected], per: pl.DataFrame, options: Options) -> dict[str, tuple[str, Gains]]:
    """The gain model of each selected DCG-family measure and G (one model per distinct parameter list), by measure."""
    models: dict[tuple, tuple[str, Gains]] = {}
    out = {}
    for name in DCG_FAMILY:
        if name in names:
            pairs = names[name].pairs() if name != "ndcg_cut" else {}
            gain = "linear" if name == "G" else options.gain
            key = (tuple(sorted(pairs.items())), gain)
            if key not in models:
                prefix = f"_idl{len(models)}"
                models[key] = (prefix, Gains(prefix, pairs, gain, per))
            out[name] = models[key]
    return out


def register_gain(s: Selected, model: tuple[str, Gains], sums: Sums, below: int, discounts: pl.Series) -> list[pl.Expr]:
    """Register the row sums of a DCG-family measure or G; returns its per-query value columns."""
    name, col = s.measure.name, s.columns()[0]
    prefix, gains = model
    rank, code = pl.col("rank"), pl.col("code")
    if name == "ndcg_cut":
        value = double(code) if gains.gain == "linear" else pl.lit(2.0).pow(double(code)) - 1.0
        gain = pl.when(code > 0).then(value).otherwise(0.0)
    else:
        gain = gains.code_gain(code)
    term = pl.when(gain != 0).then(gain / log2(rank + 1, below))
    key = f"_{name}"
    sums.sums[f"{key}dcg"] = term
    dcg = pl.col(f"{key}dcg")
    ideal = gains.at(gains.length(), discounts)
    if name in ("dcg", "ideal_dcg", "ndcg"):
        return [
            {"dcg": dcg, "ideal_dcg": ideal, "ndcg": pl.when(ideal > 0).then(dcg / ideal).otherwise(0.0)}[name].alias(
                col
            )
        ]
    if name == "ndcg_cut":
        out = []
        for k, c in zip(s.params, s.columns(), strict=True):
            sums.sums[f"{key}dcg@{k}"] = pl.when(rank <= k).then(term)
            at_k, ideal_k = pl.col(f"{key}dcg@{k}"), gains.at(pl.lit(int(k), dtype=pl.Int64), discounts)
            # trec_eval leaves the DCG unnormalized when the ideal one is 0 (it then is 0 too).
            out.append(pl.when(ideal_k > 0).then(at_k / ideal_k).otherwise(at_k).alias(c))
        return out
    if name == "G":
        # Each gain over log2(2 + cost - gain so far), the cost being the ideal gains so far, at least 1 each.
        sums.add_running(f"{key}so_far", gain)
        sums.sums[f"{key}G"] = pl.when(gain != 0).then(
            gain / ((2.0 + gains.cost(rank)) - pl.col(f"{key}so_far")).log(2)
        )
        best = gains.total_gain()
        return [pl.when(best > 0).then(pl.col(f"{key}G") / best).otherwise(0.0).alias(col)]
    if name == "ndcg_rel":
        # At each doc with a positive gain, the DCG so far over the ideal DCG at the same depth (all of it past its
        # end); each relevant doc not retrieved adds the final DCG over the whole ideal DCG; divided by R.
        sums.add_running(f"{key}so_far", term)
        sums.counts[f"{key}positive"] = gain > 0
        here = gains.at(pl.min_horizontal(rank, gains.length()), discounts)
        sums.sums[f"{key}rel"] = pl.when(gain > 0).then(pl.col(f"{key}so_far") / here)
        missing = double(gains.length() - pl.col(f"{key}positive"))
        total = pl.col(f"{key}rel") + pl.when(ideal > 0).then(missing * dcg / ideal).otherwise(0.0)
        return [pl.when(total > 0).then(total / double(gains.length())).otherwise(0.0).alias(col)]
    # Rndcg: nDCG where the ideal gain changes (at the end of each stretch of equal gain, the last where the ideal
    # ranking ends) and at the end of the ranking when it runs at least two past the ideal one, averaged.
    total, points = pl.lit(0.0), pl.lit(0, dtype=pl.Int64)
    next_gain, has_next, boundary = pl.lit(0.0), pl.lit(False), [pl.lit(False)] * gains.slots
    for t in reversed(range(gains.slots)):
        alive = gains.end(t) > (gains.end(t - 1) if t else pl.lit(0, dtype=pl.Int64))
        g = pl.col(f"{prefix}g{t}")
        boundary[t] = alive & (~has_next | (next_gain != g))
        next_gain, has_next = pl.when(alive).then(g).otherwise(next_gain), has_next | alive
    for t in range(gains.slots):
        sums.sums[f"{key}dcg@{t}"] = pl.when(rank <= gains.end(t)).then(term)
        ideal_t = gains.at(gains.end(t), discounts)
        counted = boundary[t] & (ideal_t > 0)
        total = total + pl.when(counted).then(pl.col(f"{key}dcg@{t}") / ideal_t).otherwise(0.0)
        points = points + counted.cast(pl.Int64)
    at_end = (pl.col("num_ret") >= gains.length() + 2) & (ideal > 0)
    total = total + pl.when(at_end).then(dcg / ideal).otherwise(0.0)
    points = points + at_end.cast(pl.Int64)
    return [pl.when(pl.col("num_rel") == 0).then(0.0).otherwise(total / double(points)).alias(col)]


def _rbp_gains(s: Selected, per: pl.DataFrame) -> pl.DataFrame:
    """rbp's gain of each (highest grade of the query, relevance code): trec_eval's gains (levels given, then the
    query's levels 0..max at their own value) rescaled to [0, 1] by the list's extremes when they leave it."""
    given = {int(name): value for name, value in s.pairs().items() if valid_level(name)}
    rows = []
    for m in per.get_column("_maxlevel").unique().to_list():
        listed = [*given.items(), *((lv, float(lv)) for lv in range(m + 1) if lv not in given)]
        # trec_eval's min and max start from 0 (its locals are not initialized; 0 is what its builds hold).
        low, high = min([0.0, *(g for _, g in listed)]), max([0.0, *(g for _, g in listed)])
        rescale = low < 0 or high > 1
        rows += [(m, lv, (g - low) / (high - low) if rescale else g) for lv, g in listed]
    return pl.DataFrame(rows, schema={"_maxlevel": pl.Int64, "code": pl.Int64, "_rbp_gain": pl.Float64}, orient="row")


def rbp(s: Selected, sums: Sums, per: pl.DataFrame) -> dict[str, pl.Expr]:
    """rbp: (1 - p) times the sum of gain * p^(rank - 1)."""
    p = s.pairs().get("p", 0.9)
    table = _rbp_gains(s, per)
    sums.rows = sums.rows.join(table, on=["_maxlevel", "code"], how="left", maintain_order="left")
    gain = pl.col("_rbp_gain").fill_null(0.0)
    sums.sums["_rbp"] = pl.when(gain != 0).then(gain * pl.lit(p).pow(double(pl.col("rank") - 1)))
    return {s.columns()[0]: (1.0 - p) * pl.col("_rbp")}


def rbp_resid(s: Selected, sums: Sums) -> dict[str, pl.Expr]:
    """rbp_resid, when an unjudged doc is retrieved: p^num_ret + (1 - p) times the unjudged docs' p^(rank - 1), that is
    1 - (1 - p) times the judged docs' p^(rank - 1)."""
    p = s.pairs().get("p", 0.9)
    judged = pl.col("code") >= 0
    sums.sums["_rbp_judged"] = pl.when(judged).then(pl.lit(p).pow(double(pl.col("rank") - 1)))
    sums.counts["_judged_ret"] = judged
    value = (
        pl.when(pl.col("num_ret") > pl.col("_judged_ret")).then(1.0 - (1.0 - p) * pl.col("_rbp_judged")).otherwise(0.0)
    )
    return {s.columns()[0]: value}
