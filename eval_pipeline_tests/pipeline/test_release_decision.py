"""The release decision where people look: a red check, a banner atop every report, one set of numbers, CI output."""

import json
import re
from pathlib import Path

import dagster as dg
import jsonschema
import polars as pl
import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from eval_pipeline.cli import main
from eval_pipeline.defs.gates.checks import RELEASE_CHECK
from eval_pipeline.reporting.gate_report import GATE_JSON_FIELDS

FAILED_GATES = {
    "retrieval_recall_at_10",
    "agent_args_valid_rate",
    "agent_pass_at_1",
    "policy_violations",
    "no_new_failures",
    "agent_pass_at_1_high_criticality",
    "no_new_failures_refunds",
    "evidence_ignored",
}


def _gate(scored, *extra):
    return main(
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
            *extra,
        ]
    )


def _check_evaluations(instance, asset: str, run: str):
    key = dg.AssetCheckKey(dg.AssetKey(asset), RELEASE_CHECK)
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
    return [
        r.event.dagster_event.event_specific_data
        for r in records
        if r.event and r.event.dagster_event and instance.get_run_by_id(r.run_id).tags.get("dagster/partition") == run
    ]


def test_a_blocked_release_is_a_failed_check_in_a_completed_dagster_run(scored):
    instance = scored["instance"]
    for asset in ("gate_results", "gate_report"):
        candidate = _check_evaluations(instance, asset, "cand-42")
        assert candidate and not candidate[0].passed, asset
        assert candidate[0].severity == dg.AssetCheckSeverity.ERROR
        assert candidate[0].description.startswith("Release blocked: 8 of 10 gates failed, 32 blocking case(s)")
        failed = {g["gate"] for g in candidate[0].metadata["failed_gates"].value}
        assert failed == FAILED_GATES
        assert "rag-031" in candidate[0].metadata["blocking_cases"].value
        # the baseline is its own baseline: not gated, so its check passes
        baseline = _check_evaluations(instance, asset, "base-41")
        assert baseline and baseline[0].passed
        # a result, not a crash: the check stops nothing, so no step fails with a stack trace
        assert not candidate[0].blocking, asset
    runs = {r.tags.get("dagster/partition"): r.status for r in instance.get_runs()}
    assert runs["cand-42"] == dg.DagsterRunStatus.SUCCESS and runs["base-41"] == dg.DagsterRunStatus.SUCCESS
    cand_run = next(r.run_id for r in instance.get_runs() if r.tags.get("dagster/partition") == "cand-42")
    assert not instance.all_logs(cand_run, of_type=dg.DagsterEventType.STEP_FAILURE)
    # the evaluation completed: `run` exits 0 and says the release is blocked; the gate command decides
    assert scored["code"] == 0
    assert "release blocked for cand-42" in scored["summary"]
    # said once, in plain words: the release check is not a failed blocking check
    assert (
        scored["summary"].count(
            "run cand-42: Release blocked: 8 of 10 gates failed, 32 blocking case(s) — cand-42 against base-41\n"
        )
        == 1
    )
    assert "release_is_not_blocked failed" not in scored["summary"]


@pytest.mark.parametrize("report", ["rag.md", "agent.md", "gate.md", "rag.html", "agent.html", "gate.html"])
def test_every_report_opens_with_its_verdict(scored, report):
    text = (scored["reports"] / "cand-42" / report).read_text()
    head = text[:3000]
    if report.endswith(".md"):
        assert re.search(r"^> \*\*(Release blocked|RAG lane gates|Agent lane gates)", head, re.M), head[:400]
    else:
        assert 'class="verdict verdict-fail"' in head
    assert "Release blocked" in head
    baseline = (scored["reports"] / "base-41" / report).read_text()[:3000]
    assert "Release blocked" not in baseline and "Not gated" in baseline


def _gate_rows(scored) -> dict:
    rows = scored["warehouse"].read("gate_results", "cand-42")
    return {r["gate"]: r for r in rows.iter_rows(named=True)}


