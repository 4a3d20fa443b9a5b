"""Every selected measure's per-query values from the per-query qrels table and the ranked judged rows."""

from __future__ import annotations

import re

import polars as pl

from eval_pipeline.trec.c_math import discount_sums, double, log2
from eval_pipeline.trec.gains import DCG_FAMILY, gain_models, rbp, rbp_resid, register_gain
from eval_pipeline.trec.measures import Options, Selected
from eval_pipeline.trec.ranking import Segments
from eval_pipeline.trec.sums import Sums

# trec_eval's smoothing constant in infAP (INFAP_EPSILON).
INFAP_EPSILON = 0.00001


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """numerator / denominator, 0.0 when the denominator is 0 (trec_eval's convention for empty sets)."""
    return pl.when(denominator > 0).then(double(numerator) / double(denominator)).otherwise(0.0)


def _div_constant(numerator: pl.Expr, constant: float) -> pl.Expr:
    """numerator / constant as an element-wise IEEE division, as C divides: polars multiplies by the reciprocal of a
    scalar divisor instead, which rounds differently (9 / 1000 would come out 0.009000000000000001)."""
    return double(numerator) / ((pl.int_range(pl.len()) * 0).cast(pl.Float64) + float(constant))


def measure_values(per: pl.DataFrame, hits: pl.DataFrame, selected: list[Selected], options: Options) -> pl.DataFrame:
    """Every selected measure per query from the query table `per` (pos-indexed) and the ranked rows `hits` (pos, rank,
    code, sorted by pos and rank)."""
    level = options.level
    names = {s.measure.name: s for s in selected}
    models = gain_models(names, per, options)
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
    sums = Sums(rows, segments)
    sums.counts["num_rel_ret"] = rel
    prec = double(pl.col("seen")) / double(rank)
    r, nrr = pl.col("num_rel"), pl.col("num_rel_ret")
    columns: dict[str, pl.Expr] = {}

    if names.keys() & {"map", "gm_map", "yaap"}:
        sums.sums["_ap"] = pl.when(rel).then(prec)
    for name in ("map", "gm_map"):
        if name in names:
            columns[name] = pl.when(nrr > 0).then(pl.col("_ap") / double(r)).otherwise(0.0)
    if "yaap" in names:
        columns["yaap"] = ((1.0 + pl.col("_ap")) / ((1.0 + double(r)) - pl.col("_ap"))).log()
    if "Rprec" in names:
        sums.counts["_rprec"] = rel & (rank <= pl.col("num_rel"))
        columns["Rprec"] = (
            pl.when(pl.min_horizontal("num_ret", "num_rel") > 0)
            .then(double(pl.col("_rprec")) / double(r))
            .otherwise(0.0)
        )
    if names.keys() & {"bpref", "gm_bpref"}:
        # Judged non-relevant docs above a relevant one, against the smaller of R and the judged non-relevant count.
        above = pl.col("nonrel_seen")
        term = pl.when(above > 0).then(
            1.0 - double(pl.min_horizontal(above, "num_rel")) / double(pl.min_horizontal("num_nonrel", "num_rel"))
        )
        sums.sums["_bpref"] = pl.when((code >= 0) & rel).then(term.otherwise(1.0))
        for name in ("bpref", "gm_bpref"):
            if name in names:
                columns[name] = pl.when(r > 0).then(pl.col("_bpref") / double(r)).otherwise(pl.col("_bpref"))
    if "recip_rank" in names:
        sums.minima["_first"] = pl.when(rel).then(rank)
        columns["recip_rank"] = (
            pl.when(pl.col("_first").is_not_null()).then(1.0 / double(pl.col("_first"))).otherwise(0.0)
        )
    if "infAP" in names:
        # Precision above each relevant doc estimated from the judged docs above it; pooled-unjudged docs count as
        # retrieved but not as judged, docs outside the pool not at all.
        j = double(rank - 1)
        found, nonrel, unjudged = pl.col("seen"), pl.col("nonrel_seen"), pl.col("pool_seen")
        later = 1.0 / (j + 1.0) + (j / (j + 1.0)) * (double(found - 1 + nonrel + unjudged) / j) * (
            (double(found - 1) + INFAP_EPSILON) / (double(found - 1 + nonrel) + 2 * INFAP_EPSILON)
        )
        sums.sums["_infap"] = pl.when((code >= 0) & rel).then(pl.when(rank == 1).then(1.0).otherwise(later))
        columns["infAP"] = pl.when(r > 0).then(pl.col("_infap") / double(r)).otherwise(pl.col("_infap"))
    if "binG" in names:
        sums.sums["_bing"] = pl.when(rel).then(1.0 / log2(2 + rank - pl.col("seen"), below))
        columns["binG"] = pl.when(nrr > 0).then(pl.col("_bing") / double(r)).otherwise(0.0)
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
    discounts = discount_sums(longest)
    gain_columns = [
        c
        for name in DCG_FAMILY
        if name in names
        for c in register_gain(names[name], models[name], sums, below, discounts)
    ]
    if "rbp" in names:
        columns.update(rbp(names["rbp"], sums, per))
    if "rbp_resid" in names:
        columns.update(rbp_resid(names["rbp_resid"], sums))

    per = per.join(sums.collect(), on="pos", how="left").with_columns(sums.defaults())
    per = _interpolated(per.with_columns(*gain_columns, **columns), names)
    if "relstring" in names:
        per = _add_relstring(per, hits, names["relstring"])
    return _clean_stand_ins(per, selected)


