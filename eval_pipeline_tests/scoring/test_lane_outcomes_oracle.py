"""lane_outcomes in one group-by gives what the definition gives: first failing stage by sort, then joins."""

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from eval_pipeline.scoring.attribution import (
    HARNESS_OWNER,
    STAGE_OWNERS,
    STAGE_RESULTS_SCHEMA,
    UNSUPPORTED_CORRECT,
    lane_outcomes,
)
from eval_pipeline.scoring.common import LANE_STAGES

KEYS = ["run_id", "trace_id", "case_id", "attempt", "lane"]


def _outcomes_by_joins(stages: pl.DataFrame) -> pl.DataFrame:
    """The definition, written the long way: the deciding row by sorting, then one join per fact."""
    deciding = (
        stages.filter(pl.col("status").is_in(["fail", "incomplete"]))
        .sort("stage_order", maintain_order=True)
        .group_by(KEYS, maintain_order=True)
        .first()
        .select(*KEYS, pl.col("status").alias("deciding_status"), pl.col("stage").alias("deciding_stage"), "reason")
    )
    applicable = stages.group_by(KEYS).agg((pl.col("status") != "not_applicable").any().alias("any_applicable"))
    hazards = (
        stages.filter(pl.col("lane") == "rag")
        .group_by(KEYS)
        .agg(
            (
                ((pl.col("stage") == "retrieval") & (pl.col("status") == "fail")).any()
                & ((pl.col("stage") == "answer") & (pl.col("status") == "pass")).any()
            ).alias("unsupported_correct")
        )
    )
    out = (
        stages.select(KEYS)
        .unique(maintain_order=True)
        .join(deciding, on=KEYS, how="left", maintain_order="left")
        .join(applicable, on=KEYS, how="left", maintain_order="left")
        .join(hazards, on=KEYS, how="left", maintain_order="left")
    )
    fail, incomplete = pl.col("deciding_status") == "fail", pl.col("deciding_status") == "incomplete"
    return out.select(
        *KEYS,
        pl.when(fail)
        .then(pl.lit("fail"))
        .when(incomplete)
        .then(pl.lit("incomplete"))
        .when(pl.col("any_applicable"))
        .then(pl.lit("pass"))
        .otherwise(pl.lit("not_applicable"))
        .alias("outcome"),
        pl.when(fail).then(pl.col("deciding_stage")).alias("first_failing_stage"),
        pl.when(incomplete)
        .then(pl.format("{} incomplete: {}", pl.col("deciding_stage"), pl.col("reason").fill_null("no reason given")))
        .otherwise(pl.col("reason"))
        .alias("reason"),
        pl.when(fail)
        .then(pl.col("deciding_stage").replace_strict(STAGE_OWNERS, default=None))
        .when(incomplete)
        .then(pl.lit(HARNESS_OWNER))
        .alias("owner"),
        pl.when(pl.col("unsupported_correct").fill_null(False)).then(pl.lit(UNSUPPORTED_CORRECT)).alias("hazard"),
    )


_STATUSES = st.sampled_from(["pass", "fail", "incomplete", "not_applicable"])
_REASONS = st.sampled_from([None, "no qrels", "timeout"])


@st.composite
def _stage_rows(draw) -> pl.DataFrame:
    """Stage rows of a few traces in both lanes, each trace a subset of its lane's stages in any order."""
    rows = []
    for trace in range(draw(st.integers(1, 6))):
        lane = draw(st.sampled_from(sorted(LANE_STAGES)))
        stages = list(enumerate(LANE_STAGES[lane]))
        chosen = draw(st.lists(st.sampled_from(stages), min_size=1, max_size=len(stages), unique=True))
        for order, stage in chosen:
            rows.append(
                ("r1", f"t{trace}", f"c{trace % 3}", trace % 2, lane, stage, order, draw(_STATUSES), draw(_REASONS))
            )
    return pl.DataFrame(rows, schema=STAGE_RESULTS_SCHEMA, orient="row")


@settings(max_examples=300, deadline=None)
@given(_stage_rows())
def test_one_group_by_equals_the_definition(stages):
    assert_frame_equal(lane_outcomes(stages), _outcomes_by_joins(stages))


def test_the_first_failing_stage_is_the_lowest_in_order_whatever_the_row_order():
    stages = pl.DataFrame(
        [
            ("r1", "t1", "c1", 0, "rag", "answer", 4, "fail", "wrong"),
            ("r1", "t1", "c1", 0, "rag", "retrieval", 0, "fail", "no relevant document"),
            ("r1", "t1", "c1", 0, "rag", "grounding", 2, "incomplete", None),
            ("r1", "t2", "c2", 0, "rag", "answer", 4, "pass", None),
            ("r1", "t2", "c2", 0, "rag", "grounding", 2, "incomplete", None),
            ("r1", "t3", "c3", 0, "rag", "retrieval", 0, "not_applicable", None),
        ],
        schema=STAGE_RESULTS_SCHEMA,
        orient="row",
    )
    out = lane_outcomes(stages)
    assert out.select("trace_id", "outcome", "first_failing_stage", "reason", "owner").rows() == [
        ("t1", "fail", "retrieval", "no relevant document", STAGE_OWNERS["retrieval"]),
        ("t2", "incomplete", None, "grounding incomplete: no reason given", HARNESS_OWNER),
        ("t3", "not_applicable", None, None, None),
    ]
    assert out["hazard"].to_list() == [None, None, None]