def _table_rows(markdown: str, section: str) -> list[dict]:
    """The rows of the first Markdown table after a heading."""
    after = markdown.split(section, 1)[1]
    lines = [line for line in after.splitlines() if line.startswith("|")]
    block = []
    for line in lines:
        if block and not line.startswith("|"):
            break
        block.append(line)
        if len(block) > 2 and not line.startswith("|"):
            break
    header = [c.strip() for c in block[0].strip("|").split("|")]
    out = []
    for line in block[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != len(header):
            break
        out.append(dict(zip(header, cells, strict=True)))
    return out


@pytest.mark.parametrize(
    ("report", "section"),
    [
        ("gate.md", "## Gates"),
        ("rag.md", "## Release gates of this lane"),
        ("agent.md", "## Release gates of this lane"),
    ],
)
def test_every_gated_value_in_a_report_equals_gate_results_in_its_unit(scored, report, section):
    gates = _gate_rows(scored)
    shown = _table_rows((scored["reports"] / "cand-42" / report).read_text(), section)
    assert shown, f"no gate table in {report}"
    for row in shown:
        gate = gates[row["gate"]]
        assert row["status"] == gate["status"] and row["unit"] == gate["unit"]
        digits = 0 if gate["unit"] == "cases" else 4
        for column, value in (("baseline", gate["baseline_value"]), ("candidate", gate["candidate_value"])):
            assert row[column] == f"{value:.{digits}f}", (row["gate"], column)
        points = float(row["delta"].split()[0])
        assert points == pytest.approx(gate["delta"], abs=0.005)
        assert int(row["cases"]) == gate["n_cases"]
    lanes = {"rag.md": {"rag"}, "agent.md": {"agent"}, "gate.md": {"rag", "agent", "all"}}[report]
    assert {r["gate"] for r in shown} == {g for g, r in gates.items() if r["lane"] in lanes}


def test_the_rag_report_names_the_case_that_blocks_recall_and_why(scored):
    rag = (scored["reports"] / "cand-42" / "rag.md").read_text()
    gates = _gate_rows(scored)
    recall = gates["retrieval_recall_at_10"]
    assert "rag-031" in recall["blocking_cases"]
    detail = next(d for d in recall["blocking_details"] if d.startswith("rag-031:"))
    assert detail == "rag-031: recall_at_10 1.0000 → 0.5000"
    assert "[rag-031](cases/rag-031.html)" in rag and "recall_at_10 1.0000 → 0.5000" in rag
    # pass@1 in the agent report is the mean over all cases; the gate's own scope is stated beside it
    agent = (scored["reports"] / "cand-42" / "agent.md").read_text()
    pass1 = gates["agent_pass_at_1"]
    assert (
        f"agent_pass_at_1: the gate compares {pass1['n_cases']} cases complete in both runs (excluded: "
        f"{', '.join(pass1['excluded_cases'])}): candidate {pass1['candidate_value']:.4f}"
    ) in agent


def test_failures_are_grouped_per_case_with_attempts_counted(scored):
    agent = (scored["reports"] / "cand-42" / "agent.md").read_text()
    rows = _table_rows(agent, "## Failed cases")
    by_case = {r["case_id"]: r for r in rows}
    assert by_case["[agent-010](cases/agent-010.html)"]["attempts_failed"] == "3 of 3"
    # one reason per case although three attempts failed alike
    assert by_case["[agent-010](cases/agent-010.html)"]["reasons"].count("loop_detected") == 1
    # a wrong argument is a field-level diff, the scope a list of values, not JSON encoded twice
    assert "amount 89, expected 10" in by_case["[agent-009](cases/agent-009.html)"]["reasons"]
    assert 'outside the case scope ("c-775")' in agent and '\\"c-775' not in agent


def _documented_schema() -> dict:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gate_json.md").read_text()
    return json.loads(doc.split("```json", 1)[1].split("```", 1)[0])


def test_gate_json_is_one_object_with_a_stable_schema(scored, capsys):
    code = _gate(scored, "--json")
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, _documented_schema())
    assert code == 1 and document["exit_code"] == 1 and document["verdict"] == "fail"
    assert document["schema_version"] == 1 and document["candidate"] == "cand-42" and document["baseline"] == "base-41"
    gates = {g["gate"]: g for g in document["gates"]}
    assert {g["gate"] for g in document["gates"] if g["status"] == "fail"} == FAILED_GATES
    for gate in document["gates"]:
        assert tuple(gate) == GATE_JSON_FIELDS
    recall = gates["retrieval_recall_at_10"]
    stored = _gate_rows(scored)["retrieval_recall_at_10"]
    assert recall["candidate_value"] == round(stored["candidate_value"], 6) and recall["unit"] == "fraction"
    assert recall["threshold"] == 2.0 and recall["owner"] == "retrieval" and "rag-031" in recall["blocking_cases"]
    assert gates["no_new_failures"]["unit"] == "cases" and gates["no_new_failures"]["delta"] == 31.0


