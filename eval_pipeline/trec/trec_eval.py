"""evaluate(): trec_eval 10.0's measures of a run frame against a qrels frame, and the matching of the run to the qrels.

Conventions follow trec_eval 10.0: documents are ordered by score descending (scores compare as doubles), ties by
docno descending, and the rank column of the run is ignored; queries of the run with no judgment are dropped; with
`complete`, a query of the qrels with no result is evaluated on trec_eval's one-document stand-in ranking and counts
in every average; relevant means grade >= level; a negative grade marks a pooled but unjudged document (`.` in
relstring, skipped by bpref and infAP), a document absent from the qrels is outside the pool (`-`); gains are the
grades themselves unless `-m ndcg.1=0,2=3`-style parameters set them. Every value is computed in the order and with
the arithmetic trec_eval uses (sums accumulated rank by rank, averages query by query), so the printed `%6.4f`
figures, exact halves included, are trec_eval's own.

It runs past 400 lines because the run-to-qrels matching stays in the module of evaluate(): the tests patch its join
key and slice size (pair_key, SLICE_ROWS) here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np
import polars as pl

from eval_pipeline.trec.c_math import double
from eval_pipeline.trec.gains import valid_level
from eval_pipeline.trec.measure_args import parse_measures
from eval_pipeline.trec.measure_values import measure_values
from eval_pipeline.trec.measures import JG_BASE, MEASURE_BY_NAME, Evaluation, Options, Selected
from eval_pipeline.trec.ranking import Segments, contiguous
from eval_pipeline.trec.summary import summarize, to_zscores

# The docno of trec_eval's one-document ranking for a query without results under -c.
STAND_IN_DOCNO = "ceci_nest_pas_un_docno"
# Separates the query and the judgment group in the pseudo-query ids of -R qrels_jg.
GROUP_SEPARATOR = "\x1f"


# ---------------------------------------------------------------- matching the run to the qrels


def pair_key(query_id: str = "query_id", doc_id: str = "doc_id") -> pl.Expr:
    """A 64-bit hash of the (query, doc) pair: a single numeric join key (matches are verified on the strings)."""
    return pl.col(doc_id).hash(seed=0x5EED) ^ pl.col(query_id).hash(seed=0xC0DE)


def _matches(
    run: pl.DataFrame,
    qrels: pl.DataFrame,
    blocks: tuple[pl.Series, pl.Series] | None = None,
    refuse_duplicates: bool = False,
) -> pl.DataFrame:
    """(run row, grade) of every retrieved doc the qrels judge; with `refuse_duplicates`, a query naming a doc twice
    raises, as trec_eval does (the pair hashes computed for the join show it: only when two meet are pairs compared).

    The join is on a 64-bit hash of the (query, doc) pair; each match is then checked on the doc id and the query (its
    id, or its block), so a hash collision can never give a doc another one's grade. With `blocks` (the run's query
    block of each qrels row, null where the run lacks the query, and the row count of each block), the run is in
    query blocks and the join runs one slice of consecutive blocks at a time.
    """
    judged_keys = qrels.select(pair_key().alias("_key"), "grade").with_row_index("_qrels_row")
    if blocks is None:
        keys = run.select(pair_key().alias("_key")).with_row_index("_run_row")
        matched = _join_keys(judged_keys, keys, lambda: run, refuse_duplicates)
        run_rows, qrels_rows = matched.get_column("_run_row"), matched.get_column("_qrels_row")
        same_query = run.get_column("query_id").gather(run_rows) == qrels.get_column("query_id").gather(qrels_rows)
    else:
        block_of_qrels_row, lengths = blocks
        matched = _sliced_join(
            run, judged_keys.with_columns(block_of_qrels_row.alias("q")).drop_nulls("q"), lengths, refuse_duplicates
        )
        run_rows, qrels_rows = matched.get_column("_run_row"), matched.get_column("_qrels_row")
        # The qrels row's query is block q: the run row must lie inside that block.
        bounds = pl.concat([pl.Series([0], dtype=pl.Int64), lengths.cast(pl.Int64).cum_sum()])
        q = matched.get_column("q")
        same_query = (run_rows.cast(pl.Int64) >= bounds.gather(q)) & (run_rows.cast(pl.Int64) < bounds.gather(q + 1))
    same = same_query & (run.get_column("doc_id").gather(run_rows) == qrels.get_column("doc_id").gather(qrels_rows))
    return matched.filter(same).select("_run_row", "grade")


# Run rows per slice of the sliced join: the hash table of the slice's qrels then stays in cache.
SLICE_ROWS = 150_000


def _refuse_repeats(run: pl.DataFrame) -> None:
    """Raise on the first (query, doc) pair the run rows name twice."""
    repeated = run.filter(pl.struct("query_id", "doc_id").is_duplicated())
    if repeated.height:
        first = repeated.row(0, named=True)
        raise ValueError(f"run: duplicate docs {first['query_id']} {first['doc_id']}")


def _sliced_join(
    run: pl.DataFrame, judged_keys: pl.DataFrame, lengths: pl.Series, refuse_duplicates: bool = False
) -> pl.DataFrame:
    """The hash join of `_matches`, one slice of consecutive query blocks at a time (block q's run rows are contiguous);
    each slice's keys are hashed just before its join, while its rows are still in cache (and checked for repeats
    there: a query's rows all lie in one slice)."""
    judged_keys = judged_keys if judged_keys.get_column("q").is_sorted() else judged_keys.sort("q")
    ends = lengths.cum_sum()
    starts = pl.concat([pl.Series([0], dtype=ends.dtype), ends])
    slices = max(1, -(-run.height // SLICE_ROWS))
    targets = pl.Series([i * run.height // slices for i in range(slices)], dtype=ends.dtype)
    first_blocks = [*sorted(set(ends.search_sorted(targets, side="right").to_list())), lengths.len()]
    qrels_bounds = (
        judged_keys.get_column("q").search_sorted(pl.Series(first_blocks, dtype=pl.UInt32), side="left").to_list()
    )
    parts = [
        judged_keys.clear().select("_key", "grade", "_qrels_row", "q").with_columns(_run_row=pl.lit(0, dtype=pl.UInt32))
    ]
    for (b0, b1), (r0, r1) in zip(pairwise(first_blocks), pairwise(qrels_bounds), strict=True):
        lo, hi = starts[b0], starts[b1]
        keys = run.slice(lo, hi - lo).select(pair_key().alias("_key")).with_row_index("_run_row", offset=lo)
        judged = judged_keys.slice(r0, r1 - r0).select("_key", "grade", "_qrels_row", "q")
        parts.append(
            _join_keys(judged, keys, lambda lo=lo, hi=hi: run.slice(lo, hi - lo), refuse_duplicates).select(
                parts[0].columns
            )
        )
    return pl.concat(parts)


def _join_keys(
    judged: pl.DataFrame, keys: pl.DataFrame, rows: Callable[[], pl.DataFrame], refuse_duplicates: bool
) -> pl.DataFrame:
    """The inner join of qrels keys and run keys. Refusing duplicates, the join validates that the run's keys are
    unique (cheaper than counting them apart); when they are not, `rows()` (those run rows) are checked for a real
    repeat, a collision of two pairs' hashes being harmless."""
    if not refuse_duplicates:
        # Probing with the run's many keys into a table of the qrels' few is the faster way round.
        return keys.join(judged, on="_key", how="inner")
    try:
        return judged.join(keys, on="_key", how="inner", validate="m:1")
    except pl.exceptions.ComputeError:
        _refuse_repeats(rows())
        return judged.join(keys, on="_key", how="inner")


def _block_ranks(run: pl.DataFrame, matched: pl.DataFrame, lengths: pl.Series) -> tuple[pl.DataFrame, pl.Series] | None:
    """Ranks of the matched rows when every query is one block listed by non-increasing score (as run files are), else
    None.

    Then a doc's rank is its position in its block, so only the judged rows are ranked. Also returns the blocks that
    hold tied scores, which need trec_eval's docno tie-break.
    """
    score = run.get_column("score").to_numpy()
    sizes = lengths.to_numpy().astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    later = np.ones(len(score), dtype=bool)
    later[starts] = False
    step = np.diff(score)
    # A score may rise only where a new query's block starts.
    if (later[1:] & (step > 0)).any():
        return None
    flat = np.flatnonzero(later[1:] & (step == 0)) + 1
    tied = pl.Series(np.unique(np.searchsorted(starts, flat, side="right") - 1), dtype=pl.UInt32)
    row = matched.get_column("_run_row").to_numpy().astype(np.int64)
    q = np.searchsorted(starts, row, side="right") - 1
    ranked = matched.with_columns(q=pl.Series(q, dtype=pl.UInt32), rank=pl.Series(row - starts[q] + 1, dtype=pl.Int64))
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
    run: pl.DataFrame,
    qrels: pl.DataFrame,
    qrels_queries: pl.Series,
    qrels_query_index: pl.Series,
    everything: bool = False,
    refuse_duplicates: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(retrieved docs the qrels judge, with their trec_eval rank and grade: q, rank, grade; query_id and num_ret per
    query code q).

    `qrels_queries` are the qrels' query ids, `qrels_query_index` the position there of each qrels row's query.
    With `everything`, every retrieved doc is returned, a null grade marking the docs outside the qrels.

    Every measure depends only on the judged docs of a ranking and its length (unless a gain is given to docs outside
    the pool), so only the judged rows are ranked. Ranks follow trec_eval: score descending, ties by docno descending.
    When the run is not in ranked blocks, a per-query dense rank of the score gives the rank (it equals the ordinal
    rank when no two docs tie); queries with tied scores are re-ranked exactly.
    """
    codes, retrieved, contiguous_blocks = _query_codes(run.get_column("query_id"), "q")
    retrieved = retrieved.rename({"rows": "num_ret"})
    if everything:
        return _all_rows(run, qrels, codes(), refuse_duplicates), retrieved
    blocks = None
    if contiguous_blocks:
        block_of_query = pl.DataFrame({"query_id": qrels_queries}).join(
            retrieved, on="query_id", how="left", maintain_order="left"
        )
        blocks = (block_of_query.get_column("q").gather(qrels_query_index), retrieved.get_column("num_ret"))
    matched = _matches(run, qrels, blocks, refuse_duplicates)
    ranks = _block_ranks(run, matched, retrieved.get_column("num_ret")) if contiguous_blocks else None
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
        ranked = ranked.join(exact, on="_run_row", how="left", suffix="_exact").with_columns(
            rank=pl.coalesce("rank_exact", "rank")
        )
    return ranked.select("q", "rank", "grade"), retrieved


def _all_rows(
    run: pl.DataFrame, qrels: pl.DataFrame, codes: pl.Series, refuse_duplicates: bool = False
) -> pl.DataFrame:
    """Every retrieved doc with its trec_eval rank and grade (null outside the qrels): q, rank, grade."""
    grades = _matches(run, qrels, refuse_duplicates=refuse_duplicates)
    return (
        pl.DataFrame([codes, run.get_column("score"), run.get_column("doc_id")])
        .with_row_index("_run_row")
        .join(grades, on="_run_row", how="left")
        .sort(["q", "score", "doc_id"], descending=[False, True, True])
        .select("q", rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("q"), grade="grade")
    )


# ---------------------------------------------------------------- evaluation


def _selection(measures: Sequence[str] | Sequence[Selected] | None) -> list[Selected]:
    """Selected measures as given, or parsed from -m arguments."""
    if measures and all(isinstance(m, Selected) for m in measures):
        return list(measures)  # type: ignore[arg-type]
    return parse_measures(measures)  # type: ignore[arg-type]


def evaluate(
    qrels: pl.DataFrame,
    run: pl.DataFrame,
    *,
    level: int = 1,
    measures: Sequence[str] | Sequence[Selected] | None = None,
    gain: str = "linear",
    complete: bool = False,
    max_docs: int | None = None,
    judged_only: bool = False,
    num_docs: int = 0,
    zscores: pl.DataFrame | None = None,
    refuse_duplicates: bool = False,
) -> Evaluation:
    """trec_eval's per-query values and `all` summary of `run` (query_id, doc_id, score, tag) against `qrels` (query_id,
    doc_id, grade; with a `group` column, trec_eval's qrels_jg judgment groups).

    level: -l; complete: -c; max_docs: -M (only each query's top documents count); judged_only: -J (documents
    outside the qrels or with a negative grade are removed before ranking); num_docs: -N (collection size, for
    utility's fourth coefficient); zscores: -Z (query_id, measure, mean, std_dev: values become z-scores);
    gain: the default gain of a grade for the DCG measures, the grade (linear, trec_eval's) or 2^grade - 1;
    refuse_duplicates: raise, as trec_eval does, when the run names a doc twice for one query (read_trec_run refuses
    those already unless told not to).
    """
    if gain not in ("linear", "exponential"):
        raise ValueError(f"gain must be 'linear' or 'exponential', got {gain!r}")
    selected = _selection(measures)
    groups = "group" in qrels.columns
    _check_format(selected, groups)
    options = Options(level, gain, max_docs, judged_only, num_docs, refuse_duplicates)
    keep = ["query_id", "doc_id", "grade", *(["group"] if groups else [])]
    qrels = qrels.select(pl.col(c).cast(pl.Int64 if c == "grade" else pl.String) for c in keep)
    run = run.with_columns(
        pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), pl.col("score").cast(pl.Float64)
    )
    # trec_eval keeps the run id of the file's last line.
    runid = str(run.get_column("tag")[-1]) if "tag" in run.columns and run.height else "unknown"
    stand_ins: list[str] = []
    if complete:
        run, stand_ins = _with_stand_ins(run, qrels.get_column("query_id"))
    if groups:
        per_query = _evaluate_groups(qrels, run, selected, options, stand_ins)
    else:
        per_query = _evaluate_queries(qrels, run, selected, options, stand_ins)
    if zscores is not None:
        per_query = to_zscores(per_query, selected, zscores)
    summary = summarize(selected, per_query, runid, qrels if complete else None, zscores is not None)
    printed = [c for s in selected if s.measure.aggregate not in ("runid", "count") for c in s.columns()]
    return Evaluation(selected, per_query.select("query_id", *printed), summary, zscore=zscores is not None)


def _check_format(selected: list[Selected], groups: bool) -> None:
    """qrels_jg judgments give the per-group measures only; plain qrels give every other measure."""
    for s in selected:
        if s.measure.aggregate in ("runid", "count"):
            continue
        if s.measure.qrels_jg and not groups:
            raise ValueError(f"measure {s.measure.name!r} needs judgment groups (-R qrels_jg)")
        if groups and not s.measure.qrels_jg:
            raise ValueError(
                f"measure {s.measure.name!r} cannot be computed from -R qrels_jg judgments (only {', '.join(JG_BASE)})"
            )


def _with_stand_ins(run: pl.DataFrame, qrels_queries: pl.Series) -> tuple[pl.DataFrame, list[str]]:
    """The run plus trec_eval's one-document ranking (score 1.0) for each query of the qrels it lacks (-c), and those
    queries."""
    queries = qrels_queries.unique()
    missing = queries.filter(~queries.is_in(run.get_column("query_id").unique().implode())).sort()
    if not missing.len():
        return run, []
    extra = pl.DataFrame(
        {"query_id": missing, "doc_id": pl.repeat(STAND_IN_DOCNO, missing.len(), eager=True), "score": 1.0}
    )
    tag = run.get_column("tag")[-1] if "tag" in run.columns and run.height else "unknown"
    for name, value in (("tag", tag), ("rank", 1), ("q0", "Q0")):
        if name in run.columns:
            extra = extra.with_columns(pl.lit(value).cast(run.schema[name]).alias(name))
    return pl.concat([run, extra.select(run.columns)], how="vertical_relaxed"), missing.to_list()


def _evaluate_groups(
    qrels: pl.DataFrame, run: pl.DataFrame, selected: list[Selected], options: Options, stand_ins: list[str]
) -> pl.DataFrame:
    """-R qrels_jg: each (query, judgment group) is evaluated as a query of its own over the query's ranking, and the
    per-group values are added up group by group (in group order) and divided by the number of groups."""
    pseudo = pl.concat_str("query_id", pl.lit(GROUP_SEPARATOR), "group")
    groups = qrels.select("query_id", "group").unique().sort("query_id", "group")
    by_group = run.join(groups, on="query_id", how="inner", maintain_order="left_right").with_columns(
        pseudo.alias("query_id")
    )
    # Each pseudo-query's rows together, in the run's order within it.
    by_group = by_group.drop("group").sort("query_id", maintain_order=True)
    base = {
        s.measure.name: Selected(MEASURE_BY_NAME[JG_BASE[s.measure.name]], s.params)
        for s in selected
        if s.measure.name in JG_BASE
    }
    values = _evaluate_queries(
        qrels.with_columns(pseudo.alias("query_id")).drop("group"), by_group, list(base.values()), options, []
    )
    columns = {}
    for s in selected:
        if s.measure.name in base:
            for ours, theirs in zip(s.columns(), base[s.measure.name].columns(), strict=True):
                columns[ours] = pl.col(theirs).cum_sum().last()
    per = values.with_columns(pl.col("query_id").str.split(GROUP_SEPARATOR).list.first())
    added = per.group_by("query_id", maintain_order=True).agg(_groups=pl.len(), **columns)
    divided = {
        c: pl.when(pl.col("_groups") > 1).then(pl.col(c) / double(pl.col("_groups"))).otherwise(pl.col(c))
        for c in columns
    }
    return added.with_columns(
        **divided, _stand_in=pl.col("query_id").is_in(pl.Series(stand_ins, dtype=pl.String).implode())
    )


def _needs(selected: list[Selected], options: Options) -> str:
    """Which qrels rows can change a value: 'positive' (relevant or with a gain), 'judged' (grade >= 0 too), 'pool'
    (negative grades too), 'all' (documents outside the qrels too)."""
    names = {s.measure.name for s in selected}
    given = [(int(n), v) for s in selected if s.measure.kind == "gains" for n, v in s.pairs().items() if valid_level(n)]
    if options.level <= -1 or any(n == -1 and v != 0 for n, v in given):
        return "all"
    if names & {"infAP", "relstring"} or any(n == -2 and v != 0 for n, v in given):
        return "pool"
    judged = {"bpref", "gm_bpref", "num_nonrel_judged_ret", "unj", "rbp_resid"}
    # A gain for grade 0, or a negative gain (rbp then rescales every grade's gain), makes grade-0 docs count.
    if names & judged or options.judged_only or any(n == 0 and v != 0 or v < 0 for n, v in given):
        return "judged"
    return "positive"


def _evaluate_queries(
    qrels: pl.DataFrame, run: pl.DataFrame, selected: list[Selected], options: Options, stand_ins: list[str]
) -> pl.DataFrame:
    """Per-query values (raw, before z-scores) of every selected measure, one row per evaluated query in query order,
    with `_stand_in` marking the queries evaluated on trec_eval's stand-in ranking."""
    qrels = contiguous(qrels, "query_id")
    segments = Segments.of(qrels.get_column("query_id"))
    per = _qrels_stats(qrels, segments, options.level)
    need = _needs(selected, options)
    useful, query_index = qrels, segments.index
    if need in ("positive", "judged"):
        grade = qrels.get_column("grade")
        keep = (grade >= options.level) | ((grade > 0) if need == "positive" else (grade >= 0))
        useful, query_index = qrels.filter(keep), query_index.filter(keep)
    judged, retrieved = _judged_rows(run, useful, segments.keys, query_index, need == "all", options.refuse_duplicates)
    per = (
        per.join(retrieved, on="query_id", how="inner")
        .sort("query_id")
        .with_row_index("pos")
        .with_columns(pl.col("pos").cast(pl.Int64))
    )
    per = per.with_columns(_stand_in=pl.col("query_id").is_in(pl.Series(stand_ins, dtype=pl.String).implode()))
    hits = judged.join(per.select("q", "pos"), on="q", how="inner").select("pos", "rank", "grade")
    if options.max_docs is not None:
        hits = hits.filter(pl.col("rank") <= options.max_docs)
        per = per.with_columns(num_ret=pl.min_horizontal("num_ret", pl.lit(max(options.max_docs, 0), dtype=pl.Int64)))
    hits = hits.sort("pos", "rank")
    if options.judged_only:
        # The judged docs keep their order and are ranked 1, 2, ... among themselves.
        hits = hits.filter(pl.col("grade") >= 0)
        judged = Segments.of(hits.get_column("pos"))
        hits = hits.with_columns(rank=judged.running(pl.repeat(1, hits.height, dtype=pl.Int64, eager=True)))
        judged_count = pl.DataFrame({"pos": judged.keys, "_judged": judged.last - judged.first + 1}).cast(
            {"_judged": pl.Int64}
        )
        per = (
            per.join(judged_count, on="pos", how="left")
            .with_columns(num_ret=pl.col("_judged").fill_null(0))
            .drop("_judged")
        )
    # trec_eval's relevance codes: the grade, -2 for a negative grade (pooled, unjudged), -1 outside the qrels.
    grade = pl.col("grade")
    code = (
        pl.when(grade >= 0)
        .then(grade)
        .when(grade.is_not_null())
        .then(pl.lit(-2, dtype=pl.Int64))
        .otherwise(pl.lit(-1, dtype=pl.Int64))
    )
    return measure_values(per, hits.select("pos", "rank", code=code), selected, options)


def _qrels_stats(qrels: pl.DataFrame, segments: Segments, level: int) -> pl.DataFrame:
    """Per query of the qrels: num_rel (grade >= level), num_nonrel (0 <= grade < level), the number of docs of each
    grade >= 0 (`_n<grade>`) and the highest grade >= 0 (`_maxlevel`, -1 when none)."""
    grade = qrels.get_column("grade")
    stats = {
        "query_id": segments.keys,
        "num_rel": segments.totals(((grade >= level) & (grade >= 0)).cast(pl.Int64)),
        "num_nonrel": segments.totals(((grade >= 0) & (grade < level)).cast(pl.Int64)),
    }
    levels = grade.filter(grade >= 0).unique().sort().to_list()
    for lv in levels:
        stats[f"_n{lv}"] = segments.totals((grade == lv).cast(pl.Int64))
    highest = pl.max_horizontal(*(pl.when(pl.col(f"_n{lv}") > 0).then(lv) for lv in levels)) if levels else pl.lit(None)
    return pl.DataFrame(stats).with_columns(_maxlevel=highest.fill_null(-1).cast(pl.Int64))
