"""The sample's planted counterfactual pairs end to end: the table, the evidence_ignored gate and the gate report."""

import pytest


@pytest.mark.parametrize("run_id", ["base-41", "cand-42"])
def test_every_planted_pair_gets_its_evidence_use(scored, planted, run_id):
    pairs = scored["warehouse"].read("counterfactual_pairs", run_id)
    got = {
        r["case_id"]: (r["original_case_id"], r["changed_fact"], r["evidence_use"]) for r in pairs.iter_rows(named=True)
    }
    expected = {
        c: (p["original_case_id"], p["changed_fact"], p["evidence_use"])
        for c, p in planted["counterfactual_pairs"][run_id].items()
    }
    assert got == expected


def test_the_sample_plants_each_outcome_in_the_candidate(planted):
    uses = sorted(p["evidence_use"] for p in planted["counterfactual_pairs"]["cand-42"].values())
    assert uses == ["broken", "ignored", "incomplete", "responsive"]


def test_the_ignored_pair_blocks_the_candidate(scored, planted):
    gate = next(
        r
        for r in scored["warehouse"].read("gate_results", "cand-42").iter_rows(named=True)
        if r["metric"] == "evidence_ignored"
    )
    expected = next(r for r in planted["gates"]["results"] if r["metric"] == "evidence_ignored")
    assert (gate["status"], gate["blocking_cases"], gate["delta"], gate["unit"]) == (
        expected["status"],
        expected["blocking_cases"],
        float(expected["new"]),
        "cases",
    )
    assert gate["blocking_details"][0].startswith("agent-019-cf: did the same with and without the changed fact")
    assert "issue_refund(" in gate["blocking_details"][0]


def test_the_gate_report_lists_ignored_pairs_first(scored):
    gate = (scored["reports"] / "cand-42" / "gate.md").read_text()
    section = gate.split("## Evidence use (counterfactual pairs)", 1)[1].split("\n## ", 1)[0]
    assert "4 pair(s): ignored 1, broken 1, incomplete 1, responsive 1" in section
    order = [section.index(case) for case in ("agent-019-cf", "agent-020-cf", "agent-016-cf", "agent-021-cf")]
    assert order == sorted(order)
