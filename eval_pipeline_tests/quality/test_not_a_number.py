"""A NaN in a bounded column fails the range check: pandas would read it as missing and let it pass."""

import polars as pl

from eval_pipeline.quality import tables
from eval_pipeline.quality.contracts import TableContract, check_schema_and_ranges

CONTRACT = TableContract(
    columns=("trace_id", "rate", "tokens"),
    unit_interval=("rate",),
    non_negative=("tokens",),
    unique=("trace_id",),
    per_trace=False,
)


def test_nan_in_a_unit_interval_column_fails_and_is_named():
    frame = pl.DataFrame({"trace_id": ["a", "b", "c"], "rate": [float("nan"), 0.5, None], "tokens": [1.0, 2.0, 3.0]})
    _, ranges = check_schema_and_ranges("t", CONTRACT, frame)
    assert not ranges.passed
    assert ranges.description == "NaN (not a number) in rate; the suite: 3/3 expectations met"
    assert ranges.metadata["failures"] == "not_a_number(rate): 1 unexpected"


def test_nan_beside_an_out_of_range_value_lists_both():
    frame = pl.DataFrame({"trace_id": ["a", "b"], "rate": [1.5, 0.5], "tokens": [float("nan"), float("nan")]})
    _, ranges = check_schema_and_ranges("t", CONTRACT, frame)
    assert not ranges.passed and ranges.description.startswith("NaN (not a number) in tokens; the suite: 2/3")
    lines = ranges.metadata["failures"].split("\n")
    assert lines[0].startswith("expect_column_values_to_be_between(rate): 1 unexpected")
    assert lines[1] == "not_a_number(tokens): 2 unexpected"


def test_nulls_are_not_nan_and_pass():
    frame = pl.DataFrame({"trace_id": ["a", "b"], "rate": [None, 0.25], "tokens": [None, 0.0]})
    _, ranges = check_schema_and_ranges("t", CONTRACT, frame)
    assert ranges.passed and ranges.description == "3/3 expectations met"


def test_a_grounding_rate_of_zero_over_zero_fails_the_real_contract():
    frame = pl.DataFrame({"n_supported": [0, 1], "n_claims": [0, 2]}).with_columns(
        grounding_rate=pl.col("n_supported") / pl.col("n_claims")
    )
    assert frame["grounding_rate"].is_nan().to_list() == [True, False]
    bounded = [c for c in tables.GROUNDING_SCORES.unit_interval if c == "grounding_rate"]
    assert bounded == ["grounding_rate"]
    contract = TableContract(columns=("grounding_rate",), unit_interval=("grounding_rate",), per_trace=False)
    _, ranges = check_schema_and_ranges("grounding_scores", contract, frame.select("grounding_rate"))
    assert not ranges.passed and ranges.metadata["failures"] == "not_a_number(grounding_rate): 1 unexpected"
