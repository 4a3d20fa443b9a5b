"""Citation verdicts: the docs each claim cites, a verdict per (claim, cited doc) pair, and one per claim.

Cited docs of a claim: the inline `[doc:ID]` markers of its sentence, plus structured `answer.citations`
mapped as docs/metrics.md says — `claim_index` names the claim; else the claim(s) with the highest content-word
overlap with the citation's `quote` (ties: all of them); else, with neither, every claim. A structured citation whose
`claim_index` names no claim cites no claim (its id still counts for resolution and dead citations).

Per (claim, cited doc) pair: dead when the id is neither in the corpus manifest (any version) nor in the
trace's context; supporting when the judge finds the claim SUPPORTED by that doc's text (the context's chunks
of that doc, else the corpus text). A grounding verdict SUPPORTED whose verified quote came from the cited
doc already settles the pair, without another judge call.
Per claim (`citation_verdict`): SUPPORTS (a cited doc supports it) → DEAD_CITATION (no support and a cited id
is dead) → null when a pair judgment is incomplete → RELATED_NOT_SUPPORTING; UNCITED when it cites nothing.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, Judge
from eval_pipeline.judge.text import normalize_ws, with_content_word_sets
from eval_pipeline.scoring.claims import claim_key

CITATION_VERDICTS = ("SUPPORTS", "RELATED_NOT_SUPPORTING", "UNCITED", "DEAD_CITATION")

_TRACE = ["run_id", "trace_id"]
_CLAIM = ["run_id", "trace_id", "claim_index"]


def structured_citations(traces: pl.DataFrame) -> pl.DataFrame:
    """One row per `answer.citations` entry: run_id, trace_id, doc_id, quote, cited_claim_index."""
    return (
        traces.select(*_TRACE, "citations")
        .explode("citations", keep_nulls=False, empty_as_null=False)
        .select(
            *_TRACE,
            pl.col("citations").struct.field("doc_id"),
            pl.col("citations").struct.field("quote"),
            pl.col("citations").struct.field("claim_index").alias("cited_claim_index"),
        )
    )


def citation_pairs(claims: pl.DataFrame, citations: pl.DataFrame) -> pl.DataFrame:
    """(run_id, trace_id, claim_index, doc_id) for every claim and doc it cites (docs/metrics.md mapping), distinct."""
    inline = claims.select(*_CLAIM, "inline_cited_doc_ids").explode(
        "inline_cited_doc_ids", keep_nulls=False, empty_as_null=False
    )
    inline = inline.rename({"inline_cited_doc_ids": "doc_id"})
    has_quote = pl.col("quote").is_not_null() & (normalize_ws(pl.col("quote")).str.len_chars() > 0)
    by_index = (
        citations.filter(pl.col("cited_claim_index").is_not_null())
        .join(claims.select(*_CLAIM), left_on=[*_TRACE, "cited_claim_index"], right_on=_CLAIM, maintain_order="left")
        .select(*_TRACE, pl.col("cited_claim_index").alias("claim_index"), "doc_id")
    )
    quoted = citations.filter(pl.col("cited_claim_index").is_null() & has_quote).with_row_index("cite_id")
    scope = claims.join(quoted.select(_TRACE).unique(), on=_TRACE, how="semi")
    candidates = quoted.join(scope.select(*_CLAIM, "claim"), on=_TRACE, maintain_order="left_right")
    # The overlap depends on the two texts only, and quotes and claims repeat across traces.
    overlaps = with_content_word_sets(
        with_content_word_sets(candidates.select("quote", "claim").unique(), "quote", "_quote_words"),
        "claim",
        "_claim_words",
    ).select("quote", "claim", _overlap=pl.col("_quote_words").list.set_intersection("_claim_words").list.len())
    by_quote = (
        candidates.join(overlaps, on=["quote", "claim"], how="left", maintain_order="left", nulls_equal=True)
        .filter(pl.col("_overlap") == pl.col("_overlap").max().over("cite_id"))
        .select(*_CLAIM, "doc_id")
    )
    everywhere = (
        citations.filter(pl.col("cited_claim_index").is_null() & ~has_quote)
        .join(claims.select(*_CLAIM), on=_TRACE, maintain_order="left_right")
        .select(*_CLAIM, "doc_id")
    )
    return pl.concat([inline.select(*_CLAIM, "doc_id"), by_index, by_quote, everywhere]).unique(maintain_order=True)


def known_ids(traces: pl.DataFrame, corpus: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(corpus doc ids, per-trace context doc ids): where a cited id may exist."""
    in_corpus = corpus.select("doc_id").unique()
    in_context = (
        traces.select(*_TRACE, "context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(*_TRACE, pl.col("context").struct.field("doc_id"))
        .unique()
    )
    return in_corpus, in_context


def with_existence(frame: pl.DataFrame, in_corpus: pl.DataFrame, in_context: pl.DataFrame) -> pl.DataFrame:
    """The frame (run_id, trace_id, doc_id, …) with `exists`: the id is in the corpus or in the trace's context."""
    return (
        frame.join(in_corpus.with_columns(_c=pl.lit(True)), on="doc_id", how="left")
        .join(in_context.with_columns(_x=pl.lit(True)), on=[*_TRACE, "doc_id"], how="left")
        .with_columns(exists=pl.col("_c").fill_null(False) | pl.col("_x").fill_null(False))
        .drop("_c", "_x")
    )


def _doc_evidence(pairs: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, doc_id, evidence: the context chunks of the doc in that trace, else its corpus text."""
    wanted = pairs.select(*_TRACE, "doc_id").unique()
    from_context = (
        traces.join(wanted.select(_TRACE).unique(), on=_TRACE, how="semi")
        .select(*_TRACE, "context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(*_TRACE, pl.col("context").struct.field("doc_id"), pl.col("context").struct.field("text"))
        .join(wanted, on=[*_TRACE, "doc_id"], how="semi")
        .group_by(*_TRACE, "doc_id", maintain_order=True)
        .agg(pl.struct("doc_id", "text").alias("evidence"))
    )
    from_corpus = (
        wanted.join(from_context.select(*_TRACE, "doc_id"), on=[*_TRACE, "doc_id"], how="anti")
        .join(corpus.select("doc_id", "text"), on="doc_id")
        .select(*_TRACE, "doc_id", pl.concat_list(pl.struct("doc_id", "text")).alias("evidence"))
    )
    return pl.concat([from_context, from_corpus]).with_columns(pl.col("evidence").cast(EVIDENCE))


def citation_requests(
    pairs: pl.DataFrame, claims: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame
) -> pl.DataFrame:
    """Judge requests (REQUEST_SCHEMA) for (claim, cited doc) pairs: the claim against that doc's text."""
    with_claims = pairs.join(claims.select(*_CLAIM, "claim"), on=_CLAIM)
    return with_claims.join(_doc_evidence(with_claims, traces, corpus), on=[*_TRACE, "doc_id"], how="left").select(
        claim_key("run_id", "trace_id", "claim_index", "doc_id").alias("request_key"),
        "claim",
        pl.col("evidence").fill_null(pl.lit([], dtype=EVIDENCE)),
        claim_key("run_id", "trace_id", "doc_id").alias("evidence_key"),
    )


def judge_pairs(
    pairs: pl.DataFrame, claims: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame, judge: Judge
) -> pl.DataFrame:
    """The live pairs with pair_verdict (SUPPORTS | RELATED_NOT_SUPPORTING | null when incomplete) and pair_reason."""
    settled = (
        (pl.col("verdict") == "SUPPORTED")
        & pl.col("quote_verified").fill_null(False)
        & (pl.col("evidence_doc_id") == pl.col("doc_id"))
    )
    pairs = pairs.join(
        claims.select(*_CLAIM, "verdict", "quote_verified", "evidence_doc_id"), on=_CLAIM, maintain_order="left"
    )
    to_judge = pairs.filter(~settled)
    results = judge.judge_claims(citation_requests(to_judge.select(*_CLAIM, "doc_id"), claims, traces, corpus)).select(
        "request_key",
        pl.col("verdict").alias("_pair_judge"),
        pl.col("status").alias("_pair_status"),
        pl.col("reason").alias("_pair_why"),
    )
    judged = to_judge.with_columns(claim_key("run_id", "trace_id", "claim_index", "doc_id").alias("request_key")).join(
        results, on="request_key", how="left", maintain_order="left"
    )
    judged = judged.with_columns(
        pair_verdict=pl.when(pl.col("_pair_status") != "ok")
        .then(None)
        .when(pl.col("_pair_judge") == "SUPPORTED")
        .then(pl.lit("SUPPORTS"))
        .otherwise(pl.lit("RELATED_NOT_SUPPORTING")),
        pair_reason=pl.when(pl.col("_pair_status") != "ok")
        .then(pl.format("judge could not check cited doc {}: {}", "doc_id", "_pair_why"))
        .when(pl.col("_pair_judge") != "SUPPORTED")
        .then(pl.format("cited doc {} does not support the claim ({}: {})", "doc_id", "_pair_judge", "_pair_why")),
    )
    keep = [*_CLAIM, "doc_id", "pair_verdict", "pair_reason"]
    return pl.concat(
        [
            pairs.filter(settled).select(
                *_CLAIM,
                "doc_id",
                pl.lit("SUPPORTS").alias("pair_verdict"),
                pl.lit(None, pl.String).alias("pair_reason"),
            ),
            judged.select(keep),
        ]
    )


def claim_citations(claims: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """claims + cited_doc_ids, citation_verdict, citation_reason (rules in the module docstring)."""
    per_claim = pairs.group_by(_CLAIM, maintain_order=True).agg(
        cited_doc_ids=pl.col("doc_id"),
        _supports=(pl.col("pair_verdict") == "SUPPORTS").any(),
        _dead=pl.col("doc_id").filter(pl.col("pair_verdict") == "DEAD_CITATION"),
        _incomplete=pl.col("pair_reason").filter(pl.col("pair_verdict").is_null()).first(),
        _related=pl.col("pair_reason").filter(pl.col("pair_verdict") == "RELATED_NOT_SUPPORTING").first(),
    )
    out = claims.join(per_claim, on=_CLAIM, how="left", maintain_order="left")
    verdict = (
        pl.when(pl.col("cited_doc_ids").is_null())
        .then(pl.lit("UNCITED"))
        .when(pl.col("_supports"))
        .then(pl.lit("SUPPORTS"))
        .when(pl.col("_dead").list.len() > 0)
        .then(pl.lit("DEAD_CITATION"))
        .when(pl.col("_incomplete").is_not_null())
        .then(None)
        .otherwise(pl.lit("RELATED_NOT_SUPPORTING"))
    )
    reason = (
        pl.when(pl.col("cited_doc_ids").is_null())
        .then(pl.lit("the claim cites no document"))
        .when(pl.col("_supports"))
        .then(None)
        .when(pl.col("_dead").list.len() > 0)
        .then(pl.format("cited id {} is in neither the corpus nor the context", pl.col("_dead").list.join(", ")))
        .when(pl.col("_incomplete").is_not_null())
        .then(pl.col("_incomplete"))
        .otherwise(pl.col("_related"))
    )
    return (
        out.with_columns(citation_verdict=verdict, citation_reason=reason)
        .with_columns(pl.col("cited_doc_ids").fill_null(pl.lit([], dtype=pl.List(pl.String))))
        .drop("_supports", "_dead", "_incomplete", "_related")
    )
