"""The local judge's claim features: claims and evidence sentences tokenized in one vocabulary, claim words, names."""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.lexical import token_rows, vocabulary
from eval_pipeline.judge.text import sentence_rows


def featurized(
    claim_ids: pl.DataFrame, texts: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(sentences with sid, claim tokens, sentence tokens, vocabulary) of distinct claims (cid, claim_text) and distinct
    evidence texts (text_id, text): both tokenized in one vocabulary."""
    sentences = sentence_rows(texts, ["text_id"], "text").with_row_index("sid")
    claim_tokens = token_rows(claim_ids, "cid", "claim_text")
    sentence_tokens = token_rows(sentences, "sid", "sentence")
    return (
        sentences,
        claim_tokens,
        sentence_tokens,
        vocabulary(pl.concat([claim_tokens["raw"], sentence_tokens["raw"]])),
    )


def claim_words(claim_rows: pl.DataFrame) -> pl.DataFrame:
    """Distinct content words of each claim: rid, tid, is_num, is_name (any occurrence), shown (first raw form)."""
    return (
        claim_rows.filter(pl.col("is_content"))
        .group_by("rid", "tid")
        .agg(
            pl.col("is_num").first(),
            pl.col("is_name").any(),
            pl.col("is_subjective").any(),
            shown=pl.col("lower").first().str.replace(r"'s$", ""),
        )
    )


def claim_entities(claim_rows: pl.DataFrame) -> pl.DataFrame:
    """rid, entity, tid, shown: names of each claim, adjacent name words forming one entity (Media Play News)."""
    names = claim_rows.filter(pl.col("is_name") & ~pl.col("is_num"))
    continues = (pl.col("rid").shift(1) == pl.col("rid")) & (pl.col("pos").shift(1) == pl.col("pos") - 1)
    return names.select(
        "rid",
        "tid",
        (~continues.fill_null(False)).cum_sum().alias("entity"),
        pl.col("lower").str.replace(r"'s$", "").alias("shown"),
    )
