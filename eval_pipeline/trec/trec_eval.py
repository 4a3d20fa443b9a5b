"""trec_eval 10.0's measures over a qrels frame and a run frame, computed columnar with polars.

Conventions follow trec_eval 10.0: documents are ordered by score descending (scores compare as doubles), ties by
docno descending, and the rank column of the run is ignored; queries of the run with no judgment are dropped; with
`complete`, a query of the qrels with no result is evaluated on trec_eval's one-document stand-in ranking and counts
in every average; relevant means grade >= level; a negative grade marks a pooled but unjudged document (`.` in
relstring, skipped by bpref and infAP), a document absent from the qrels is outside the pool (`-`); gains are the
grades themselves unless `-m ndcg.1=0,2=3`-style parameters set them. Every value is computed in the order and with
the arithmetic trec_eval uses (sums accumulated rank by rank, averages query by query), so the printed `%6.4f`
figures, exact halves included, are trec_eval's own.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

import numpy as np
import polars as pl

from eval_pipeline.trec.ranking import Segments, contiguous

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
# trec_eval's floor for geometric means (MIN_GEO_MEAN), so one zero does not zero the mean.
MIN_GEO_MEAN = 0.00001
# trec_eval's smoothing constant in infAP (INFAP_EPSILON).
INFAP_EPSILON = 0.00001
# trec_eval's value for a measure the z-score file has no mean for (MISSING_ZSCORE_VALUE).
MISSING_ZSCORE = -1000000.0
# The docno of trec_eval's one-document ranking for a query without results under -c.
STAND_IN_DOCNO = "ceci_nest_pas_un_docno"
# Separates the query and the judgment group in the pseudo-query ids of -R qrels_jg.
GROUP_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class Measure:
    """A trec_eval measure: printed name, parameter kind and defaults, print format, how `all` aggregates it, help text.

    kind: single (no parameters), cutoffs (integer ranks, `P_10`), levels (fractions printed %3.2f,
    `iprec_at_recall_0.10`), values (numbers in order, printed after the name as given: `utility_2,-1,0,0`),
    gains (`level=gain` pairs and, for rbp, `p=persistence`: `ndcg_1=0,2=3`).
    """

    name: str
    about: str = ""
    kind: str = "single"
    defaults: tuple = ()
    integer: bool = False
    aggregate: str = "mean"  # mean | sum | gm | count | runid | none
    summary_only: bool = False
    qrels_jg: bool = False

    @property
    def float_params(self) -> bool:
        """Whether the printed names carry %3.2f fractions (iprec_at_recall_0.10) rather than integers."""
        return self.kind == "levels"


# In trec_eval's own print order (its measure table), so output lines come out in the same order.
TABLE: tuple[Measure, ...] = (
    Measure("runid", "the run's tag (from the run file's last line)", aggregate="runid", summary_only=True),
    Measure("num_q", "number of queries evaluated", integer=True, aggregate="count", summary_only=True),
    Measure("num_ret", "documents retrieved (summed in 'all')", integer=True, aggregate="sum"),
    Measure("num_rel", "relevant documents in the qrels (summed in 'all')", integer=True, aggregate="sum"),
    Measure("num_rel_ret", "relevant documents retrieved (summed in 'all')", integer=True, aggregate="sum"),
    Measure("map", "mean average precision"),
    Measure("gm_map", "geometric mean of average precision (summary only)", aggregate="gm", summary_only=True),
    Measure("Rprec", "precision after R documents, R = number of relevant documents"),
    Measure("bpref", "binary preference: relevant documents above judged non-relevant ones"),
    Measure("recip_rank", "reciprocal rank of the first relevant document"),
    Measure("iprec_at_recall", "interpolated precision at recall levels", "levels", RECALL_LEVELS),
    Measure("P", "precision at cutoffs", "cutoffs", CUTOFFS),
    Measure(
        "relstring", "grades of the first N documents as a string (per query only)", "values", (10.0,), aggregate="none"
    ),
    Measure("recall", "recall at cutoffs", "cutoffs", CUTOFFS),
    Measure("infAP", "inferred AP (Yilmaz & Aslam): negative grades are pooled but unjudged"),
    Measure("gm_bpref", "geometric mean of bpref (summary only)", aggregate="gm", summary_only=True),
    Measure("Rprec_mult", "precision at multiples of R", "levels", R_MULTIPLES),
    Measure(
        "utility",
        "p1*rel_ret + p2*nonrel_ret + p3*rel_not_ret + p4*nonrel_not_ret (p4 needs -N)",
        "values",
        (1.0, -1.0, 0.0, 0.0),
    ),
    Measure("11pt_avg", "interpolated precision averaged over the recall levels given", "values", RECALL_LEVELS),
    Measure("binG", "binary G: relevant documents discounted by the non-relevant ones above them"),
    Measure("G", "normalized gain G (-m G.1=3.5,2=9)", "gains"),
    Measure("dcg", "discounted cumulative gain (not in all_trec)", "gains"),
    Measure("ideal_dcg", "ideal discounted cumulative gain (not in all_trec)", "gains"),
    Measure("ndcg", "nDCG over the whole ranking (-m ndcg.1=0,2=3 sets the gain of each grade)", "gains"),
    Measure("ndcg_rel", "nDCG averaged over the relevant documents (gains as ndcg)", "gains"),
    Measure("Rndcg", "nDCG averaged at the grade boundaries of the ideal ranking (gains as ndcg)", "gains"),
    Measure("ndcg_cut", "nDCG at cutoffs, gain = grade", "cutoffs", CUTOFFS),
    Measure("map_cut", "average precision truncated at cutoffs", "cutoffs", CUTOFFS),
    Measure("relative_P", "precision at cutoffs relative to the best possible", "cutoffs", CUTOFFS),
    Measure("success", "1 if a relevant document is in the top k", "cutoffs", (1, 5, 10)),
    Measure("set_P", "precision of the whole retrieved set"),
    Measure("set_relative_P", "set precision relative to the best possible"),
    Measure("set_recall", "recall of the whole retrieved set"),
    Measure("set_map", "set precision x set recall"),
    Measure("set_F", "F of set precision and recall, beta = the parameter (-m set_F.0.5)", "values", (1.0,)),
    Measure(
        "num_nonrel_judged_ret",
        "judged non-relevant documents retrieved (summed in 'all')",
        integer=True,
        aggregate="sum",
    ),
    Measure("map_avgjg", "map averaged over judgment groups (-R qrels_jg)", qrels_jg=True),
    Measure("P_avgjg", "P at cutoffs averaged over judgment groups (-R qrels_jg)", "cutoffs", CUTOFFS, qrels_jg=True),
    Measure(
        "Rprec_mult_avgjg",
        "Rprec_mult averaged over judgment groups (-R qrels_jg)",
        "levels",
        R_MULTIPLES,
        qrels_jg=True,
    ),
    Measure("yaap", "yet another average precision (Robertson; not in all_trec)"),
    Measure("rbp", "rank-biased precision, persistence p (-m rbp.p=0.95; default 0.9)", "gains"),
    Measure("rbp_resid", "rbp's residual: what unjudged documents could still add (-m rbp_resid.p=0.95)", "gains"),
    Measure("unj", "share of unjudged documents in the top k", "cutoffs", (5, 10, 20)),
)
MEASURE_BY_NAME = {m.name: m for m in TABLE}
OFFICIAL = (
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
)
ALL_TREC = (
    *OFFICIAL, "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility", "11pt_avg", "ndcg", "relative_P",
    "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P",
    "set_map", "set_F", "num_nonrel_judged_ret",
)  # fmt: skip
# The measures of all_trec, in print order; TABLE adds dcg, ideal_dcg, yaap and the qrels_jg measures.
MEASURES: tuple[Measure, ...] = tuple(m for m in TABLE if m.name in ALL_TREC)
NICKNAMES = {
    "official": OFFICIAL,
    "all_trec": ALL_TREC,
    "set": (
        "runid",
        "num_q",
        "num_ret",
        "num_rel",
        "num_rel_ret",
        "utility",
        "set_P",
        "set_recall",
        "set_relative_P",
        "set_map",
        "set_F",
    ),
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"),
}
# trec_eval's preference measures need its prefs / qrels_prefs relevance formats, which are not read here.
PREFERENCE_NICKNAMES = ("prefs", "all_prefs")
# The measures computable from -R qrels_jg judgments (each standing for its per-group measure).
JG_BASE = {"map_avgjg": "map", "P_avgjg": "P", "Rprec_mult_avgjg": "Rprec_mult"}


@dataclass(frozen=True)
class Selected:
    """A measure chosen for output with its parameters: cutoffs or levels (sorted), values (in order), or gain pairs.

    `printable` is the parameter text as given on the command line for values and gains measures, which trec_eval
    appends to the printed name (`set_F_0.5`); None for the defaults.
    """

    measure: Measure
    params: tuple = ()
    printable: str | None = None

    def columns(self) -> list[str]:
        """The printed names of this measure's values, e.g. P_5, iprec_at_recall_0.10, utility_2,-1,0,0."""
        if self.measure.kind in ("cutoffs", "levels"):
            return [f"{self.measure.name}_{_param_text(self.measure, p)}" for p in self.params]
        if self.printable is not None:
            return [f"{self.measure.name}_{self.printable}"]
        return [self.measure.name]

    def pairs(self) -> dict[str, float]:
        """The `name=value` parameters of a gains measure (the first value of a repeated name)."""
        out: dict[str, float] = {}
        for name, value in self.params if self.measure.kind == "gains" else ():
            out.setdefault(name, value)
        return out


