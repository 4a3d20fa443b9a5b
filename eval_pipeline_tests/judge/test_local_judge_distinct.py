"""The local judge's work per distinct text: what judging every request on its own word rows gives.

Claims featurized once per claim text, round one of the sentence choice found per claim text, verdicts decided once
per (claim, chosen sentences) — the same verdicts, scores, reasons and quotes.
"""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.judge.base import EVIDENCE, RAW_RESULT_SCHEMA, conform, evidence_sets
from eval_pipeline.judge.lexical import annotate, token_rows, vocabulary
from eval_pipeline.judge.local import QUOTE_JOINER, LocalJudge
from eval_pipeline.judge.local_choice import choose_sentences
from eval_pipeline.judge.local_words import claim_words
from eval_pipeline.judge.text import pack_key, sentence_rows, strip_doc_markers

REFUNDS = "Refunds are issued within 14 days. They go back to the original payment method."
PLANS = "The Pro plan costs $19 per month. Annual plans are billed yearly. Refunds are not available for annual plans."
OFFICE = "The office opened on March 3, 2019 in Berlin. CEO Jane Doe announced the merger on Monday."
SHORT = "Refunds are issued within 14 days."


def _reference(judge: LocalJudge, requests: pl.DataFrame) -> pl.DataFrame:
    """Every request judged on its own word rows (claims featurized per request, the greedy choice from round one)."""
    keys = requests.select("request_key", "evidence_key").with_row_index("rid")
    evidence_ids = keys.select("evidence_key").unique(maintain_order=True).with_row_index("eid")
    keys = keys.join(evidence_ids, on="evidence_key").select("rid", "eid", "request_key")
    claim_frame = requests.select(strip_doc_markers(pl.col("claim").fill_null("")).alias("claim_text")).with_row_index(
        "rid"
    )
    chunks = evidence_sets(requests).join(evidence_ids, on="evidence_key").drop("evidence_key")
    texts = chunks.select("text").unique().with_row_index("text_id")
    sentences = sentence_rows(texts, ["text_id"], "text").with_row_index("sid")
    claim_tokens = token_rows(claim_frame, "rid", "claim_text")
    sentence_tokens = token_rows(sentences, "sid", "sentence")
    vocab = vocabulary(pl.concat([claim_tokens["raw"], sentence_tokens["raw"]]))
    claim_rows = annotate(claim_tokens, vocab, "rid")
    sentence_rows_ = annotate(sentence_tokens, vocab, "sid")
    words = claim_words(claim_rows)
    chunk_index = chunks.join(texts, on="text").select("eid", "ev_pos", "doc_id", "text_id")
    first_chunks = chunk_index.group_by("eid", "text_id").agg(pl.col("ev_pos").min())
    sentence_words = sentence_rows_.filter(pl.col("is_content")).select("sid", "tid").unique()
    index = sentence_words.join(sentences.select("sid", "text_id"), on="sid").select(
        pack_key("text_id", "tid").alias("_word"), "sid"
    )
    matches = (
        words.select("rid", "tid")
        .join(keys.select("rid", "eid"), on="rid")
        .join(first_chunks, on="eid")
        .select("rid", "ev_pos", "tid", pack_key("text_id", "tid").alias("_word"))
        .join(index, on="_word")
        .drop("_word")
    )
    chosen = choose_sentences(matches)
    verdicts = judge._decide(words, claim_rows, chosen, matches, sentence_rows_)
    quotes = (
        chosen.join(sentences.select("sid", "sentence"), on="sid")
        .join(keys.select("rid", "eid"), on="rid")
        .join(chunk_index.select("eid", "ev_pos", "doc_id"), on=["eid", "ev_pos"])
        .sort("rid", "ev_pos", "sid")
        .group_by("rid", maintain_order=True)
        .agg(evidence_quote=pl.col("sentence").str.join(QUOTE_JOINER), evidence_doc_id=pl.col("doc_id").first())
    )
    return (
        keys.join(verdicts, on="rid", how="left")
        .join(quotes, on="rid", how="left")
        .join(chunks.group_by("eid").len("n_chunks"), on="eid", how="left")
        .join(words.group_by("rid").len("n_words"), on="rid", how="left")
        .select(
            "request_key",
            pl.col("verdict").fill_null("NOT_IN_EVIDENCE"),
            pl.col("score").fill_null(0.0),
            "evidence_quote",
            "evidence_doc_id",
            pl.when(pl.col("verdict").is_not_null())
            .then(pl.col("reason"))
            .when(pl.col("n_chunks").fill_null(0) == 0)
            .then(pl.lit("no evidence"))
            .when(pl.col("n_words").fill_null(0) == 0)
            .then(pl.lit("the claim has no content words"))
            .otherwise(pl.lit("support 0: no evidence sentence shares a word with the claim"))
            .alias("reason"),
        )
    )