def test_gate_junit_is_read_by_a_junit_parser(scored, tmp_path, capsys):
    path = tmp_path / "gates.xml"
    assert _gate(scored, "--junit", str(path)) == 1
    assert f"JUnit XML: {path}" in capsys.readouterr().out
    xml = JUnitXml.fromfile(str(path))
    cases = {case.name: case for suite in xml for case in suite}
    assert set(cases) == set(_gate_rows(scored))
    failed = {name for name, case in cases.items() if any(isinstance(r, Failure) for r in case.result)}
    assert failed == FAILED_GATES
    assert not cases["grounding_rate"].result  # passed
    recall = next(r for r in cases["retrieval_recall_at_10"].result if isinstance(r, Failure))
    assert (
        "recall_at_10 dropped 11.11 points" in recall.message and "rag-031: recall_at_10 1.0000 → 0.5000" in recall.text
    )
    suite = next(iter(xml))
    # the one error: recall_account_closure is insufficient (2 cases in its slice, fewer than min_cases)
    assert (suite.tests, suite.failures, suite.errors) == (10, 8, 1)
    # the baseline against itself: every gate not applicable, i.e. skipped
    main(
        [
            "gate",
            "--candidate",
            "base-41",
            "--baseline",
            "base-41",
            "--data",
            str(scored["data"]),
            "--warehouse",
            scored["warehouse"].root,
            "--junit",
            str(path),
        ]
    )
    skipped = [case for suite in JUnitXml.fromfile(str(path)) for case in suite]
    assert skipped and all(isinstance(case.result[0], Skipped) for case in skipped)
    assert not any(isinstance(r, Error) for case in skipped for r in case.result)
    capsys.readouterr()
    assert (
        main(
            [
                "gate",
                "--candidate",
                "base-41",
                "--baseline",
                "base-41",
                "--data",
                str(scored["data"]),
                "--warehouse",
                scored["warehouse"].root,
                "--json",
            ]
        )
        == 2
    )
    not_gated = json.loads(capsys.readouterr().out)
    jsonschema.validate(not_gated, _documented_schema())
    assert not_gated["verdict"] == "not_gated" and not_gated["exit_code"] == 2


def test_a_qrels_mismatch_names_the_run_to_rescore(scored):
    from eval_pipeline.gating import compare
    from eval_pipeline.gating.facts import run_facts
    from eval_pipeline.io.policy import load_gate_policy
    from eval_pipeline.io.storage import open_location

    policy = load_gate_policy(open_location(str(scored["data"])))
    candidate = run_facts(scored["warehouse"], "cand-42")
    candidate.qrels_version = "qrels-after-a-bump"
    recall = (
        compare(policy, candidate, "base-41", scored["warehouse"])
        .filter(pl.col("metric") == "recall_at_10")
        .row(0, named=True)
    )
    assert recall["status"] == "incomparable"
    assert "re-score the baseline with the current judgments (eval-pipeline run --run base-41)" in recall["reason"]


def test_an_exploratory_run_is_not_gated_and_says_how_to_gate_it(scored):
    from eval_pipeline.gating import compare
    from eval_pipeline.gating.facts import run_facts
    from eval_pipeline.io.policy import load_gate_policy
    from eval_pipeline.io.storage import open_location

    policy = load_gate_policy(open_location(str(scored["data"])))
    candidate = run_facts(scored["warehouse"], "cand-42")
    candidate.manifest = {**candidate.manifest, "mode": "exploratory"}
    results = compare(policy, candidate, "base-41", scored["warehouse"])
    assert set(results["status"]) == {"not_applicable"} and results["baseline_run_id"].null_count() == results.height
    assert "--baseline RUN" in results["reason"][0]


def test_imported_runs_are_exploratory_unless_a_baseline_of_the_same_dataset_is_named(tmp_path, capsys, reference_data):
    from eval_pipeline.io.loaders import load_manifest
    from eval_pipeline.io.storage import open_location

    source = reference_data / "tau_bench" / "gpt-4o-airline.sample.json"
    data = tmp_path / "data"
    assert main(["import", "tau-bench", str(source), "--run", "tau-a", "--data", str(data)]) == 0
    assert "mode: exploratory, not gated" in capsys.readouterr().out
    first = load_manifest(open_location(str(data)), "tau-a")
    assert first.mode == "exploratory" and first.baseline_run_id is None
    assert main(["import", "tau-bench", str(source), "--run", "tau-b", "--data", str(data), "--baseline", "tau-a"]) == 0
    second = load_manifest(open_location(str(data)), "tau-b")
    assert second.mode == "gate" and second.baseline_run_id == "tau-a"
    other = main(
        [
            "import",
            "tau-bench",
            str(source),
            "--run",
            "tau-c",
            "--data",
            str(data),
            "--baseline",
            "tau-a",
            "--dataset-version",
            "another-dataset",
        ]
    )
    assert other == 2 and "is of dataset" in capsys.readouterr().err
    assert main(["import", "tau-bench", str(source), "--run", "tau-d", "--data", str(data), "--baseline", "ghost"]) == 2
