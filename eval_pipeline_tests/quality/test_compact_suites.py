"""The compact suites decide exactly as the per-column suites: same verdicts, same messages, on any table."""

import math
import threading

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline.quality import contracts, tables
from eval_pipeline.quality.contracts import RANGES, SCHEMA, TableContract, check_schema_and_ranges

CONTRACT = TableContract(
    columns=("trace_id", "rate", "share", "tokens", "status", "stage", "missing_column"),
    unit_interval=("rate", "share"),
    non_negative=("tokens",),
    value_sets={"status": ("scored", "incomplete"), "stage": ("pass", "fail")},
    unique=("trace_id",),
)


def per_column(name: str, contract: TableContract, frame: pl.DataFrame) -> tuple[contracts.Verdict, contracts.Verdict]:
    """The verdicts of the per-column suites alone (the reference)."""
    present = set(frame.columns)
    schema, ranges = contracts._suites(name, contract, present)
    schema_verdict = contracts._run_suite(schema, frame.head(0).select(sorted(present)), result_format="BOOLEAN_ONLY")
    columns = contracts._ge_columns(contract, present)
    range_verdict = contracts._with_not_a_number(contracts._run_suite(ranges, frame.select(columns)), contract, frame)
    return schema_verdict, range_verdict


floats = st.one_of(st.none(), st.just(math.nan), st.floats(-2, 2, allow_nan=False), st.sampled_from([0.0, 1.0, -0.0]))
ints = st.one_of(st.none(), st.integers(-3, 10**12))
words = st.one_of(st.none(), st.sampled_from(["scored", "incomplete", "pass", "fail", "Scored", "", "pass "]))


@st.composite
def frames(draw):
    n = draw(st.integers(0, 6))
    return pl.DataFrame(
        {
            "trace_id": draw(
                st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e", "f"])), min_size=n, max_size=n)
            ),
            "rate": pl.Series(draw(st.lists(floats, min_size=n, max_size=n)), dtype=pl.Float64),
            "share": pl.Series(draw(st.lists(ints, min_size=n, max_size=n)), dtype=pl.Int64),
            "tokens": pl.Series(draw(st.lists(ints, min_size=n, max_size=n)), dtype=pl.Int64),
            "status": pl.Series(draw(st.lists(words, min_size=n, max_size=n)), dtype=pl.String),
            "stage": pl.Series(draw(st.lists(words, min_size=n, max_size=n)), dtype=pl.String),
        }
    )


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_compact_and_per_column_suites_agree(frame):
    assert check_schema_and_ranges("t", CONTRACT, frame) == per_column("t", CONTRACT, frame)


def test_a_passing_table_reports_the_per_column_suite():
    frame = pl.DataFrame(
        {
            "trace_id": ["a", "b"],
            "rate": [0.0, 1.0],
            "share": [0, 1],
            "tokens": [3, 0],
            "status": ["scored", None],
            "stage": ["pass", "fail"],
            "missing_column": [None, None],
        }
    )
    schema, ranges = check_schema_and_ranges("t", CONTRACT, frame)
    assert schema == contracts.Verdict(
        True,
        "7/7 expectations met",
        {"suite": f"t.{SCHEMA}", "expectations": 7, "unsuccessful": 0, "failures": "no failed expectation"},
    )
    assert ranges == contracts.Verdict(
        True,
        "6/6 expectations met",
        {"suite": f"t.{RANGES}", "expectations": 6, "unsuccessful": 0, "failures": "no failed expectation"},
    )


def test_a_value_of_one_set_is_not_allowed_in_another_column():
    frame = pl.DataFrame(
        {"trace_id": ["a"], "rate": [0.5], "share": [1], "tokens": [1], "status": ["pass"], "stage": ["scored"]}
    )
    _, ranges = check_schema_and_ranges("t", CONTRACT, frame)
    assert not ranges.passed
    assert ranges.metadata["failures"].split("\n") == [
        "expect_column_values_to_be_in_set(status): 1 unexpected ['pass']",
        "expect_column_values_to_be_in_set(stage): 1 unexpected ['scored']",
    ]


def test_a_column_of_another_type_is_validated_column_by_column():
    frame = pl.DataFrame(
        {"trace_id": ["a"], "rate": ["0.5"], "share": [1], "tokens": [1], "status": ["scored"], "stage": ["pass"]}
    )
    assert contracts._stacked(CONTRACT, frame, set(frame.columns)) is None
    assert check_schema_and_ranges("t", CONTRACT, frame) == per_column("t", CONTRACT, frame)


def test_every_table_contract_of_the_pipeline_stacks_its_own_columns():
    for name in ("RETRIEVAL_SCORES", "CONTEXT_SCORES", "CLAIMS", "TOOL_SCORES", "STAGE_RESULTS", "RELIABILITY"):
        contract = getattr(tables, name)
        # a frame of the contracted columns, each as the scorers write it: numbers bounded, statuses as text
        frame = pl.DataFrame(
            {
                c: pl.Series(
                    [None], dtype=pl.Float64 if c in (*contract.unit_interval, *contract.non_negative) else pl.String
                )
                for c in contract.columns
            }
        )
        assert contracts._stacked(contract, frame, set(frame.columns)) is not None, name


def test_two_threads_validating_at_once_each_get_the_verdict_of_their_own_table():
    # a fused step's two chains validate at the same time where no validator process runs
    good = pl.DataFrame(
        {"trace_id": ["a", "b"], "rate": [0.1, 0.2], "share": [0, 1], "tokens": [3, 0], "status": ["scored"] * 2}
    ).with_columns(stage=pl.lit("pass"))
    bad = pl.DataFrame(
        {"trace_id": [f"t{i}" for i in range(400)], "rate": [2.0] * 400, "share": [0] * 400, "tokens": [1] * 400}
    ).with_columns(status=pl.lit("scored"), stage=pl.lit("fail"))
    verdicts: dict[str, list[bool]] = {"good": [], "bad": []}

    def validate(name: str, frame: pl.DataFrame) -> None:
        for _ in range(25):
            verdicts[name].append(check_schema_and_ranges("t", CONTRACT, frame)[1].passed)

    threads = [threading.Thread(target=validate, args=args) for args in (("good", good), ("bad", bad))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert verdicts == {"good": [True] * 25, "bad": [False] * 25}
