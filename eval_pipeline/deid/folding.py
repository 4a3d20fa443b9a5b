"""Unicode disguises undone before detection (docs/privacy.md), with the original span of each folded character.

Both detectors look at folded text: NFKC (full-width digits and letters, `＠`), format characters removed (zero-width
spaces and joiners, soft hyphens, bidi controls, variation selectors), every script's decimal digits read as ASCII
digits, and percent escapes decoded (`%40` is `@`). Dashes stay: `0.6564–1.0000` is a range, no phone number. A value
found in the folded text is replaced over the original span it came from, the text a reader sees, zero-width
characters inside it included.

Only a value holding non-ASCII text or a percent escape can change (`may_be_disguised`): ASCII data never reaches the
per-character Python here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

# Default-ignorable characters that are not of category Cf (combining grapheme joiner, Hangul fillers, Khmer inherent
# vowels, Mongolian free variation selectors, variation selectors): invisible, so they can hide inside a value too.
_IGNORABLE = frozenset({0x34F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810),
                        *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)})  # fmt: skip
# The percent escapes of one UTF-8 encoded character: a lead byte and its continuation bytes.
_CONT = "%[89ABab][0-9A-Fa-f]"
_PERCENT_CHAR = re.compile(
    rf"%[0-7][0-9A-Fa-f]|%[CDcd][0-9A-Fa-f]{_CONT}|%[Ee][0-9A-Fa-f]{_CONT}{_CONT}|%[Ff][0-7]{_CONT}{_CONT}{_CONT}"
)
# In polars: a value worth folding holds a percent escape, or non-ASCII text that folding may change.
_PERCENT = r"%[0-9A-Fa-f]{2}"
_FOLDED_CLASSES = (
    r"[\p{Cf}\x{34F}\x{115F}\x{1160}\x{17B4}\x{17B5}\x{3164}\x{FFA0}\x{180B}-\x{180F}\x{FE00}-\x{FE0F}]|[\p{Nd}--0-9]"
)

# A non-ASCII character inside an e-mail-like run around an `@` (`josé.garcía@…`, `jane@bücher.de`): only such text
# needs the (three times slower) Unicode e-mail pattern of detectors.combined_pattern.
NON_ASCII_EMAIL = r"[^\x00-\x7f][A-Za-z0-9._%+-]*@|@[A-Za-z0-9.-]*[^\x00-\x7f]"


@dataclass(frozen=True)
class Folded:
    """Folded text and, for each of its characters, the span `[start, end)` of the original text it came from."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def source(self, start: int, end: int) -> tuple[int, int]:
        """The original span of the folded span `[start, end)` (non-empty)."""
        return self.starts[start], self.ends[end - 1]

    def rewrite(self, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str | None]) -> Folded:
        """Each non-empty match replaced by `replace(match)` (None keeps it); new characters span what the match
        spanned."""
        text, starts, ends, pos = [], [], [], 0
        for match in pattern.finditer(self.text):
            new = replace(match)
            if new is None or match.end() == match.start():
                continue
            text.append(self.text[pos : match.start()])
            starts += self.starts[pos : match.start()]
            ends += self.ends[pos : match.start()]
            first, last = self.starts[match.start()], self.ends[match.end() - 1]
            text.append(new)
            starts += [first] * len(new)
            ends += [last] * len(new)
            pos = match.end()
        if pos == 0:
            return self
        text.append(self.text[pos:])
        return Folded("".join(text), (*starts, *self.starts[pos:]), (*ends, *self.ends[pos:]))


def _fold_chars(chars: str) -> str:
    """One base character with its combining marks, folded."""
    out = []
    for ch in unicodedata.normalize("NFKC", chars):
        if ch < "\x80":
            out.append(ch)
        elif unicodedata.category(ch) == "Cf" or ord(ch) in _IGNORABLE:
            continue
        elif (digit := unicodedata.decimal(ch, None)) is not None:
            out.append(str(digit))
        else:
            out.append(ch)
    return "".join(out)


# Text outside ASCII, with the ASCII character before it when a combining mark opens it (`e` + U+0301 folds as one).
_NON_ASCII_RUN = re.compile(r"[\x00-\x7f]?[^\x00-\x7f]+")


def _is_mark(ch: str) -> bool:
    """A combining mark that folds with the character before it (not a default-ignorable one, which is dropped)."""
    return ch >= "\u0300" and unicodedata.category(ch)[0] == "M" and ord(ch) not in _IGNORABLE


# The original span of each folded character: its starts and its ends, side by side.
Spans = tuple[list[int], list[int]]


