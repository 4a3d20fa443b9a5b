"""Text helpers shared by the judges and scorers: work done once per distinct text."""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.text import content_word_set, normalize_ws, with_content_word_sets, with_distinct


def test_with_distinct_adds_the_value_of_each_row_in_row_order_nulls_included():
    frame = pl.DataFrame({"row": [3, 1, 2, 0, 4], "text": [" a  b", None, "c\td ", " a  b", None]})
    out = with_distinct(frame, "text", folded=normalize_ws(pl.col("text")), n=pl.col("text").str.len_chars())
    assert out.columns == ["row", "text", "folded", "n"]
    assert out.rows() == [
        (3, " a  b", "a b", 5),
        (1, None, None, None),
        (2, "c\td ", "c d", 4),
        (0, " a  b", "a b", 5),
        (4, None, None, None),
    ]


def test_content_word_sets_of_a_frame_are_those_of_each_text():
    texts = [
        "Refunds are issued within 14 days.",
        "The refund was issued in fourteen days!",
        "Yes, it does.",
        "",
        None,
        "Refunds are issued within 14 days.",
        "Plans cost $49.00 or 6,650 credits; not refundable.",
    ]
    frame = pl.DataFrame({"row": list(range(len(texts))), "text": texts})
    got = with_content_word_sets(frame, "text", "words").with_columns(pl.col("words").list.sort())
    expected = frame.with_columns(words=content_word_set(pl.col("text")).list.sort())
    assert got.to_dicts() == expected.to_dicts()
    assert got["words"][1].to_list() == ["14", "day", "issu", "refund"]
    assert got["words"][3].to_list() == [] and got["words"][4] is None
