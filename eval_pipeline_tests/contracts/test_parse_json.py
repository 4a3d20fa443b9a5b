"""parse_json: json.loads' values, read by orjson wherever orjson gives the same value."""

import json

import pytest

from eval_pipeline.contracts.frames import parse_json


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
