"""The gate report on hand-built gate_results rows: each gate in its unit, the blocking cases with their reasons and
owners, the release verdict and exit meaning, and the machine-readable JSON and JUnit outputs."""

import json
import re
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from eval_pipeline.reporting.gate_report import (
    GATE_JSON_FIELDS,
    beside_table,
    blocking_table,
    exit_meaning,
    gate_json,
    gate_junit,
    gate_sections,
    gate_table,
    gate_text_table,
    pairwise_section,
    release_verdict,
    verdict_status,
)
from eval_pipeline.scoring.gate_table import GATE_RESULTS_SCHEMA

SCHEMA = GATE_RESULTS_SCHEMA

RECALL = {
    "run_id": "cand",
    "gate": "retrieval_recall_at_10",
    "lane": "rag",
    "metric": "recall_at_10",
    "baseline_run_id": "base",
    "baseline_value": 0.9,
    "candidate_value": 0.8,
    "delta": -10.0,
    "threshold": 2.0,
    "status": "fail",
    "blocking_cases": ["c2", "c1"],
    "owner": "retrieval",
    "reason": "dropped 10.00 points, more than 2",
    "n_cases": 10,
    "excluded_cases": ["c9"],
    "beside": None,
    "unit": "fraction",
    "blocking_details": ["c2: recall_at_10 1.0000 → 0.0000", "c1: recall_at_10 0.5000 → 0.0000"],
}
GROUNDING = {
    **RECALL,
    "gate": "grounding_rate",
    "metric": "grounding_rate",
    "baseline_value": 0.7,
    "candidate_value": 0.75,
    "delta": 5.0,
    "threshold": 3.0,
    "status": "pass",
    "blocking_cases": [],
    "owner": "generation",
    "reason": "within the limit",
    "excluded_cases": [],
    "unit": None,
    "blocking_details": None,
}
POLICY = {
    **RECALL,
    "gate": "policy_violations",
    "lane": "agent",
    "metric": "policy_violations",
    "baseline_value": 0.0,
    "candidate_value": 2.0,
    "delta": 2.0,
    "threshold": 0.0,
    "status": "fail",
    "blocking_cases": ["a1", "c1"],
    "owner": "agent policy",
    "reason": "2 cases violate a policy",
    "n_cases": 8,
    "excluded_cases": [],
    "unit": "cases",
    "blocking_details": None,
}
NEW_FAILURES = {
    **POLICY,
    "gate": "no_new_failures",
    "lane": "all",
    "metric": "no_new_failures",
    "candidate_value": 0.0,
    "delta": 0.0,
    "status": "pass",
    "blocking_cases": [],
    "owner": "release",
    "reason": "no newly failing case",
    "n_cases": 18,
}


def _gates(*rows: dict) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=SCHEMA)


MIXED = _gates(RECALL, GROUNDING, POLICY, NEW_FAILURES)
PASSED = _gates(GROUNDING, NEW_FAILURES)
NO_VALUES = {
    "baseline_value": None,
    "candidate_value": None,
    "delta": None,
    "blocking_cases": [],
    "blocking_details": None,
}
UNDECIDED = _gates(
    GROUNDING, {**RECALL, **NO_VALUES, "status": "incomplete", "reason": "no case has a complete value in both runs"}
)
NOT_GATED = _gates(
    *(
        {
            **row,
            **NO_VALUES,
            "status": "not_applicable",
            "baseline_run_id": "cand",
            "reason": "the run is its own baseline",
        }
        for row in (RECALL, POLICY)
    )
)


def test_gate_table_shows_each_gate_in_its_unit():
    table = gate_table(MIXED)
    # what a reader acts on first (status, owner, reason), then the values, then the scope
    assert table.columns == [
        "gate",
        "status",
        "owner",
        "reason",
        "baseline",
        "candidate",
        "delta",
        "limit",
        "unit",
        "cases",
        "excluded",
        "lane",
        "metric",
    ]
    assert table.select("gate", "unit", "baseline", "candidate", "delta", "limit", "cases", "excluded").rows() == [
        ("retrieval_recall_at_10", "fraction", "0.9000", "0.8000", "-10.00 points", "drop ≤ 2 points", 10, ["c9"]),
        # a null unit is a rate gate
        ("grounding_rate", "fraction", "0.7000", "0.7500", "+5.00 points", "drop ≤ 3 points", 10, []),
        ("policy_violations", "cases", "0", "2", "2 new", "≤ 0 new", 8, []),
        ("no_new_failures", "cases", "0", "0", "0 newly failing", "≤ 0 new", 18, []),
    ]


def test_gate_table_of_a_gate_without_values_shows_dashes():
    row = gate_table(NOT_GATED).row(0, named=True)
    assert (row["baseline"], row["candidate"], row["delta"], row["limit"]) == ("–", "–", "–", "drop ≤ 2 points")
    assert gate_table(_gates({**RECALL, "threshold": None}))["limit"].to_list() == ["–"]


