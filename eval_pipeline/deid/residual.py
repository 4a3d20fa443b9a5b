"""A second, independent residual scan: libphonenumber, python-stdnum and whitespace-tolerant grouping.

It shares no regex and no classification with the replacement pass (detectors.py): text is first normalized
(JSON whitespace escapes and any whitespace run become one space, tokens are blanked), short candidates are cut out
in polars, and each distinct candidate is judged by phonenumbers' matcher and stdnum's validators. A value one pass
misses is then still found by the other.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import phonenumbers
import polars as pl
from stdnum import iban as _iban
from stdnum import luhn as _luhn
from stdnum.br import cpf
from stdnum.de import idnr
from stdnum.es import dni, nie
from stdnum.fr import nir
from stdnum.in_ import aadhaar
from stdnum.it import codicefiscale
from stdnum.nl import bsn
from stdnum.us import itin, ssn

from eval_pipeline.deid.columns import ROW, VALUE, StringLeaves, keep_matches, leaf_name
from eval_pipeline.deid.detectors import (
    CARD,
    EMAIL,
    ESCAPED_TOKEN_PATTERN,
    IBAN,
    NATIONAL_ID,
    PHONE,
    TOKEN_PATTERN,
    mask,
)
from eval_pipeline.deid.folding import Folded, fold, folded_values
from eval_pipeline.deid.lookalikes import holds_date

# Keywords that announce a national id; a bare digit run right after one is checked against every id.
_ID_WORDS = (
    r"national[ _]?id|id[ _]?number|tax[ _]?id|tax[ _]?number|tin|steuer[ _-]?id|steuer[ _-]?idnr|idnr|"
    r"identifikationsnummer|steuernummer|dni|nie|nif|nir|insee|codice[ _]?fiscale|bsn|burgerservicenummer|cpf|"
    r"aadhaa?r|ssn|social[ _]security[ _]number|itin"
)
# A candidate: an optional id keyword, then a run of digits and capitals with single separators between groups.
_CANDIDATE = r"(?i:(?:" + _ID_WORDS + r")[\"' :=#]{0,5})?\+?\(?[0-9A-Z]+(?:\)?[ ./\-]?\(?[0-9A-Z]+){0,10}"
# An optional `:` before the local part marks URL credentials (`https://user:pass@host`), the URL detector's part.
# Local parts and domains may be written in any script (`josé.garcía@ejemplo.es`, `jane@bücher.de`); `{L}` is a
# letter or digit of any script in Rust, any non-ASCII character in Python (which only sees what Rust matched).
_EMAIL_BODY = (
    r":?[A-Za-z0-9._%+\-{L}]+ ?@ ?[A-Za-z0-9{L}](?:[A-Za-z0-9\-{L}]*[A-Za-z0-9{L}])?"
    r"(?:\.[A-Za-z0-9\-{L}]+)*\.[A-Za-z{L}]{2,24}"
)
_EMAIL = _EMAIL_BODY.replace("{L}", r"\p{L}\p{M}\p{Nd}")
_KEYWORD_RE = re.compile(r"(?i:(?:" + _ID_WORDS + r")[\"' :=#]{0,5})")
_GROUP_RE = re.compile(r"[0-9A-Z]+")
_NINO_RE = re.compile(r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z][0-9]{6}[A-D]")
_EMAIL_RE = re.compile(_EMAIL_BODY.replace("{L}", "\x80-\U0010ffff"))
_CANDIDATE_RE = re.compile(_CANDIDATE)
# Group shapes of formatted digit ids (lengths of the digit groups); a bare run needs a keyword or the region.
_SHAPED_IDS = (
    ((2, 3, 3, 3), idnr),
    ((1, 2, 2, 2, 3, 3, 2), nir),
    ((3, 3, 3, 2), cpf),
    ((4, 4, 4), aadhaar),
    ((4, 2, 3), bsn),
)
BARE_IDS = {"DE": (11, idnr), "FR": (15, nir), "BR": (11, cpf), "IN": (12, aadhaar), "NL": (9, bsn)}
_ALL_BARE = (idnr, nir, cpf, aadhaar, bsn, dni, nie, codicefiscale)
_PHONE_REGIONS = ("US", "DE", "GB", "FR", "IT", "NL")
_VALID = phonenumbers.Leniency.VALID
_WORTH_SCANNING = r"@|(?:[0-9][^0-9]*){6}"
_PHONE_SHAPE = re.compile(r"[+(]|[0-9][ /\-.]\(?[0-9]")
_DATE = re.compile(r"[0-9]{1,4}[./\-][0-9]{1,2}[./\-][0-9]{1,4}")


def normalized(expr: pl.Expr) -> pl.Expr:
    """Tokens blanked, JSON whitespace escapes and every whitespace run made one space."""
    # A raw token and an escaped one never overlap, nor a JSON escape and a whitespace character, so each pair is
    # one pass. Whitespace other than a space, then runs of spaces: three times faster than one `\s+` pass.
    return (
        expr.str.replace_all(f"{TOKEN_PATTERN}|{ESCAPED_TOKEN_PATTERN}", " ~ ")
        .str.replace_all(r"\\[nrt]|[^\S ]", " ")
        .str.replace_all(" {2,}", " ")
    )


def _ssn_like(compact: str) -> bool:
    # stdnum refuses the advertised SSNs (078-05-1120); written down they are still someone's number to hide.
    blacklisted = f"{compact[:3]}-{compact[3:5]}-{compact[5:]}" in ssn._ssn_blacklist  # noqa: SLF001
    return ssn.is_valid(compact) or itin.is_valid(compact) or blacklisted


def _windows(groups: list[re.Match[str]]) -> Iterable[tuple[int, tuple[int, ...], str, int, int]]:
    """Every run of consecutive groups: where it starts, the groups' lengths, their concatenation and its span."""
    for i in range(len(groups)):
        for j in range(i + 1, min(len(groups), i + 8) + 1):
            part = groups[i:j]
            yield (
                i,
                tuple(len(g.group()) for g in part),
                "".join(g.group() for g in part),
                part[0].start(),
                part[-1].end(),
            )


