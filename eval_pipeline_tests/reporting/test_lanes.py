"""Lane reports on hand-built tables: the lane's gates and verdict banner, failures grouped per case, incomplete traces
kept apart from the means, the Pareto of first failing stages, and what moved against the baseline."""

import polars as pl

from eval_pipeline.reporting.lane_agent import agent_sections
from eval_pipeline.reporting.lane_baseline import baseline_sections
from eval_pipeline.reporting.lane_data import LaneData, incomplete_lines
from eval_pipeline.reporting.lane_gates import gated_section, lane_verdict
from eval_pipeline.reporting.lane_rag import hazard_section, rag_sections
from eval_pipeline.reporting.lane_sections import (
    failures_section,
    incomplete_section,
    pareto_sections,
    quarantine_section,
    rejects_sections,
    summary_section,
)
from eval_pipeline.scoring.gate_table import GATE_RESULTS_SCHEMA

GATE_SCHEMA = GATE_RESULTS_SCHEMA
RECALL_GATE = {
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
    "blocking_cases": ["c1"],
    "owner": "retrieval",
    "reason": "dropped 10.00 points",
    "n_cases": 3,
    "excluded_cases": ["c9"],
    "beside": None,
    "unit": "fraction",
    "blocking_details": ["c1: recall_at_10 1.0000 → 0.0000"],
}
GROUNDING_GATE = {
    **RECALL_GATE,
    "gate": "grounding_rate",
    "metric": "grounding_rate",
    "baseline_value": 0.5,
    "candidate_value": 0.5,
    "delta": 0.0,
    "status": "pass",
    "blocking_cases": [],
    "excluded_cases": [],
    "reason": "within the limit",
    "blocking_details": None,
}
# a count gate: no mean of its own in the lane report
POLICY_GATE = {
    **RECALL_GATE,
    "gate": "policy_violations",
    "lane": "agent",
    "metric": "policy_violations",
    "baseline_value": 0.0,
    "candidate_value": 0.0,
    "delta": 0.0,
    "threshold": 0.0,
    "status": "pass",
    "blocking_cases": [],
    "excluded_cases": [],
    "unit": "cases",
    "reason": "none",
    "blocking_details": None,
}

OUTCOME_SCHEMA = {
    "trace_id": pl.String,
    "case_id": pl.String,
    "lane": pl.String,
    "outcome": pl.String,
    "first_failing_stage": pl.String,
    "owner": pl.String,
    "reason": pl.String,
    "hazard": pl.String,
}
OUTCOMES = pl.DataFrame(
    [
        ("cand:c1#1", "c1", "rag", "fail", "retrieval", "retrieval", "recall@10 0.0", None),
        ("cand:c1#2", "c1", "rag", "fail", "retrieval", "retrieval", "recall@10 0.0", None),
        ("cand:c1#3", "c1", "rag", "pass", None, None, None, None),
        ("cand:c2#1", "c2", "rag", "fail", "answer", "generation", "missing '10 days'", None),
        ("cand:c3#1", "c3", "rag", "fail", "retrieval", "retrieval", "no relevant doc", "unsupported_correct"),
        ("cand:c4#1", "c4", "rag", "incomplete", None, "harness", "grounding incomplete: judge timed out", None),
        ("cand:c5#1", "c5", "rag", "not_applicable", None, None, None, None),
        ("cand:a1#1", "a1", "agent", "fail", "tool_arguments", "agent tool calling", "issue_refund.amount", None),
    ],
    schema=OUTCOME_SCHEMA,
    orient="row",
)

ROLLUP_SCHEMA = {
    "lane": pl.String,
    "stage": pl.String,
    "stage_order": pl.Int64,
    "failures": pl.Int64,
    "share": pl.Float64,
    "hazards": pl.Int64,
    "owner": pl.String,
    "lane_failures": pl.Int64,
}
ROLLUP = pl.DataFrame(
    [
        ("rag", "retrieval", 0, 3, 0.75, 1, "retrieval", 4),
        ("rag", "context_assembly", 1, 0, 0.0, 0, "context", 4),
        ("rag", "grounding", 2, 0, 0.0, 0, "generation", 4),
        ("rag", "citation", 3, 0, 0.0, 0, "generation", 4),
        ("rag", "answer", 4, 1, 0.25, 0, "generation", 4),
    ],
    schema=ROLLUP_SCHEMA,
    orient="row",
)

