"""trec_eval-compatible measures over a qrels frame and a run frame, computed columnar with polars.

Conventions follow trec_eval 10: documents are ordered by score descending, ties by docno descending (the rank
column of the run is ignored; scores compare as 32-bit floats, as trec_eval stores them); queries of the run with no judgment are dropped (with `complete`, queries of the
qrels with no result count with empty rankings); relevant means grade >= level; a negative grade marks a document
as not judged (trec_eval's "not in pool"); nDCG uses the grade itself as the gain (linear) unless asked otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import polars as pl

from eval_pipeline.trec.ranking import Segments, contiguous, discount_expr, gain_expr, judged_stats

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
# trec_eval's floor for geometric means (MIN_GEO_MEAN), so one zero does not zero the mean.
MIN_GEO_MEAN = 0.00001


@dataclass(frozen=True)
class Measure:
    """A trec_eval measure: its printed name, default cutoffs, print format and how `all` aggregates it."""

    name: str
    defaults: tuple[float, ...] = ()
    float_params: bool = False
    integer: bool = False
    aggregate: str = "mean"  # mean | sum | gm | count | runid
    summary_only: bool = False


# In trec_eval's own print order (its measure table), so output lines come out in the same order.
MEASURES: tuple[Measure, ...] = (
    Measure("runid", aggregate="runid", summary_only=True),
    Measure("num_q", integer=True, aggregate="count", summary_only=True),
    Measure("num_ret", integer=True, aggregate="sum"),
    Measure("num_rel", integer=True, aggregate="sum"),
    Measure("num_rel_ret", integer=True, aggregate="sum"),
    Measure("map"),
    Measure("gm_map", aggregate="gm", summary_only=True),
    Measure("Rprec"),
    Measure("bpref"),
    Measure("recip_rank"),
    Measure("iprec_at_recall", RECALL_LEVELS, float_params=True),
    Measure("P", CUTOFFS),
    Measure("recall", CUTOFFS),
    Measure("gm_bpref", aggregate="gm", summary_only=True),
    Measure("Rprec_mult", R_MULTIPLES, float_params=True),
    Measure("utility"),
    Measure("11pt_avg"),
    Measure("ndcg"),
    Measure("ndcg_cut", CUTOFFS),
    Measure("map_cut", CUTOFFS),
    Measure("relative_P", CUTOFFS),
    Measure("success", (1, 5, 10)),
    Measure("set_P"),
    Measure("set_relative_P"),
    Measure("set_recall"),
    Measure("set_map"),
    Measure("set_F"),
    Measure("num_nonrel_judged_ret", integer=True, aggregate="sum"),
    Measure("unj", (5, 10, 20)),
)
MEASURE_BY_NAME = {m.name: m for m in MEASURES}
OFFICIAL = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P")


@dataclass(frozen=True)
class Selected:
    """A measure chosen for output, with the cutoffs it is computed at."""

    measure: Measure
    params: tuple[float, ...] = ()

    def columns(self) -> list[str]:
        """The printed names of this measure's values, e.g. P_5, iprec_at_recall_0.10."""
        if not self.measure.defaults:
            return [self.measure.name]
        return [f"{self.measure.name}_{_param_text(self.measure, p)}" for p in self.params]


@dataclass
class Evaluation:
    """Per-query values (one column per printed measure name) and the `all` summary, ready to print."""

    selected: list[Selected]
    per_query: pl.DataFrame
    summary: dict[str, object] = field(default_factory=dict)


def _param_text(measure: Measure, param: float) -> str:
    return f"{param:.2f}" if measure.float_params else str(int(param))


def parse_measures(specs: Iterable[str] | None) -> list[Selected]:
    """trec_eval `-m` arguments (all_trec, official, P, P.5,10, and the shorthand P_5) as selected measures."""
    chosen: dict[str, set[float]] = {}
    for spec in specs or ["official"]:
        if spec == "all_trec":
            names = [(m.name, None) for m in MEASURES]
        elif spec == "official":
            names = [(name, None) for name in OFFICIAL]
        else:
            names = [_parse_one(spec)]
        for name, params in names:
            measure = MEASURE_BY_NAME[name]
            chosen.setdefault(name, set()).update(params if params is not None else measure.defaults)
    return [Selected(m, tuple(sorted(chosen[m.name]))) for m in MEASURES if m.name in chosen]