def _phones(candidate: str, regions: tuple[str, ...]) -> list[tuple[str, int, int]]:
    found = []
    for region in regions:
        for match in phonenumbers.PhoneNumberMatcher(candidate, region, leniency=_VALID):
            raw = match.raw_string
            # A bare digit run is an id or an amount far more often than a phone: a phone is written with a `+`,
            # or separators between its groups; a date and an hour (`01.02.2024 14`) is neither.
            if _DATE.match(raw):
                continue
            # One dot between digits is a decimal (`0.986111`), not a grouping.
            grouped = re.search(r"[0-9][ /\-]\(?[0-9]", raw) or raw.count(".") >= 2
            if raw.startswith(("+", "(")) or grouped:
                found.append((raw, match.start, match.end))
        if found:
            return found
    return found


@functools.lru_cache(maxsize=1 << 16)
def judge_spans(candidate: str, regions: frozenset[str] = frozenset()) -> tuple[tuple[str, str, int, int], ...]:
    """The personal values in one normalized candidate, found with phonenumbers and stdnum: entity type, value and
    its span `[start, end)` in the candidate."""
    found: list[tuple[str, str, int, int]] = []
    keyword = _KEYWORD_RE.match(candidate)
    lead = keyword.end() if keyword else 0
    body = candidate[lead:]
    groups = list(_GROUP_RE.finditer(body))
    for start, shape, compact, first, last in _windows(groups):
        digits = compact.isdigit()
        # A date is never a national id (`Date of Birth: 1989-12-13` before a capitalised word is no DNI).
        dated = len(shape) >= 3 and holds_date(body[first:last])
        kind = None
        if digits and 13 <= len(compact) <= 19 and compact[0] in "23456" and _luhn.is_valid(compact):
            kind = CARD
        elif re.fullmatch(r"[A-Z]{2}[0-9]{2}[0-9A-Z]{11,30}", compact) and _iban.is_valid(compact):
            kind = IBAN
        elif dated:
            continue
        elif not digits and (
            dni.is_valid(compact)
            or nie.is_valid(compact)
            or codicefiscale.is_valid(compact)
            or _NINO_RE.fullmatch(compact)
        ):
            kind = NATIONAL_ID
        elif digits and len(shape) > 1 and any(shape == s and m.is_valid(compact) for s, m in _SHAPED_IDS):
            kind = NATIONAL_ID
        elif digits and shape in ((3, 2, 4),) and _ssn_like(compact):
            kind = NATIONAL_ID
        # After a keyword only the value right after it counts, and only at an id's length (stdnum pads short BSNs).
        elif (
            digits
            and start == 0
            and len(shape) == 1
            and keyword
            and len(compact) >= 8
            and (any(m.is_valid(compact) for m in _ALL_BARE) or _ssn_like(compact))
        ):
            kind = NATIONAL_ID
        elif (
            digits
            and len(shape) == 1
            and any(len(compact) == n and m.is_valid(compact) for r, (n, m) in BARE_IDS.items() if r in regions)
        ):
            kind = NATIONAL_ID
        if kind is not None:
            found.append((kind, compact, lead + first, lead + last))
    # _phones keeps only numbers written with `+`, `(` or separators between digits: a bare run (an order number)
    # never reaches libphonenumber, whose matcher costs ~0.1 ms a region
    if not found and len(re.sub(r"[^0-9]", "", body)) >= 6 and _PHONE_SHAPE.search(body):
        phone_regions = tuple(sorted(r for r in regions if r in phonenumbers.SUPPORTED_REGIONS)) + _PHONE_REGIONS
        found += [(PHONE, raw, lead + a, lead + b) for raw, a, b in _phones(body, phone_regions)]
    return tuple(found)