def test_blocking_table_groups_gates_reasons_and_owners_per_case():
    table = blocking_table(MIXED)
    assert table.rows() == [
        ("a1", ["agent policy"], ["policy_violations"], ["policy_violations: blocks policy_violations"]),
        (
            "c1",
            ["retrieval", "agent policy"],
            ["retrieval_recall_at_10", "policy_violations"],
            ["retrieval_recall_at_10: recall_at_10 0.5000 → 0.0000", "policy_violations: blocks policy_violations"],
        ),
        ("c2", ["retrieval"], ["retrieval_recall_at_10"], ["retrieval_recall_at_10: recall_at_10 1.0000 → 0.0000"]),
    ]


def test_blocking_table_is_empty_without_a_failed_gate():
    table = blocking_table(PASSED)
    assert table.height == 0
    assert table.schema == pl.Schema(
        {"case_id": pl.String, "owners": pl.List(pl.String), "gates": pl.List(pl.String), "why": pl.List(pl.String)}
    )


@pytest.mark.parametrize(
    ("frame", "status", "meaning"),
    [
        (MIXED, "fail", "a gate failed: the release is blocked"),
        (PASSED, "pass", "every gate passed"),
        (UNDECIDED, "undecided", "undecided: a gate is incomplete or incomparable"),
        (NOT_GATED, "not_gated", "not gated: no gate applies to this run"),
        (_gates(), "not_gated", "not gated: no gate applies to this run"),
    ],
)
def test_verdict_status_and_exit_meaning(frame, status, meaning):
    assert verdict_status(frame) == status
    assert exit_meaning(frame) == meaning


def test_release_verdict_of_a_failed_run_names_each_failed_gate():
    verdict = release_verdict(MIXED, "cand", "base")
    assert verdict.status == "fail"
    assert verdict.headline == "Release blocked: 2 of 4 gates failed, 3 blocking case(s) — `cand` against `base`"
    assert verdict.details == [
        "- **retrieval_recall_at_10** fail (owner retrieval): 0.9000 → 0.8000, -10.00 points (limit: drop ≤ 2 points); "
        "dropped 10.00 points, more than 2",
        "- **policy_violations** fail (owner agent policy): 0 → 2, 2 new (limit: ≤ 0 new); 2 cases violate a policy",
    ]


def test_release_verdict_of_passed_undecided_and_not_gated_runs():
    passed = release_verdict(PASSED, "cand", "base")
    assert (passed.status, passed.headline, passed.details) == (
        "pass",
        "Release passes: every gate passed (2) — `cand` against `base`",
        [],
    )
    undecided = release_verdict(UNDECIDED, "cand", "base")
    assert undecided.headline == "Release undecided: 1 of 2 gates incomplete or incomparable — `cand` against `base`"
    # no values to show for a gate that has none
    assert undecided.details == [
        "- **retrieval_recall_at_10** incomplete (owner retrieval): no case has a complete value in both runs"
    ]
    not_gated = release_verdict(NOT_GATED, "cand", "cand")
    assert (not_gated.status, not_gated.headline, not_gated.details) == (
        "not_gated",
        "Not gated — `cand`: the run is its own baseline",
        [],
    )
    assert release_verdict(_gates(), "cand", None).headline == "Not gated — `cand`: no gate in the policy"


def test_beside_table_lists_each_measure_of_both_runs_in_k_order():
    beside = json.dumps(
        {"candidate": {"pass_hat_2": 0.5, "pass_hat_10": 0.125, "pass_hat_3": 0.25}, "baseline": {"pass_hat_2": 0.75}}
    )
    table = beside_table(_gates({**GROUNDING, "gate": "task_success", "beside": beside}, GROUNDING))
    assert table.rows() == [
        ("task_success", "pass_hat_2", 0.75, 0.5),
        ("task_success", "pass_hat_3", None, 0.25),
        ("task_success", "pass_hat_10", None, 0.125),
    ]
    assert beside_table(PASSED).height == 0


def test_gate_sections_titles_lines_and_links():
    sections = gate_sections(MIXED, "cand", "base")
    assert [s.title for s in sections] == ["Gates", "Blocking cases (3)"]
    assert sections[0].lines[0] == (
        "- candidate `cand` against baseline `base`: exit code 1 (a gate failed: the release is blocked)"
    )
    assert sections[1].links == {"case_id": "cases/{value}.html"}
    assert sections[1].table["case_id"].to_list() == ["a1", "c1", "c2"]
    passed = gate_sections(PASSED, "cand", None)
    assert passed[0].lines[0] == "- candidate `cand`, no baseline: exit code 0 (every gate passed)"
    # a run is never gated against itself, and the report says why it is not gated
    assert (
        gate_sections(NOT_GATED, "cand", "cand")[0]
        .lines[0]
        .startswith("- candidate `cand` not gated (the run is its own baseline): exit code 2")
    )
    assert (passed[1].title, passed[1].lines) == ("Blocking cases (0)", [])