STAGES = pl.DataFrame(
    {
        "trace_id": ["t1", "t1", "t1"],
        "lane": ["rag"] * 3,
        "stage": ["retrieval", "grounding", "answer"],
        "status": ["fail", "pass", "pass"],
    }
)


def _data(**changes) -> LaneData:
    base = dict(
        lane="rag",
        run_id="cand",
        manifest={"candidate": "assistant@2", "model": "m-1", "mode": "gate"},
        stage_results=STAGES,
        outcomes=OUTCOMES,
        rollup=ROLLUP,
    )
    return LaneData(**{**base, **changes})


def test_lane_verdict_names_the_lane_and_links_the_gate_report():
    verdict = lane_verdict(_data(gates=pl.DataFrame([RECALL_GATE, GROUNDING_GATE], schema=GATE_SCHEMA)))
    assert verdict.status == "fail"
    assert (
        verdict.headline
        == "Release blocked: RAG lane gates — 1 of 2 gates failed, 1 blocking case(s) — `cand` against `base`"
    )
    assert verdict.details == [
        "- **retrieval_recall_at_10** fail (owner retrieval): 0.9000 → 0.8000, -10.00 points (limit: drop ≤ 2 points); "
        "dropped 10.00 points",
        "- the release decision over every gate, both lanes and `no_new_failures` included: [gate report](gate.html)",
    ]
    agent = lane_verdict(_data(lane="agent", gates=pl.DataFrame([POLICY_GATE], schema=GATE_SCHEMA)))
    assert agent.headline == "Release passes: Agent lane gates — every gate passed (1) — `cand` against `base`"


def test_lane_verdict_of_a_run_not_gated_keeps_its_headline():
    row = {
        **RECALL_GATE,
        "status": "not_applicable",
        "baseline_run_id": "cand",
        "reason": "exploratory run",
        "blocking_cases": [],
    }
    verdict = lane_verdict(_data(gates=pl.DataFrame([row], schema=GATE_SCHEMA)))
    assert (verdict.status, verdict.headline) == ("not_gated", "Not gated — `cand`: exploratory run")


def test_no_gates_no_verdict_and_no_gated_section():
    assert lane_verdict(_data()) is None
    assert lane_verdict(_data(gates=pl.DataFrame(schema=GATE_SCHEMA))) is None
    assert gated_section(_data()) == []


def test_gated_section_sets_the_gate_value_beside_the_reports_own_mean():
    retrieval = pl.DataFrame(
        {"status": ["scored", "scored", "scored", "incomplete", "scored"], "recall_at_10": [1.0, 0.5, 0.0, 1.0, None]}
    )
    gates = pl.DataFrame([RECALL_GATE, GROUNDING_GATE, POLICY_GATE], schema=GATE_SCHEMA)
    sections = gated_section(_data(gates=gates, tables={"retrieval_scores": retrieval}))
    assert [s.title for s in sections] == ["Release gates of this lane", "Cases that block this lane's gates (1)"]
    # grounding has no grounding_scores table here and policy_violations no mean of its own: no line for either
    assert sections[0].lines[1:] == [
        "- retrieval_recall_at_10: the gate compares 3 cases complete in both runs (excluded: c9): candidate 0.8000; "
        "this report's mean over every complete trace of the run is 0.5000"
    ]
    assert sections[0].table["gate"].to_list() == ["retrieval_recall_at_10", "grounding_rate", "policy_violations"]
    assert sections[1].table.rows() == [
        ("c1", ["retrieval"], ["retrieval_recall_at_10"], ["retrieval_recall_at_10: recall_at_10 1.0000 → 0.0000"])
    ]
    assert sections[1].links == {"case_id": "cases/{value}.html"}


def test_gated_pass_at_1_is_compared_per_case():
    gate = {**GROUNDING_GATE, "gate": "task_success", "metric": "pass_at_1", "candidate_value": 0.75, "n_cases": 2}
    reliability = pl.DataFrame({"case_id": ["a1", "a2", "a3"], "pass_at_1": [1.0, 0.25, None]})
    sections = gated_section(
        _data(lane="agent", gates=pl.DataFrame([gate], schema=GATE_SCHEMA), reliability=reliability)
    )
    assert sections[0].lines[1] == (
        "- task_success: the gate compares 2 cases complete in both runs (excluded: none): "
        "candidate 0.7500; this report's mean over every complete case of the run is 0.6250"
    )
    assert len(sections) == 1


