"""parse_json: json.loads' values, read by orjson wherever orjson gives the same value."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.contracts.frames import holds_long_digit_run, parse_json


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"refund": {"amount": 12.5, "items": [1, -0.0, 1e-320, 1E5, null, true]}}',
        "123456789012345678901234567890",  # beyond 64 bits: orjson would read a float
        '[1, {"id": 18446744073709551616}]',
        "NaN",
        '"\\ud800"',  # a lone surrogate orjson refuses
        '"caf\\u00e9"',
    ],
)
def test_parse_json_gives_what_json_loads_gives(text):
    value = parse_json(text)
    assert repr(value) == repr(json.loads(text))


def test_parse_json_refuses_what_json_refuses():
    with pytest.raises(ValueError):
        parse_json("{not json")
    with pytest.raises(TypeError):
        parse_json(None)


# Digits, runs of them, other scripts' digits, non-ASCII text and lone surrogates, side by side.
_PIECES = st.sampled_from(["0", "7", "12345", "123456789", "9" * 19, "\u0663", "\uff11", "é", "\ud800", " ", "x", '"'])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_the_long_digit_test_is_the_regex(text):
    assert holds_long_digit_run(text) == (re.search("[0-9]{19}", text) is not None)


def test_a_long_digit_run_is_found_at_either_end_and_only_when_whole():
    assert (
        holds_long_digit_run("1" * 19) and holds_long_digit_run("é" + "1" * 19) and holds_long_digit_run("1" * 19 + "x")
    )
    assert not holds_long_digit_run("1" * 18 + "x" + "1" * 18) and not holds_long_digit_run("\uff11" * 19)
    assert parse_json("12345678901234567890") == 12345678901234567890  # an int, not orjson's float