def _parse_one(spec: str) -> tuple[str, tuple[float, ...] | None]:
    name, dot, params = spec.partition(".")
    if name not in MEASURE_BY_NAME:
        # Shorthand such as P_5 or ndcg_cut_10: the printed name of one value.
        match = re.fullmatch(r"(.+)_([0-9.]+)", spec)
        if match and MEASURE_BY_NAME.get(match.group(1), Measure("")).defaults:
            return match.group(1), (float(match.group(2)),)
        raise ValueError(f"unknown measure {spec!r}; known: {', '.join(m.name for m in MEASURES)}, all_trec, official")
    measure = MEASURE_BY_NAME[name]
    if not dot:
        return name, None
    if not measure.defaults:
        raise ValueError(f"measure {name!r} takes no parameters")
    try:
        values = tuple(float(p) for p in params.split(",") if p)
    except ValueError as exc:
        raise ValueError(f"bad parameters in {spec!r}: {exc}") from None
    if not values or any(v <= 0 and not measure.float_params for v in values) or any(v < 0 for v in values):
        raise ValueError(f"bad parameters in {spec!r}: cutoffs must be positive")
    return name, values


def pair_key(query_id: str = "query_id", doc_id: str = "doc_id") -> pl.Expr:
    """A 64-bit hash of the (query, doc) pair: a single numeric join key (matches are verified on the strings)."""
    return pl.col(doc_id).hash(seed=0x5EED) ^ pl.col(query_id).hash(seed=0xC0DE)


def _matches(run: pl.DataFrame, qrels: pl.DataFrame, blocks: tuple[pl.Series, pl.Series] | None = None) -> pl.DataFrame:
    """(run row, grade) of every retrieved doc the qrels judge.

    The join is on a 64-bit hash of the (query, doc) pair; each match is then checked on the doc id and the query (its
    id, or its block), so a hash collision can never give a doc another one's grade. With `blocks` (the run's query
    block of each qrels row, null where the run lacks the query, and the row count of each block), the run is in
    query blocks and the join runs one slice of consecutive blocks at a time.
    """
    judged_keys = qrels.select(pair_key().alias("_key"), "grade").with_row_index("_qrels_row")
    if blocks is None:
        keys = run.select(pair_key().alias("_key")).with_row_index("_run_row")
        matched = judged_keys.join(keys, on="_key", how="inner")
        run_rows, qrels_rows = matched.get_column("_run_row"), matched.get_column("_qrels_row")
        same_query = run.get_column("query_id").gather(run_rows) == qrels.get_column("query_id").gather(qrels_rows)
    else:
        block_of_qrels_row, lengths = blocks
        matched = _sliced_join(run, judged_keys.with_columns(block_of_qrels_row.alias("q")).drop_nulls("q"), lengths)
        run_rows, qrels_rows = matched.get_column("_run_row"), matched.get_column("_qrels_row")
        # The qrels row's query is block q: the run row must lie inside that block.
        bounds = pl.concat([pl.Series([0], dtype=pl.Int64), lengths.cast(pl.Int64).cum_sum()])
        q = matched.get_column("q")
        same_query = (run_rows.cast(pl.Int64) >= bounds.gather(q)) & (run_rows.cast(pl.Int64) < bounds.gather(q + 1))
    same = same_query & (run.get_column("doc_id").gather(run_rows) == qrels.get_column("doc_id").gather(qrels_rows))
    return matched.filter(same).select("_run_row", "grade")


# Run rows per slice of the sliced join: the hash table of the slice's qrels then stays in cache.
SLICE_ROWS = 150_000