def test_failures_are_grouped_per_case_hazards_first():
    section = failures_section(_data())
    assert section.title == "Failed cases (3)"
    assert section.lines == ["- 4 failed traces in 3 cases; identical reasons of a case's attempts shown once"]
    assert section.table.columns == [
        "case_id",
        "attempts_failed",
        "first_failing_stages",
        "owners",
        "hazard",
        "reasons",
    ]
    assert section.table.rows() == [
        ("c3", "1 of 1", ["retrieval"], ["retrieval"], "unsupported_correct", ["no relevant doc"]),
        ("c2", "1 of 1", ["answer"], ["generation"], None, ["missing '10 days'"]),
        ("c1", "2 of 3", ["retrieval"], ["retrieval"], None, ["recall@10 0.0"]),
    ]
    agent = failures_section(_data(lane="agent"))
    assert agent.table.rows() == [
        ("a1", "1 of 1", ["tool_arguments"], ["agent tool calling"], None, ["issue_refund.amount"])
    ]


def test_summary_counts_this_lane_only():
    section = summary_section(_data(rejects=pl.DataFrame({"reason": ["bad json", "no id"]})))
    assert section.lines == [
        "- run `cand`: candidate `assistant@2`, model `m-1`, mode `gate`",
        "- traces in this lane: 7 — passed 1, failed 4, incomplete 1 (owner: harness), not applicable 1",
        "- rejected input lines (whole run): 2",
        "- lanes are never blended: this report covers retrieval, context, grounding, citations and answers only",
    ]
    agent = summary_section(_data(lane="agent"))
    assert (
        agent.lines[1]
        == "- traces in this lane: 1 — passed 0, failed 1, incomplete 0 (owner: harness), not applicable 0"
    )


def test_hazards_and_incomplete_traces_are_listed():
    hazard = hazard_section(_data())
    assert hazard.title == "Review first: unsupported_correct (1)"
    assert hazard.table.rows() == [("cand:c3#1", "c3", "no relevant doc")]
    incomplete = incomplete_section(_data())
    assert incomplete.title == "Incomplete (1, owner: harness)"
    assert incomplete.table.rows() == [("cand:c4#1", "c4", "harness", "grounding incomplete: judge timed out")]


def test_incomplete_lines_count_by_reason():
    frame = pl.DataFrame(
        {
            "grounding_stage": ["pass", "incomplete", "incomplete", "incomplete", "fail"],
            "grounding_reason": [None, "judge timed out", None, "judge timed out", "claim 0"],
        }
    )
    assert incomplete_lines(frame, "grounding") == [
        "- incomplete grounding: 3 of 5 traces, left out of the means (judge timed out: 2; no reason given: 1)"
    ]
    assert incomplete_lines(frame.head(1), "grounding") == ["- incomplete grounding: 0 traces"]
    assert incomplete_lines(frame, "citation") == []
    assert incomplete_lines(None, "grounding") == []


def test_pareto_ranks_stages_and_checks_the_sum():
    pareto, every = pareto_sections(_data())
    assert pareto.table.rows() == [("retrieval", 3, 0.75, 0.75, "retrieval"), ("answer", 1, 0.25, 1.0, "generation")]
    assert pareto.lines == ["- stage counts sum to 4; the lane has 4 failed traces ✔"]
    assert pareto.chart.startswith("<svg")
    assert every.table.height == 5
    mismatch, _ = pareto_sections(_data(rollup=ROLLUP.with_columns(pl.lit(5, dtype=pl.Int64).alias("lane_failures"))))
    assert mismatch.lines == ["- stage counts sum to 4; the lane has 5 failed traces ✘ (mismatch)"]