@dataclass
class Evaluation:
    """Per-query values (one column per printed measure name) and the `all` summary, ready to print.

    `zscore` marks values converted to z-scores (printed with a `Z` prefix, as trec_eval -Z does).
    """

    selected: list[Selected]
    per_query: pl.DataFrame
    summary: dict[str, object] = field(default_factory=dict)
    zscore: bool = False


def _param_text(measure: Measure, param: float) -> str:
    """A parameter as trec_eval appends it to a printed name: %3.2f for levels, %ld for cutoffs."""
    return f"{param:3.2f}" if measure.float_params else str(int(param))


# ---------------------------------------------------------------- measure arguments (-m)


NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _number(text: str, spec: str) -> float:
    """A parameter's number; not a number raises, naming the -m argument."""
    if not NUMBER.fullmatch(text):
        raise ValueError(f"bad parameters in {spec!r}: {text!r} is not a number")
    return float(text)


def _cutoff(text: str, spec: str) -> int:
    """A rank cutoff: the integer part of the number, as trec_eval's atol reads it."""
    return int(_number(text, spec))


def _parse_params(measure: Measure, text: str, spec: str) -> tuple[tuple, str | None]:
    """The parameters of `-m NAME.TEXT` for `measure`, and the printable text for values and gains measures."""
    items = text.split(",")
    if measure.kind == "single":
        raise ValueError(f"measure {measure.name!r} takes no parameters")
    if measure.kind in ("cutoffs", "levels"):
        values = [_cutoff(p, spec) if measure.kind == "cutoffs" else _number(p, spec) for p in items]
        if any(v <= 0 for v in values) if measure.kind == "cutoffs" else any(v < 0 for v in values):
            raise ValueError(f"bad parameters in {spec!r}: cutoffs must be positive")
        if len(set(values)) < len(values):
            raise ValueError(f"bad parameters in {spec!r}: duplicate cutoffs")
        return tuple(sorted(values)), None
    if measure.kind == "values":
        values = tuple(_number(p, spec) for p in items)
        if measure.name == "utility" and len(values) != 4:
            raise ValueError(f"bad parameters in {spec!r}: utility takes 4 coefficients")
        return values, text
    pairs = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or "=" in value:
            raise ValueError(f"bad parameters in {spec!r}: expected name=value pairs such as 1=0,2=3 or p=0.9")
        pairs.append((name, _number(value, spec)))
    return tuple(pairs), text