def judge(candidate: str, regions: frozenset[str] = frozenset()) -> tuple[tuple[str, str], ...]:
    """The personal values (entity type, text) in one normalized candidate, found with phonenumbers and stdnum."""
    return tuple((kind, value) for kind, value, _, _ in judge_spans(candidate, regions))


_SCHEMA = {"table": pl.String, "column": pl.String, "row": pl.Int64, "entity_type": pl.String,
           "masked_excerpt": pl.String}  # fmt: skip


def independent_scan(frame: pl.DataFrame, table: str, regions: frozenset[str] = frozenset()) -> pl.DataFrame:
    """Residual findings by the independent detectors, one row per finding (scan.FINDINGS_SCHEMA)."""
    return scan_leaves(StringLeaves(frame), table, regions)


def judged_elsewhere(regions: frozenset[str]) -> pl.Expr:
    """Candidates `judge` finds nothing in, told in polars: a bare digit run (no keyword, no group separators, so no
    shaped id and no phone) that has neither a card's length (13-19) nor a bare id's length in these regions."""
    lengths = sorted({*range(13, 20), *(n for region, (n, _) in BARE_IDS.items() if region in regions)})
    match = pl.col("match")
    return match.str.contains(r"^[0-9]+$") & ~match.str.len_chars().is_in(lengths)


def _candidate_lists(distinct: pl.DataFrame, folded: pl.Series | None = None) -> pl.DataFrame:
    """The independent scan's candidates in each distinct value (`VALUE`, `match`: the candidate runs, then the
    e-mails, of its normalized text), for the values that can hold a finding; `folded`: the values already folded."""
    # Unicode disguises are undone first (folding.py), in Python for the few values that hold any.
    folded = folded_values(distinct[VALUE]) if folded is None else folded
    # A value holding a finding has an `@` or six digits (see the filter in scan_leaves): the rest is not normalized.
    worth = distinct.with_columns(folded.alias("text")).filter(pl.col("text").str.contains(_WORTH_SCANNING))
    text = worth.with_columns(normalized(pl.col("text")).alias("text"))
    return text.select(
        VALUE,
        pl.concat_list(pl.col("text").str.extract_all(_CANDIDATE), pl.col("text").str.extract_all(_EMAIL)).alias(
            "match"
        ),
    )


