"""A reused verdict keeps what was recorded when it was made: a rerun writes the rows a fresh run writes."""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import RAW_RESULT_SCHEMA, Judge, conform
from eval_pipeline.judge.local import LocalJudge
from eval_pipeline.judge.reuse import ReusingJudge
from eval_pipeline_tests.judge.test_judge_reuse import SAME_TWICE


class PricedJudge(Judge):
    """The local judge with the usage a served model would report: the claim's length in tokens in, 7 out,
    $0.002, 350 ms."""

    def __init__(self) -> None:
        self.inner = LocalJudge()
        self.version, self.model = self.inner.version, self.inner.model
        self.sent: list[str] = []

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        self.sent += requests["request_key"].to_list()
        raw = conform(self.inner._judge_claims(requests), RAW_RESULT_SCHEMA)
        lengths = requests.select("request_key", pl.col("claim").str.len_chars().cast(pl.Int64).alias("_length"))
        return (
            raw.join(lengths, on="request_key")
            .with_columns(
                input_tokens=pl.col("_length"),
                output_tokens=pl.lit(7, pl.Int64),
                cost_usd=pl.lit(0.002),
                latency_ms=pl.lit(350.0),
            )
            .drop("_length")
        )

    def _judge_pairs(self, requests):
        return self.inner._judge_pairs(requests)


def test_a_rerun_keeps_the_recorded_tokens_cost_and_latency_and_the_same_cached():
    first = ReusingJudge(PricedJudge())
    fresh = first.judge_claims(SAME_TWICE).sort("request_key")
    inner = PricedJudge()
    again = ReusingJudge(inner, first.used().lazy())
    rerun = again.judge_claims(SAME_TWICE).sort("request_key")
    assert inner.sent == [] and (again.judged, again.reused) == (0, 3)
    assert rerun.equals(fresh)
    # t2/0 repeats t1/0 within the run: one call, counted once; the others carry the call that made their verdict
    assert rerun.select("request_key", "cached", "input_tokens", "output_tokens", "cost_usd", "latency_ms").rows() == [
        ("t1/0", False, 45, 7, 0.002, 350.0),
        ("t2/0", True, 0, 0, 0.0, 0.0),
        ("t3/0", False, 30, 7, 0.002, 350.0),
        ("t4/0", False, 42, 7, 0.002, 350.0),
    ]
    # the store's rows of the rerun are the fresh run's, costs as recorded (not 0); what a run spent is its own
    assert again.used().equals(first.used())
    assert sorted(again.used()["input_tokens"].to_list()) == [30, 42, 45]
    assert round(first.cost_usd, 6) == 0.006 and again.cost_usd is None


def test_null_usage_stays_null_when_reused_and_when_repeated():
    first = ReusingJudge(LocalJudge())
    fresh = first.judge_claims(SAME_TWICE)
    again = ReusingJudge(LocalJudge(), first.used().lazy())
    rerun = again.judge_claims(SAME_TWICE)
    # the local judge counts no tokens and measures no latency: null in every row, the repeated t2/0 included
    for frame in (fresh, rerun, again.used()):
        assert (
            frame.select(pl.col("input_tokens", "output_tokens", "latency_ms").null_count()).row(0)
            == (frame.height,) * 3
        )
    assert rerun.sort("request_key").equals(fresh.sort("request_key"))


def test_a_repeat_in_a_later_batch_of_the_run_is_cached_as_in_one_batch():
    whole = ReusingJudge(PricedJudge()).judge_claims(SAME_TWICE).sort("request_key")
    batched = ReusingJudge(PricedJudge())
    parts = pl.concat([batched.judge_claims(SAME_TWICE.head(1)), batched.judge_claims(SAME_TWICE.slice(1))]).sort(
        "request_key"
    )
    assert (
        parts.select("request_key", "cached", "input_tokens").rows()
        == whole.select("request_key", "cached", "input_tokens").rows()
    )