def parse_measures(specs: Iterable[str] | None) -> list[Selected]:
    """trec_eval `-m` arguments as selected measures, in trec_eval's print order.

    Accepted: nicknames (official, all_trec, set, qrels_jg), NAME, NAME.params (P.5,10; iprec_at_recall..1,.5;
    utility.2,-1,0,0; set_F.0.5; ndcg.1=0,2=3; rbp.p=0.95) and the shorthand P_5 for one cutoff. Cutoffs given for a
    measure replace its defaults (several -m for one measure add up); for values and gains measures the first
    parameter list given wins, as in trec_eval.
    """
    marked: set[str] = set()
    explicit: dict[str, list[tuple[tuple, str | None]]] = {}
    for spec in specs or ["official"]:
        name, dot, text = spec.partition(".")
        if name in NICKNAMES:
            marked.update(NICKNAMES[name])
            continue
        if name in PREFERENCE_NICKNAMES or name.startswith("prefs_"):
            raise ValueError(
                f"preference measure {spec!r} needs -R prefs or qrels_prefs judgments, which are not supported"
            )
        if name not in MEASURE_BY_NAME:
            # Shorthand such as P_5 or ndcg_cut_10: the printed name of one value.
            match = re.fullmatch(r"(.+)_([0-9.]+)", spec)
            shorthand = MEASURE_BY_NAME.get(match.group(1)) if match else None
            if shorthand is None or shorthand.kind not in ("cutoffs", "levels"):
                known = ", ".join(m.name for m in TABLE)
                raise ValueError(f"unknown measure {spec!r}; known: {known}, and the sets {', '.join(NICKNAMES)}")
            name, dot, text = shorthand.name, ".", match.group(2)
        measure = MEASURE_BY_NAME[name]
        marked.add(name)
        if dot:
            if not text:
                raise ValueError(f"measure {spec!r}: empty parameter list")
            explicit.setdefault(name, []).append(_parse_params(measure, text, spec))
    selected = []
    for measure in TABLE:
        if measure.name not in marked:
            continue
        given = explicit.get(measure.name)
        if not given:
            selected.append(Selected(measure, tuple(measure.defaults)))
        elif measure.kind in ("cutoffs", "levels"):
            selected.append(Selected(measure, tuple(sorted({p for params, _ in given for p in params}))))
        else:
            selected.append(Selected(measure, given[0][0], given[0][1]))
    _check_names(selected)
    return selected


def _check_names(selected: list[Selected]) -> None:
    """Refuse parameters that would print two values under one name (their columns would clash)."""
    names = [c for s in selected for c in s.columns()]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"two parameters print as the same name: {', '.join(repeated)}")


def _selection(measures: Sequence[str] | Sequence[Selected] | None) -> list[Selected]:
    """Selected measures as given, or parsed from -m arguments."""
    if measures and all(isinstance(m, Selected) for m in measures):
        return list(measures)  # type: ignore[arg-type]
    return parse_measures(measures)  # type: ignore[arg-type]


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
    """Ranks of the matched rows when every query is one block listed by non-increasing score (as run files are), else None.

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


# ---------------------------------------------------------------- gains and ideal rankings


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


def _valid_level(name: str) -> bool:
    """Whether a gain parameter's name is a relevance level (trec_eval's valid_int), not e.g. rbp's p."""
    return re.fullmatch(r"[+-]?\d+", name) is not None


def _default_gain(level: int, gain: str) -> float:
    """The gain of a level no parameter sets: the level itself, or 2^level - 1."""
    return float(level) if gain == "linear" else 2.0**level - 1.0