def test_newly_failing_cases_against_the_baseline():
    baseline = pl.DataFrame(
        [
            ("base:c1#1", "c1", "rag", "pass", None, None, None, None),
            ("base:c2#1", "c2", "rag", "fail", "answer", "generation", "x", None),
            ("base:c3#1", "c3", "rag", "pass", None, None, None, None),
            ("base:c6#1", "c6", "rag", "pass", None, None, None, None),
        ],
        schema=OUTCOME_SCHEMA,
        orient="row",
    )
    base_rollup = ROLLUP.with_columns(
        pl.Series("failures", [0, 0, 0, 0, 1]), pl.Series("share", [0.0, 0.0, 0.0, 0.0, 1.0])
    )
    data = _data(
        baseline_run_id="base",
        baseline_outcomes=baseline,
        baseline_rollup=base_rollup,
        quarantine=pl.DataFrame({"case_id": ["c3"], "reason": ["flipped"]}),
    )
    newly, shift = baseline_sections(data)
    assert newly.title == "Against baseline base"
    # c2 failed before too; c6 is not in this run
    assert newly.table.rows() == [("c1", ["retrieval"], False), ("c3", ["retrieval"], True)]
    assert newly.lines == [
        "- newly failing cases (passed in `base`, fail here): 2, of which flaky (quarantined, left out of the "
        "`no_new_failures` gate): 1"
    ]
    assert shift.table.select("stage", "baseline_failures", "candidate_failures", "share_shift").rows() == [
        ("retrieval", 0, 3, 0.75),
        ("context_assembly", 0, 0, 0.0),
        ("grounding", 0, 0, 0.0),
        ("citation", 0, 0, 0.0),
        ("answer", 1, 1, -0.75),
    ]


def test_without_a_baseline_the_note_says_why():
    assert baseline_sections(_data()) == []
    [section] = baseline_sections(_data(baseline_note="exploratory run"))
    assert (section.title, section.lines) == ("Against a baseline", ["- no baseline comparison: exploratory run"])


def test_rejected_lines_grouped_by_reason_with_quoted_values_masked():
    rejects = pl.DataFrame(
        {
            "input_kind": ["trace", "trace", "case"],
            "source_file": ["b.jsonl", "a.jsonl", "cases.yaml"],
            "line": [3, 7, 1],
            "reason": ["unknown case 'c77'", "unknown case 'c78'", "bad field"],
        }
    )
    by_reason, each = rejects_sections(_data(rejects=rejects))
    assert by_reason.title == "Rejected input lines (3)"
    assert by_reason.table.rows() == [("trace", "unknown case '…'", 2), ("case", "bad field", 1)]
    assert each.table["source_file"].to_list() == ["a.jsonl", "b.jsonl", "cases.yaml"]
    assert rejects_sections(_data())[0].lines == ["- no reject table"]


def test_quarantine_lists_flaky_cases_sorted():
    quarantine = pl.DataFrame(
        {
            "case_id": ["a2", "a1"],
            "reason": ["r2", "r1"],
            "flipped_trace_ids": [["t3"], ["t1", "t2"]],
            "n_success": [1, 1],
        }
    )
    section = quarantine_section(_data(quarantine=quarantine))
    assert section.title == "Quarantine (2 flaky cases)"
    assert section.table.rows() == [("a1", "r1", ["t1", "t2"]), ("a2", "r2", ["t3"])]
    assert quarantine_section(_data()).title == "Quarantine (0 flaky cases)"