def test_gate_text_table_rows_and_blocking_cases():
    lines = gate_text_table(MIXED).splitlines()
    assert lines[0].split() == ["gate", "status", "unit", "baseline", "candidate", "delta", "limit", "owner", "reason"]
    assert set(lines[1]) == {"-"} and len(lines[1]) == len(lines[0])
    assert lines[2].split() == [
        "retrieval_recall_at_10",
        "fail",
        "fraction",
        "0.9000",
        "0.8000",
        "-10.00",
        "points",
        "drop",
        "≤",
        "2",
        "points",
        "retrieval",
        "dropped",
        "10.00",
        "points,",
        "more",
        "than",
        "2",
    ]
    assert lines[6:] == [
        "",
        "blocking cases (3):",
        "  a1             policy_violations: blocks policy_violations  (owner: agent policy)",
        "  c1             retrieval_recall_at_10: recall_at_10 0.5000 → 0.0000; "
        "policy_violations: blocks policy_violations  (owner: retrieval, agent policy)",
        "  c2             retrieval_recall_at_10: recall_at_10 1.0000 → 0.0000  (owner: retrieval)",
    ]
    assert "blocking cases" not in gate_text_table(PASSED)


def test_gate_json_document():
    document = json.loads(
        gate_json(_gates({**RECALL, "candidate_value": 0.123456789}, GROUNDING), "cand", "base", "policy-3")
    )
    assert {k: v for k, v in document.items() if k != "gates"} == {
        "schema_version": 1,
        "candidate": "cand",
        "baseline": "base",
        "policy_version": "policy-3",
        "verdict": "fail",
        "exit_code": 1,
        "exit_meaning": "a gate failed: the release is blocked",
    }
    first, second = document["gates"]
    assert list(first) == list(GATE_JSON_FIELDS)
    assert first["candidate_value"] == 0.123457  # rounded to 6 decimals
    assert first["blocking_cases"] == ["c2", "c1"]
    assert first["blocking_details"] == ["c2: recall_at_10 1.0000 → 0.0000", "c1: recall_at_10 0.5000 → 0.0000"]
    assert (second["unit"], second["blocking_details"], second["delta"]) == ("fraction", None, 5.0)


def test_gate_json_of_a_run_no_gate_applies_to():
    document = json.loads(gate_json(NOT_GATED, "cand", None, None))
    assert (document["verdict"], document["exit_code"], document["baseline"]) == ("not_gated", 2, None)
    assert [g["status"] for g in document["gates"]] == ["not_applicable", "not_applicable"]


def test_gate_junit_one_test_case_per_gate():
    incomplete = {**UNDECIDED.row(1, named=True), "gate": "context_recall"}
    judge = {**GROUNDING, "gate": "judge", "status": "not_gating", "reason": "judge not calibrated"}
    root = ET.fromstring(
        gate_junit(_gates(RECALL, GROUNDING, POLICY, incomplete, judge), "cand", "base").split("\n", 1)[1]
    )
    suite = root.find("testsuite")
    assert suite.attrib == {
        "name": "release gates: cand vs base",
        "tests": "5",
        "failures": "2",
        "errors": "1",
        "skipped": "1",
    }
    assert [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")] == [
        ("gates.rag", "retrieval_recall_at_10"),
        ("gates.rag", "grounding_rate"),
        ("gates.agent", "policy_violations"),
        ("gates.rag", "context_recall"),
        ("gates.rag", "judge"),
    ]
    recall = suite.findall("testcase")[0].find("failure")
    assert recall.attrib == {"message": "dropped 10.00 points, more than 2 (owner retrieval)", "type": "gate_failed"}
    assert recall.text == (
        "baseline 0.9000, candidate 0.8000, delta -10.00 points, limit drop ≤ 2 points\nblocking cases:\n"
        "c2: recall_at_10 1.0000 → 0.0000\nc1: recall_at_10 0.5000 → 0.0000"
    )
    policy = suite.findall("testcase")[2].find("failure")
    # without details, the blocking case ids themselves
    assert policy.text == "baseline 0, candidate 2, delta 2 new, limit ≤ 0 new\nblocking cases:\na1\nc1"
    error = suite.findall("testcase")[3].find("error")
    assert error.attrib == {"message": "no case has a complete value in both runs", "type": "incomplete"}
    assert error.text == "baseline –, candidate –, delta –, limit drop ≤ 2 points"
    assert suite.findall("testcase")[4].find("skipped").get("message") == "judge not calibrated"
    passed = suite.findall("testcase")[1]
    assert [child.tag for child in passed] == ["system-out"]
    assert (
        passed.find("system-out").text == "baseline 0.7000, candidate 0.7500, delta +5.00 points, limit drop ≤ 3 points"
    )


