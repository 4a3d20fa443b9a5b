"""The shared quote check: passages of a quote verified one by one, however often a backend answered a request.

The same whether a backend answered each request once (passages numbered within the quote) or some request twice
(numbered across its rows).
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, RAW_RESULT_SCHEMA, conform, verify_quotes

CHUNKS = [
    {"doc_id": "a", "text": "Refunds take 5 days.  They go back to the card."},
    {"doc_id": "b", "text": "Plans renew yearly."},
]
QUOTES = {
    "one": ("Refunds take 5 days.", "a"),
    "two": ("Refunds take 5 days. … Plans renew yearly.", "b"),
    "spaced": ("They go back\nto the card.", "b"),
    "stray joiner": ("Plans renew yearly. …  … ", "b"),
    "made up": ("Refunds take 5 days. … Refunds are instant.", "a"),
    "only joiner": (" … ", "a"),
}


def _verify(keys: list[str]) -> pl.DataFrame:
    requests = pl.DataFrame(
        {
            "request_key": list(QUOTES),
            "claim": list(QUOTES),
            "evidence": [CHUNKS] * len(QUOTES),
            "evidence_key": ["e"] * len(QUOTES),
        },
        schema_overrides={"evidence": EVIDENCE},
    )
    raw = conform(
        pl.DataFrame(
            {
                "request_key": keys,
                "verdict": ["SUPPORTED"] * len(keys),
                "status": ["ok"] * len(keys),
                "evidence_quote": [QUOTES[k][0] for k in keys],
                "evidence_doc_id": [QUOTES[k][1] for k in keys],
            }
        ),
        RAW_RESULT_SCHEMA,
    )
    return verify_quotes(requests, raw).select("request_key", "verdict", "quote_verified", "evidence_doc_id", "reason")


def test_each_passage_is_found_where_it_is_and_a_made_up_one_downgrades_the_quote():
    got = {
        r["request_key"]: (r["verdict"], r["quote_verified"], r["evidence_doc_id"])
        for r in _verify(list(QUOTES)).to_dicts()
    }
    assert got == {
        "one": ("SUPPORTED", True, "a"),
        "two": ("SUPPORTED", True, "a"),
        "spaced": ("SUPPORTED", True, "a"),
        "stray joiner": ("NOT_IN_EVIDENCE", False, "b"),
        "made up": ("NOT_IN_EVIDENCE", False, "a"),
        "only joiner": ("NOT_IN_EVIDENCE", False, "a"),
    }


def test_a_request_answered_twice_leaves_the_other_verdicts_as_they_are():
    once = _verify(list(QUOTES))
    twice = _verify([*QUOTES, "two"])
    assert twice.filter(pl.col("request_key") != "two").sort("request_key").to_dicts() == (
        once.filter(pl.col("request_key") != "two").sort("request_key").to_dicts()
    )
    assert twice.filter(pl.col("request_key") == "two")["verdict"].to_list() == ["SUPPORTED", "SUPPORTED"]