def test_rag_report_section_order_and_metric_means():
    tables = {
        "retrieval_scores": pl.DataFrame(
            {
                "status": ["scored", "scored", "incomplete"],
                "recall_at_10": [1.0, 0.0, None],
                "mrr": [1.0, 0.5, None],
                "failure_class": [None, "keyword_miss", None],
                "qrels_version": ["q7", "q7", "q7"],
            }
        ),
        "grounding_scores": pl.DataFrame(
            {
                "status": ["scored", "scored"],
                "grounding_rate": [1.0, 0.5],
                "grounding_stage": ["pass", "incomplete"],
                "grounding_reason": [None, "judge timeout"],
            }
        ),
    }
    sections = rag_sections(_data(tables=tables))
    titles = [s.title for s in sections]
    assert titles == [
        "Failed high-criticality cases",
        "Summary",
        "Review first: unsupported_correct (1)",
        "First failing stage (Pareto)",
        "All stages",
        "Retrieval × grounding × answer",
        "Retrieval",
        "Retrieval metrics",
        "Context assembly",
        "Grounding",
        "Citations",
        "Answers",
        "Quarantine (0 flaky cases)",
        "Failed cases (3)",
        "Incomplete (1, owner: harness)",
        "Slices",
        "Rejected input lines",
    ]
    by_title = {s.title: s for s in sections}
    assert by_title["Retrieval"].lines == [
        "- mrr 0.7500, ndcg@10 –, context precision –, judged@10 –",
        "- qrels version `q7`",
    ]
    assert by_title["Retrieval"].table.rows() == [("keyword_miss", 1)]
    assert by_title["Retrieval metrics"].table.rows() == [("recall_at_10", 0.5, 2), ("mrr", 0.75, 2)]
    assert by_title["Grounding"].lines == [
        "- grounding rate 0.7500 (supported claims / claims, per trace)",
        "- incomplete grounding: 1 of 2 traces, left out of the means (judge timeout: 1)",
    ]
    assert by_title["Retrieval × grounding × answer"].table.select(
        "retrieval", "grounded", "answer", "traces"
    ).rows() == [("fail", "yes", "right", 1)]


def test_agent_report_tool_lines_and_reliability():
    tools = pl.DataFrame(
        {
            "trace_id": ["t2", "t1", "t3"],
            "case_id": ["a2", "a1", "a3"],
            "status": ["scored"] * 3,
            "tool_call_f1": [1.0, 0.5, 0.0],
            "policy_violation": [False, True, None],
            "loop_detected": [False, False, True],
            "adapter_divergence": [None, None, "dispatched x"],
        }
    )
    outcomes = pl.DataFrame(
        {
            "status": ["scored", "scored", "incomplete"],
            "success": [True, False, None],
            "milestones_failed": [[], ["refunded", "notified"], ["refunded"]],
        }
    )
    reliability = pl.DataFrame(
        {
            "case_id": ["a2", "a1"],
            "n_attempts": [2, 2],
            "pass_at_1": [0.5, 1.0],
            "pass_hat_2": [0.0, 1.0],
            "pass_hat_1": [0.5, 1.0],
            "flaky": [True, False],
        }
    )
    sections = agent_sections(
        _data(lane="agent", tables={"tool_scores": tools, "outcome_scores": outcomes}, reliability=reliability)
    )
    by_title = {s.title: s for s in sections}
    assert by_title["Tool calls"].lines == [
        "- policy violations: 1 trace(s); loops: 1; adapter divergences (harness defects, incomplete): 1"
    ]
    assert by_title["Policy violations, loops and adapter divergences"].table.rows() == [
        ("t1", "a1", None),
        ("t3", "a3", "dispatched x"),
    ]
    assert by_title["Outcome"].lines == [
        "- success (verified world state, never the final message): 0.5000 over 2 scored traces"
    ]
    assert by_title["Outcome"].table.rows() == [("refunded", 2), ("notified", 1)]
    reliability_section = by_title["Reliability over repeated attempts"]
    assert reliability_section.lines == ["- pass@1 0.7500; pass^1 0.7500, pass^2 0.5000"]
    assert reliability_section.table.columns == [
        "case_id",
        "n_attempts",
        "pass_at_1",
        "pass_hat_1",
        "pass_hat_2",
        "flaky",
    ]
    assert reliability_section.table["case_id"].to_list() == ["a1", "a2"]


def _agent_stage_rows(trace: str, case: str, failing: set[str]) -> list[dict]:
    stages = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop", "recovery", "outcome")
    return [
        {
            "trace_id": trace,
            "case_id": case,
            "lane": "agent",
            "stage": s,
            "stage_order": i,
            "status": "fail" if s in failing else "pass",
            "reason": None,
        }
        for i, s in enumerate(stages)
    ]


