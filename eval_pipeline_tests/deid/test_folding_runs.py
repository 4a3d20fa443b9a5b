"""Folding copies ASCII between non-ASCII runs as it is: the same text and spans as folding character by character."""

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.deid.folding import _IGNORABLE, _PERCENT_CHAR, _decoded, _fold_chars, fold, fold_text


def _fold_each_character(text: str) -> tuple[str, list[int], list[int]]:
    """The definition: every character with its combining marks folded in turn, with the span it came from."""
    out, starts, ends, i = [], [], [], 0
    while i < len(text):
        j = i + 1
        while (
            j < len(text)
            and text[j] >= "\u0300"
            and unicodedata.category(text[j])[0] == "M"
            and ord(text[j]) not in _IGNORABLE
        ):
            j += 1
        folded = text[i] if j - i == 1 and text[i] < "\x80" else _fold_chars(text[i:j])
        out.append(folded)
        starts += [i] * len(folded)
        ends += [j] * len(folded)
        i = j
    return "".join(out), starts, ends


# ASCII (with `%` and hex digits for escapes), combining marks, ignorables, format characters, other scripts' digits,
# full-width forms and ligatures: every branch of the fold, side by side.
_PIECES = st.sampled_from(
    list("ab3e%40 -@.") + ["%40", "%EF%BC%A0", "%C3%A9", "%E2%80%8B", "%FF"]
    + ["\u0301", "\u0308", "\u034f", "\ufe0f", "\u200b", "\u00ad", "\u202e", "\u0663", "\u096f", "\uff41", "\uff10",
       "\uff20", "\ufb01", "\u2460", "é", "→", "…", "\u1160", "\U000e0100", "\u3164"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=24).map("".join))
def test_fold_by_runs_matches_folding_each_character(text):
    expected, starts, ends = _fold_each_character(text)
    folded = fold(text)
    if "%" in expected:
        # percent escapes are decoded after the characters are folded (fold's second pass), on both sides
        expected = _PERCENT_CHAR.sub(lambda m: m.group() if (new := _decoded(m)) is None else new, expected)
        assert fold_text(text) == expected == folded.text
        return
    assert fold_text(text) == expected == folded.text
    if not text.isascii():
        assert (list(folded.starts), list(folded.ends)) == (starts, ends)


def test_a_mark_after_ascii_folds_with_it_and_ascii_keeps_its_span():
    folded = fold("ab e\u0301 → x")
    assert folded.text == "ab é → x"
    assert [folded.source(i, i + 1) for i in range(len(folded.text))] == [
        (0, 1), (1, 2), (2, 3), (3, 5), (5, 6), (6, 7), (7, 8), (8, 9)
    ]  # fmt: skip
