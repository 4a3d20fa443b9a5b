"""Verdict reuse: an unchanged (claim, evidence) under the same judge version is never judged twice.

Anything changed is judged again.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import RAW_RESULT_SCHEMA, REQUEST_SCHEMA, Judge, conform
from eval_pipeline.judge.local import LocalJudge
from eval_pipeline.judge.reuse import HASH_SCHEME, STORED_SCHEMA, ReusingJudge

REFUNDS = [
    {
        "doc_id": "policy/refunds",
        "text": "Annual SMB plans have a 14 day refund window. Monthly plans are not refundable.",
    }
]
BILLING = [{"doc_id": "billing/faq", "text": "Refunds are issued to the original payment method."}]


def _requests(rows: list[tuple[str, str, list[dict]]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"request_key": key, "claim": claim, "evidence": evidence, "evidence_key": None}
            for key, claim, evidence in rows
        ],
        schema=REQUEST_SCHEMA,
    )


SAME_TWICE = _requests(
    [
        ("t1/0", "Annual SMB plans have a 14 day refund window.", REFUNDS),
        ("t2/0", "Annual SMB plans have a 14 day refund window.", REFUNDS),  # another trace, same claim and evidence
        ("t3/0", "Monthly plans can be refunded.", REFUNDS),
        ("t4/0", "Refunds go to the original payment method.", BILLING),
    ]
)
VERDICT_COLUMNS = ["request_key", "verdict", "evidence_quote", "evidence_doc_id", "quote_verified", "status"]


class CountingJudge(Judge):
    """The local judge, counting the requests it is sent; claims listed in `fail` come back incomplete."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.inner = LocalJudge()
        self.version, self.model = self.inner.version, self.inner.model
        self.sent: list[str] = []
        self.fail = fail

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        self.sent += requests["request_key"].to_list()
        raw = conform(self.inner._judge_claims(requests), RAW_RESULT_SCHEMA)
        failed = requests.filter(pl.col("claim").is_in(list(self.fail)))["request_key"]
        broken = pl.col("request_key").is_in(failed.to_list())
        return raw.with_columns(
            status=pl.when(broken).then(pl.lit("incomplete")).otherwise(pl.col("status")),
            reason=pl.when(broken).then(pl.lit("timeout")).otherwise(pl.col("reason")),
            verdict=pl.when(broken).then(None).otherwise(pl.col("verdict")),
        )

    def _judge_pairs(self, requests):
        return self.inner._judge_pairs(requests)


def test_identical_requests_are_sent_once_and_verdicts_match_the_judge_alone():
    alone = LocalJudge().judge_claims(SAME_TWICE)
    inner = CountingJudge()
    reusing = ReusingJudge(inner)
    results = reusing.judge_claims(SAME_TWICE)
    assert inner.sent == ["t1/0", "t3/0", "t4/0"]
    assert (reusing.judged, reusing.reused) == (3, 0)
    assert results.select(VERDICT_COLUMNS).sort("request_key").equals(alone.select(VERDICT_COLUMNS).sort("request_key"))
    assert results.sort("request_key")["cached"].to_list() == [False, True, False, False]
    assert reusing.fresh.height == 3 and set(reusing.fresh["hash_scheme"]) == {HASH_SCHEME}
    assert reusing.fresh.schema == pl.Schema(STORED_SCHEMA)


def test_a_second_run_over_unchanged_inputs_sends_nothing_and_gives_the_same_verdicts():
    first = ReusingJudge(CountingJudge())
    before = first.judge_claims(SAME_TWICE)
    inner = CountingJudge()
    second = ReusingJudge(inner, first.fresh.lazy())
    after = second.judge_claims(SAME_TWICE)
    assert inner.sent == [] and (second.judged, second.reused) == (0, 3) and second.fresh.is_empty()
    # the rows are the first run's, `cached` and the costs the local judge does not count (null) included
    assert after.sort("request_key").equals(before.sort("request_key"))
    assert after.sort("request_key")["cached"].to_list() == [False, True, False, False]
    # the local judge counts no tokens and measures no latency (null), and costs nothing (0.0)
    assert after.select(pl.col("input_tokens", "latency_ms").null_count()).row(0) == (4, 4)
    assert after["cost_usd"].to_list() == [0.0] * 4
    assert second.used().equals(first.used())


def test_changed_evidence_a_changed_claim_or_another_judge_version_is_judged_again():
    first = ReusingJudge(CountingJudge())
    first.judge_claims(SAME_TWICE)
    changed = _requests(
        [
            ("t1/0", "Annual SMB plans have a 14 day refund window.", REFUNDS),  # unchanged
            ("t3/0", "Monthly plans can be refunded.", BILLING),  # evidence changed
            ("t4/0", "Refunds go to the original card.", BILLING),  # claim changed
        ]
    )
    inner = CountingJudge()
    second = ReusingJudge(inner, first.fresh.lazy())
    second.judge_claims(changed)
    assert inner.sent == ["t3/0", "t4/0"] and (second.judged, second.reused) == (2, 1)

    other_version = CountingJudge()
    other_version.version = "local-lexical:other"
    third = ReusingJudge(other_version, first.fresh.lazy())
    third.judge_claims(SAME_TWICE)
    assert other_version.sent == ["t1/0", "t3/0", "t4/0"]


def test_incomplete_verdicts_are_not_stored_and_are_asked_again():
    first = ReusingJudge(CountingJudge(fail=("Monthly plans can be refunded.",)))
    results = first.judge_claims(SAME_TWICE)
    incomplete = results.filter(pl.col("status") == "incomplete")
    assert incomplete["request_key"].to_list() == ["t3/0"] and incomplete["verdict"].to_list() == [None]
    assert first.fresh.height == 2
    inner = CountingJudge()
    ReusingJudge(inner, first.fresh.lazy()).judge_claims(SAME_TWICE)
    assert inner.sent == ["t3/0"]


def test_a_later_batch_of_the_same_run_reuses_what_an_earlier_batch_judged():
    inner = CountingJudge()
    reusing = ReusingJudge(inner)
    reusing.judge_claims(SAME_TWICE.head(2))
    reusing.judge_claims(SAME_TWICE)
    assert inner.sent == ["t1/0", "t3/0", "t4/0"] and (reusing.judged, reusing.reused) == (3, 1)
