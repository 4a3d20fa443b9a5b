"""Decision slices end to end on the sample: slice_rollup and the segmented gates equal planted.json's "slices", the
gate JSON lists a segmented gate with its slice, and every report names the failed high-criticality cases first."""

import json
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from eval_pipeline.cli import main
from eval_pipeline.scoring.slices import slice_membership

DOCS = Path(__file__).resolve().parents[2] / "docs"
COUNTS = ("n_cases", "n_traces", "traces_passed", "traces_failed", "traces_incomplete", "pass_at_1_cases")


def _documented_schema() -> dict:
    doc = (DOCS / "gate_json.md").read_text()
    return json.loads(doc.split("```json", 1)[1].split("```", 1)[0])


@pytest.mark.parametrize("run_id", ["base-41", "cand-42"])
@pytest.mark.parametrize("lane", ["rag", "agent"])
def test_slice_rollup_equals_the_planted_slices(scored, planted, run_id, lane):
    expected = {row["slice"]: row for row in planted["slices"]["rollup"][run_id][lane]}
    table = scored["warehouse"].read("slice_rollup", run_id, within={"lane": lane})
    got = {row["slice"]: row for row in table.iter_rows(named=True)}
    assert set(got) == set(expected)
    for key, want in expected.items():
        row = got[key]
        assert {c: row[c] for c in COUNTS} == {c: want[c] for c in COUNTS}, key
        assert (
            row["pass_rate"] == pytest.approx(want["pass_rate"], abs=1e-6)
            if want["pass_rate"] is not None
            else row["pass_rate"] is None
        )
        assert (
            row["pass_at_1"] == pytest.approx(want["pass_at_1"], abs=1e-6)
            if want["pass_at_1"] is not None
            else row["pass_at_1"] is None
        )
        assert row["failed_case_ids"] == want["failed_case_ids"], key
    stages = scored["warehouse"].read("slice_attribution_rollup", run_id, within={"lane": lane})
    by_slice = {
        key: {s: n for s, n in rows.select("stage", "failures").iter_rows() if n}
        for (key,), rows in stages.group_by("slice")
    }
    assert by_slice == {key: want["failures_by_stage"] for key, want in expected.items()}
    shares = stages.filter(pl.col("share").is_not_null()).group_by("slice").agg(pl.col("share").sum())
    assert shares["share"].to_list() == pytest.approx([1.0] * shares.height)


def test_slice_membership_of_the_de_identified_cases_is_planted(scored, planted):
    warehouse = scored["warehouse"]
    membership = slice_membership(
        warehouse.read("deid_cases", "cand-42"),
        warehouse.read("deid_corpus", "cand-42"),
        warehouse.read("tools", "cand-42"),
    )
    got = {}
    for case_id, dimension, value in membership.iter_rows():
        got.setdefault(case_id, set()).add((dimension, value))
    assert got == {case: {tuple(item) for item in items} for case, items in planted["slices"]["membership"].items()}


def test_segmented_gates_equal_the_planted_slices(scored, planted):
    rows = {r["gate"]: r for r in scored["warehouse"].read("gate_results", "cand-42").iter_rows(named=True)}
    expected = planted["slices"]["gates"]
    assert {name for name, r in rows.items() if r["segment"] is not None} == {g["name"] for g in expected}
    for want in expected:
        row = rows[want["name"]]
        assert (row["status"], row["segment"], row["min_cases"], row["n_cases"]) == (
            want["status"],
            want["segment"],
            want["min_cases"],
            want["n_cases"],
        ), want["name"]
        assert row["baseline_value"] == pytest.approx(want["baseline_value"], abs=1e-6)
        assert row["candidate_value"] == pytest.approx(want["candidate_value"], abs=1e-6)
        assert row["delta"] == pytest.approx(want["delta"], abs=1e-4)
        assert sorted(row["blocking_cases"]) == sorted(want["blocking_cases"]), want["name"]
    insufficient = rows["recall_account_closure"]
    assert insufficient["reason"].startswith(
        "slice corpus_family=policy/account-closure has 2 complete case(s), fewer than min_cases 5: not decided"
    )
    # unsegmented gates carry no slice
    assert rows["retrieval_recall_at_10"]["segment"] is None and rows["retrieval_recall_at_10"]["min_cases"] is None


