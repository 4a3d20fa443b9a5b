"""Text primitives shared by claims, the local judge, citations and answer scoring, as polars expressions.

Sentence splitting (used for answers and evidence alike):
- a sentence ends at `.`, `!` or `?` (closing quotes/brackets allowed) followed by white space and then an
  upper-case letter, a digit, an opening quote or bracket; `49.00`, `v2.1` and `e.g. the` never split
  because no white space or no capital follows the dot;
- the dots of `e.g.`, `i.e.`, titles (`Dr.`, `Mr.` …), `vs.`, `approx.`, `Inc.`, `Ltd.`, `Corp.`, `Dept.`,
  `St.`, `Fig.`, `cf.` and `No.` before a number never end a sentence; other dotted abbreviations
  (`U.S.`, `p.m.`) end one when a capital follows (a known limitation, kept for speed);
- a blank line, or a line break before a list marker or a capital, ends a sentence; list markers
  (`-`, `*`, `•`, `1.`, `2)`) at the start of a line are dropped;
- inline `[doc:ID]` markers written after the terminator (`… days. [doc:a]`) are moved before it, so a
  marker always stays with the sentence it follows.

Tokens: lower-cased words (letters, apostrophes kept inside), numbers (`6,650` → `6650`, `49.00` → `49`,
number words two…ninety → digits) and the symbols `$ € £ %`. Words are lightly stemmed (`'s`, plural
`-s`/`-ies`, `-ed`, `-ing`, final `-e`), so `refunded`, `refunds` and `refund` meet.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import polars as pl

PROTECTED_DOT = "\u2024"
SPLIT_MARK = "\x1f"
DOC_MARKER = r"\[doc:\s*([^\]]*?)\s*\]"

_TITLE_ABBREVIATIONS = r"(?i)\b(mr|mrs|ms|dr|prof|jr|sr|st|vs|approx|inc|ltd|corp|dept|fig|cf)\."

STOPWORDS: frozenset[str] = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at",
        "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did",
        "do", "does", "doing", "down", "during", "each", "either", "else", "etc", "ever", "every", "few", "for", "from",
        "further", "get", "gets", "got", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
        "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "may", "me",
        "might", "more", "most", "must", "my", "myself", "of", "off", "on", "once", "only", "or", "other", "our",
        "ours", "ourselves", "out", "over", "own", "per", "same", "shall", "she", "should", "so", "some", "such",
        "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
        "those", "through", "to", "too", "under", "until", "up", "upon", "us", "very", "via", "was", "we", "were",
        "what", "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within",
        "would", "you", "your", "yours", "yourself", "yourselves", "one", "ones"
    }
)
NEGATIONS: frozenset[str] = frozenset({"not", "no", "never", "none", "nothing", "neither", "nor", "cannot", "without", "non"})

NUMBER_WORDS: dict[str, str] = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
    "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14", "fifteen": "15",
    "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30",
    "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
}

# Words of one group fill the same slot, so two different members conflict (an annual plan is not a monthly one).
EXCLUSIVE_GROUPS: dict[str, tuple[str, ...]] = {
    "period": ("annual", "annually", "yearly", "monthly", "quarterly", "weekly", "daily", "hourly"),
    "daykind": ("business", "calendar", "working"),
    "tier": ("free", "basic", "starter", "standard", "pro", "professional", "premium", "plus", "team", "business", "enterprise"),
    "month": ("january", "february", "march", "april", "june", "july", "august", "september", "october",
              "november", "december"),
    "weekday": ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    "comparison": ("more", "less", "fewer", "greater", "higher", "lower", "minimum", "maximum", "before", "after",
                   "earlier", "later"),
}
CURRENCY = ("$", "€", "£")

_TOKEN = r"[$€£%]|\d[\d,]*(?:\.\d+)?|\p{L}+(?:'\p{L}+)*"


def normalize_ws(text: pl.Expr) -> pl.Expr:
    """Runs of white space folded to one space, ends trimmed."""
    # Same result as replacing \s+, but single spaces are not matched, which makes it several times faster.
    return text.str.replace_all(r"\s{2,}|[^\S ]", " ").str.strip_chars()


def strip_doc_markers(text: pl.Expr) -> pl.Expr:
    """Text with inline `[doc:ID]` markers removed and the space they leave before punctuation closed."""
    return normalize_ws(text.str.replace_all(r"\s*\[doc:[^\]]*\]", "").str.replace_all(r"\s+([.!?,;:])", "${1}"))


def doc_markers(text: pl.Expr) -> pl.Expr:
    """The doc ids of the inline `[doc:ID]` markers of a text, in order."""
    return text.str.extract_all(r"\[doc:[^\]]*\]").list.eval(pl.element().str.extract(DOC_MARKER, 1)).list.eval(
        pl.element().filter(pl.element().str.len_chars() > 0)
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
    return t.str.replace_all(r"([.!?]+[\"'”’)\]]*)\s+([\p{Lu}\d\"'“‘(\[])", f"${{1}}{SPLIT_MARK}${{2}}")


def sentence_rows(frame: pl.DataFrame, keys: Sequence[str], text_column: str) -> pl.DataFrame:
    """One row per sentence of each text: keys, sent_pos (0-based), sentence (markers kept); rules in the module docstring."""
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
    """A raw token normalized: numbers canonical (`6,650` → `6650`, `49.00` → `49`), number words as digits, words stemmed."""
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


@lru_cache(maxsize=1)
def group_table() -> pl.DataFrame:
    """token → slot (group name) for every member of the exclusive groups, as normalized tokens."""
    rows = [(word, name) for name, members in EXCLUSIVE_GROUPS.items() for word in members]
    frame = pl.DataFrame(rows, schema={"raw": pl.String, "slot": pl.String}, orient="row")
    return frame.select(normalize_token(pl.col("raw")).alias("token"), "slot").unique()


def pack_key(high: str, low: str) -> pl.Expr:
    """Two non-negative integer columns below 2^32 as one UInt64 (one-column joins and group-bys are the fast ones)."""
    return pl.col(high).cast(pl.UInt64) * (1 << 32) + pl.col(low).cast(pl.UInt64)


def raw_token_rows(frame: pl.DataFrame, key: str, text_column: str) -> pl.DataFrame:
    """One row per raw token of each text, in text order: key, raw."""
    return frame.select(key, raw_tokens(pl.col(text_column)).alias("raw")).explode("raw", keep_nulls=False, empty_as_null=False)


def vocabulary(raw: pl.Series) -> pl.DataFrame:
    """Each distinct raw token: its normalized `token`, a dense integer id `tid` of that token, flags, and the
    exclusive `groups` it belongs to (null for most words).

    The regex work runs once per distinct word, not once per occurrence; texts featurized against one
    vocabulary share token ids, so their word sets compare as integer sets.
    """
    stop = sorted(stemmed_stopwords())
    is_neg = pl.col("raw").is_in(sorted(NEGATIONS)) | pl.col("raw").str.ends_with("n't")
    is_num = pl.col("token").str.contains(r"^\d")
    return (
        raw.unique().drop_nulls().to_frame("raw")
        .with_columns(token=normalize_token(pl.col("raw")))
        .with_columns(
            tid=pl.col("token").rank("dense").cast(pl.UInt32),
            is_num=is_num,
            is_neg=is_neg,
            is_content=(is_num | pl.col("token").str.contains(r"^\p{L}{2}")) & ~pl.col("token").is_in(stop) & ~is_neg,
        )
        .join(group_table().group_by("token").agg(pl.col("slot").alias("groups")), on="token", how="left")
    )


def _slot_rows(tokens: pl.DataFrame, key: str) -> pl.DataFrame:
    """`value|slot` rows: each number with its unit, each exclusive-group word with its group.

    The unit of a number is the currency symbol before it, `%` after it, `yr` for a year 1900–2099, else the
    next content word, else the previous one.
    """
    same_next = pl.col(key).shift(-1) == pl.col(key)
    same_prev = pl.col(key).shift(1) == pl.col(key)
    word = pl.when(pl.col("is_content") & ~pl.col("is_num")).then(pl.col("token"))
    # Neighbours are read before filtering to the numbers; the unit is then built on the few number rows.
    numbers = tokens.with_columns(
        _before=pl.when(same_prev).then(pl.col("raw").shift(1)),
        _after=pl.when(same_next).then(pl.col("raw").shift(-1)),
        _following=pl.when(same_next).then(word.shift(-1)),
        _preceding=pl.when(same_prev).then(word.shift(1)),
    ).filter(pl.col("is_num"))
    unit = (
        pl.when(pl.col("_before").is_in(list(CURRENCY)))
        .then(pl.lit("$"))
        .when(pl.col("_after") == "%")
        .then(pl.lit("%"))
        .when(pl.col("token").str.contains(r"^(?:19|20)\d\d$"))
        .then(pl.lit("yr"))
        .otherwise(pl.coalesce("_following", "_preceding", pl.lit("")))
    )
    groups = tokens.filter(pl.col("groups").is_not_null()).select(key, "token", pl.col("groups").alias("group")).explode("group")
    return pl.concat(
        [
            numbers.select(key, pl.concat_str([pl.col("token"), unit], separator="|").alias("slot")),
            groups.select(key, pl.concat_str(["token", "group"], separator="|").alias("slot")),
        ]
    )


def _entity_rows(frame: pl.DataFrame, key: str, text_column: str, vocab: pl.DataFrame) -> pl.DataFrame:
    """key → tid of each capitalized word (names, plans, products) that is a content word."""
    rows = frame.select(
        key,
        pl.col(text_column).str.replace_all("’", "'", literal=True).str.extract_all(r"\b\p{Lu}\p{L}*(?:'\p{L}+)*").alias("raw"),
    ).explode("raw", keep_nulls=False, empty_as_null=False)
    known = vocab.filter(pl.col("is_content") & ~pl.col("is_num")).select("raw", "tid")
    return rows.with_columns(pl.col("raw").str.to_lowercase()).join(known, on="raw").select(key, "tid")


def text_features(
    frame: pl.DataFrame, key: str, text_column: str, prefix: str, raw_rows: pl.DataFrame, vocab: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(features, content-word rows) of a text column keyed by a unique `key`, against a shared vocabulary.

    `raw_rows` are raw_token_rows(frame, key, text_column); `vocab` a vocabulary() holding all their raw tokens.
    features: key, `<prefix>words` (distinct content-word tids), `<prefix>n_words`, `<prefix>n_nonnum`,
    `<prefix>slots` (`value|slot` strings), `<prefix>ents` (tids of capitalized words), `<prefix>neg`;
    content-word rows: key, tid, is_num (one row per distinct content word).
    """
    tokens = raw_rows.join(vocab, on="raw", how="left", maintain_order="left")
    words = tokens.filter(pl.col("is_content")).select(key, "tid", "is_num").filter(pack_key(key, "tid").is_first_distinct())
    word_lists = words.group_by(key).agg(
        pl.col("tid").alias(f"{prefix}words"),
        pl.len().alias(f"{prefix}n_words"),
        (~pl.col("is_num")).sum().alias(f"{prefix}n_nonnum"),
    )
    negation = tokens.group_by(key).agg(pl.col("is_neg").any().alias(f"{prefix}neg"))
    slots = _slot_rows(tokens, key).unique().group_by(key).agg(pl.col("slot").alias(f"{prefix}slots"))
    entities = _entity_rows(frame, key, text_column, vocab).unique().group_by(key).agg(pl.col("tid").alias(f"{prefix}ents"))
    features = frame.select(key)
    for part in (word_lists, negation, slots, entities):
        features = features.join(part, on=key, how="left")
    features = features.with_columns(
        pl.col(f"{prefix}words", f"{prefix}ents").fill_null(pl.lit([], dtype=pl.List(pl.UInt32))),
        pl.col(f"{prefix}slots").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.col(f"{prefix}n_words", f"{prefix}n_nonnum").fill_null(0).cast(pl.Int64),
        pl.col(f"{prefix}neg").fill_null(False),
    )
    return features, words


def slot_types(slots: pl.Expr) -> pl.Expr:
    """The slot names of `value|slot` tokens."""
    return slots.list.eval(pl.element().str.replace(r"^[^|]*\|", ""))


def content_word_set(text: pl.Expr) -> pl.Expr:
    """Distinct content words of a text (list), for word-overlap measures on small frames."""
    stop = sorted(stemmed_stopwords())
    return (
        raw_tokens(text)
        .list.eval(normalize_token(pl.element()))
        .list.eval(
            pl.element().filter(
                (pl.element().str.contains(r"^\d") | pl.element().str.contains(r"^\p{L}{2}"))
                & ~pl.element().is_in(stop)
                & ~pl.element().is_in(sorted(NEGATIONS))
            )
        )
        .list.unique()
    )