class CandidateMemo:
    """The independent scan's candidates (`_candidate_lists`) of the values scanned so far, looked up by value.

    The residual check over a de-identified batch reads again the values that the union passes (disguise.union) of
    its text and id leaves have just scanned; a value's candidates depend on the value alone, so a value looked up
    here gets what scanning it again would give. Cleared by its owner after each batch, so memory stays bounded.
    """

    def __init__(self) -> None:
        # Every value scanned (`VALUE`) with its candidates (`match`), null where it cannot hold a finding.
        self._known = pl.DataFrame(schema={VALUE: pl.String, "match": pl.List(pl.String)})

    def clear(self) -> None:
        """Forget every value."""
        self._known = self._known.clear()

    def candidate_lists(self, distinct: pl.DataFrame, folded: pl.Series | None = None) -> pl.DataFrame:
        """`_candidate_lists(distinct, folded)`, scanning only the values not seen before and remembering them."""
        values = distinct.select(VALUE)
        if folded is not None:
            values = values.with_columns(folded.alias("folded"))
        # One join tells the values seen before (with their candidates) from the rest.
        known = self._known.with_columns(pl.lit(True).alias("seen"))
        looked = values.join(known, on=VALUE, how="left")
        seen = looked.filter(pl.col("seen") & pl.col("match").is_not_null()).select(VALUE, "match")
        fresh = looked.filter(pl.col("seen").is_null())
        scanned = _candidate_lists(fresh.select(VALUE), fresh["folded"] if folded is not None else None)
        self._known = pl.concat([self._known, fresh.select(VALUE).join(scanned, on=VALUE, how="left")])
        return pl.concat([seen, scanned])


def _verdicts(matched: pl.DataFrame, regions: frozenset[str]) -> pl.DataFrame:
    """Entity type and masked excerpt of each distinct candidate of `matched` (from _candidate_lists) that holds a
    finding (`match`, `entity_type`, `masked_excerpt`)."""
    # every value judged below holds six digits or more (the shortest: a UK NINO, a 6-digit phone); an
    # e-mail needs its `@`. Filtering here keeps ordinary words and codes out of the per-candidate Python. Either
    # takes six characters at least (the shortest e-mail `a@b.cc`; `_CANDIDATE` holds no `@`), a test that drops
    # the most candidates for the least work, before they are made unique.
    candidates = (
        matched.select(pl.col("match").explode().drop_nulls())
        .filter(pl.col("match").str.len_bytes() >= 6)
        .unique()
        .filter(pl.col("match").str.contains("@") | (pl.col("match").str.count_matches("[0-9]") >= 6))
        .filter(~judged_elsewhere(regions))
    )
    rows = []
    for match in candidates["match"].sort().to_list():
        if "@" in match:
            if not match.startswith(":") and _EMAIL_RE.fullmatch(match):
                rows.append((match, EMAIL, mask(match.replace(" ", ""))))
            continue
        rows += [(match, kind, mask(value)) for kind, value in judge(match, regions)]
    return pl.DataFrame(
        rows, schema={"match": pl.String, "entity_type": pl.String, "masked_excerpt": pl.String}, orient="row"
    )