def _fold_run(run: str, offset: int, out: list[str], spans: Spans | None) -> None:
    """One run of text (no combining mark right after it) folded chunk by chunk into `out`, with spans if asked."""
    i, n = 0, len(run)
    while i < n:
        j = i + 1
        # A base character and its combining marks fold together (NFKC composes `e` + U+0301 into `é`).
        while j < n and _is_mark(run[j]):
            j += 1
        folded = run[i] if j - i == 1 and run[i] < "\x80" else _fold_chars(run[i:j])
        out.append(folded)
        if spans is not None:
            spans[0].extend([offset + i] * len(folded))
            spans[1].extend([offset + j] * len(folded))
        i = j


def _fold_runs(text: str, spans: Spans | None) -> str:
    """NFKC, format characters dropped, digits of every script read as ASCII, with spans into `spans` if given;
    ASCII between non-ASCII runs is copied as it is (it folds to itself), so the per-character work is only over the
    non-ASCII text."""
    out: list[str] = []

    def copied(start: int, stop: int) -> None:
        out.append(text[start:stop])
        if spans is not None:
            spans[0].extend(range(start, stop))
            spans[1].extend(range(start + 1, stop + 1))

    pos = 0
    for found in _NON_ASCII_RUN.finditer(text):
        start = found.start()
        # an ASCII character before the run joins it only when a combining mark follows it
        if text[start] < "\x80" and not _is_mark(text[start + 1]):
            start += 1
        copied(pos, start)
        _fold_run(text[start : found.end()], start, out, spans)
        pos = found.end()
    copied(pos, len(text))
    return "".join(out)


def _fold_unicode(text: str) -> Folded:
    """NFKC, format characters dropped, digits of every script read as ASCII, with spans."""
    spans: Spans = ([], [])
    folded = _fold_runs(text, spans)
    return Folded(folded, tuple(spans[0]), tuple(spans[1]))


def _decoded(match: re.Match[str]) -> str | None:
    """The character one UTF-8 sequence of percent escapes spells, folded; None for a control character or bad UTF-8."""
    try:
        decoded = bytes.fromhex(match.group().replace("%", "")).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if unicodedata.category(decoded) == "Cc" else _fold_chars(decoded)


def fold(text: str) -> Folded:
    """`text` with its Unicode disguises undone (see the module docstring), with the original span of each character."""
    folded = (
        _fold_unicode(text)
        if not text.isascii()
        else Folded(text, tuple(range(len(text))), tuple(range(1, len(text) + 1)))
    )
    # Each decoded character spans its own escapes (`%EF%BC%A0`, a full-width `@`, is one `@`).
    return folded.rewrite(_PERCENT_CHAR, _decoded) if "%" in folded.text else folded


def fold_text(text: str) -> str:
    """The folded text alone (ASCII without a percent sign is returned as it is), without the spans `fold` keeps."""
    if text.isascii():
        folded = text
    else:
        folded = _fold_runs(text, None)
    if "%" not in folded:
        return folded
    return _PERCENT_CHAR.sub(lambda match: match.group() if (new := _decoded(match)) is None else new, folded)


def non_ascii(values: pl.Series) -> pl.Series:
    """For each value, whether it holds a non-ASCII character (null for null)."""
    # More UTF-8 bytes than characters: what `[^\x00-\x7f]` tells, without a regex reading every character.
    return values.str.len_bytes() != values.str.len_chars()


def holds_non_ascii_email(values: pl.Series) -> pl.Series:
    """For each value, whether it matches NON_ASCII_EMAIL (False for null); only non-ASCII values are searched."""
    wide = non_ascii(values).fill_null(False)
    if not wide.any():
        return wide
    return wide.scatter(wide.arg_true(), values.filter(wide).str.contains(NON_ASCII_EMAIL))


def may_be_disguised(values: pl.Series) -> pl.Series:
    """For each value, whether folding may change it: a percent escape, or non-ASCII text holding a format character,
    a non-ASCII digit, or anything NFKC changes. ASCII values cost one regex test."""
    percent = values.str.contains(_PERCENT)
    outside = non_ascii(values)
    if not outside.any():
        return percent.fill_null(False)
    wide = values.filter(outside)
    changes = wide.str.contains(_FOLDED_CLASSES) | (wide.str.normalize("NFKC") != wide)
    disguised = outside.fill_null(False).scatter(outside.arg_true(), changes)
    return (percent | disguised).fill_null(False)


def folded_values(values: pl.Series) -> pl.Series:
    """`values` with each disguised one folded (in Python, one call per disguised value), the rest as they are."""
    disguised = may_be_disguised(values)
    if not disguised.any():
        return values
    return values.scatter(disguised.arg_true(), [fold_text(v) for v in values.filter(disguised).to_list()])
