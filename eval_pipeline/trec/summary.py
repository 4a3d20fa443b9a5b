"""trec_eval's -Z z-scores of the per-query values and its `all` summary, accumulated query by query."""

from __future__ import annotations

import math

import polars as pl

from eval_pipeline.trec.measures import Selected

# trec_eval's floor for geometric means (MIN_GEO_MEAN), so one zero does not zero the mean.
MIN_GEO_MEAN = 0.00001
# trec_eval's value for a measure the z-score file has no mean for (MISSING_ZSCORE_VALUE).
MISSING_ZSCORE = -1000000.0


def to_zscores(per: pl.DataFrame, selected: list[Selected], zscores: pl.DataFrame) -> pl.DataFrame:
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


def summarize(
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
