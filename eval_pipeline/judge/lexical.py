"""Lexical features of claims and evidence sentences for the local judge, as polars frames.

Tokens, in text order with their case: words, numbers, the symbols `$ € £ %`, and clause breaks (`; : ( ) [ ] — –`
and the words but, while, whereas, although, though, however, except, unless, yet). A text is prepared first:
U.S./USA/United States read as one name (likewise U.K./United Kingdom), a hyphen after a short prefix (e-mail,
co-op, re-use, pre-order) is dropped, other hyphenated words are their parts, and ISO dates (2016-07-20) are
written out (20 July 2016).

Normalisation runs once per distinct raw token (`vocabulary`):
- numbers: thousands separators, ordinal suffixes and trailing decimal zeros dropped (`6,650` → 6650,
  `20th` → 20, `49.00` → 49); number words two … ninety and ordinals second … twentieth as digits; noon, midday
  and midnight as times (values, like numbers);
- currency codes and words (USD, dollars, EUR, euros, GBP) read as their symbol, `percent` as `%`;
- words: British spellings as American (colour, organise, centre, catalogue, travelled, defence …), irregular
  forms as their lemma (went → go, children → child), then the Snowball English stemmer (PyStemmer).
Content words: numbers and normalised words of two or more letters that are neither stop words (function words and
discourse words such as yes, oh, actually) nor negations. Names: capitalised content words that do not open their text.
Negated words: a content word whose closest preceding content word or negation in its clause is a negation
(`not refundable`, `no fee`). The unit of a number: a currency symbol beside it, `%` after it, `yr` for a year
1000–2099, a month beside it (a date), else the next content word of its clause, else the previous one — never across
a clause break.
The word lists and tables are in `lexical_words`; those shared with `text` in `text_words`.
"""

from __future__ import annotations

from functools import lru_cache

import polars as pl

from eval_pipeline.judge.lexical_words import (
    BRITISH,
    CURRENCY_WORDS,
    DOUBLED_L,
    EXTRA_STOPWORDS,
    IRREGULAR,
    MONTH_ABBREVIATIONS,
    MONTHS,
    ORDINAL_WORDS,
    SUBJECTIVE_WORDS,
    TIME_WORDS,
)
from eval_pipeline.judge.text_words import EXCLUSIVE_GROUPS, NEGATIONS, NUMBER_WORDS, STOPWORDS

TOKEN = r"[$€£%]|\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?|\p{L}+(?:['’]\p{L}+)*|[;:()\[\]—–]"
BREAK_PUNCTUATION = (";", ":", "(", ")", "[", "]", "—", "–")
BREAK_WORDS = ("but", "while", "whereas", "although", "though", "however", "except", "unless", "yet")
SYMBOLS = ("$", "€", "£", "%")
CURRENCY = ("$", "€", "£")


def prepare(text: pl.Expr) -> pl.Expr:
    """Text rewritten so that equal things tokenize alike (module docstring: aliases, prefix hyphens, ISO dates)."""
    t = text.str.replace_all("’", "'", literal=True)
    t = t.str.replace_all(r"\bU\.\s?S\.(?:\s?A\.)?|\bUnited States(?: of America)?\b|\bUSA\b|\bUS\b", "USA")
    t = t.str.replace_all(r"\bU\.\s?K\.|\bUnited Kingdom\b", "UK")
    t = t.str.replace_all(r"(?i)\b(e|x|co|re|pre|post|anti|multi|semi|sub|mid|inter|un)-(\p{L})", "${1}${2}")
    for number, month in enumerate(MONTHS, start=1):
        t = t.str.replace_all(rf"\b(\d{{4}})-{number:02d}-(\d{{2}})\b", f"${{2}} {month} ${{1}}")
    return t


