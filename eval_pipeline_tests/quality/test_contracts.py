"""Table contracts: Great Expectations schema and range suites, completeness against the expected traces, and the
residual personal-data scan, each failure named with its column and offending values."""

import polars as pl
import pytest

from eval_pipeline.quality.contracts import (
    TableContract,
    Verdict,
    check_complete,
    check_no_personal_data,
    check_schema_and_ranges,
    lane_table,
)

CONTRACT = TableContract(
    columns=("run_id", "trace_id", "status", "score", "tokens"),
    unit_interval=("score",),
    non_negative=("tokens",),
    value_sets={"status": ("scored", "incomplete")},
    unique=("trace_id",),
)


def _frame(**changes) -> pl.DataFrame:
    columns = {
        "run_id": ["r1", "r1", "r1"],
        "trace_id": ["t1", "t2", "t3"],
        "status": ["scored", "scored", "incomplete"],
        "score": [0.0, 1.0, None],
        "tokens": [0, 12, None],
    }
    return pl.DataFrame({**columns, **changes})


def test_lane_table_columns_value_sets_and_key():
    contract = lane_table(
        "recall",
        "rank",
        stages=("retrieval", "answer"),
        unit_interval=("recall",),
        non_negative=("rank",),
        value_sets={"kind": ("a", "b")},
    )
    assert contract.columns == (
        "run_id",
        "trace_id",
        "case_id",
        "attempt",
        "status",
        "reason",
        "retrieval_stage",
        "retrieval_reason",
        "answer_stage",
        "answer_reason",
        "recall",
        "rank",
    )
    assert dict(contract.value_sets) == {
        "status": ("scored", "incomplete", "not_applicable"),
        "retrieval_stage": ("pass", "fail", "incomplete", "not_applicable"),
        "answer_stage": ("pass", "fail", "incomplete", "not_applicable"),
        "kind": ("a", "b"),
    }
    assert (contract.unit_interval, contract.non_negative, contract.unique) == (("recall",), ("rank",), ("trace_id",))
    assert contract.per_trace and contract.scan_personal_data and not contract.independent_scan


def test_conforming_frame_passes_both_suites():
    schema, ranges = check_schema_and_ranges("t", CONTRACT, _frame())
    assert schema == Verdict(
        True,
        "5/5 expectations met",
        {"suite": "t.schema", "expectations": 5, "unsuccessful": 0, "failures": "no failed expectation"},
    )
    # nulls are not range violations: an incomplete row has no score
    assert ranges == Verdict(
        True,
        "4/4 expectations met",
        {"suite": "t.value_ranges", "expectations": 4, "unsuccessful": 0, "failures": "no failed expectation"},
    )


def test_missing_column_fails_the_schema_suite_by_name():
    schema, ranges = check_schema_and_ranges("t", CONTRACT, _frame().drop("tokens"))
    assert not schema.passed
    assert schema.description == "4/5 expectations met"
    assert schema.metadata["failures"] == "expect_column_to_exist(tokens): failed unexpected []"
    # the range of a missing column is not evaluated; the others still are
    assert ranges.passed and ranges.metadata["expectations"] == 3


def test_extra_columns_are_allowed():
    schema, ranges = check_schema_and_ranges("t", CONTRACT, _frame(extra=["x", "y", "z"]))
    assert schema.passed and ranges.passed


@pytest.mark.parametrize(
    ("changes", "failure"),
    [
        ({"score": [0.5, 1.01, None]}, "expect_column_values_to_be_between(score): 1 unexpected [1.01]"),
        ({"score": [-0.25, 0.5, None]}, "expect_column_values_to_be_between(score): 1 unexpected [-0.25]"),
        ({"score": [float("inf"), 0.5, None]}, "expect_column_values_to_be_between(score): 1 unexpected [inf]"),
        ({"tokens": [-3, 0, None]}, "expect_column_values_to_be_between(tokens): 1 unexpected [-3.0]"),
        (
            {"status": ["scored", "Scored", "done"]},
            "expect_column_values_to_be_in_set(status): 2 unexpected ['Scored', 'done']",
        ),
        ({"trace_id": ["t1", "t2", "t1"]}, "expect_column_values_to_be_unique(trace_id): 2 unexpected ['t1', 't1']"),
    ],
)
def test_each_range_violation_fails_and_is_named(changes, failure):
    schema, ranges = check_schema_and_ranges("t", CONTRACT, _frame(**changes))
    assert schema.passed
    assert not ranges.passed
    assert ranges.description == "3/4 expectations met"
    assert ranges.metadata == {"suite": "t.value_ranges", "expectations": 4, "unsuccessful": 1, "failures": failure}


def test_several_violations_are_listed_one_per_line():
    _, ranges = check_schema_and_ranges("t", CONTRACT, _frame(score=[2.0, 0.5, None], status=["x", "scored", "scored"]))
    assert ranges.description == "2/4 expectations met"
    assert ranges.metadata["failures"].splitlines() == [
        "expect_column_values_to_be_between(score): 1 unexpected [2.0]",
        "expect_column_values_to_be_in_set(status): 1 unexpected ['x']",
    ]


