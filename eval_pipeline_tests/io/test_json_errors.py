"""Why a line is not JSON, in plain words wherever input is read: never orjson's own message, never "at at"."""

import orjson
import pytest

from eval_pipeline.io.json_errors import invalid_json, json_problem
from eval_pipeline.io.loaders import parse_json_line


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b"nope, not json", "Expecting value at column 1"),
        (b'{"id": "c", "context": "x"\n', "Expecting ',' delimiter at column 27 (the text ends there)"),
        ('{"answer": "unterminated', "Unterminated string starting at column 12"),
        ('{\n  "a": 1,,\n}', "Expecting property name enclosed in double quotes at line 2 column 10"),
        (b'{"score": NaN}', "NaN is not a JSON number"),
        (b"\xff{}", "not UTF-8 text at byte offset 0"),
        (b"  ", "the text is empty"),
    ],
)
def test_json_problem_in_plain_words(text, reason):
    assert json_problem(text) == reason
    assert invalid_json(text) == f"invalid JSON: {reason}"


def test_orjson_refuses_what_the_reason_then_explains():
    # the lines where orjson's message leaked: "invalid literal, expected 'null'" and friends
    for raw in (b"nope", b'{"a": 1', b"{'a': 1}"):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(raw)
        assert "expected" not in json_problem(raw).removeprefix("Expecting") and "char " not in json_problem(raw)


def test_a_reject_reason_names_the_column_once():
    value, reason = parse_json_line(b'{"trace_id": "t1", "answer": "cut short')
    assert value is None and reason == "invalid JSON: Unterminated string starting at column 30"
