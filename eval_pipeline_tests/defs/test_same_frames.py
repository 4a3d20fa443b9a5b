"""same_frames: a pure function called again on the very same frames answers from what it returned, while they live."""

import gc

import polars as pl

from eval_pipeline.defs.same_frames import same_frames


def _counted():
    calls: list[int] = []

    def total(frame: pl.DataFrame, other: pl.DataFrame | None = None) -> int:
        calls.append(1)
        return int(frame["x"].sum()) + (0 if other is None else int(other["x"].sum()))

    return same_frames(total), calls


def test_the_same_frames_are_computed_once_and_equal_but_other_frames_again():
    total, calls = _counted()
    a, b = pl.DataFrame({"x": [1, 2]}), pl.DataFrame({"x": [10]})
    assert total(a, b) == 13 and total(a, b) == 13 and len(calls) == 1
    assert total(a.clone(), b) == 13 and len(calls) == 2  # an equal frame is another frame
    assert total(a, None) == 3 and total(a, None) == 3 and len(calls) == 3
    assert total(b, a) == 13 and len(calls) == 4  # the order of the frames counts


def test_nothing_is_kept_once_a_frame_is_gone_and_a_reused_id_is_not_taken_for_it():
    total, calls = _counted()
    a = pl.DataFrame({"x": [1]})
    assert total(a) == 1
    del a
    gc.collect()
    assert total.kept == {}
    # new frames may take the old one's id: each is computed, never answered with another frame's result
    for n in range(20):
        assert total(pl.DataFrame({"x": [n]})) == n
    assert len(calls) == 21


def test_lane_outcomes_of_the_same_stage_results_are_the_same_frame():
    from eval_pipeline.defs.same_frames import lane_outcomes
    from eval_pipeline.scoring.attribution import STAGE_RESULTS_SCHEMA

    stages = pl.DataFrame(
        [("r1", "t1", "c1", 0, "rag", "retrieval", 0, "fail", "no relevant document")],
        schema=STAGE_RESULTS_SCHEMA,
        orient="row",
    )
    first = lane_outcomes(stages)
    assert lane_outcomes(stages) is first and first["outcome"].to_list() == ["fail"]
