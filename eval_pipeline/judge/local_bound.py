"""The local judge's exact bound: which requests it could never find SUPPORTED, known without judging them."""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import REQUEST_SCHEMA, conform, evidence_sets
from eval_pipeline.judge.lexical import annotate
from eval_pipeline.judge.local_words import claim_entities, claim_words, featurized
from eval_pipeline.judge.text import strip_doc_markers

__all__ = ["support_bound"]


def support_bound(
    requests: pl.DataFrame,
    support_threshold: float,
    *,
    number_penalty: float,
    name_penalty: float,
    opinion_penalty: float,
) -> pl.DataFrame:
    """request_key, could_support: false when even the evidence's best sentences score below the support threshold.

    An upper bound of the local judge's score: the claim words found anywhere in the evidence / claim words, times a
    penalty for each number, name (none of its words) and opinion word the whole evidence lacks; the sentences it
    chooses are a part of the evidence, so they find no more and lack no less. Exact: a request it rules out is never
    SUPPORTED.
    """
    requests = (
        conform(requests, REQUEST_SCHEMA)
        .unique("request_key", keep="first", maintain_order=True)
        .with_columns(evidence_key=pl.coalesce("evidence_key", "request_key"), claim=pl.col("claim").fill_null(""))
    )
    # a claim is asked against many evidence sets: its markers are stripped once
    stripped = (
        requests.select("claim").unique(maintain_order=True).with_columns(claim_text=strip_doc_markers(pl.col("claim")))
    )
    requests = requests.join(stripped, on="claim", how="left", maintain_order="left")
    claim_ids = requests.select("claim_text").unique(maintain_order=True).with_row_index("cid")
    evidence_ids = requests.select("evidence_key").unique(maintain_order=True).with_row_index("eid")
    # each request known by its row (`rq`) while it is counted: grouping a word per row by the request_key text,
    # which holds the claim, took most of the time
    keys = (
        requests.select("request_key", "evidence_key", "claim_text")
        .with_row_index("rq")
        .join(claim_ids, on="claim_text")
        .join(evidence_ids, on="evidence_key")
        .select("rq", "request_key", "cid", "eid")
    )
    chunks = evidence_sets(requests).join(evidence_ids, on="evidence_key").select("eid", "text")
    texts = chunks.select("text").unique().with_row_index("text_id")
    sentences, claim_tokens, sentence_tokens, vocab = featurized(claim_ids, texts)
    claim_rows = annotate(claim_tokens, vocab, "cid").rename({"cid": "rid"})
    words = claim_words(claim_rows).rename({"rid": "cid"})
    held = (
        sentence_tokens.join(vocab.filter(pl.col("is_content")).select("raw", "tid"), on="raw")
        .join(sentences.select("sid", "text_id"), on="sid")
        .join(chunks.join(texts, on="text").select("eid", "text_id").unique(), on="text_id")
        .select(_pair_key())
        .unique()
        .to_series()
        .implode()
    )
    # whether the evidence holds a claim word: its (evidence, word) key looked up among those the evidence holds
    found = keys.select("rq", "cid", "eid").join(words, on="cid").with_columns(_found=_pair_key().is_in(held))
    missing = ~pl.col("_found")
    per_word = found.group_by("rq").agg(
        _n_words=pl.len(),
        _n_found=pl.col("_found").sum(),
        _lacking_numbers=(missing & pl.col("is_num")).sum(),
        _lacking_opinions=(missing & pl.col("is_subjective")).sum(),
    )
    names = (
        keys.select("rq", "cid", "eid")
        .join(claim_entities(claim_rows).rename({"rid": "cid"}), on="cid")
        .with_columns(_found=_pair_key().is_in(held))
        .group_by("rq", "entity")
        .agg(_present=pl.col("_found").any())
        .group_by("rq")
        .agg(_absent_names=(~pl.col("_present").fill_null(False)).sum())
    )
    bound = (
        pl.col("_n_found")
        / pl.col("_n_words")
        * pl.lit(number_penalty).pow(pl.col("_lacking_numbers"))
        * pl.lit(name_penalty).pow(pl.col("_absent_names").fill_null(0))
        * pl.lit(opinion_penalty).pow(pl.col("_lacking_opinions"))
    ).round(4)
    return (
        keys.select("rq", "request_key")
        .join(per_word, on="rq", how="left", maintain_order="left")
        .join(names, on="rq", how="left", maintain_order="left")
        .select(
            "request_key",
            could_support=(pl.col("_n_words").fill_null(0) > 0) & (bound >= support_threshold).fill_null(False),
        )
    )


def _pair_key() -> pl.Expr:
    """An (eid, tid) pair as one integer: both are row indices, under 2**32."""
    return (pl.col("eid").cast(pl.UInt64) * (1 << 32) + pl.col("tid").cast(pl.UInt64)).alias("_pair")