def test_frame_without_any_ranged_column_has_no_range_expectation():
    schema, ranges = check_schema_and_ranges("t", CONTRACT, pl.DataFrame({"run_id": ["r1"]}))
    assert not schema.passed and schema.description == "1/5 expectations met"
    assert ranges == Verdict(True, "no range expectation applies", {"suite": "t.value_ranges", "expectations": 0})


def test_empty_frame_fails_every_column():
    schema, _ = check_schema_and_ranges("t", CONTRACT, pl.DataFrame())
    assert schema.description == "0/5 expectations met"
    assert schema.metadata["unsuccessful"] == 5


EXPECTED = pl.DataFrame({"trace_id": ["t1", "t2", "t3", "t2"]})


def test_complete_when_every_expected_trace_has_a_row():
    frame = pl.DataFrame(
        {
            "trace_id": ["t3", "t1", "t2"],
            "status": ["scored", "incomplete", "not_applicable"],
            "reason": [None, "judge timed out", "no retrieval in trace"],
        }
    )
    verdict = check_complete(frame, EXPECTED)
    assert verdict == Verdict(
        True,
        "3 rows for 3 expected traces",
        {
            "expected_traces": 3,
            "missing_traces": 0,
            "missing_sample": "no trace missing",
            "unexpected_traces": 0,
            "incomplete_without_reason": 0,
            "incomplete_rows": 1,
        },
    )


def test_missing_unexpected_null_key_and_unexplained_rows_fail_completeness():
    frame = pl.DataFrame(
        {
            "trace_id": ["t1", "t9", None],
            "status": ["incomplete", "scored", "not_applicable"],
            "reason": [None, None, None],
        }
    )
    verdict = check_complete(frame, EXPECTED)
    assert not verdict.passed
    assert verdict.description == "3 rows for 3 expected traces"
    # a null trace id matches no expected trace: it counts as unexpected
    sample = verdict.metadata.pop("missing_sample")
    assert sorted(sample.split(", ")) == ["t2", "t3"]  # in no set order
    assert verdict.metadata == {
        "expected_traces": 3,
        "missing_traces": 2,
        "unexpected_traces": 2,
        "incomplete_without_reason": 2,
        "incomplete_rows": 1,
    }


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        (
            pl.DataFrame({"trace_id": ["t1", "t2"], "status": ["scored", "scored"], "reason": [None, None]}),
            "missing_traces",
        ),
        (
            pl.DataFrame({"trace_id": ["t1", "t2", "t3", "t4"], "status": ["scored"] * 4, "reason": [None] * 4}),
            "unexpected_traces",
        ),
        (
            pl.DataFrame(
                {"trace_id": ["t1", "t2", "t3"], "status": ["scored", "incomplete", "scored"], "reason": [None] * 3}
            ),
            "incomplete_without_reason",
        ),
    ],
)
def test_each_completeness_violation_alone_fails(frame, field):
    verdict = check_complete(frame, EXPECTED)
    assert not verdict.passed
    assert {k for k in ("missing_traces", "unexpected_traces", "incomplete_without_reason") if verdict.metadata[k]} == {
        field
    }
    assert verdict.metadata[field] == 1


def test_frame_without_status_counts_no_incomplete_rows():
    verdict = check_complete(pl.DataFrame({"trace_id": ["t1", "t2", "t3"]}), EXPECTED)
    assert verdict.passed
    assert (verdict.metadata["incomplete_without_reason"], verdict.metadata["incomplete_rows"]) == (0, 0)


def test_table_not_per_trace_is_complete():
    assert check_complete(pl.DataFrame({"trace_id": []}, schema={"trace_id": pl.String}), None) == Verdict(
        True, "table is not per trace", {}
    )


def test_personal_data_is_located_never_quoted():
    frame = pl.DataFrame(
        {
            "trace_id": ["t1", "t2"],
            "answer": ["write to jane.doe@example.com or call +44 20 7946 0958", "the refund is 10 EUR"],
        }
    )
    verdict = check_no_personal_data("answers", frame)
    assert verdict == Verdict(
        False,
        "2 residual personal data finding(s): answers.answer: EMAIL ×1; answers.answer: PHONE ×1",
        {"findings": 2, "where": "answers.answer: EMAIL ×1\nanswers.answer: PHONE ×1"},
    )
    assert "jane.doe" not in verdict.description + verdict.metadata["where"]


def test_clean_table_has_no_personal_data():
    frame = pl.DataFrame({"trace_id": ["t1"], "answer": ["the refund of 10 EUR was issued to order 88171"]})
    assert check_no_personal_data("answers", frame) == Verdict(
        True, "0 residual personal data finding(s)", {"findings": 0, "where": "nothing found"}
    )