def _r_cutoff(multiple: float) -> pl.Expr:
    """The rank of a multiple of R: trec_eval adds 0.9 to mult * R and truncates."""
    return (double(pl.col("num_rel")) * multiple + 0.9).floor().cast(pl.Int64)


def _recall_count(x: float) -> pl.Expr:
    """The relevant docs a recall level stands for: trec_eval 10 takes lround(x * R)."""
    return (double(pl.col("num_rel")) * x).round(0, mode="half_away_from_zero").cast(pl.Int64)


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


def _count_columns(s: Selected, options: Options) -> dict[str, pl.Expr]:
    """Per-query columns of the measures that are plain functions of per-query counts and sums."""
    r, n, nrr = pl.col("num_rel"), pl.col("num_ret"), pl.col("num_rel_ret")
    name, out = s.measure.name, {}
    for p, col in zip(s.params, s.columns(), strict=True) if s.measure.kind in ("cutoffs", "levels") else ():
        if name == "P":
            out[col] = _div_constant(pl.col(f"_rel@{p}"), p)
        elif name == "recall":
            out[col] = _ratio(pl.col(f"_rel@{p}"), r)
        elif name == "relative_P":
            out[col] = (
                pl.when(r > 0)
                .then(double(pl.col(f"_rel@{p}")) / double(pl.min_horizontal(r, pl.lit(p))))
                .otherwise(0.0)
            )
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
        out[col] = p1 * double(nrr) + p2 * double(n - nrr) + p3 * double(r - nrr) + p4 * double(outside)
    elif name == "set_P":
        out[col] = _ratio(nrr, n)
    elif name == "set_relative_P":
        out[col] = pl.when((n > 0) & (r > 0)).then(double(nrr) / double(pl.min_horizontal(n, r))).otherwise(0.0)
    elif name == "set_recall":
        out[col] = _ratio(nrr, r)
    elif name == "set_map":
        out[col] = pl.when((n > 0) & (r > 0)).then((double(nrr) * double(nrr)) / (double(n) * double(r))).otherwise(0.0)
    elif name == "set_F":
        beta = s.params[0]
        precision, recall = double(nrr) / double(n), double(nrr) / double(r)
        out[col] = pl.when(nrr > 0).then((beta + 1.0) * precision * recall / (beta * precision + recall)).otherwise(0.0)
    return out


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