def _sliced_join(run: pl.DataFrame, judged_keys: pl.DataFrame, lengths: pl.Series) -> pl.DataFrame:
    """The hash join of `_matches`, one slice of consecutive query blocks at a time (block q's run rows are contiguous);
    each slice's keys are hashed just before its join, while its rows are still in cache."""
    judged_keys = judged_keys if judged_keys.get_column("q").is_sorted() else judged_keys.sort("q")
    ends = lengths.cum_sum()
    starts = pl.concat([pl.Series([0], dtype=ends.dtype), ends])
    slices = max(1, -(-run.height // SLICE_ROWS))
    targets = pl.Series([i * run.height // slices for i in range(slices)], dtype=ends.dtype)
    first_blocks = [*sorted(set(ends.search_sorted(targets, side="right").to_list())), lengths.len()]
    qrels_bounds = judged_keys.get_column("q").search_sorted(pl.Series(first_blocks, dtype=pl.UInt32), side="left").to_list()
    parts = [judged_keys.clear().select("_key", "grade", "_qrels_row", "q").with_columns(_run_row=pl.lit(0, dtype=pl.UInt32))]
    for (b0, b1), (r0, r1) in zip(pairwise(first_blocks), pairwise(qrels_bounds), strict=True):
        lo, hi = starts[b0], starts[b1]
        keys = run.slice(lo, hi - lo).select(pair_key().alias("_key")).with_row_index("_run_row", offset=lo)
        parts.append(judged_keys.slice(r0, r1 - r0).select("_key", "grade", "_qrels_row", "q").join(keys, on="_key", how="inner"))
    return pl.concat(parts)


def _block_ranks(run: pl.DataFrame, matched: pl.DataFrame, lengths: pl.Series) -> tuple[pl.DataFrame, pl.Series] | None:
    """Ranks of the matched rows when every query is one block listed by non-increasing score (as run files are), else None.

    Then a doc's rank is its position in its block, so only the judged rows are ranked. Also returns the blocks that
    hold tied scores, which need trec_eval's docno tie-break.
    """
    starts = (lengths.cum_sum() - lengths).cast(pl.UInt32)
    step = run.get_column("score").diff()
    # A score may rise only where a new query's block starts.
    rises = (step > 0).arg_true()
    if rises.len() and not rises.cast(pl.UInt32).is_in(starts.implode()).all():
        return None
    flat = (step == 0).arg_true().cast(pl.UInt32)
    tied = (starts.search_sorted(flat.filter(~flat.is_in(starts.implode())), side="right") - 1).unique().cast(pl.UInt32)
    row = matched.get_column("_run_row")
    q = (starts.search_sorted(row, side="right") - 1).cast(pl.UInt32)
    ranked = matched.with_columns(q=q, rank=(row.cast(pl.Int64) - starts.gather(q).cast(pl.Int64) + 1))
    return ranked, tied


def _query_codes(query_id: pl.Series, name: str) -> tuple[Callable[[], pl.Series], pl.DataFrame, bool]:
    """A UInt32 code per row (computed on demand), the (code, query_id, rows) table, and whether each query's rows are
    one block (as in TREC files: then the codes number the blocks in order), else categorical codes."""
    blocks = query_id.rle()
    if blocks.struct.field("value").is_unique().all():
        table = pl.DataFrame(
            {
                name: pl.int_range(0, blocks.len(), dtype=pl.UInt32, eager=True),
                "query_id": blocks.struct.field("value"),
                "rows": blocks.struct.field("len").cast(pl.Int64),
            }
        )
        return lambda: query_id.rle_id().alias(name), table, True
    codes = query_id.cast(pl.Categorical).to_physical().alias(name)
    table = pl.DataFrame([codes, query_id]).group_by(name).agg(pl.col("query_id").first(), rows=pl.len().cast(pl.Int64))
    return lambda: codes, table, False


def _judged_rows(
    run: pl.DataFrame, qrels: pl.DataFrame, level: int, qrels_queries: pl.Series, qrels_query_index: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(judged retrieved docs with their trec_eval rank, grade and relevance; query_id and num_ret per query code q).

    `qrels_queries` are the qrels' query ids, `qrels_query_index` the position there of each qrels row's query.

    Every supported measure depends only on the judged docs of a ranking and its length, so only the judged rows are
    kept. Ranks follow trec_eval: score descending, ties by docno descending. When the run is not in ranked blocks,
    a per-query dense rank of the score gives the rank (it equals the ordinal rank when no two docs tie); queries with
    tied scores are re-ranked exactly.
    """
    codes, retrieved, contiguous = _query_codes(run.get_column("query_id"), "q")
    retrieved = retrieved.rename({"rows": "num_ret"})
    blocks = None
    if contiguous:
        block_of_query = pl.DataFrame({"query_id": qrels_queries}).join(retrieved, on="query_id", how="left", maintain_order="left")
        blocks = (block_of_query.get_column("q").gather(qrels_query_index), retrieved.get_column("num_ret"))
    matched = _matches(run, qrels, blocks)
    ranks = _block_ranks(run, matched, retrieved.get_column("num_ret")) if contiguous else None
    if ranks is None:
        scored = pl.DataFrame([codes(), run.get_column("score")]).with_row_index("_run_row")
        dense = scored.with_columns(rank=pl.col("score").rank("dense", descending=True).over("q").cast(pl.Int64))
        tied = dense.group_by("q").agg(_tied=pl.col("rank").max() < pl.len()).filter(pl.col("_tied")).get_column("q")
        ranked = matched.join(dense.select("_run_row", "q", "rank"), on="_run_row", how="inner")
    else:
        ranked, tied = ranks
    if tied.len():
        # trec_eval's order within the tied queries: score descending, then docno descending.
        exact = (
            pl.DataFrame([codes(), run.get_column("score"), run.get_column("doc_id")])
            .with_row_index("_run_row")
            .filter(pl.col("q").is_in(tied.implode()))
            .sort(["q", "score", "doc_id"], descending=[False, True, True])
            .select("_run_row", rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("q"))
        )
        ranked = ranked.join(exact, on="_run_row", how="left", suffix="_exact").with_columns(rank=pl.coalesce("rank_exact", "rank"))
    judged = ranked.select(
        "q", "rank", "grade", rel=pl.col("grade") >= level, judged_nonrel=(pl.col("grade") >= 0) & (pl.col("grade") < level)
    )
    return judged, retrieved


COUNT_NEEDS = {"Rprec", "Rprec_mult", "bpref", "gm_bpref", "iprec_at_recall", "11pt_avg"}
NONREL_NEEDS = {"bpref", "gm_bpref", "num_nonrel_judged_ret", "unj"}


def _running_counts(judged: pl.DataFrame) -> tuple[pl.DataFrame, Segments]:
    """The judged rows in (query, rank) order with `seen` (relevant docs at or above the row in its query), `judged_seen`
    (judged docs, grade >= 0, at or above it) and `rel_total` (relevant docs the query retrieved); and their segments."""
    ordered = judged.sort("q", "rank")
    segments = Segments.of(ordered.get_column("q"))
    rel = ordered.get_column("rel").cast(pl.Int64)
    judged_flags = (ordered.get_column("rel") | ordered.get_column("judged_nonrel")).cast(pl.Int64)
    counts = ordered.with_columns(
        seen=segments.running(rel), judged_seen=segments.running(judged_flags), rel_total=segments.totals(rel).gather(segments.index)
    )
    return counts, segments


def _per_query_hits(hits: pl.DataFrame, selected: list[Selected], gain: str) -> pl.DataFrame:
    """One row per query code q with every aggregate the selected measures need: segment sums, the first relevant
    rank, and maxima of interpolated precision."""
    rows, how = _hit_aggregates(selected, gain)
    counts, segments = _running_counts(hits)
    contributions = counts.select("q", "seen", "rel", **rows)
    sums = [name for name, agg in how.items() if agg == "sum"]
    out = pl.DataFrame({"q": segments.keys, **{name: segments.totals(contributions.get_column(name)) for name in sums}})
    if "_first" in how:
        first = contributions.filter(pl.col("rel") & (pl.col("seen") == 1)).select("q", "_first")
        out = out.join(first, on="q", how="left")
    maxima = [name for name, agg in how.items() if agg == "max"]
    if maxima:
        out = out.join(contributions.group_by("q").agg(pl.col(maxima).max()), on="q", how="left")
    return out


def _hit_aggregates(selected: list[Selected], gain: str) -> tuple[dict[str, pl.Expr], dict[str, str]]:
    """Per-row contributions (over `_running_counts` rows) of what the selected measures need, and how each one
    aggregates per query (sum, max, or the value at the first relevant row)."""
    rel, rank = pl.col("rel"), pl.col("rank")
    prec = pl.col("seen") / rank
    rows: dict[str, pl.Expr] = {"num_rel_ret": rel.cast(pl.Int64)}
    how: dict[str, str] = {}
    names = {s.measure.name: s for s in selected}
    cutoffs = set()
    for name in ("P", "recall", "relative_P", "success"):
        if name in names:
            cutoffs.update(names[name].params)
    for k in sorted(cutoffs):
        rows[f"_rel@{k:g}"] = (rel & (rank <= k)).cast(pl.Int64)
    if names.keys() & {"map", "gm_map", "map_cut"}:
        rows["_ap"] = pl.when(rel).then(prec).otherwise(0.0)
    if "map_cut" in names:
        for k in names["map_cut"].params:
            rows[f"_ap@{k:g}"] = pl.when(rel & (rank <= k)).then(prec).otherwise(0.0)
    if "recip_rank" in names:
        rows["_first"], how["_first"] = rank, "first relevant"
    if "Rprec" in names:
        rows["_rprec"] = (rel & (rank <= pl.col("num_rel"))).cast(pl.Int64)
    if "Rprec_mult" in names:
        for m in names["Rprec_mult"].params:
            rows[f"_rmult@{m:.2f}"] = (rel & (rank <= _r_cutoff(m))).cast(pl.Int64)
    if names.keys() & {"bpref", "gm_bpref"}:
        # Judged docs at or above a relevant doc, minus relevant ones: judged non-relevant docs ranked above it.
        above = pl.col("judged_seen") - pl.col("seen")
        r, n = pl.col("num_rel"), pl.col("num_nonrel")
        term = pl.when(above > 0).then(1.0 - pl.min_horizontal(above, r) / pl.min_horizontal(n, r)).otherwise(1.0)
        rows["_bpref"] = pl.when(rel).then(term).otherwise(0.0)
    if names.keys() & {"iprec_at_recall", "11pt_avg"}:
        levels = set(names["iprec_at_recall"].params) if "iprec_at_recall" in names else set()
        if "11pt_avg" in names:
            levels.update(RECALL_LEVELS)
        for x in sorted(levels):
            # trec_eval 10 turns a recall level into a count of relevant docs with lround(x * R); the interpolated
            # precision is the best precision from the rank where that count is reached on (0 if never reached).
            needed = (pl.col("num_rel") * x).round(0, mode="half_away_from_zero")
            reached = rel & (pl.col("seen") >= needed) & (needed <= pl.col("rel_total"))
            rows[f"_iprec@{x:.2f}"], how[f"_iprec@{x:.2f}"] = pl.when(reached).then(prec), "max"
    if names.keys() & {"ndcg", "ndcg_cut"}:
        dcg = gain_expr(pl.col("grade"), gain) * discount_expr(rank)
        rows["_dcg"] = dcg
        for k in names["ndcg_cut"].params if "ndcg_cut" in names else ():
            rows[f"_dcg@{k:g}"] = pl.when(rank <= k).then(dcg).otherwise(0.0)
    if "num_nonrel_judged_ret" in names:
        rows["_nonrel_ret"] = pl.col("judged_nonrel").cast(pl.Int64)
    if "unj" in names:
        for k in names["unj"].params:
            rows[f"_judged@{k:g}"] = ((pl.col("grade") >= 0) & (rank <= k)).cast(pl.Int64)
    return rows, {name: how.get(name, "sum") for name in rows}


def _r_cutoff(multiple: float) -> pl.Expr:
    # trec_eval turns mult * R into a rank by adding 0.9 and truncating.
    return (pl.col("num_rel") * multiple + 0.9).floor()


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """numerator / denominator, 0.0 when the denominator is 0 (trec_eval's convention for empty sets)."""
    return pl.when(denominator > 0).then(numerator / denominator).otherwise(0.0)


def _final_columns(selected: list[Selected]) -> list[pl.Expr]:
    """Per-query measure columns from the aggregated frame, one per printed name."""
    r = pl.col("num_rel")
    rel_ret, num_ret = pl.col("num_rel_ret"), pl.col("num_ret")
    out: list[pl.Expr] = []
    for s in selected:
        name = s.measure.name
        if name in ("runid", "num_q"):
            continue
        if name in ("num_ret", "num_rel", "num_rel_ret"):
            out.append(pl.col(name).alias(name))
        elif name == "num_nonrel_judged_ret":
            out.append(pl.col("_nonrel_ret").alias(name))
        elif name in ("map", "gm_map"):
            out.append(_ratio(pl.col("_ap"), r).alias(name))
        elif name == "Rprec":
            out.append(_ratio(pl.col("_rprec"), r).alias(name))
        elif name in ("bpref", "gm_bpref"):
            out.append(_ratio(pl.col("_bpref"), r).alias(name))
        elif name == "recip_rank":
            out.append(pl.when(pl.col("_first").is_not_null()).then(1.0 / pl.col("_first")).otherwise(0.0).alias(name))
        elif name == "ndcg":
            out.append(_ratio(pl.col("_dcg"), pl.col("_idcg")).alias(name))
        elif name == "utility":
            out.append((rel_ret - (num_ret - rel_ret)).cast(pl.Float64).alias(name))
        elif name == "11pt_avg":
            out.append(pl.mean_horizontal([pl.col(f"_iprec@{x:.2f}") for x in RECALL_LEVELS]).alias(name))
        elif name == "set_P":
            out.append(_ratio(rel_ret, num_ret).alias(name))
        elif name == "set_relative_P":
            out.append(_ratio(rel_ret, pl.min_horizontal(num_ret, r)).alias(name))
        elif name == "set_recall":
            out.append(_ratio(rel_ret, r).alias(name))
        elif name == "set_map":
            out.append((_ratio(rel_ret, num_ret) * _ratio(rel_ret, r)).alias(name))
        elif name == "set_F":
            p, rc = _ratio(rel_ret, num_ret), _ratio(rel_ret, r)
            out.append(_ratio(2 * p * rc, p + rc).alias(name))
        else:
            out.extend(_cutoff_columns(s))
    return out


def _cutoff_columns(s: Selected) -> list[pl.Expr]:
    r = pl.col("num_rel")
    name, cols = s.measure.name, s.columns()
    out = []
    for p, col in zip(s.params, cols, strict=True):
        if name == "P":
            out.append((pl.col(f"_rel@{p:g}") / p).alias(col))
        elif name == "recall":
            out.append(_ratio(pl.col(f"_rel@{p:g}"), r).alias(col))
        elif name == "relative_P":
            out.append(_ratio(pl.col(f"_rel@{p:g}"), pl.min_horizontal(r, pl.lit(p))).alias(col))
        elif name == "success":
            out.append((pl.col(f"_rel@{p:g}") > 0).cast(pl.Float64).alias(col))
        elif name == "map_cut":
            out.append(_ratio(pl.col(f"_ap@{p:g}"), r).alias(col))
        elif name == "ndcg_cut":
            out.append(_ratio(pl.col(f"_dcg@{p:g}"), pl.col(f"_idcg@{p:g}")).alias(col))
        elif name == "iprec_at_recall":
            out.append(pl.col(f"_iprec@{p:.2f}").alias(col))
        elif name == "Rprec_mult":
            out.append(_ratio(pl.col(f"_rmult@{p:.2f}"), _r_cutoff(p)).alias(col))
        elif name == "unj":
            # Unjudged (absent from the qrels, or a negative grade) among the top p: what is retrieved minus what is judged.
            shown = pl.min_horizontal(pl.col("num_ret"), pl.lit(p))
            out.append(((shown - pl.col(f"_judged@{p:g}")) / p).alias(col))
    return out


def evaluate(
    qrels: pl.DataFrame,
    run: pl.DataFrame,
    *,
    level: int = 1,
    measures: Sequence[str] | Sequence[Selected] | None = None,
    gain: str = "linear",
    complete: bool = False,
) -> Evaluation:
    """trec_eval's per-query values and `all` summary of `run` (query_id, doc_id, score, tag) against `qrels` (query_id, doc_id, grade)."""
    selected = _selection(measures)
    qrels = qrels.select(pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), pl.col("grade").cast(pl.Int64))
    # trec_eval keeps scores as C floats: two scores equal to 32-bit precision tie, and the docno decides.
    run = run.with_columns(pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), pl.col("score").cast(pl.Float32))
    names = {s.measure.name: s for s in selected}
    qrels = contiguous(qrels, "query_id")
    cutoffs = [*names["ndcg_cut"].params, None] if "ndcg_cut" in names else [None] if "ndcg" in names else []
    segments = Segments.of(qrels.get_column("query_id"))
    stats = judged_stats(qrels, "query_id", level, cutoffs, gain, "_idcg", segments)
    # Unless a measure counts judged non-relevant docs, only docs with a gain or relevance change a value: the
    # others need not be found in the run at all.
    useful, query_index = qrels, segments.index
    if not names.keys() & NONREL_NEEDS:
        keep = (qrels.get_column("grade") > 0) | (qrels.get_column("grade") >= level)
        useful, query_index = qrels.filter(keep), query_index.filter(keep)
    judged, retrieved = _judged_rows(run, useful, level, segments.keys, query_index)
    if "_idcg@all" in stats.columns:
        stats = stats.rename({"_idcg@all": "_idcg"})
    if not complete:
        stats = stats.join(retrieved.select("query_id"), on="query_id", how="semi")
    coded = stats.join(retrieved.select("q", "query_id", "num_ret"), on="query_id", how="left")
    hits = judged
    if names.keys() & COUNT_NEEDS:
        hits = judged.join(coded.select("q", "num_rel", "num_nonrel").drop_nulls("q"), on="q", how="inner")
    per_hit = _per_query_hits(hits, selected, gain)
    counts = [c for c in per_hit.columns if c not in ("q", "_first") and per_hit.schema[c].is_integer()]
    per_query = (
        coded.join(per_hit, on="q", how="left")
        .with_columns(pl.col(c).fill_null(0) for c in ["num_ret", *counts])
        .with_columns(pl.col(c).fill_null(0.0) for c in per_hit.columns if c.startswith(("_ap", "_bpref", "_iprec", "_dcg")))
        .with_columns(pl.col(c).fill_null(0.0) for c in stats.columns if c.startswith("_idcg"))
        .select("query_id", *_final_columns(selected))
        .sort("query_id")
    )
    runid = run.get_column("tag")[0] if "tag" in run.columns and run.height else "unknown"
    return Evaluation(selected, per_query, _summary(selected, per_query, runid))


def _selection(measures: Sequence[str] | Sequence[Selected] | None) -> list[Selected]:
    if measures and all(isinstance(m, Selected) for m in measures):
        return list(measures)  # type: ignore[arg-type]
    return parse_measures(measures)  # type: ignore[arg-type]


def _summary(selected: list[Selected], per_query: pl.DataFrame, runid: str) -> dict[str, object]:
    """The `all` values: sums for counts, geometric means for gm_*, means otherwise, as trec_eval aggregates."""
    exprs: list[pl.Expr] = []
    for s in selected:
        agg = s.measure.aggregate
        if agg in ("runid", "count"):
            continue
        for col in s.columns():
            if agg == "sum":
                exprs.append(pl.col(col).sum().alias(col))
            elif agg == "gm":
                exprs.append(pl.col(col).clip(lower_bound=MIN_GEO_MEAN).log().mean().exp().alias(col))
            else:
                exprs.append(pl.col(col).mean().alias(col))
    values = per_query.select(exprs).row(0, named=True) if exprs else {}
    summary: dict[str, object] = {}
    for s in selected:
        for col in s.columns():
            if s.measure.aggregate == "runid":
                summary[col] = runid
            elif s.measure.aggregate == "count":
                summary[col] = per_query.height
            else:
                value = values.get(col)
                summary[col] = (
                    (0 if s.measure.integer else 0.0) if value is None or (isinstance(value, float) and math.isnan(value)) else value
                )
    return summary


def format_results(evaluation: Evaluation, per_query: bool = False) -> list[str]:
    """Output lines exactly as trec_eval prints them: `%-22s\\t%s\\t%.4f` (integers as %d)."""
    lines: list[str] = []
    if per_query:
        for row in evaluation.per_query.iter_rows(named=True):
            for s in evaluation.selected:
                if s.measure.summary_only:
                    continue
                lines.extend(_line(s.measure, col, row["query_id"], row[col]) for col in s.columns())
    for s in evaluation.selected:
        lines.extend(_line(s.measure, col, "all", evaluation.summary[col]) for col in s.columns())
    return lines


def _line(measure: Measure, name: str, query_id: str, value: object) -> str:
    if measure.aggregate == "runid":
        text = str(value)
    elif measure.integer:
        text = str(int(value))  # type: ignore[call-overload]
    else:
        text = f"{float(value):.4f}"  # type: ignore[arg-type]
    return f"{name:<22}\t{query_id}\t{text}"