class _Gains:
    """trec_eval's gains for one parameter list: the gain of each relevance code, and per query the ideal ranking as
    slots of equal gain in ideal order (per-query columns `<prefix>g<s>`, the slot's gain, and `<prefix>a<s>`, the
    ideal positions filled by the end of slot s; a slot past the end of the ideal ranking adds no position).

    trec_eval lists the levels given as parameters (in order), then the query's levels 0..max not given, sorts them by
    gain with a comparator that truncates differences to int, and fills the ideal ranking from the highest gain down,
    stopping at the first level with documents and a gain <= 0.
    """

    def __init__(self, prefix: str, pairs: dict[str, float], gain: str, per: pl.DataFrame) -> None:
        self.prefix, self.gain = prefix, gain
        self.given = {int(name): value for name, value in pairs.items() if _valid_level(name)}
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
        value = _f(code) if self.gain == "linear" else pl.lit(2.0).pow(_f(code)) - 1.0
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
            total = total + pl.col(f"{self.prefix}g{s}") * _f(self.end(s) - start)
            start = self.end(s)
        return total

    def cost(self, rank: pl.Expr) -> pl.Expr:
        """G's cost at `rank`: one per position plus what the ideal gains above 1 add over the first `rank` positions."""
        total, start = _f(rank), pl.lit(0, dtype=pl.Int64)
        for s in range(self.slots):
            width = pl.min_horizontal(self.end(s), rank) - pl.min_horizontal(start, rank)
            total = total + pl.max_horizontal(pl.col(f"{self.prefix}g{s}") - 1.0, pl.lit(0.0)) * _f(width)
            start = self.end(s)
        return total


@lru_cache(maxsize=8)
def _log2_table(size: int) -> pl.Series:
    """log2(k) for k = 0..size-1 with the C library's log2, as trec_eval computes its discounts (log2(0) = -inf)."""
    return pl.Series([-math.inf, *(math.log2(k) for k in range(1, size))], dtype=pl.Float64)


def _table_size(n: int) -> int:
    """A power of two above n (at least 1024), so the cached log2 tables are few."""
    return 1 << max(10, int(n).bit_length())


def _log2(argument: pl.Expr, below: int) -> pl.Expr:
    """C log2 of a non-negative integer expression whose values are below `below`."""
    return pl.lit(_log2_table(_table_size(below))).gather(argument.cast(pl.Int64))


def _discounts(longest: int) -> pl.Series:
    """D[i] = sum of 1/log2(j + 1) for j = 1..i, i = 0..longest: ideal DCGs are differences of D."""
    logs = _log2_table(_table_size(longest + 2))
    return pl.concat([pl.Series([0.0]), (1.0 / logs.slice(2, longest)).cum_sum()])


# ---------------------------------------------------------------- evaluation


@dataclass
class _Options:
    level: int
    gain: str
    max_docs: int | None
    judged_only: bool
    num_docs: int
    refuse_duplicates: bool = False


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


class _Sums:
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
    options = _Options(level, gain, max_docs, judged_only, num_docs, refuse_duplicates)
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
        per_query = _to_zscores(per_query, selected, zscores)
    summary = _summary(selected, per_query, runid, qrels if complete else None, zscores is not None)
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
    qrels: pl.DataFrame, run: pl.DataFrame, selected: list[Selected], options: _Options, stand_ins: list[str]
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
        c: pl.when(pl.col("_groups") > 1).then(pl.col(c) / _f(pl.col("_groups"))).otherwise(pl.col(c)) for c in columns
    }
    return added.with_columns(
        **divided, _stand_in=pl.col("query_id").is_in(pl.Series(stand_ins, dtype=pl.String).implode())
    )


def _needs(selected: list[Selected], options: _Options) -> str:
    """Which qrels rows can change a value: 'positive' (relevant or with a gain), 'judged' (grade >= 0 too), 'pool'
    (negative grades too), 'all' (documents outside the qrels too)."""
    names = {s.measure.name for s in selected}
    given = [
        (int(n), v) for s in selected if s.measure.kind == "gains" for n, v in s.pairs().items() if _valid_level(n)
    ]
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
    qrels: pl.DataFrame, run: pl.DataFrame, selected: list[Selected], options: _Options, stand_ins: list[str]
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
    return _measure_values(per, hits.select("pos", "rank", code=code), selected, options)


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


def _levels(per: pl.DataFrame) -> list[int]:
    """The grades >= 0 the qrels hold, from the per-query count columns."""
    return sorted(int(c[2:]) for c in per.columns if re.fullmatch(r"_n\d+", c))


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """numerator / denominator, 0.0 when the denominator is 0 (trec_eval's convention for empty sets)."""
    return pl.when(denominator > 0).then(_f(numerator) / _f(denominator)).otherwise(0.0)


def _f(expr: pl.Expr) -> pl.Expr:
    """The expression as a double, as C converts longs before dividing."""
    return expr.cast(pl.Float64)


def _div_constant(numerator: pl.Expr, constant: float) -> pl.Expr:
    """numerator / constant as an element-wise IEEE division, as C divides: polars multiplies by the reciprocal of a
    scalar divisor instead, which rounds differently (9 / 1000 would come out 0.009000000000000001)."""
    return _f(numerator) / ((pl.int_range(pl.len()) * 0).cast(pl.Float64) + float(constant))


