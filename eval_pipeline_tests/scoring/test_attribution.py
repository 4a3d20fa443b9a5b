"""First failing stage, rollup, contingency and per-attempt success on hand-built stage tables."""

import polars as pl

from eval_pipeline.scoring import attribution as a

KEYS = {"run_id": "r", "attempt": 1}


def lane_table(stage: str, statuses: dict[str, str], reasons: dict[str, str] | None = None) -> pl.DataFrame:
    ids = list(statuses)
    return pl.DataFrame(
        {
            "run_id": ["r"] * len(ids),
            "trace_id": ids,
            "case_id": [f"c-{t}" for t in ids],
            "attempt": [1] * len(ids),
            f"{stage}_stage": [statuses[t] for t in ids],
            f"{stage}_reason": [(reasons or {}).get(t) for t in ids],
        }
    )


def rag_stages() -> pl.DataFrame:
    # t1 passes; t2 hazard (retrieval fails, answer right); t3 retrieval and answer fail;
    # t4 grounding fails before an incomplete answer;
    # t5 retrieval passes, grounding incomplete, answer fails -> incomplete;
    # t6 citation not applicable, answer fails -> answer.
    retrieval = lane_table(
        "retrieval",
        {"t1": "pass", "t2": "fail", "t3": "fail", "t4": "pass", "t5": "pass", "t6": "pass"},
        {"t2": "no relevant doc in top 10", "t3": "no relevant doc in top 10"},
    )
    context = lane_table(
        "context_assembly",
        {"t1": "pass", "t2": "not_applicable", "t3": "not_applicable", "t4": "pass", "t5": "pass", "t6": "pass"},
    )
    grounding = lane_table(
        "grounding",
        {"t1": "pass", "t2": "pass", "t3": "fail", "t4": "fail", "t5": "incomplete", "t6": "pass"},
        {"t4": "1 of 2 claims contradicted", "t5": "judge timed out"},
    )
    citation = lane_table(
        "citation",
        {
            "t1": "pass",
            "t2": "not_applicable",
            "t3": "not_applicable",
            "t4": "pass",
            "t5": "pass",
            "t6": "not_applicable",
        },
    )
    answer = lane_table(
        "answer",
        {"t1": "pass", "t2": "pass", "t3": "fail", "t4": "incomplete", "t5": "fail", "t6": "fail"},
        {"t6": "missing '14 days'"},
    )
    return a.stage_results("rag", [retrieval, context, grounding, citation, answer])


def test_stage_results_are_long_and_ordered_by_the_lane():
    stages = rag_stages()
    assert stages.height == 30
    assert stages.filter(pl.col("trace_id") == "t1")["stage"].to_list() == list(a.LANE_STAGES["rag"])


def test_first_failing_stage_wins_and_incomplete_is_apart():
    outcomes = a.lane_outcomes(rag_stages()).sort("trace_id")
    got = {r["trace_id"]: (r["outcome"], r["first_failing_stage"], r["hazard"]) for r in outcomes.iter_rows(named=True)}
    assert got == {
        "t1": ("pass", None, None),
        "t2": ("fail", "retrieval", "unsupported_correct"),
        "t3": ("fail", "retrieval", None),
        "t4": ("fail", "grounding", None),
        "t5": ("incomplete", None, None),
        "t6": ("fail", "answer", None),
    }
    t5 = outcomes.filter(pl.col("trace_id") == "t5").row(0, named=True)
    assert t5["owner"] == a.HARNESS_OWNER and t5["reason"] == "grounding incomplete: judge timed out"
    assert outcomes.filter(pl.col("trace_id") == "t4")["owner"][0] == a.STAGE_OWNERS["grounding"]


def test_attribution_lists_hazard_first_and_rollup_sums_to_failures():
    outcomes = a.lane_outcomes(rag_stages())
    failed = a.attribution(outcomes)
    assert failed["trace_id"].to_list()[0] == "t2"
    assert set(failed["outcome"].to_list()) == {"fail", "incomplete"}
    rollup = a.rollup(outcomes, "rag")
    assert dict(rollup.select("stage", "failures").iter_rows()) == {
        "retrieval": 2,
        "context_assembly": 0,
        "grounding": 1,
        "citation": 0,
        "answer": 1,
    }
    assert rollup["failures"].sum() == rollup["lane_failures"][0] == 4
    assert rollup["lane_incomplete"][0] == 1 and rollup["lane_passed"][0] == 1 and rollup["lane_traces"][0] == 6
    assert rollup.filter(pl.col("stage") == "retrieval")["share"][0] == 0.5
    assert rollup.filter(pl.col("stage") == "retrieval")["hazards"][0] == 1
    pareto = a.pareto(rollup)
    assert pareto["stage"].to_list() == ["retrieval", "grounding", "answer"]
    assert pareto["cumulative_share"].to_list() == [0.5, 0.75, 1.0]


def test_contingency_counts_each_combination_with_hazard_first():
    table = a.contingency(rag_stages())
    rows = {(r["retrieval"], r["grounded"], r["answer"]): r["traces"] for r in table.iter_rows(named=True)}
    assert rows == {
        ("pass", "yes", "right"): 1,
        ("fail", "yes", "right"): 1,
        ("fail", "no", "wrong"): 1,
        ("pass", "no", "incomplete"): 1,
        ("pass", "incomplete", "wrong"): 1,
        ("pass", "yes", "wrong"): 1,
    }
    assert table.row(0, named=True)["retrieval"] == "fail" and table.row(0, named=True)["answer"] == "right"
    assert (
        table.filter(pl.col("grounded") == "no")["diagnosis"]
        .to_list()[0]
        .startswith(("fix the retriever", "the model invented"))
    )


def test_all_not_applicable_is_not_a_pass_or_a_failure():
    stages = a.stage_results(
        "rag", [lane_table("retrieval", {"t": "not_applicable"}), lane_table("answer", {"t": "not_applicable"})]
    )
    assert a.lane_outcomes(stages)["outcome"].to_list() == ["not_applicable"]


def test_attempt_success_uses_agent_outcome_for_agent_cases_and_rag_lane_for_rag_only():
    cases = pl.DataFrame({"case_id": ["c-t1", "c-t2", "c-a"], "lanes": [["rag"], ["rag"], ["rag", "agent"]]})
    outcomes = a.lane_outcomes(rag_stages())
    agent = pl.DataFrame(
        {
            "run_id": ["r", "r"],
            "trace_id": ["a1", "a2"],
            "case_id": ["c-a", "c-a"],
            "attempt": [1, 2],
            "success": [True, None],
        }
    )
    success = a.attempt_success(outcomes, cases, agent).sort("trace_id")
    assert success.select("trace_id", "lane", "success").rows() == [
        ("a1", "agent", True),
        ("a2", "agent", None),
        ("t1", "rag", True),
        ("t2", "rag", False),
    ]