def _requests(rows: list[tuple[str, list[tuple[str, str]], str | None]]) -> pl.DataFrame:
    """Requests from (claim, [(doc_id, text)], evidence_key); evidence_key null means the request's own key."""
    frame = pl.DataFrame(
        {
            "request_key": [f"r{i}" for i in range(len(rows))],
            "claim": [claim for claim, _, _ in rows],
            "evidence": [[{"doc_id": d, "text": t} for d, t in chunks] for _, chunks, _ in rows],
            "evidence_key": [key for _, _, key in rows],
        },
        schema={"request_key": pl.String, "claim": pl.String, "evidence": EVIDENCE, "evidence_key": pl.String},
    )
    return frame.with_columns(evidence_key=pl.coalesce("evidence_key", "request_key"))


CASES = [
    # one claim text against many evidence sets, in different orders and with a repeated text
    ("Refunds are issued within 14 days.", [("a", REFUNDS), ("b", PLANS)], None),
    ("Refunds are issued within 14 days.", [("b", PLANS), ("a", REFUNDS)], None),
    ("Refunds are issued within 14 days.", [("b", PLANS), ("a", REFUNDS), ("c", REFUNDS)], None),
    # the same sentence in two chunks: the earlier chunk wins the tie
    ("Refunds are issued within 14 days.", [("x", SHORT), ("y", REFUNDS)], None),
    ("Refunds are issued within 14 days.", [("y", REFUNDS), ("x", SHORT)], None),
    # a claim no single sentence holds: later rounds choose more sentences, across chunks
    ("Refunds are issued within 14 days to the original payment method.", [("a", REFUNDS)], None),
    ("Refunds are issued within 14 days to the original payment method.", [("x", SHORT), ("a", REFUNDS)], None),
    ("Refunds of the Pro plan are issued within 14 days and billed yearly.", [("b", PLANS), ("a", REFUNDS)], None),
    # conflicts, negation and names, alone and beside supporting text
    ("Refunds are issued within 30 days.", [("a", REFUNDS)], None),
    ("Refunds are available for annual plans.", [("b", PLANS)], None),
    ("The Pro plan costs $29 per month.", [("b", PLANS), ("a", REFUNDS)], None),
    ("CEO John Smith announced the merger.", [("o", OFFICE)], None),
    ("The office opened on March 3, 2019.", [("o", OFFICE), ("b", PLANS)], None),
    # claims of one answer sharing an evidence key
    ("Annual plans are billed yearly [doc:b].", [("b", PLANS), ("a", REFUNDS)], "answer-1"),
    ("Annual plans are billed yearly.", [("b", PLANS), ("a", REFUNDS)], "answer-1"),
    ("They go back to the original payment method.", [("b", PLANS), ("a", REFUNDS)], "answer-1"),
    # nothing to find: no content words, no shared word, no evidence
    ("Yes, it does.", [("a", REFUNDS)], None),
    ("Shipping to Mars is free.", [("a", REFUNDS)], None),
    ("Refunds are issued within 14 days.", [], None),
    (None, [("a", REFUNDS)], None),
]


@pytest.mark.parametrize("order", ["as_listed", "reversed"])
def test_judging_per_distinct_text_gives_every_request_its_own_verdict(order):
    cases = CASES if order == "as_listed" else CASES[::-1]
    requests = _requests(cases)
    judge = LocalJudge()
    expected = _reference(judge, requests).sort("request_key")
    got = conform(judge._judge_claims(requests), RAW_RESULT_SCHEMA).select(expected.columns).sort("request_key")
    assert got.to_dicts() == expected.to_dicts()
    # the cases reach every path: round one alone, later rounds, and no sentence at all
    assert {"SUPPORTED", "CONTRADICTED", "NOT_IN_EVIDENCE"} <= set(got["verdict"].to_list())
    assert any(QUOTE_JOINER in (q or "") for q in got["evidence_quote"].to_list())


def test_a_request_judged_alone_or_among_many_gets_the_same_result():
    requests = _requests(CASES)
    judge = LocalJudge()
    together = conform(judge._judge_claims(requests), RAW_RESULT_SCHEMA).sort("request_key")
    for i in range(requests.height):
        alone = conform(judge._judge_claims(requests.slice(i, 1)), RAW_RESULT_SCHEMA)
        assert alone.to_dicts() == together.filter(pl.col("request_key") == requests["request_key"][i]).to_dicts()
