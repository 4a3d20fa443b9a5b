"""Evidence diversity (docs/evidence_diversity.md): the independent families and sources that evidence draws on.

How many independent document families, and source systems, the context, the citations and each supported claim
draw on.

A doc's family is its corpus `family`; a doc absent from the corpus, or without a family, is a family of its own,
keyed by its doc_id. Its source is the corpus `source`; a doc without one (or absent from the corpus) adds no source.

A claim's supporting families: for a claim judged SUPPORTED whose context spans two or more families, the number of
those families whose context chunks alone support it, each (claim, family text) asked of the judge that gave the
verdict, on distinct values. A family that holds the whole verified quote (a quote of one passage, found in that
family's doc) supports the claim without a call, as a cited doc holding the quote does in `citations`; a family the
judge rules out by an exact bound (`Judge.could_support`: the local judge's best possible score is below its
threshold) does not support it, also without a call. Within one family the count is 1 without any call; a claim
not supported is 0; an incomplete claim, or a supported one whose family decision could not be completed, is null.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, QUOTE_PARTS, Judge
from eval_pipeline.judge.text import normalize_ws

_TRACE = ["run_id", "trace_id"]
_CLAIM = ["run_id", "trace_id", "claim_index"]
# two seeded 64-bit hashes: a family's text is known by 128 bits, as the verdict store knows a request
_SEEDS = (0xD1FE_A, 0xD1FE_B)


def doc_families(corpus: pl.DataFrame | None) -> pl.DataFrame:
    """doc_id, _corpus_family, _source of each corpus doc (a blank source is no source)."""
    schema = {"doc_id": pl.String, "_corpus_family": pl.String, "_source": pl.String}
    if corpus is None:
        return pl.DataFrame(schema=schema)
    # a warehouse table written before corpora named their source has no such column
    source = pl.col("source") if "source" in corpus.columns else pl.lit(None, pl.String)
    source = source.cast(pl.String).str.strip_chars()
    return (
        corpus.select(
            "doc_id", pl.col("family").alias("_corpus_family"), pl.when(source != "").then(source).alias("_source")
        )
        .unique("doc_id", keep="first", maintain_order=True)
        .cast(schema)  # type: ignore[arg-type]
    )


def with_families(frame: pl.DataFrame, families: pl.DataFrame, doc_id: str = "doc_id") -> pl.DataFrame:
    """The frame with _family (the doc's corpus family, else its doc_id) and _source for its `doc_id` column."""
    return (
        frame.join(families, left_on=doc_id, right_on="doc_id", how="left", maintain_order="left")
        .with_columns(_family=pl.coalesce("_corpus_family", doc_id))
        .drop("_corpus_family")
    )


def distinct_families(where: pl.Expr | None = None) -> pl.Expr:
    """Distinct families of the docs in a group, of those `where` holds (an aggregation over with_families rows)."""
    family = pl.col("_family") if where is None else pl.col("_family").filter(where)
    return family.n_unique().cast(pl.Int64)


def distinct_sources(where: pl.Expr | None = None) -> pl.Expr:
    """Distinct given sources of the docs in a group, of those `where` holds; 0 when none is given (an aggregation)."""
    source = pl.col("_source") if where is None else pl.col("_source").filter(where)
    return source.drop_nulls().n_unique().cast(pl.Int64)


def _context_chunks(traces: pl.DataFrame, families: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, _pos, doc_id, text, _family, _source: every context chunk, in context order."""
    chunks = (
        traces.select(*_TRACE, "context", pl.int_ranges(0, pl.col("context").list.len().fill_null(0)).alias("_pos"))
        .filter(pl.col("context").list.len() > 0)
        .explode(["context", "_pos"])
        .select(*_TRACE, "_pos", pl.col("context").struct.field("doc_id"), pl.col("context").struct.field("text"))
    )
    return with_families(chunks, families)


def family_support(
    claims: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame | None, judge: Judge
) -> pl.DataFrame:
    """The judged claims with supporting_families and triangulated (≥ 2 supporting families), as the module docstring
    says."""
    ok = pl.col("status") == "ok"
    supported = claims.filter(ok & (pl.col("verdict") == "SUPPORTED")).select(
        *_CLAIM, "claim", "evidence_quote", "evidence_doc_id"
    )
    families = doc_families(corpus)
    chunks = _context_chunks(traces.join(supported.select(_TRACE).unique(), on=_TRACE, how="semi"), families)
    spread = chunks.group_by(_TRACE).agg(_n_families=distinct_families()).filter(pl.col("_n_families") >= 2)
    # One evidence list per (trace, family), in context order, known by its content so equal texts are asked once.
    evidence = (
        chunks.join(spread, on=_TRACE, how="semi", maintain_order="left")
        .sort(*_TRACE, "_pos")
        .group_by(*_TRACE, "_family", maintain_order=True)
        .agg(pl.struct("doc_id", "text").alias("evidence"))
        .with_columns(pl.col("evidence").cast(EVIDENCE))
        .with_columns(*(pl.col("evidence").hash(seed).alias(f"_ev{i}") for i, seed in enumerate(_SEEDS)))
    )
    spread_claims = supported.join(spread, on=_TRACE, how="semi", maintain_order="left")
    # A quote of one passage was found in evidence_doc_id: that doc's family holds all of it, and supports the claim.
    parts = (
        normalize_ws(pl.col("evidence_quote").fill_null(""))
        .str.split(QUOTE_PARTS)
        .list.eval(pl.element().str.strip_chars().filter(pl.element().str.len_chars() > 0))
        .list.len()
    )
    settled = with_families(
        spread_claims.filter((parts == 1) & pl.col("evidence_doc_id").is_not_null()).select(*_CLAIM, "evidence_doc_id"),
        families,
        doc_id="evidence_doc_id",
    ).select(*_CLAIM, pl.col("_family").alias("_settled"))
    pairs = (
        spread_claims.select(*_CLAIM, "claim")
        .join(evidence.select(*_TRACE, "_family", "_ev0", "_ev1"), on=_TRACE, maintain_order="left_right")
        .join(settled, on=_CLAIM, how="left", maintain_order="left")
        .filter(pl.col("_settled").is_null() | (pl.col("_family") != pl.col("_settled")))
        .with_columns(
            request_key=pl.concat_str(
                [pl.col("_ev0").cast(pl.String), pl.col("_ev1").cast(pl.String), "claim"], separator="\x1f"
            )
        )
    )
    requests = (
        pairs.select("request_key", "claim", "_ev0", "_ev1")
        .unique("request_key", keep="first", maintain_order=True)
        .join(
            evidence.select("_ev0", "_ev1", "evidence").unique(["_ev0", "_ev1"], keep="first", maintain_order=True),
            on=["_ev0", "_ev1"],
            how="left",
            maintain_order="left",
        )
        .select(
            "request_key",
            "claim",
            "evidence",
            pl.concat_str([pl.col("_ev0").cast(pl.String), pl.col("_ev1").cast(pl.String)], separator="\x1f").alias(
                "evidence_key"
            ),
        )
    )
    # A pair the judge knows it cannot find supported (the local judge's exact bound) is decided without a call.
    possible = judge.could_support(requests)
    ruled_out = possible.filter(~pl.col("could_support")).select(
        "request_key", pl.lit("NOT_IN_EVIDENCE").alias("verdict"), pl.lit("ok").alias("_status")
    )
    asked = requests.join(possible.filter(pl.col("could_support")), on="request_key", how="semi", maintain_order="left")
    answers = pl.concat(
        [judge.judge_claims(asked).select("request_key", "verdict", pl.col("status").alias("_status")), ruled_out]
    )
    judged = (
        pairs.join(answers, on="request_key", how="left", maintain_order="left")
        .group_by(_CLAIM)
        .agg(
            _judged_support=((pl.col("_status") == "ok") & (pl.col("verdict") == "SUPPORTED")).sum().cast(pl.Int64),
            _unfinished=(pl.col("_status").is_null() | (pl.col("_status") != "ok")).sum(),
        )
    )
    counted = (
        spread_claims.select(_CLAIM)
        .join(settled, on=_CLAIM, how="left")
        .join(judged, on=_CLAIM, how="left")
        .select(
            *_CLAIM,
            pl.when(pl.col("_unfinished").fill_null(0) == 0)
            .then(pl.col("_settled").is_not_null().cast(pl.Int64) + pl.col("_judged_support").fill_null(0))
            .alias("_spread_support"),
            pl.lit(True).alias("_spread"),
        )
    )
    count = (
        pl.when(~ok)
        .then(None)
        .when(pl.col("verdict").ne_missing("SUPPORTED"))
        .then(pl.lit(0, pl.Int64))
        .when(pl.col("_spread").fill_null(False))
        .then(pl.col("_spread_support"))
        .otherwise(pl.lit(1, pl.Int64))
    )
    return (
        claims.join(counted, on=_CLAIM, how="left", maintain_order="left")
        .with_columns(supporting_families=count.cast(pl.Int64))
        .with_columns(triangulated=pl.col("supporting_families") >= 2)
        .drop("_spread_support", "_spread")
    )