def token_rows(frame: pl.DataFrame, key: str, text_column: str) -> pl.DataFrame:
    """One row per token of each text, in order: key, pos (0-based), raw (case kept)."""
    return (
        frame.select(key, prepare(pl.col(text_column)).str.extract_all(TOKEN).alias("raw"))
        .explode("raw", keep_nulls=False, empty_as_null=False)
        .with_columns(pos=pl.int_range(pl.len(), dtype=pl.Int32).over(key))
    )


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def _americanize(word: pl.Expr) -> pl.Expr:
    """British spellings of a lower-case word as American ones (regular patterns plus the BRITISH table)."""
    w = word.replace(BRITISH)
    w = w.str.replace(r"^(\p{L}{2,})our(s|ed|ing|ite|ites|able|ful|less)?$", "${1}or${2}")
    w = w.str.replace(r"^(\p{L}{3,})is(e|ed|es|ing|ation|ations|er|ers)$", "${1}iz${2}")
    w = w.str.replace(r"^(\p{L}{2,})ys(e|ed|es|ing)$", "${1}yz${2}")
    w = w.str.replace(r"^(\p{L}{2,})(t|b)re(s|d)?$", "${1}${2}er${3}")
    w = w.str.replace(r"^(\p{L}{3,})ogue(s)?$", "${1}og${2}")
    return w.str.replace(rf"^({DOUBLED_L})l(ed|ing|er|ers)$", "${1}${2}")


@lru_cache(maxsize=1)
def _stop_set() -> tuple[str, ...]:
    return tuple(sorted(set(STOPWORDS) | EXTRA_STOPWORDS))


@lru_cache(maxsize=1)
def _group_table() -> pl.DataFrame:
    """lower-case word → exclusive groups it belongs to."""
    rows = [(word, name) for name, members in EXCLUSIVE_GROUPS.items() for word in members]
    frame = pl.DataFrame(rows, schema={"lower": pl.String, "group": pl.String}, orient="row")
    return frame.group_by("lower").agg(pl.col("group").alias("groups"))


def vocabulary(raw: pl.Series) -> pl.DataFrame:
    """Each distinct raw token: its normalised `token`, a dense id `tid` of that token, and its flags.

    Columns: raw, token, tid (UInt32, equal for equal tokens), is_num, is_sym, is_neg, is_break, is_content,
    is_cap, groups (exclusive groups of the word, null for most words).
    """
    frame = (
        raw.unique()
        .drop_nulls()
        .to_frame("raw")
        .with_columns(lower=pl.col("raw").str.to_lowercase().str.replace_all("’", "'", literal=True))
    )
    lower = pl.col("lower")
    numeric = lower.str.contains(r"^\d")
    number = (
        lower.str.replace(r"(?:st|nd|rd|th)$", "")
        .str.replace_all(",", "", literal=True)
        .str.replace(r"^(\d+)\.0+$", "${1}")
        .str.replace(r"^(\d+\.\d*?)0+$", "${1}")
    )
    number_word = lower.replace_strict({**NUMBER_WORDS, **ORDINAL_WORDS, **TIME_WORDS}, default=None)
    symbol = (
        pl.when(pl.col("raw").is_in(list(SYMBOLS)))
        .then(pl.col("raw"))
        .otherwise(lower.replace_strict(CURRENCY_WORDS, default=None))
    )
    month = pl.col("raw").replace_strict(MONTH_ABBREVIATIONS, default=None)
    word = pl.coalesce(month, lower.str.replace(r"'s$", "").replace(IRREGULAR))
    frame = frame.with_columns(
        _number=pl.when(numeric).then(number).otherwise(number_word),
        _symbol=symbol,
        _word=_americanize(word),
    )
    words = frame.filter(pl.col("_number").is_null() & pl.col("_symbol").is_null())["_word"].unique().to_list()
    stems = pl.DataFrame(
        {"_word": words, "_stem": _stemmer().stemWords(words)}, schema={"_word": pl.String, "_stem": pl.String}
    )
    stop = list(_stop_set())
    is_neg = lower.is_in(sorted(NEGATIONS)) | lower.str.ends_with("n't")
    is_break = lower.is_in(list(BREAK_PUNCTUATION) + list(BREAK_WORDS))
    return (
        frame.join(stems, on="_word", how="left")
        .with_columns(token=pl.coalesce("_number", "_symbol", "_stem"))
        .with_columns(
            tid=pl.col("token").rank("dense").cast(pl.UInt32),
            is_num=pl.col("_number").is_not_null(),
            is_sym=pl.col("_symbol").is_not_null(),
            is_neg=is_neg,
            is_break=is_break,
            is_content=(
                pl.col("_number").is_not_null()
                | (pl.col("token").str.contains(r"^\p{L}{2}") & ~lower.is_in(stop) & ~pl.col("_word").is_in(stop))
            )
            & ~is_neg
            & ~is_break,
            is_cap=pl.col("raw").str.contains(r"^\p{Lu}"),
            is_subjective=lower.is_in(list(SUBJECTIVE_WORDS)),
        )
        .join(_group_table(), on="lower", how="left")
        .select(
            "raw",
            "token",
            "tid",
            "is_num",
            "is_sym",
            "is_neg",
            "is_break",
            "is_content",
            "is_cap",
            "is_subjective",
            "groups",
            "lower",
        )
    )


