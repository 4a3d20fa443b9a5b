"""Text primitives shared by claims, the local judge, citations and answer scoring, as polars expressions.

Sentence splitting (used for answers and evidence alike):
- a sentence ends at `.`, `!` or `?` (closing quotes/brackets allowed) followed by white space and then an
  upper-case letter, a digit, an opening quote or bracket; `49.00`, `v2.1` and `e.g. the` never split
  because no white space or no capital follows the dot; in lower-case (chat) text, `!` or `?` before a
  lower-case word, and a dot after a lower-case word of two or more letters, also end a sentence;
- the dots of `e.g.`, `i.e.`, titles (`Dr.`, `Mr.` …), `vs.`, `approx.`, `etc.`, `et al.`, `Inc.`, `Ltd.`, `Corp.`,
  `Dept.`, `St.`, `Fig.`, `cf.`, units (`ft.`, `lbs.`, `hrs.`, `mins.` …) and `No.` before a number never end a
  sentence; other dotted abbreviations (`U.S.`, `p.m.`) end one when a capital follows (a known limitation,
  kept for speed);
- a blank line, or a line break before a list marker or a capital, ends a sentence; list markers
  (`-`, `*`, `•`, `1.`, `2)`) at the start of a line are dropped;
- inline `[doc:ID]` markers written after the terminator (`… days. [doc:a]`) are moved before it, so a
  marker always stays with the sentence it follows.

`content_word_set` (word overlap of citation quotes with claims): lower-cased words and numbers (`6,650` → `6650`,
`49.00` → `49`, number words two…ninety → digits), lightly stemmed (`'s`, plural `-s`/`-ies`, `-ed`, `-ing`,
final `-e`), so `refunded`, `refunds` and `refund` meet. The local judge's own features are in `lexical`.
The word lists (stop words, negations, number words, exclusive groups), shared with it, are in `text_words`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import polars as pl

from eval_pipeline.judge.text_words import NEGATIONS, NUMBER_WORDS, STOPWORDS

PROTECTED_DOT = "\u2024"
SPLIT_MARK = "\x1f"
DOC_MARKER = r"\[doc:\s*([^\]]*?)\s*\]"

_TITLE_ABBREVIATIONS = (
    r"(?i)\b(mr|mrs|ms|dr|prof|jr|sr|st|vs|approx|inc|ltd|corp|dept|fig|cf|etc|al|ca|incl|esp|viz|resp|est|ft|lbs?|oz"
    r"|hrs?|yrs?|mins?|secs?|pp|vol|eds?)\."
)

_TOKEN = r"[$€£%]|\d[\d,]*(?:\.\d+)?|\p{L}+(?:'\p{L}+)*"


def normalize_ws(text: pl.Expr) -> pl.Expr:
    """Runs of white space folded to one space, ends trimmed."""
    # Same result as replacing \s+, but single spaces are not matched, which makes it several times faster.
    return text.str.replace_all(r"\s{2,}|[^\S ]", " ").str.strip_chars()


def with_distinct(frame: pl.DataFrame, column: str, **exprs: pl.Expr) -> pl.DataFrame:
    """The frame with the named expressions of `column` added, each evaluated once per distinct value."""
    # Answers, claims, quotes and documents repeat across traces: costly text work is done once per text.
    distinct = frame.select(column).unique().with_columns(**exprs)
    return frame.join(distinct, on=column, how="left", maintain_order="left", nulls_equal=True)


def strip_doc_markers(text: pl.Expr) -> pl.Expr:
    """Text with inline `[doc:ID]` markers removed and the space they leave before punctuation closed."""
    return normalize_ws(text.str.replace_all(r"\s*\[doc:[^\]]*\]", "").str.replace_all(r"\s+([.!?,;:])", "${1}"))


def doc_markers(text: pl.Expr) -> pl.Expr:
    """The doc ids of the inline `[doc:ID]` markers of a text, in order."""
    return (
        text.str.extract_all(r"\[doc:[^\]]*\]")
        .list.eval(pl.element().str.extract(DOC_MARKER, 1))
        .list.eval(pl.element().filter(pl.element().str.len_chars() > 0))
    )


def _split_marks(text: pl.Expr) -> pl.Expr:
    """The text with SPLIT_MARK at every sentence boundary and PROTECTED_DOT in protected abbreviations."""
    t = text.str.replace_all(r"\r\n?", "\n")
    t = t.str.replace_all(r"(?m)^[ \t]*(?:[-*•]|\d{1,2}[.)])[ \t]+", "")
    t = t.str.replace_all(r"([.!?]+)((?:\s*\[doc:[^\]]*\])+)", "${2}${1}")
    t = t.str.replace_all(r"(?i)\b(e)\.(g)\.", f"${{1}}{PROTECTED_DOT}${{2}}{PROTECTED_DOT}")
    t = t.str.replace_all(r"(?i)\b(i)\.(e)\.", f"${{1}}{PROTECTED_DOT}${{2}}{PROTECTED_DOT}")
    t = t.str.replace_all(_TITLE_ABBREVIATIONS, f"${{1}}{PROTECTED_DOT}")
    t = t.str.replace_all(r"\b(No|no)\.(\s*\d)", f"${{1}}{PROTECTED_DOT}${{2}}")
    t = t.str.replace_all(r"\n[ \t]*\n\s*", SPLIT_MARK)
    t = t.str.replace_all(r"\n[ \t]*([\p{Lu}\d\"'“‘(\[])", f"{SPLIT_MARK}${{1}}")
    t = t.str.replace_all(r"([.!?]+[\"'”’)\]]*)\s+([\p{Lu}\d\"'“‘(\[])", f"${{1}}{SPLIT_MARK}${{2}}")
    # Chat text is often lower case throughout: `!`/`?` before a lower-case word end a sentence, and so does a
    # dot after a lower-case word (abbreviations were protected above).
    t = t.str.replace_all(r"([!?]+[\"'”’)\]]*)\s+(\p{Ll})", f"${{1}}{SPLIT_MARK}${{2}}")
    return t.str.replace_all(r"(\b\p{Ll}{2,}\.[\"'”’)\]]*)\s+(\p{Ll})", f"${{1}}{SPLIT_MARK}${{2}}")


def sentence_rows(frame: pl.DataFrame, keys: Sequence[str], text_column: str) -> pl.DataFrame:
    """One row per sentence of each text: keys, sent_pos (0-based), sentence (markers kept); rules in the module
    docstring."""
    return (
        frame.select(*keys, _split_marks(pl.col(text_column)).str.split(SPLIT_MARK).alias("sentence"))
        .explode("sentence", keep_nulls=False, empty_as_null=False)
        .with_columns(pl.col("sentence").str.replace_all(PROTECTED_DOT, ".", literal=True).str.strip_chars())
        .filter(pl.col("sentence").str.contains(r"[\p{L}\d]"))
        .with_columns(sent_pos=pl.int_range(pl.len(), dtype=pl.Int64).over(list(keys)))
    )


def _stem(word: pl.Expr) -> pl.Expr:
    return (
        word.str.replace(r"'s$", "")
        .str.replace(r"^(\p{L}{2,})ies$", "${1}y")
        .str.replace(r"^(\p{L}{2,}[^s'])s$", "${1}")
        .str.replace(r"^(\p{L}{3,})(?:ing|ed)$", "${1}")
        .str.replace(r"^(\p{L}{3,})e$", "${1}")
    )


def normalize_token(token: pl.Expr) -> pl.Expr:
    """A raw token normalized: numbers canonical (`6,650` → `6650`, `49.00` → `49`), number words as digits, words
    stemmed."""
    number = (
        token.str.replace_all(",", "", literal=True)
        .str.replace(r"^(\d+)\.0+$", "${1}")
        .str.replace(r"^(\d+\.\d*?)0+$", "${1}")
    )
    word = token.replace(NUMBER_WORDS)
    return (
        pl.when(token.str.contains(r"^\d"))
        .then(number)
        .when(word.str.contains(r"^\d"))
        .then(word)
        .when(token.str.contains(r"^\p{L}"))
        .then(_stem(token))
        .otherwise(token)
    )


def raw_tokens(text: pl.Expr) -> pl.Expr:
    """Lower-cased tokens before stemming (words, numbers, currency and percent symbols), in order."""
    return text.str.to_lowercase().str.replace_all("’", "'", literal=True).str.extract_all(_TOKEN)


@lru_cache(maxsize=1)
def stemmed_stopwords() -> frozenset[str]:
    """Stopwords as raw and as normalized tokens."""
    normalized = pl.select(normalize_token(pl.lit(pl.Series(sorted(STOPWORDS))))).to_series().to_list()
    return frozenset(normalized) | STOPWORDS


def pack_key(high: str, low: str) -> pl.Expr:
    """Two non-negative integer columns below 2^32 as one UInt64 (one-column joins and group-bys are the fast ones)."""
    return pl.col(high).cast(pl.UInt64) * (1 << 32) + pl.col(low).cast(pl.UInt64)


def _is_content_word(word: pl.Expr) -> pl.Expr:
    """Whether a normalized token is a content word: a number or two or more letters, not a stop word or negation."""
    stop = sorted(stemmed_stopwords())
    return (
        (word.str.contains(r"^\d") | word.str.contains(r"^\p{L}{2}"))
        & ~word.is_in(stop)
        & ~word.is_in(sorted(NEGATIONS))
    )


def content_word_set(text: pl.Expr) -> pl.Expr:
    """Distinct content words of a text (list), for word-overlap measures on small frames."""
    words = raw_tokens(text).list.eval(normalize_token(pl.element()))
    return words.list.eval(pl.element().filter(_is_content_word(pl.element()))).list.unique()


def with_content_word_sets(frame: pl.DataFrame, column: str, name: str) -> pl.DataFrame:
    """The frame with `name`: the content_word_set of `column` (the same words, in no set order), for large frames."""
    # Texts repeat, and words repeat across texts far more: each distinct text is tokenized once and each distinct
    # token normalized once.
    texts = frame.select(column).unique().with_row_index("_text")
    tokens = texts.select("_text", raw_tokens(pl.col(column)).alias("_token")).explode(
        "_token", keep_nulls=False, empty_as_null=False
    )
    tokens = with_distinct(tokens, "_token", _word=normalize_token(pl.col("_token")))
    words = tokens.filter(_is_content_word(pl.col("_word"))).group_by("_text").agg(pl.col("_word").unique().alias(name))
    texts = (
        texts.join(words, on="_text", how="left")
        .with_columns(
            # a text without a content word has an empty set; only a null text has none
            pl.when(pl.col(column).is_not_null()).then(pl.col(name).fill_null(pl.lit([], dtype=pl.List(pl.String))))
        )
        .drop("_text")
    )
    return frame.join(texts, on=column, how="left", maintain_order="left", nulls_equal=True)
