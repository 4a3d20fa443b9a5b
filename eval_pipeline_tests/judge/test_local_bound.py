"""The local judge's bound (LocalJudge.could_support) is exact: a request it rules out is never found SUPPORTED."""

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline.judge import make_judge

# names, numbers, opinion words and plain words, so each penalty of the bound comes into play
WORDS = ["Acme", "Jane", "Berlin", "30", "2024", "best", "terrible", "refund", "window", "days", "policy", "orders"]
DOCS = ["kb/a", "kb/b", "notes/c"]

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=7).map(lambda words: " ".join(words) + ".")
claims = st.one_of(
    st.none(),
    sentences,
    # the same claim with an inline doc marker: stripped, it is the claim without it
    sentences.map(lambda text: text[:-1] + " [doc:kb/a]."),
)
evidence = st.lists(
    st.fixed_dictionaries({"doc_id": st.sampled_from(DOCS), "text": st.lists(sentences, max_size=3).map(" ".join)}),
    max_size=3,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(claims, evidence), min_size=1, max_size=8), st.booleans())
def test_a_request_ruled_out_is_never_supported(pairs, shared_evidence_keys):
    requests = pl.DataFrame(
        {
            # a key asked twice is one request (the first kept)
            "request_key": [f"r{i % 6}" for i in range(len(pairs))],
            "claim": [claim for claim, _ in pairs],
            "evidence": [chunks for _, chunks in pairs],
            "evidence_key": [f"e{i % 2}" if shared_evidence_keys else None for i in range(len(pairs))],
        },
        schema={
            "request_key": pl.String,
            "claim": pl.String,
            "evidence": pl.List(pl.Struct({"doc_id": pl.String, "text": pl.String})),
            "evidence_key": pl.String,
        },
    )
    local = make_judge("local")
    bound = local.could_support(requests)
    keys = requests["request_key"].unique(maintain_order=True).to_list()
    assert bound["request_key"].to_list() == keys
    verdicts = dict(local.judge_claims(requests).select("request_key", "verdict").iter_rows())
    for key, possible in bound.iter_rows():
        if not possible:
            assert verdicts[key] != "SUPPORTED", key


def test_a_claim_whose_every_word_the_evidence_holds_is_not_ruled_out():
    requests = pl.DataFrame(
        {
            "request_key": ["held", "held-marked", "lacking", "empty"],
            "claim": ["Acme refund window 30 days.", "Acme refund window 30 days [doc:kb/a].", "Jane best 2024.", None],
            "evidence": [[{"doc_id": "kb/a", "text": "The Acme refund window is 30 days."}]] * 4,
        }
    )
    assert dict(make_judge("local").could_support(requests).iter_rows()) == {
        "held": True,
        "held-marked": True,
        "lacking": False,
        "empty": False,
    }