def annotate(tokens: pl.DataFrame, vocab: pl.DataFrame, key: str) -> pl.DataFrame:
    """Token rows (token_rows) with their vocabulary flags, clause number, name flag and number unit.

    Columns added: tid, token, lower, is_num, is_neg, is_content, is_name, groups, clause, unit (numbers only),
    negated (a content word right after a negation in its clause).
    """
    rows = tokens.join(vocab, on="raw", how="left", maintain_order="left").with_columns(
        clause=pl.col("is_break").cast(pl.Int32).cum_sum().over(key)
    )
    group = pl.col(key).cast(pl.UInt64) * (1 << 20) + pl.col("clause").cast(pl.UInt64)
    is_word = pl.col("is_content") & ~pl.col("is_num")
    word = pl.when(is_word).then(pl.col("token"))
    word_group = pl.when(is_word).then(group)
    same_next = pl.col(key).shift(-1) == pl.col(key)
    same_prev = pl.col(key).shift(1) == pl.col(key)
    next_is = pl.when(same_next & (group.shift(-1) == group)).then(pl.col("token").shift(-1))
    prev_is = pl.when(same_prev & (group.shift(1) == group)).then(pl.col("token").shift(1))
    rows = rows.with_columns(
        _next_word=pl.when(word_group.shift(-1).backward_fill() == group).then(word.shift(-1).backward_fill()),
        _prev_word=pl.when(word_group.shift(1).forward_fill() == group).then(word.shift(1).forward_fill()),
        _next_tok=next_is,
        _prev_tok=prev_is,
        is_name=pl.col("is_cap") & pl.col("is_content") & ~pl.col("is_num") & (pl.col("pos") > 0),
    )
    months = list(_month_tokens())
    unit = (
        pl.when(pl.col("_prev_tok").is_in(list(CURRENCY)))
        .then(pl.col("_prev_tok"))
        .when(pl.col("_next_tok").is_in(list(CURRENCY)))
        .then(pl.col("_next_tok"))
        .when(pl.col("_next_tok") == "%")
        .then(pl.lit("%"))
        .when(pl.col("token").str.contains(r"^(?:1\d|20)\d\d$"))
        .then(pl.lit("yr"))
        .when(pl.col("_prev_tok").is_in(months))
        .then(pl.col("_prev_tok"))
        .when(pl.col("_next_tok").is_in(months))
        .then(pl.col("_next_tok"))
        .otherwise(pl.coalesce("_next_word", "_prev_word", pl.lit("")))
    )
    # A content word is negated when the closest content word or negation before it in its clause is a negation
    # (not refundable, no fee, never expire, aren't issued): negation is read word by word, not per sentence.
    significant = pl.col("is_content") | pl.col("is_neg")
    last_neg = pl.when(significant).then(pl.col("is_neg")).shift(1).forward_fill()
    last_group = pl.when(significant).then(group).shift(1).forward_fill()
    negated = pl.col("is_content") & (last_group == group).fill_null(False) & last_neg.fill_null(False)
    return rows.with_columns(unit=pl.when(pl.col("is_num")).then(unit), negated=negated).drop(
        "_next_word", "_prev_word", "_next_tok", "_prev_tok", "is_cap", "is_break", "is_sym"
    )


@lru_cache(maxsize=1)
def _month_tokens() -> tuple[str, ...]:
    words = list(MONTHS)
    return tuple(_stemmer().stemWords(words))
