"""Claim extraction: each answer split into factual claims, with the inline `[doc:ID]` citations of each.

A claim is one sentence of the answer (splitting rules in `eval_pipeline.judge.text`), markers removed.
Not claims: pleasantries, interjections and offers of help ("Thanks for reaching out", "Let me know if…",
"Happy to help", "Yeah!", "That's so cool"), questions (a sentence ending in `?`), sentences without a content
word ("Yes, it does."), lead-ins to a list (ending in `:`), refusals (a sentence holding one of the refusal
phrases: "I couldn't find…" asserts nothing about the evidence) and pieces without a letter or digit.
Traces whose harness status is error/timeout yield no claims: every lane of theirs is incomplete anyway.
`judge_claims` then gives each claim the judge's verdict against the context its answer was given. A trace that
logged no context (null or an empty list) is not judged: what the model saw is unknown, so its claims are
`incomplete` with reason `no_context_logged` (SPEC §11), never NOT_IN_EVIDENCE, and cost no judge call.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, RESULT_SCHEMA, Judge
from eval_pipeline.judge.lexical import EXTRA_STOPWORDS
from eval_pipeline.judge.text import NEGATIONS, STOPWORDS, doc_markers, sentence_rows, strip_doc_markers
from eval_pipeline.scoring.common import KEY_COLUMNS, harness_incomplete
from eval_pipeline.settings import DEFAULT_REFUSAL_PHRASES

CLAIMS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "claim_index": pl.Int64,
    "claim": pl.String,
    "inline_cited_doc_ids": pl.List(pl.String),
}

JUDGED_COLUMNS: tuple[str, ...] = tuple(c for c in RESULT_SCHEMA if c != "request_key")

PLEASANTRY = (
    r"(?i)^(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening))\b"
    r"|(?i)^(?:thanks|thank you|many thanks|you'?re welcome|sure|certainly|of course|absolutely|great|okay|ok|got it)\b[\s!.,]*$"
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
    r"|(?i)^(?:(?:yes|yeah|oh|well|no|ok|okay)[,!.]?\s*)*(?:i (?:agree|think so|believe so|guess so|hope so|know)(?: with you)?"
    r"|(?:that|it)'?s? (?:is )?(?:so |very )?(?:true|right|correct)|so true|me too|same here)\b[\s!.,]*$"
)


NO_CONTEXT_LOGGED = "no_context_logged"


def no_context_logged() -> pl.Expr:
    """True for a trace whose harness logged no context (null or an empty list)."""
    return pl.col("context").list.len().fill_null(0) == 0


def unanswered() -> pl.Expr:
    """True for a trace with no answer to score: none at all, or no text and not marked refused."""
    return ~pl.col("has_answer").fill_null(False) | (pl.col("answer_text").is_null() & ~pl.col("answer_refused").fill_null(False))


def refusal_expr(text: pl.Expr, phrases: Sequence[str]) -> pl.Expr:
    """Whether a text holds one of the refusal phrases (case-insensitive, curly apostrophes read as straight)."""
    folded = text.str.replace_all("’", "'", literal=True).str.to_lowercase()
    return folded.str.contains_any([p.lower() for p in phrases])


def has_content_word(text: pl.Expr) -> pl.Expr:
    """Whether a text has a number or a word of two or more letters that is not a stop word ("Yes, it does." has none)."""
    stop = sorted(set(STOPWORDS) | set(EXTRA_STOPWORDS) | set(NEGATIONS))
    words = text.str.to_lowercase().str.replace_all("’", "'", literal=True).str.extract_all(r"\d|\p{L}{2,}(?:'\p{L}+)*")
    return words.list.eval(pl.element().str.contains(r"^\d") | ~pl.element().is_in(stop)).list.any()


def is_claim(claim: pl.Expr, refusal_phrases: Sequence[str] = DEFAULT_REFUSAL_PHRASES) -> pl.Expr:
    """Whether a marker-free sentence is a factual claim (not a pleasantry, offer of help, question, lead-in or refusal)."""
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
    sentences = sentence_rows(frame.filter(pl.col(text_column).is_not_null()), keys, text_column)
    return (
        sentences.with_columns(
            claim=strip_doc_markers(pl.col("sentence")),
            inline_cited_doc_ids=doc_markers(pl.col("sentence")).list.unique(maintain_order=True),
        )
        .filter(is_claim(pl.col("claim"), refusal_phrases))
        .with_columns(claim_index=pl.int_range(pl.len(), dtype=pl.Int64).over(list(keys)))
        .select(*keys, "claim_index", "claim", "inline_cited_doc_ids")
    )


def extract_claims(traces: pl.DataFrame, refusal_phrases: Sequence[str] = DEFAULT_REFUSAL_PHRASES) -> pl.DataFrame:
    """The `claims` rows of every answered trace (CLAIMS_SCHEMA), one per factual claim of `answer_text`."""
    answered = traces.filter(~harness_incomplete() & pl.col("answer_text").is_not_null())
    claims = claims_of_texts(answered, KEY_COLUMNS, "answer_text", refusal_phrases)
    return claims.cast(CLAIMS_SCHEMA).select(list(CLAIMS_SCHEMA))


def context_evidence(traces: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, evidence: the context chunks each answer was given, as judge evidence ({doc_id, text})."""
    chunks = (
        traces.select("run_id", "trace_id", "context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(
            "run_id", "trace_id", pl.struct(pl.col("context").struct.field("doc_id"), pl.col("context").struct.field("text")).alias("chunk")
        )
    )
    evidence = chunks.group_by("run_id", "trace_id", maintain_order=True).agg(pl.col("chunk").alias("evidence"))
    return evidence.with_columns(pl.col("evidence").cast(EVIDENCE))


def claim_key(*columns: str) -> pl.Expr:
    """A request key joining key columns with a unit separator (never part of an id)."""
    return pl.concat_str([pl.col(c).cast(pl.String).fill_null("") for c in columns], separator="\x1f")


def grounding_requests(claims: pl.DataFrame, traces: pl.DataFrame) -> pl.DataFrame:
    """Judge requests (REQUEST_SCHEMA) for claims against their trace's context; claims of a trace without context get none."""
    return claims.join(context_evidence(traces), on=["run_id", "trace_id"], how="inner", maintain_order="left").select(
        claim_key("run_id", "trace_id", "claim_index").alias("request_key"),
        "claim",
        "evidence",
        claim_key("run_id", "trace_id").alias("evidence_key"),
    )


def judge_claims(claims: pl.DataFrame, traces: pl.DataFrame, judge: Judge) -> pl.DataFrame:
    """The claims with the judge's verdict against their trace's context (JUDGED_COLUMNS added; module docstring)."""
    requests = grounding_requests(claims, traces)
    results = judge.judge_claims(requests).with_columns(_asked=pl.lit(True))
    unasked = pl.col("_asked").is_null()
    return (
        claims.with_columns(claim_key("run_id", "trace_id", "claim_index").alias("request_key"))
        .join(results, on="request_key", how="left", maintain_order="left")
        .with_columns(
            status=pl.when(unasked).then(pl.lit("incomplete")).otherwise(pl.col("status")),
            reason=pl.when(unasked).then(pl.lit(NO_CONTEXT_LOGGED)).otherwise(pl.col("reason")),
            judge_version=pl.when(unasked).then(pl.lit(judge.version, pl.String)).otherwise(pl.col("judge_version")),
            judge_model=pl.when(unasked).then(pl.lit(judge.model, pl.String)).otherwise(pl.col("judge_model")),
        )
        .select(*claims.columns, *JUDGED_COLUMNS)
    )