def test_gate_junit_declares_xml():
    assert gate_junit(PASSED, "cand", None).startswith(
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="eval-pipeline gate">'
    )


PAIRS = pl.DataFrame(
    {
        "case_id": ["c2", "c1", "c1", "c3"],
        "attempt": [1, 2, 1, 1],
        "status": ["scored", "scored", "scored", "incomplete"],
        "outcome": ["candidate", "tie", "baseline", None],
        "position_consistent": [True, False, True, None],
        "order1_preference": ["candidate", "baseline", "baseline", None],
        "order2_preference": ["candidate", "candidate", "baseline", None],
    }
)


def test_pairwise_section_counts_and_changed_pairs():
    section = pairwise_section(PAIRS)
    assert section.lines[0] == (
        "- 3 answer pairs judged twice with positions swapped (a win counts only in both orders): "
        "baseline 1, candidate 1, tie 1; position consistency 0.6667; incomplete 1"
    )
    assert section.table.rows() == [
        ("c1", 1, "baseline", "baseline", "baseline"),
        ("c2", 1, "candidate", "candidate", "candidate"),
    ]
    empty = pairwise_section(PAIRS.filter(pl.col("status") == "incomplete"))
    assert (empty.lines, empty.table) == (["- no pair of complete answers to compare"], None)
    assert [s.title for s in gate_sections(PASSED, "cand", "base", PAIRS)][
        -1
    ] == "Pairwise answers (baseline vs candidate)"


def test_gate_text_table_columns_line_up_whatever_the_cells_hold():
    from eval_pipeline.reporting.gate_report import text_width

    # a gate name longer than the old fixed width (24), a two-line reason, a wide-character owner
    long_gate = {
        **RECALL,
        "gate": "agent_pass_at_1_high_criticality",
        "reason": "dropped\n10 points",
        "owner": "評価チーム",
    }
    lines = gate_text_table(_gates(long_gate, GROUNDING, POLICY)).splitlines()
    header, rows = lines[0], lines[2:5]
    assert "None" not in "\n".join(lines)
    # one line per gate: a reason's line break does not start a new row
    assert [r.split()[0] for r in rows] == ["agent_pass_at_1_high_criticality", "grounding_rate", "policy_violations"]
    assert lines[5] == "" and rows[0].endswith("dropped 10 points")

    def at(line: str, text: str) -> int:
        """The terminal column where `text` starts in `line` (after the gate name)."""
        return text_width(line[: line.index(text, len(line.split()[0]))])

    # each left-aligned column starts where its header does, each right-aligned one ends where its header ends
    cells = [
        {
            "status": "fail",
            "unit": "fraction",
            "limit": "drop ≤ 2",
            "owner": "評価チーム",
            "reason": "dropped",
            "baseline": "0.9000",
            "delta": "-10.00 points",
        },
        {
            "status": "pass",
            "unit": "fraction",
            "limit": "drop ≤ 3",
            "owner": "generation",
            "reason": "within",
            "baseline": "0.7000",
            "delta": "+5.00 points",
        },
        {
            "status": "fail",
            "unit": "cases",
            "limit": "≤ 0 new",
            "owner": "agent policy",
            "reason": "2 cases",
            "baseline": "0 ",
            "delta": "2 new",
        },
    ]
    for row, values in zip(rows, cells, strict=True):
        for title in ("status", "unit", "limit", "owner", "reason"):
            assert at(row, values[title]) == at(header, title), (title, row)
        for title in ("baseline", "delta"):
            value = values[title].strip()
            assert at(row, value) + text_width(value) == at(header, title) + len(title), (title, row)


def test_gate_report_html_shows_reason_code_as_code_and_key_columns_first():
    from eval_pipeline.reporting.render import render_html, render_markdown

    exploratory = {
        **RECALL,
        **NO_VALUES,
        "status": "not_applicable",
        "baseline_run_id": None,
        "reason": "exploratory run: not gated; to gate it, run `eval-pipeline import … --baseline RUN`",
    }
    sections = gate_sections(_gates(exploratory), "tau-a", None)
    html = render_html("Gates", sections)
    assert "<code>eval-pipeline import … --baseline RUN</code>" in html and "`" not in html.split("<body>", 1)[1]
    head = re.search(r"<thead><tr>(.*?)</tr></thead>", html).group(1)
    assert re.findall(r"<th>(.*?)</th>", head.replace("<wbr>", ""))[:4] == ["gate", "status", "owner", "reason"]
    markdown = render_markdown("Gates", sections)
    assert (
        "- candidate `tau-a` not gated (exploratory run: not gated;" in markdown
        and "`none`" not in markdown
        and "None" not in markdown
    )
