"""The local judge's choice of evidence sentences: up to four per claim, greedily, the most new claim words first."""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.text import pack_key

MAX_EVIDENCE_SENTENCES = 4


def _rank(n: pl.Expr, ev_pos: pl.Expr, sid: pl.Expr) -> pl.Expr:
    """The greedy choice's order as one UInt64.

    The most new words, then the earlier chunk, then the earlier sentence.
    """
    return (
        n.cast(pl.UInt64) * (1 << 48)
        + (65535 - ev_pos.clip(0, 65535)).cast(pl.UInt64) * (1 << 32)
        + ((1 << 32) - 1 - sid.cast(pl.UInt64))
    )


def _unrank(rank: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(sid, ev_pos) of a packed rank."""
    return (
        ((1 << 32) - 1 - (rank % (1 << 32))).cast(pl.UInt32).alias("sid"),
        (65535 - (rank // (1 << 32)) % (1 << 16)).cast(pl.Int64).alias("ev_pos"),
    )


def choose_for_requests(
    keys: pl.DataFrame,
    words: pl.DataFrame,
    first_chunks: pl.DataFrame,
    sentence_words: pl.DataFrame,
    sentences: pl.DataFrame,
) -> pl.DataFrame:
    """rid, sid, ev_pos, round: what choose_sentences gives every request, the common case found per claim text."""
    offered = keys.select("rid", "cid", "eid").join(first_chunks, on="eid")
    n_words = words.group_by("cid").agg(n_words=pl.len())
    index = sentence_words.join(sentences.select("sid", "text_id"), on="sid").select(
        pack_key("text_id", "tid").alias("_word"), "sid"
    )
    # A sentence holding every word of the claim wins round one (the earliest such chunk, then sentence) and
    # leaves nothing for later rounds. Such sentences are found once per (claim text, evidence text) offered
    # together, among the sentences holding the claim's rarest word.
    frequency = sentence_words.group_by("tid").agg(_df=pl.len())
    rarest = (
        words.select("cid", "tid")
        .join(frequency, on="tid")
        .group_by("cid")
        .agg(pl.col("tid").sort_by("_df", "tid").first())
    )
    whole = (
        offered.select("cid", "text_id")
        .unique()
        .join(rarest, on="cid")
        .select("cid", "text_id", pack_key("text_id", "tid").alias("_word"))
        .join(index, on="_word")
        .select("cid", "text_id", "sid")
        .join(words.select("cid", "tid"), on="cid")
        .join(sentence_words, on=["sid", "tid"], how="semi")
        .group_by("cid", "text_id", "sid")
        .agg(_found=pl.len())
        .join(n_words, on="cid")
        .filter(pl.col("_found") == pl.col("n_words"))
        .select("cid", "text_id", "sid")
    )
    easy = (
        offered.join(whole, on=["cid", "text_id"])
        .group_by("rid")
        .agg(_rank=_rank(pl.lit(0), pl.col("ev_pos"), pl.col("sid")).max())
        .select("rid", *_unrank(pl.col("_rank")), pl.lit(0, dtype=pl.Int32).alias("round"))
    )
    # The other requests are chosen in full from their word rows.
    matches = (
        offered.join(easy, on="rid", how="anti")
        .join(words.select("cid", "tid"), on="cid")
        .select("rid", "ev_pos", "tid", pack_key("text_id", "tid").alias("_word"))
        .join(index, on="_word")
        .drop("_word")
    )
    return pl.concat([easy, choose_sentences(matches)])


def choose_sentences(matches: pl.DataFrame) -> pl.DataFrame:
    """rid, sid, ev_pos, round: up to MAX_EVIDENCE_SENTENCES sentences per claim chosen greedily.

    The sentence holding the most claim words not yet found each round, ties to the earlier chunk and sentence.
    """
    # One UInt64 per (claim, sentence) and per (claim, word) keeps every group-by and join on a single integer.
    remaining = matches.select(
        "rid", "sid", "ev_pos", pack_key("rid", "sid").alias("_pair"), pack_key("rid", "tid").alias("_word")
    )
    picked = []
    for round_ in range(MAX_EVIDENCE_SENTENCES):
        if remaining.is_empty():
            break
        counts = remaining.group_by("_pair").agg(
            pl.len().alias("n"), pl.col("rid").first(), pl.col("sid").first(), pl.col("ev_pos").first()
        )
        # The most new words, then the earlier chunk, then the earlier sentence: the largest packed rank wins.
        best = (
            counts.with_columns(_rank=_rank(pl.col("n"), pl.col("ev_pos"), pl.col("sid")))
            .group_by("rid")
            .agg(pl.col("_rank").max())
            .select("rid", *_unrank(pl.col("_rank")), pl.lit(round_, dtype=pl.Int32).alias("round"))
        )
        picked.append(best)
        taken = remaining.join(best.select(pack_key("rid", "sid").alias("_pair")), on="_pair", how="semi").select(
            "_word"
        )
        remaining = remaining.join(taken, on="_word", how="anti")
    if not picked:
        return pl.DataFrame(schema={"rid": pl.UInt32, "sid": pl.UInt32, "ev_pos": pl.Int64, "round": pl.Int32})
    return pl.concat(picked)
