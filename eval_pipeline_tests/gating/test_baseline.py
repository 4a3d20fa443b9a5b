"""`--baseline latest-passing`: the newest earlier run of the candidate's dataset whose gates all passed."""

import polars as pl

from eval_pipeline.gating.baseline import choose_latest_passing

MANIFESTS = pl.DataFrame(
    {
        "run_id": ["r1", "r2", "r3", "cand", "r5", "other-ds"],
        "dataset_version": ["v1", "v1", "v1", "v1", "v1", "v2"],
        "created_at": [
            "2026-01-01T00:00:00Z",
            "2026-01-02T00:00:00Z",
            "2026-01-03T00:00:00Z",
            "2026-01-04T00:00:00Z",
            "2026-01-05T00:00:00Z",  # newer than the candidate
            "2026-01-03T12:00:00Z",  # another dataset version
        ],
    }
)


def gates(**statuses: list[str]) -> pl.DataFrame:
    rows = [(run, status) for run, values in statuses.items() for status in values]
    return pl.DataFrame(rows, schema=["run_id", "status"], orient="row")


def test_the_newest_earlier_passing_run_of_the_same_dataset_is_chosen():
    results = gates(r1=["pass", "pass"], r2=["pass", "not_gating"], r3=["pass", "fail"], r5=["pass"])
    results = pl.concat([results, gates(**{"other-ds": ["pass"]})])
    # r5 passed but was created after the candidate; other-ds passed but is another dataset; r3 failed a gate
    assert choose_latest_passing(MANIFESTS, results, "cand", None) == "r2"


def test_the_policy_baseline_counts_as_accepted_without_its_gates():
    assert choose_latest_passing(MANIFESTS, gates(r1=["pass"], r3=["fail"]), "cand", "r3") == "r3"
    assert choose_latest_passing(MANIFESTS, gates(r1=["pass"]), "cand", "r5") == "r1"


def test_undecided_and_unscored_runs_are_not_passing():
    results = gates(r1=["incomplete"], r2=["pass", "insufficient"])
    assert choose_latest_passing(MANIFESTS, results, "cand", None) is None
    assert choose_latest_passing(MANIFESTS, None, "cand", None) is None


def test_a_candidate_missing_from_the_manifests_considers_every_other_run():
    assert choose_latest_passing(MANIFESTS, gates(r5=["pass"], r1=["pass"]), "unknown", None) == "r5"