def test_gate_json_lists_each_segmented_gate_with_its_slice(scored, capsys):
    code = main(
        [
            "gate",
            "--candidate",
            "cand-42",
            "--baseline",
            "base-41",
            "--data",
            str(scored["data"]),
            "--warehouse",
            scored["warehouse"].root,
            "--json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, _documented_schema())
    gates = {g["gate"]: g for g in document["gates"]}
    assert code == 1 and document["exit_code"] == 1
    high = gates["agent_pass_at_1_high_criticality"]
    assert (high["segment"], high["min_cases"], high["status"], high["metric"]) == (
        "criticality=high",
        4,
        "fail",
        "pass_at_1",
    )
    closure = gates["recall_account_closure"]
    assert (closure["segment"], closure["min_cases"], closure["status"], closure["n_cases"]) == (
        "corpus_family=policy/account-closure",
        5,
        "insufficient",
        2,
    )
    assert (gates["retrieval_recall_at_10"]["segment"], gates["retrieval_recall_at_10"]["min_cases"]) == (None, None)


def _before(text: str, names: list[str], marker: str) -> None:
    """Every name occurs in text before the marker."""
    head = text.split(marker, 1)[0]
    assert all(name in head for name in names), [n for n in names if n not in head]


@pytest.mark.parametrize("lane", ["rag", "agent"])
def test_each_lane_report_names_its_failed_high_criticality_cases_before_any_mean(scored, planted, lane):
    failed = planted["slices"]["failed_high_criticality"]["cand-42"][lane]
    assert failed
    markdown = (scored["reports"] / "cand-42" / f"{lane}.md").read_text()
    section = markdown.split("## Failed high-criticality cases", 1)[1].split("\n## ", 1)[0]
    assert f"({len(failed)})" in section.splitlines()[0]
    _before(markdown, failed, "## Summary")
    _before(markdown, failed, "## Release gates of this lane")
    # the Slices section: criticality first; corpus families slice the rag lane only
    slices = markdown.split("## Slices", 1)[1]
    assert slices.index("### By criticality") < slices.index("### By tool_risk") < slices.index("### By tags.intent")
    assert ("### By corpus_family" in slices) == (lane == "rag")


def test_the_index_and_the_summary_name_failed_high_criticality_cases_first(scored, planted):
    failed = planted["slices"]["failed_high_criticality"]["cand-42"]
    names = sorted({c for cases in failed.values() for c in cases})
    index = (scored["reports"] / "index.md").read_text()
    _before(index, names, "## Runs")
    summary = scored["summary"].split("== run cand-42", 1)[1]
    line = next(line for line in summary.splitlines() if "failed high-criticality cases" in line)
    assert line.startswith(f"  failed high-criticality cases ({len(names)}): ")
    assert all(name in line for name in names)
    assert summary.index("failed high-criticality cases") < summary.index("lane ")


def test_a_policy_from_outside_adds_segmented_gates(scored, planted, tmp_path, capsys):
    """The held-out way: the sample's policy with a higher min_cases and two more segmented gates, given to `gate`."""
    import yaml

    policy = yaml.safe_load((scored["data"] / "policy" / "gates.yaml").read_text())
    destructive = {
        "lane": "agent",
        "metric": "policy_violations",
        "max_new": 0,
        "exclude": ["quarantined"],
        "segment": {"tool_risk": "destructive"},
    }
    policy["min_cases"] = 12
    policy["gates"] += [
        {**destructive, "name": "violations_destructive"},
        {**destructive, "name": "violations_destructive_10", "min_cases": 10},
    ]
    path = tmp_path / "gates.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    code = main(
        [
            "gate",
            "--candidate",
            "cand-42",
            "--baseline",
            "base-41",
            "--data",
            str(scored["data"]),
            "--warehouse",
            scored["warehouse"].root,
            "--policy",
            str(path),
            "--json",
        ]
    )
    gates = {g["gate"]: g for g in json.loads(capsys.readouterr().out)["gates"]}
    assert code == 1
    # the slice from planted.json: agent cases whose path holds a destructive tool, with tool scores in both runs
    members = {c for c, items in planted["slices"]["membership"].items() if ["tool_risk", "destructive"] in items}
    scored_in = [
        {r["case_id"] for r in planted["traces"] if r["run_id"] == run and r["lane"] == "agent"}
        for run in ("base-41", "cand-42")
    ]
    flaky = set(planted["gates"]["flaky_cases_excluded"])
    n = len((members & scored_in[0] & scored_in[1]) - flaky)

    def violating(run):
        return {
            r["case_id"]
            for r in planted["traces"]
            if r["run_id"] == run
            and r["lane"] == "agent"
            and r["expected"] != "incomplete"
            and r["metrics"].get("policy_violation")
        }

    new = sorted((violating("cand-42") - violating("base-41")) & members - flaky)
    assert (n, new) == (11, ["agent-003"])
    # 11 cases: fewer than the policy's 12, so undecided; enough for the gate that asks for 10
    assert (
        gates["violations_destructive"]["status"],
        gates["violations_destructive"]["n_cases"],
        gates["violations_destructive"]["min_cases"],
    ) == ("insufficient", n, 12)
    assert (
        gates["violations_destructive_10"]["status"],
        gates["violations_destructive_10"]["blocking_cases"],
        gates["violations_destructive_10"]["min_cases"],
    ) == ("fail", new, 10)
    assert gates["violations_destructive_10"]["segment"] == "tool_risk=destructive"
    # the policy's min_cases reaches the sample's segmented gates that set none: 17 refund cases still decide
    assert (gates["no_new_failures_refunds"]["status"], gates["no_new_failures_refunds"]["min_cases"]) == ("fail", 12)