def test_reliability_shows_the_attempts_that_failed_a_process_stage_beside_pass_at_1():
    # a1 reaches the right world state in the wrong order every time: pass@1 1.0 with 3 of 3 attempts failed
    stages = pl.DataFrame(
        [
            *(row for n in (1, 2, 3) for row in _agent_stage_rows(f"a1#{n}", "a1", {"tool_order"})),
            *_agent_stage_rows("a2#1", "a2", {"policy", "outcome"}),
            *_agent_stage_rows("a3#1", "a3", set()),
        ]
    )
    reliability = pl.DataFrame(
        {
            "case_id": ["a3", "a2", "a1"],
            "n_attempts": [1, 1, 3],
            "n_incomplete": [0, 0, 0],
            "n_success": [1, 0, 3],
            "pass_at_1": [1.0, 0.0, 1.0],
            "pass_hat_1": [1.0, 0.0, 1.0],
            "flaky": [False, False, False],
        }
    )
    section = {s.title: s for s in agent_sections(_data(lane="agent", stage_results=stages, reliability=reliability))}[
        "Reliability over repeated attempts"
    ]
    assert section.table.columns == [
        "case_id",
        "n_attempts",
        "n_incomplete",
        "n_success",
        "failed_process_stage",
        "pass_at_1",
        "pass_hat_1",
        "flaky",
    ]
    assert section.table.select("case_id", "n_success", "failed_process_stage", "pass_at_1").rows() == [
        ("a1", 3, 3, 1.0),
        ("a2", 0, 1, 0.0),
        ("a3", 1, 0, 1.0),
    ]
    # the note says what pass@1 counts, on the page where the numbers are
    assert any(
        line.startswith("- pass@1 and pass^k count an attempt a success when its verified outcome")
        and "`failed_process_stage`" in line
        for line in section.lines
    )
    # the stored table is shown as it is: no column of its own changed
    assert reliability.columns == [
        "case_id",
        "n_attempts",
        "n_incomplete",
        "n_success",
        "pass_at_1",
        "pass_hat_1",
        "flaky",
    ]


def test_slices_say_why_pass_rate_and_pass_at_1_differ():
    slices = pl.DataFrame(
        {
            "dimension": ["criticality"],
            "value": ["high"],
            "n_cases": [1],
            "n_traces": [3],
            "traces_failed": [3],
            "traces_incomplete": [0],
            "pass_rate": [0.0],
            "pass_at_1": [1.0],
            "top_failing_stage": ["tool_order"],
            "failed_case_ids": [["a1"]],
        }
    )
    agent = {s.title: s for s in agent_sections(_data(lane="agent", slices=slices))}["Slices"]
    assert any(
        "pass_at_1 counts an attempt a success when its verified outcome passed" in line
        and "pass_rate counts a trace passed only when every stage passed" in line
        for line in agent.lines
    )
    rag = {s.title: s for s in rag_sections(_data(slices=slices))}["Slices"]
    assert any(
        line.startswith("- pass_rate counts a trace passed when every stage passed; pass_at_1 counts the same")
        for line in rag.lines
    )


def test_judge_calibration_shows_may_gate_first_and_the_confusion_as_a_table():
    from eval_pipeline.reporting.render import render_html

    calibration = pl.DataFrame(
        {
            "level": ["claim"],
            "judge_version": ["local-2"],
            "n": [63],
            "agreement": [0.95],
            "cohen_kappa": [0.84],
            "kappa_ci_low": [0.66],
            "kappa_ci_high": [1.0],
            "balanced_accuracy": [0.9],
            "self_consistency_flip_rate": [0.0],
            "may_gate": [True],
            "confusion": [
                '{"SUPPORTED": {"SUPPORTED": 51, "CONTRADICTED": 1}, '
                '"CONTRADICTED": {"SUPPORTED": 0, "CONTRADICTED": 4}}'
            ],
        }
    )
    section = {s.title: s for s in rag_sections(_data(tables={"judge_calibration": calibration}))}["Judge calibration"]
    assert section.table.columns[:3] == ["level", "judge_version", "may_gate"]
    assert section.lines == ["- confusion: rows are the human labels, columns the judge's verdicts"]
    html = render_html("R", [section])
    assert '<td class="json"><table class="nested"><tr><th></th><th>SUPPORTED</th><th>CONTRADICTED</th></tr>' in html
    assert "{&quot;" not in html


def test_a_version_the_importer_wrote_as_none_is_said_in_words():
    section = summary_section(_data(manifest={"candidate": "gpt-4o", "corpus_version": "none", "mode": "exploratory"}))
    assert section.lines[0] == "- run `cand`: candidate `gpt-4o`, no corpus, mode `exploratory`"