# The measures whose per-row sums use the ideal ranking, and the gain their defaults take (G and rbp keep the grade).
DCG_FAMILY = ("dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "G", "ndcg_cut")


def _measure_values(per: pl.DataFrame, hits: pl.DataFrame, selected: list[Selected], options: _Options) -> pl.DataFrame:
    """Every selected measure per query from the query table `per` (pos-indexed) and the ranked rows `hits` (pos, rank,
    code, sorted by pos and rank)."""
    level = options.level
    names = {s.measure.name: s for s in selected}
    models = _gain_models(names, per, options)
    distinct = {prefix: model for prefix, model in models.values()}
    for model in distinct.values():
        per = model.add_columns(per)
    segments = Segments.of(hits.get_column("pos"))
    code, rank = pl.col("code"), pl.col("rank")
    rel = code >= level
    below = int(hits.get_column("rank").max() or 0) + 3
    ideal_columns = [c for c in per.columns if re.fullmatch(r"_idl\d+[ga]\d+", c)]
    rows = hits.with_columns(
        seen=segments.running(hits.select(rel.cast(pl.Int64)).to_series()),
        nonrel_seen=segments.running(hits.select(((code >= 0) & (code < level)).cast(pl.Int64)).to_series()),
        pool_seen=segments.running(hits.select((code == -2).cast(pl.Int64)).to_series()),
        **{
            c: per.get_column(c).gather(hits.get_column("pos"))
            for c in ["num_rel", "num_ret", "num_nonrel", "_maxlevel", *ideal_columns]
        },
    )
    sums = _Sums(rows, segments)
    sums.counts["num_rel_ret"] = rel
    prec = _f(pl.col("seen")) / _f(rank)
    r, nrr = pl.col("num_rel"), pl.col("num_rel_ret")
    columns: dict[str, pl.Expr] = {}

    if names.keys() & {"map", "gm_map", "yaap"}:
        sums.sums["_ap"] = pl.when(rel).then(prec)
    for name in ("map", "gm_map"):
        if name in names:
            columns[name] = pl.when(nrr > 0).then(pl.col("_ap") / _f(r)).otherwise(0.0)
    if "yaap" in names:
        columns["yaap"] = ((1.0 + pl.col("_ap")) / ((1.0 + _f(r)) - pl.col("_ap"))).log()
    if "Rprec" in names:
        sums.counts["_rprec"] = rel & (rank <= pl.col("num_rel"))
        columns["Rprec"] = (
            pl.when(pl.min_horizontal("num_ret", "num_rel") > 0).then(_f(pl.col("_rprec")) / _f(r)).otherwise(0.0)
        )
    if names.keys() & {"bpref", "gm_bpref"}:
        # Judged non-relevant docs above a relevant one, against the smaller of R and the judged non-relevant count.
        above = pl.col("nonrel_seen")
        term = pl.when(above > 0).then(
            1.0 - _f(pl.min_horizontal(above, "num_rel")) / _f(pl.min_horizontal("num_nonrel", "num_rel"))
        )
        sums.sums["_bpref"] = pl.when((code >= 0) & rel).then(term.otherwise(1.0))
        for name in ("bpref", "gm_bpref"):
            if name in names:
                columns[name] = pl.when(r > 0).then(pl.col("_bpref") / _f(r)).otherwise(pl.col("_bpref"))
    if "recip_rank" in names:
        sums.minima["_first"] = pl.when(rel).then(rank)
        columns["recip_rank"] = pl.when(pl.col("_first").is_not_null()).then(1.0 / _f(pl.col("_first"))).otherwise(0.0)
    if "infAP" in names:
        # Precision above each relevant doc estimated from the judged docs above it; pooled-unjudged docs count as
        # retrieved but not as judged, docs outside the pool not at all.
        j = _f(rank - 1)
        found, nonrel, unjudged = pl.col("seen"), pl.col("nonrel_seen"), pl.col("pool_seen")
        later = 1.0 / (j + 1.0) + (j / (j + 1.0)) * (_f(found - 1 + nonrel + unjudged) / j) * (
            (_f(found - 1) + INFAP_EPSILON) / (_f(found - 1 + nonrel) + 2 * INFAP_EPSILON)
        )
        sums.sums["_infap"] = pl.when((code >= 0) & rel).then(pl.when(rank == 1).then(1.0).otherwise(later))
        columns["infAP"] = pl.when(r > 0).then(pl.col("_infap") / _f(r)).otherwise(pl.col("_infap"))
    if "binG" in names:
        sums.sums["_bing"] = pl.when(rel).then(1.0 / _log2(2 + rank - pl.col("seen"), below))
        columns["binG"] = pl.when(nrr > 0).then(pl.col("_bing") / _f(r)).otherwise(0.0)
    for x in sorted(_recall_levels(names)):
        sums.maxima[f"_ip@{x!r}"] = pl.when(rel & (pl.col("seen") >= _recall_count(x))).then(prec)

    cutoffs = sorted({k for m in ("P", "recall", "relative_P", "success") if m in names for k in names[m].params})
    for k in cutoffs:
        sums.counts[f"_rel@{k}"] = rel & (rank <= k)
    for k in names["map_cut"].params if "map_cut" in names else ():
        sums.sums[f"_ap@{k}"] = pl.when(rel & (rank <= k)).then(prec)
    for x in names["Rprec_mult"].params if "Rprec_mult" in names else ():
        sums.counts[f"_rmult@{x!r}"] = rel & (rank <= _r_cutoff(x))
    for k in names["unj"].params if "unj" in names else ():
        sums.counts[f"_judged@{k}"] = (code >= 0) & (rank <= k)
    if "num_nonrel_judged_ret" in names:
        sums.counts["_nonrel_ret"] = (code >= 0) & (code < level)
    for s in selected:
        columns.update(_count_columns(s, options))

    longest = max([int(per.select(model.length().max()).item() or 0) for model in distinct.values()] + [1])
    discounts = _discounts(longest)
    gain_columns = [
        c
        for name in DCG_FAMILY
        if name in names
        for c in _register_gain(names[name], models[name], sums, below, discounts)
    ]
    if "rbp" in names:
        columns.update(_rbp(names["rbp"], sums, per))
    if "rbp_resid" in names:
        columns.update(_rbp_resid(names["rbp_resid"], sums))

    per = per.join(sums.collect(), on="pos", how="left").with_columns(sums.defaults())
    per = _interpolated(per.with_columns(*gain_columns, **columns), names)
    if "relstring" in names:
        per = _add_relstring(per, hits, names["relstring"])
    return _clean_stand_ins(per, selected)


def _r_cutoff(multiple: float) -> pl.Expr:
    """The rank of a multiple of R: trec_eval adds 0.9 to mult * R and truncates."""
    return (_f(pl.col("num_rel")) * multiple + 0.9).floor().cast(pl.Int64)


def _recall_count(x: float) -> pl.Expr:
    """The relevant docs a recall level stands for: trec_eval 10 takes lround(x * R)."""
    return (_f(pl.col("num_rel")) * x).round(0, mode="half_away_from_zero").cast(pl.Int64)


def _recall_levels(names: dict[str, Selected]) -> set[float]:
    """The recall levels whose interpolated precision iprec_at_recall and 11pt_avg need."""
    levels = set(names["iprec_at_recall"].params) if "iprec_at_recall" in names else set()
    if "11pt_avg" in names:
        # Level 0 gives the final interpolated precision, which 11pt_avg's stuck levels take.
        levels.update([*names["11pt_avg"].params, 0.0])
    return levels


def _interpolated(per: pl.DataFrame, names: dict[str, Selected]) -> pl.DataFrame:
    """iprec_at_recall and 11pt_avg from the `_ip@x` maxima: the best precision at a relevant doc once the count
    lround(x * R) is reached (what trec_eval's backward pass over the ranking keeps), 0 past the relevant retrieved."""
    nrr, n = pl.col("num_rel_ret"), pl.col("num_ret")

    def at(x: float) -> pl.Expr:
        # The final interpolated precision of an empty ranking is trec_eval's 0/0: NaN.
        best = pl.col(f"_ip@{x!r}").fill_null(0.0)
        return pl.when((n == 0) & (_recall_count(x) == 0)).then(float("nan")).otherwise(best)

    if "iprec_at_recall" in names:
        s = names["iprec_at_recall"]
        per = per.with_columns(
            pl.when(_recall_count(x) > nrr).then(0.0).otherwise(at(x)).alias(col)
            for x, col in zip(s.params, s.columns(), strict=True)
        )
    if "11pt_avg" in names:
        s = names["11pt_avg"]
        # trec_eval consumes the levels from the last to the first while the relevant count falls: levels beyond the
        # relevant retrieved add nothing; a level whose count was passed already (levels out of order) or is 0 stops
        # the pass, and it and every level before it add the final interpolated precision. Added in that order; each
        # step's state is a column, so the expressions stay flat.
        per = per.with_columns(_sum=pl.lit(0.0), _stuck=pl.lit(False), _bound=nrr, _skipping=pl.lit(True))
        stuck, bound, skipping = pl.col("_stuck"), pl.col("_bound"), pl.col("_skipping")
        for x in reversed(s.params):
            c = _recall_count(x)
            per = per.with_columns(_skipping=skipping & (c > nrr))
            per = per.with_columns(_matched=~skipping & ~stuck & (c >= 1) & (c <= bound))
            matched = pl.col("_matched")
            per = per.with_columns(
                _sum=pl.col("_sum") + pl.when(skipping).then(0.0).when(matched).then(at(x)).otherwise(at(0.0)),
                _bound=pl.when(matched).then(c).otherwise(bound),
                _stuck=~skipping & ~matched,
            )
        per = per.with_columns(_div_constant(pl.col("_sum"), len(s.params)).alias(s.columns()[0]))
    return per


def _count_columns(s: Selected, options: _Options) -> dict[str, pl.Expr]:
    """Per-query columns of the measures that are plain functions of per-query counts and sums."""
    r, n, nrr = pl.col("num_rel"), pl.col("num_ret"), pl.col("num_rel_ret")
    name, out = s.measure.name, {}
    for p, col in zip(s.params, s.columns(), strict=True) if s.measure.kind in ("cutoffs", "levels") else ():
        if name == "P":
            out[col] = _div_constant(pl.col(f"_rel@{p}"), p)
        elif name == "recall":
            out[col] = _ratio(pl.col(f"_rel@{p}"), r)
        elif name == "relative_P":
            out[col] = pl.when(r > 0).then(_f(pl.col(f"_rel@{p}")) / _f(pl.min_horizontal(r, pl.lit(p)))).otherwise(0.0)
        elif name == "success":
            out[col] = (pl.col(f"_rel@{p}") > 0).cast(pl.Float64)
        elif name == "map_cut":
            out[col] = _ratio(pl.col(f"_ap@{p}"), r)
        elif name == "Rprec_mult":
            out[col] = _ratio(pl.col(f"_rmult@{p!r}"), _r_cutoff(p))
        elif name == "unj":
            # Unjudged (absent from the qrels, or a negative grade) among the top p: what is shown minus what is judged.
            out[col] = _div_constant(pl.min_horizontal(n, pl.lit(p)) - pl.col(f"_judged@{p}"), p)
    col = s.columns()[0]
    if name in ("num_ret", "num_rel", "num_rel_ret"):
        out[col] = pl.col(name)
    elif name == "num_nonrel_judged_ret":
        out[col] = pl.col("_nonrel_ret")
    elif name == "utility":
        p1, p2, p3, p4 = s.params
        outside = pl.lit(options.num_docs, dtype=pl.Int64) + nrr - n - r
        out[col] = p1 * _f(nrr) + p2 * _f(n - nrr) + p3 * _f(r - nrr) + p4 * _f(outside)
    elif name == "set_P":
        out[col] = _ratio(nrr, n)
    elif name == "set_relative_P":
        out[col] = pl.when((n > 0) & (r > 0)).then(_f(nrr) / _f(pl.min_horizontal(n, r))).otherwise(0.0)
    elif name == "set_recall":
        out[col] = _ratio(nrr, r)
    elif name == "set_map":
        out[col] = pl.when((n > 0) & (r > 0)).then((_f(nrr) * _f(nrr)) / (_f(n) * _f(r))).otherwise(0.0)
    elif name == "set_F":
        beta = s.params[0]
        precision, recall = _f(nrr) / _f(n), _f(nrr) / _f(r)
        out[col] = pl.when(nrr > 0).then((beta + 1.0) * precision * recall / (beta * precision + recall)).otherwise(0.0)
    return out


def _gain_models(names: dict[str, Selected], per: pl.DataFrame, options: _Options) -> dict[str, tuple[str, _Gains]]:
    """The gain model of each selected DCG-family measure and G (one model per distinct parameter list), by measure."""
    models: dict[tuple, tuple[str, _Gains]] = {}
    out = {}
    for name in DCG_FAMILY:
        if name in names:
            pairs = names[name].pairs() if name != "ndcg_cut" else {}
            gain = "linear" if name == "G" else options.gain
            key = (tuple(sorted(pairs.items())), gain)
            if key not in models:
                prefix = f"_idl{len(models)}"
                models[key] = (prefix, _Gains(prefix, pairs, gain, per))
            out[name] = models[key]
    return out


def _register_gain(
    s: Selected, model: tuple[str, _Gains], sums: _Sums, below: int, discounts: pl.Series
) -> list[pl.Expr]:
    """Register the row sums of a DCG-family measure or G; returns its per-query value columns."""
    name, col = s.measure.name, s.columns()[0]
    prefix, gains = model
    rank, code = pl.col("rank"), pl.col("code")
    if name == "ndcg_cut":
        value = _f(code) if gains.gain == "linear" else pl.lit(2.0).pow(_f(code)) - 1.0
        gain = pl.when(code > 0).then(value).otherwise(0.0)
    else:
        gain = gains.code_gain(code)
    term = pl.when(gain != 0).then(gain / _log2(rank + 1, below))
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
        missing = _f(gains.length() - pl.col(f"{key}positive"))
        total = pl.col(f"{key}rel") + pl.when(ideal > 0).then(missing * dcg / ideal).otherwise(0.0)
        return [pl.when(total > 0).then(total / _f(gains.length())).otherwise(0.0).alias(col)]
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
    return [pl.when(pl.col("num_rel") == 0).then(0.0).otherwise(total / _f(points)).alias(col)]


def _rbp_gains(s: Selected, per: pl.DataFrame) -> pl.DataFrame:
    """rbp's gain of each (highest grade of the query, relevance code): trec_eval's gains (levels given, then the
    query's levels 0..max at their own value) rescaled to [0, 1] by the list's extremes when they leave it."""
    given = {int(name): value for name, value in s.pairs().items() if _valid_level(name)}
    rows = []
    for m in per.get_column("_maxlevel").unique().to_list():
        listed = [*given.items(), *((lv, float(lv)) for lv in range(m + 1) if lv not in given)]
        # trec_eval's min and max start from 0 (its locals are not initialized; 0 is what its builds hold).
        low, high = min([0.0, *(g for _, g in listed)]), max([0.0, *(g for _, g in listed)])
        rescale = low < 0 or high > 1
        rows += [(m, lv, (g - low) / (high - low) if rescale else g) for lv, g in listed]
    return pl.DataFrame(rows, schema={"_maxlevel": pl.Int64, "code": pl.Int64, "_rbp_gain": pl.Float64}, orient="row")


def _rbp(s: Selected, sums: _Sums, per: pl.DataFrame) -> dict[str, pl.Expr]:
    """rbp: (1 - p) times the sum of gain * p^(rank - 1)."""
    p = s.pairs().get("p", 0.9)
    table = _rbp_gains(s, per)
    sums.rows = sums.rows.join(table, on=["_maxlevel", "code"], how="left", maintain_order="left")
    gain = pl.col("_rbp_gain").fill_null(0.0)
    sums.sums["_rbp"] = pl.when(gain != 0).then(gain * pl.lit(p).pow(_f(pl.col("rank") - 1)))
    return {s.columns()[0]: (1.0 - p) * pl.col("_rbp")}


def _rbp_resid(s: Selected, sums: _Sums) -> dict[str, pl.Expr]:
    """rbp_resid, when an unjudged doc is retrieved: p^num_ret + (1 - p) times the unjudged docs' p^(rank - 1), that is
    1 - (1 - p) times the judged docs' p^(rank - 1)."""
    p = s.pairs().get("p", 0.9)
    judged = pl.col("code") >= 0
    sums.sums["_rbp_judged"] = pl.when(judged).then(pl.lit(p).pow(_f(pl.col("rank") - 1)))
    sums.counts["_judged_ret"] = judged
    value = (
        pl.when(pl.col("num_ret") > pl.col("_judged_ret")).then(1.0 - (1.0 - p) * pl.col("_rbp_judged")).otherwise(0.0)
    )
    return {s.columns()[0]: value}


def _add_relstring(per: pl.DataFrame, hits: pl.DataFrame, s: Selected) -> pl.DataFrame:
    """relstring: one character per document of the top N (the grade 0-9, '>' above 9, '-' outside the qrels, '.' a
    negative grade)."""
    length, col = int(s.params[0]), s.columns()[0]
    shown = per.select("pos", n=pl.min_horizontal("num_ret", pl.lit(max(length, 0), dtype=pl.Int64)))
    places = (
        shown.filter(pl.col("n") > 0)
        .select("pos", rank=pl.int_ranges(1, pl.col("n") + 1, dtype=pl.Int64))
        .explode("rank")
    )
    code = pl.col("code")
    char = (
        pl.when(code > 9)
        .then(pl.lit(">"))
        .when(code >= 0)
        .then(code.cast(pl.String))
        .when(code == -1)
        .then(pl.lit("-"))
    )
    char = char.when(code == -2).then(pl.lit(".")).otherwise(pl.lit("<"))
    marks = hits.filter(pl.col("rank") <= length).select("pos", "rank", _ch=char)
    text = (
        places.join(marks, on=["pos", "rank"], how="left", maintain_order="left")
        .group_by("pos", maintain_order=True)
        .agg(pl.col("_ch").fill_null("-").str.join(""))
    )
    return per.join(text.rename({"_ch": col}), on="pos", how="left").with_columns(pl.col(col).fill_null(""))


def _clean_stand_ins(per: pl.DataFrame, selected: list[Selected]) -> pl.DataFrame:
    """trec_eval's clean-up of a stand-in ranking's values: num_ret, utility, relstring, unj_* and rbp_resid (by those
    exact printed names) go back to zero."""
    stand_in, out = pl.col("_stand_in"), {}
    for s in selected:
        for col in s.columns():
            if col == "num_ret":
                out[col] = pl.when(stand_in).then(pl.lit(0, dtype=pl.Int64)).otherwise(pl.col(col))
            elif col in ("utility", "rbp_resid") or col.startswith("unj"):
                out[col] = pl.when(stand_in).then(0.0).otherwise(pl.col(col))
            elif col == "relstring":
                out[col] = pl.when(stand_in).then(pl.lit("")).otherwise(pl.col(col))
    return per.with_columns(**out) if out else per


# ---------------------------------------------------------------- z-scores, summary, output


def _to_zscores(per: pl.DataFrame, selected: list[Selected], zscores: pl.DataFrame) -> pl.DataFrame:
    """Each per-query value as (value - mean) / std_dev of its (query, measure) in the z-score file (trec_eval -Z);
    a missing mean, or a std_dev of 0 with a value other than the mean, gives -1000000. gm_* convert log values."""
    table = zscores.select(
        pl.col("query_id").cast(pl.String),
        pl.col("measure").cast(pl.String),
        pl.col("mean").cast(pl.Float64),
        pl.col("std_dev").cast(pl.Float64),
    ).unique(subset=["query_id", "measure"], keep="first")
    out = per
    for s in selected:
        if s.measure.aggregate in ("runid", "count", "none"):
            continue
        for col in s.columns():
            raw = pl.col(col).cast(pl.Float64)
            if s.measure.aggregate == "gm":
                raw = pl.max_horizontal(raw, pl.lit(MIN_GEO_MEAN)).log()
            stats = table.filter(pl.col("measure") == col).select("query_id", _m="mean", _s="std_dev")
            joined = out.select("query_id", _v=raw).join(stats, on="query_id", how="left", maintain_order="left")
            z = (
                pl.when(pl.col("_m").is_null())
                .then(MISSING_ZSCORE)
                .when(pl.col("_s") != 0)
                .then((pl.col("_v") - pl.col("_m")) / pl.col("_s"))
                .when(pl.col("_v") == pl.col("_m"))
                .then(0.0)
                .otherwise(MISSING_ZSCORE)
            )
            out = out.with_columns(joined.select(z).to_series().alias(col))
    return out


def _summary(
    selected: list[Selected], per_query: pl.DataFrame, runid: str, complete_qrels: pl.DataFrame | None, zscore: bool
) -> dict[str, object]:
    """The `all` values as trec_eval accumulates them query by query: sums for counts, exp of the mean log for gm_*,
    the sum over the number of queries otherwise."""
    count = per_query.height
    # Query by query, as trec_eval adds them (a running sum); the division happens here, in IEEE double.
    totals = {}
    for s in selected:
        if s.measure.aggregate in ("runid", "count", "none"):
            continue
        for col in s.columns():
            value = pl.col(col).cast(pl.Float64)
            if s.measure.aggregate == "gm" and not zscore:
                value = pl.max_horizontal(value, pl.lit(MIN_GEO_MEAN)).log()
            totals[col] = value.cum_sum().last().fill_null(0.0)
    values = per_query.select(**totals).row(0, named=True) if totals and count else dict.fromkeys(totals, 0.0)
    summary: dict[str, object] = {}
    for s in selected:
        agg = s.measure.aggregate
        for col in s.columns():
            if agg == "runid":
                summary[col] = runid
            elif agg == "count":
                summary[col] = count
            elif agg == "none":
                continue
            elif agg == "sum":
                summary[col] = int(values[col]) if s.measure.integer and not zscore else values[col]
            elif agg == "gm":
                summary[col] = math.exp(values[col] / count) if count else 0.0
            else:
                summary[col] = values[col] / count if count else 0.0
    if complete_qrels is not None and not zscore and "num_rel" in summary:
        # trec_eval -c sums num_rel over every query of the qrels, counting grades > 0 whatever the level.
        summary["num_rel"] = int(complete_qrels.filter(pl.col("grade") > 0).height)
    return summary


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
