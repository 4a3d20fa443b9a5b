"""Claim splitting: each text split into factual claims, with the inline `[doc:ID]` citations of each.

A claim is one sentence of the text (splitting rules in `eval_pipeline.judge.text`), markers removed.
Not claims: pleasantries, interjections and offers of help ("Thanks for reaching out", "Let me know if…",
"Happy to help", "Yeah!", "That's so cool"), questions (a sentence ending in `?`), sentences without a content
word ("Yes, it does."), lead-ins to a list (ending in `:`), refusals (a sentence holding one of the refusal
phrases: "I couldn't find…" asserts nothing about the evidence) and pieces without a letter or digit.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from eval_pipeline.judge.lexical_words import EXTRA_STOPWORDS
from eval_pipeline.judge.text import doc_markers, sentence_rows, strip_doc_markers, with_distinct
from eval_pipeline.judge.text_words import NEGATIONS, STOPWORDS
from eval_pipeline.settings import DEFAULT_REFUSAL_PHRASES

PLEASANTRY = (
    r"(?i)^(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening))\b"
    r"|(?i)^(?:thanks|thank you|many thanks|you'?re welcome|sure|certainly|of course|absolutely|great|okay|ok"
    r"|got it)\b[\s!.,]*$"
    r"|(?i)^(?:thanks|thank you|many thanks)\b"
    r"|(?i)\b(?:let me know|feel free|don'?t hesitate|do not hesitate|reach out (?:to us )?(?:again|anytime))\b"
    r"|(?i)\b(?:happy|glad|here|delighted) to (?:help|assist)\b"
    r"|(?i)\bi'?d be (?:happy|glad|delighted) to\b"
    r"|(?i)\bhope (?:this|that|it) helps\b"
    r"|(?i)\bis there anything else\b"
    r"|(?i)\bhave a (?:great|nice|good|wonderful|lovely)\b"
    r"|(?i)\bthanks for (?:reaching out|contacting|your (?:patience|question|message))\b"
    r"|(?i)^(?:(?:yes|yeah|yep|yup|no|nope|nah|ok|okay|sure|oh|ah|wow|lol|haha|hmm|right|true|indeed|cool|nice|great"
    r"|awesome|interesting|really|exactly|definitely|absolutely|of course|me too|i agree|agreed)\b[\s!.,]*)+$"
    r"|(?i)^(?:that'?s|that is|it'?s|it is|how|so|very|really)\s+(?:(?:very|so|really|pretty|quite)\s+)?"
    r"(?:cool|interesting|awesome|great|sad|funny|amazing|crazy|neat|nice|wild|weird|strange|fascinating)\b[\s!.,]*$"
    r"|(?i)^i (?:didn'?t|did not) know (?:that|this)\b[\s!.,]*$"
    r"|(?i)^(?:(?:yes|yeah|oh|well|no|ok|okay)[,!.]?\s*)*"
    r"(?:i (?:agree|think so|believe so|guess so|hope so|know)(?: with you)?"
    r"|(?:that|it)'?s? (?:is )?(?:so |very )?(?:true|right|correct)|so true|me too|same here)\b[\s!.,]*$"
)


def refusal_expr(text: pl.Expr, phrases: Sequence[str]) -> pl.Expr:
    """Whether a text holds one of the refusal phrases (case-insensitive, curly apostrophes read as straight)."""
    folded = text.str.replace_all("’", "'", literal=True).str.to_lowercase()
    return folded.str.contains_any([p.lower() for p in phrases])


def has_content_word(text: pl.Expr) -> pl.Expr:
    """Whether a text has a number or a word of two or more letters that is not a stop word ("Yes, it does." has
    none)."""
    stop = sorted(set(STOPWORDS) | set(EXTRA_STOPWORDS) | set(NEGATIONS))
    words = text.str.to_lowercase().str.replace_all("’", "'", literal=True).str.extract_all(r"\d|\p{L}{2,}(?:'\p{L}+)*")
    return words.list.eval(pl.element().str.contains(r"^\d") | ~pl.element().is_in(stop)).list.any()


def is_claim(claim: pl.Expr, refusal_phrases: Sequence[str] = DEFAULT_REFUSAL_PHRASES) -> pl.Expr:
    """Whether a marker-free sentence is a factual claim (not a pleasantry, offer of help, question, lead-in or
    refusal)."""
    return (
        has_content_word(claim)
        & ~claim.str.contains(PLEASANTRY)
        & ~claim.str.ends_with("?")
        & ~claim.str.ends_with(":")
        & ~refusal_expr(claim, refusal_phrases)
    )


def claims_of_texts(
    frame: pl.DataFrame,
    keys: Sequence[str],
    text_column: str,
    refusal_phrases: Sequence[str] = DEFAULT_REFUSAL_PHRASES,
) -> pl.DataFrame:
    """One row per claim of each text: keys, claim_index (0-based, in answer order), claim, inline_cited_doc_ids."""
    rows = frame.filter(pl.col(text_column).is_not_null()).select(*keys, text_column)
    # Answers repeat across attempts, cases and runs: each distinct text is split and tested once.
    texts = rows.select(text_column).unique(maintain_order=True).with_row_index("_text_id")
    # Sentences repeat across answers too, and claims (markers stripped) even more.
    sentences = with_distinct(
        sentence_rows(texts, ["_text_id"], text_column),
        "sentence",
        claim=strip_doc_markers(pl.col("sentence")),
        inline_cited_doc_ids=doc_markers(pl.col("sentence")).list.unique(maintain_order=True),
    )
    per_text = (
        with_distinct(sentences, "claim", _is_claim=is_claim(pl.col("claim"), refusal_phrases))
        .filter(pl.col("_is_claim"))
        .select("_text_id", "claim", "inline_cited_doc_ids")
    )
    return (
        rows.join(texts, on=text_column, maintain_order="left")
        .select(*keys, "_text_id")
        .join(per_text, on="_text_id", maintain_order="left_right")
        .with_columns(claim_index=pl.int_range(pl.len(), dtype=pl.Int64).over(list(keys)))
        .select(*keys, "claim_index", "claim", "inline_cited_doc_ids")
    )