def scan_leaves(
    leaves: StringLeaves,
    table: str,
    regions: frozenset[str] = frozenset(),
    folded: pl.Series | None = None,
    memo: CandidateMemo | None = None,
) -> pl.DataFrame:
    """`independent_scan` over the string leaves of a frame already read (`folded`: their distinct values folded, when
    the caller has them already; `memo`: candidates of values scanned before)."""
    if not leaves.paths:
        return pl.DataFrame(schema=_SCHEMA)  # type: ignore[arg-type]
    # Normalizing, cutting candidates and judging them runs once per distinct value or candidate; the candidates
    # holding a finding are then spread back over the rows holding their value, in the order of the rows.
    if memo is None:
        matched = _candidate_lists(leaves.distinct, folded)
    else:
        matched = memo.candidate_lists(leaves.distinct, folded)
    verdicts = _verdicts(matched, regions)
    if verdicts.height == 0:
        return pl.DataFrame(schema=_SCHEMA)  # type: ignore[arg-type]
    matched = keep_matches(matched, verdicts["match"].unique())
    hits = pl.concat(
        [hits.select(pl.lit(leaf_name(path)).alias("column"), ROW, "match") for path, hits in leaves.spread(matched)]
        or [pl.DataFrame(schema={"column": pl.String, ROW: pl.Int64, "match": pl.String})]
    )
    found = hits.join(verdicts, on="match", how="inner", maintain_order="left").select(
        pl.lit(table).alias("table"), "column", pl.col(ROW).alias("row"), "entity_type", "masked_excerpt"
    )
    return found.unique(maintain_order=True).cast(_SCHEMA)  # type: ignore[arg-type]


_TOKENS_RE = re.compile(f"{TOKEN_PATTERN}|{ESCAPED_TOKEN_PATTERN}")
_SPACE_RE = re.compile(r"\\[nrt]|[^\S ]")
_SPACES_RE = re.compile(" {2,}")


def _normalized_with_spans(value: str) -> Folded:
    """`normalized` over the folded value, in Python, keeping the original span of every character."""
    folded = fold(value)
    folded = folded.rewrite(_TOKENS_RE, lambda m: " ~ ").rewrite(_SPACE_RE, lambda m: " ")
    return folded.rewrite(_SPACES_RE, lambda m: " ")


def residual_spans(value: str, regions: frozenset[str] = frozenset()) -> list[tuple[str, str, int, int]]:
    """What the independent scan finds in one value, for replacing it: entity type, value (normal enough to key a
    pseudonym on) and its span `[start, end)` in `value` as written, in order and not overlapping."""
    text = _normalized_with_spans(value)
    found: list[tuple[str, str, int, int]] = []
    for match in _CANDIDATE_RE.finditer(text.text):
        found += [
            (kind, v, match.start() + a, match.start() + b) for kind, v, a, b in judge_spans(match.group(), regions)
        ]
    for match in _EMAIL_RE.finditer(text.text):
        if not match.group().startswith(":"):
            found.append((EMAIL, match.group().replace(" ", ""), match.start(), match.end()))
    spans, end = [], 0
    # The longest value wins where two overlap (a card's digits also hold shorter ids).
    for kind, v, a, b in sorted(found, key=lambda f: (f[2], f[2] - f[3])):
        if a >= end:
            start, stop = text.source(a, b)
            spans.append((kind, v, start, stop))
            end = b
    return spans


def values_with_findings(
    values: pl.Series, regions: frozenset[str] = frozenset(), memo: CandidateMemo | None = None
) -> pl.Series:
    """The distinct values among `values` in which the independent scan finds something (columnar, see scan_leaves);
    `memo`: candidates of values scanned before, to look up and add to."""
    # What independent_scan reports rows of, told per distinct value: one holding a candidate with a verdict.
    distinct = pl.DataFrame({VALUE: values.unique().drop_nulls()}, schema={VALUE: pl.String})
    matched = _candidate_lists(distinct) if memo is None else memo.candidate_lists(distinct)
    verdicts = _verdicts(matched, regions)
    if verdicts.height == 0:
        return pl.Series("text", [], dtype=pl.String)
    return keep_matches(matched, verdicts["match"].unique())[VALUE].alias("text")
