"""The story of one case from small hand-built tables: every stage of a RAG and of an agent attempt, the first failing
stage, the retrieved and missed documents, wrong tool arguments field by field, the gate the case blocks, the
baseline side by side, and the HTML page."""

import json

import polars as pl

from eval_pipeline.reporting.case_story import (
    ABSENT,
    CaseTables,
    build_story,
    call_argument_diffs,
    case_page_html,
    case_page_name,
    case_sections,
    case_story_text,
    delta_cell,
    field_diffs,
    fmt,
    json_text,
    side_by_side,
    split_call,
)

RUN = "cand"
STAGE_KEYS = ("run_id", "trace_id", "case_id", "attempt", "lane", "stage", "stage_order", "status", "reason")


def _stages(trace: str, case: str, attempt: int, lane: str, rows, run: str = RUN) -> pl.DataFrame:
    return pl.DataFrame(
        [
            dict(zip(STAGE_KEYS, (run, trace, case, attempt, lane, stage, i, status, reason), strict=True))
            for i, (stage, status, reason) in enumerate(rows)
        ]
    )


# ---------------------------------------------------------------- a RAG case

HIT = pl.Struct({"doc_id": pl.String, "score": pl.Float64})
RETRIEVAL = pl.List(
    pl.Struct(
        {
            "round": pl.Int64,
            "tool": pl.String,
            "variant": pl.String,
            "query": pl.String,
            "candidates": pl.List(HIT),
            "hits": pl.List(HIT),
        }
    )
)
CITATIONS = pl.List(pl.Struct({"doc_id": pl.String, "quote": pl.String, "claim_index": pl.Int64}))
RAG_STAGES = [
    ("retrieval", "fail", "no relevant doc in the top 10"),
    ("context_assembly", "pass", None),
    ("grounding", "fail", "claim 0 NOT_IN_EVIDENCE"),
    ("citation", "not_applicable", "citations not required"),
    ("answer", "fail", "missing '5 business days'"),
]


def _rag_tables(**frames) -> CaseTables:
    traces = pl.DataFrame(
        {
            "run_id": [RUN],
            "trace_id": ["cand:c1#1"],
            "case_id": ["c1"],
            "attempt": [1],
            "status": ["ok"],
            "error": [None],
            "retrieval": [
                [
                    {
                        "round": 1,
                        "tool": "search",
                        "variant": None,
                        "query": "refund time",
                        "candidates": [
                            {"doc_id": "kb-shipping", "score": 0.9},
                            {"doc_id": "kb-refunds-old", "score": 0.8},
                            {"doc_id": "kb-refunds", "score": 0.3},
                        ],
                        "hits": [{"doc_id": "kb-shipping", "score": 0.9}, {"doc_id": "kb-refunds-old", "score": 0.8}],
                    }
                ]
            ],
            "context": [[{"doc_id": "kb-shipping", "text": "Shipping is free.", "tokens": 5}]],
            "answer_text": ["Refunds take 10 days."],
            "citations": [[]],
        },
        schema_overrides={"retrieval": RETRIEVAL, "error": pl.String, "citations": CITATIONS},
    )
    cases = pl.DataFrame(
        {
            "case_id": ["c1"],
            "lanes": [["rag"]],
            "input": ["How long do refunds take?"],
            "criticality": ["high"],
            "case_revision": [1],
            "required_doc_ids": [["kb-refunds"]],
            "expected_answer_contains": [["5 business days"]],
            "multi_hop": [False],
        }
    )
    qrels = pl.DataFrame(
        {
            "query_id": ["c1", "c1", "c2"],
            "doc_id": ["kb-refunds", "kb-refunds-old", "kb-shipping"],
            "grade": [3, 1, 3],
            "source": ["human", "pool", "human"],
        }
    )
    retrieval = pl.DataFrame(
        {
            "trace_id": ["cand:c1#1"],
            "case_id": ["c1"],
            "recall_at_10": [0.0],
            "mrr": [0.0],
            "failure_class": ["embedding_miss"],
        }
    )
    claims = pl.DataFrame(
        {
            "trace_id": ["cand:c1#1"],
            "case_id": ["c1"],
            "claim_index": [0],
            "verdict": ["NOT_IN_EVIDENCE"],
            "score": [0.1],
            "claim": ["Refunds take 10 days."],
            "evidence_doc_id": [None],
            "evidence_quote": [None],
            "quote_verified": [None],
            "cited_doc_ids": [[]],
            "citation_verdict": ["UNCITED"],
            "citation_reason": [None],
            "reason": ["no chunk says 10 days"],
            "status": ["scored"],
        },
        schema_overrides={
            "evidence_doc_id": pl.String,
            "evidence_quote": pl.String,
            "quote_verified": pl.Boolean,
            "cited_doc_ids": pl.List(pl.String),
            "citation_reason": pl.String,
        },
    )
    grounding = pl.DataFrame(
        {
            "trace_id": ["cand:c1#1"],
            "case_id": ["c1"],
            "grounding_rate": [0.0],
            "n_claims": [1],
            "n_supported": [0],
            "judge_version": ["local-1"],
        }
    )
    base = {
        "deid_cases": cases,
        "deid_traces": traces,
        "stage_results": _stages("cand:c1#1", "c1", 1, "rag", RAG_STAGES),
        "qrels": qrels,
        "retrieval_scores": retrieval,
        "claims": claims,
        "grounding_scores": grounding,
    }
    return CaseTables(run_id=RUN, manifest={"candidate": "assistant@2", "model": "m-1"}, frames={**base, **frames})


def test_rag_story_text_stage_by_stage():
    text = case_story_text(build_story(_rag_tables(), "c1"))
    assert (
        text
        == "\n".join(
            [
                "case c1 in run cand (candidate assistant@2, model m-1)",
                "  input: How long do refunds take?",
                "  lanes: rag · criticality: high · revision 1",
                "  required docs: kb-refunds",
                '  expected answer contains: "5 business days"',
                "",
                "attempt 1 — cand:c1#1 (harness ok)",
                "  rag: FAIL at retrieval (owner: retrieval (index, retriever, query rewriting))",
                "    why: no relevant doc in the top 10",
                "  stages (rag):",
                "    retrieval        fail             no relevant doc in the top 10",
                "    context_assembly pass",
                "    grounding        fail             claim 0 NOT_IN_EVIDENCE",
                "    citation         not_applicable   citations not required",
                "    answer           fail             missing '5 business days'",
                '  queries: "refund time"',
                "  retrieved (rank order; relevant = qrels grade >= 2):",
                "    rank 1: kb-shipping  · not relevant (unjudged), score 0.9000, round 1, in context",
                "    rank 2: kb-refunds-old  · not relevant (grade 1), score 0.8000, round 1",
                "    ✘ missed relevant kb-refunds (grade 3, human): in the candidates at 3 but not in the hits",
                "    recall_at_1 –, recall_at_5 –, recall_at_10 0.0000, recall_at_20 –, precision_at_5 –, mrr 0.0000, "
                "ndcg_at_10 –, judged_at_10 –",
                "    first hit rank –, relevant –, rounds –, evidence round –, failure class embedding_miss",
                "  context (1 chunks, – tokens; context recall –, precision –):",
                '    [1] kb-shipping, 5 tokens: "Shipping is free."',
                "  claims (grounding rate 0.0000; 0 of 1 supported, judge local-1):",
                '    claim 0: NOT_IN_EVIDENCE (score 0.1000) "Refunds take 10 days."',
                "      evidence –: null",
                "      citation: UNCITED → –",
                "      judge: no chunk says 10 days",
                '  answer: "Refunds take 10 days."',
            ]
        )
        + "\n"
    )


def test_relevance_threshold_decides_what_is_relevant():
    tables = CaseTables(run_id=RUN, manifest=None, frames=_rag_tables().frames, relevance_threshold=1)
    story = build_story(tables, "c1")
    ranked = story.attempts[0].rag.ranked
    assert ranked.select("rank", "doc_id", "grade", "relevant", "in_context").rows() == [
        (1, "kb-shipping", None, False, True),
        (2, "kb-refunds-old", 1, True, False),
    ]
    assert (
        "    rank 2: kb-refunds-old  ✔ relevant (grade 1), score 0.8000, round 1" in case_story_text(story).splitlines()
    )


def test_stored_attribution_wins_over_the_stage_results():
    attribution = pl.DataFrame(
        {
            "trace_id": ["cand:c1#1"],
            "case_id": ["c1"],
            "lane": ["rag"],
            "outcome": ["fail"],
            "first_failing_stage": ["retrieval"],
            "owner": ["retrieval team"],
            "reason": ["stored: recall@10 0.0"],
            "hazard": [None],
        },
        schema_overrides={"hazard": pl.String},
    )
    story = build_story(_rag_tables(attribution=attribution), "c1")
    lines = case_story_text(story).splitlines()
    assert lines[7:9] == ["  rag: FAIL at retrieval (owner: retrieval team)", "    why: stored: recall@10 0.0"]


def test_story_metrics_of_an_attempt():
    attempt = build_story(_rag_tables(), "c1").attempts[0]
    assert attempt.metrics == {
        "recall_at_10": 0.0,
        "mrr": 0.0,
        "failure_class": "embedding_miss",
        "grounding_rate": 0.0,
        "n_claims": 1,
        "n_supported": 0,
    }
    assert (attempt.trace_id, attempt.attempt, attempt.harness_status, attempt.agent) == ("cand:c1#1", 1, "ok", None)


# ---------------------------------------------------------------- an agent case

AGENT_STAGES = [
    ("policy", "pass", None),
    ("tool_selection", "pass", None),
    ("tool_arguments", "fail", "issue_refund.amount differs"),
    ("tool_order", "pass", None),
    ("loop", "pass", None),
    ("recovery", "not_applicable", "no injected fault"),
    ("outcome", "fail", "milestone refunded failed"),
]
STEPS = pl.List(
    pl.Struct({"index": pl.Int64, "kind": pl.String, "tool": pl.String, "status": pl.String, "error": pl.String})
)
MILESTONES = pl.List(pl.Struct({"name": pl.String, "path": pl.String, "op": pl.String, "passed": pl.Boolean}))
GATE_SCHEMA = {
    "gate": pl.String,
    "status": pl.String,
    "owner": pl.String,
    "reason": pl.String,
    "metric": pl.String,
    "baseline_run_id": pl.String,
    "baseline_value": pl.Float64,
    "candidate_value": pl.Float64,
    "delta": pl.Float64,
    "threshold": pl.Float64,
    "blocking_cases": pl.List(pl.String),
    "excluded_cases": pl.List(pl.String),
}
TRACES = ["cand:a1#1", "cand:a1#2"]


def _agent_tables() -> CaseTables:
    state = {"orders": {"88171": {"refund": 89, "status": "refunded"}}}
    traces = pl.DataFrame(
        {
            "trace_id": TRACES,
            "case_id": ["a1", "a1"],
            "attempt": [1, 2],
            "status": ["ok", "ok"],
            "error": [None, None],
            "answer_text": ["Refunded 89 EUR.", "Refunded 89 EUR."],
            "steps": [
                [
                    {"index": 0, "kind": "tool_call", "tool": "get_order", "status": "ok", "error": None},
                    {"index": 1, "kind": "message", "tool": None, "status": None, "error": None},
                    {"index": 2, "kind": "tool_call", "tool": "notify", "status": "error", "error": "mail server down"},
                ]
            ]
            * 2,
            "final_state_json": [json.dumps(state)] * 2,
        },
        schema_overrides={"steps": STEPS, "error": pl.String},
    )
    reference = [
        {"name": "get_order", "args_json": '{"order_id":"88171"}'},
        {"name": "issue_refund", "args_json": '{"amount":10,"order_id":"88171"}'},
    ]
    cases = pl.DataFrame(
        {
            "case_id": ["a1"],
            "lanes": [["agent"]],
            "input": ["Refund the duplicate charge"],
            "criticality": ["high"],
            "case_revision": [2],
            "reference_tool_calls": [reference],
            "tool_match": ["ordered"],
            "milestones": [[{"name": "refunded", "path": "orders.88171.refund", "op": "eq", "value_json": "10"}]],
        }
    )
    diffs = pl.DataFrame(
        {
            "trace_id": [TRACES[0]] * 3 + [TRACES[1]] * 3,
            "case_id": ["a1"] * 6,
            "position": [1, 2, 3] * 2,
            "match": ["same", "args_differ", "missing"] * 2,
            "expected_call": [
                'get_order({"order_id":"88171"})',
                'issue_refund({"amount":10,"order_id":"88171"})',
                'notify({"to":"customer"})',
            ]
            * 2,
            "actual_call": ['get_order({"order_id":"88171"})', 'issue_refund({"amount":89,"order_id":"88171"})', None]
            * 2,
            "actual_status": ["ok", "ok", None] * 2,
            "matched_path": ["reference"] * 6,
        }
    )
    tools = pl.DataFrame(
        {
            "trace_id": TRACES,
            "case_id": ["a1", "a1"],
            "tool_call_f1": [0.8, 0.8],
            "args_valid_rate": [0.5, 0.5],
            "matched_path": ["reference"] * 2,
            "tool_match": ["ordered"] * 2,
            "strict_order_accuracy": [1.0, 1.0],
        }
    )
    outcomes = pl.DataFrame(
        {
            "trace_id": TRACES,
            "case_id": ["a1", "a1"],
            "success": [False, False],
            "success_claimed": [True, True],
            "milestones": [[{"name": "refunded", "path": "orders.88171.refund", "op": "eq", "passed": False}]] * 2,
            "fault_kind": [None, None],
            "n_steps": [4, 4],
            "cost_usd": [0.0021, 0.0021],
        },
        schema_overrides={"milestones": MILESTONES, "fault_kind": pl.String},
    )
    reliability = pl.DataFrame(
        {
            "case_id": ["a1"],
            "lane": ["agent"],
            "n_attempts": [2],
            "n_complete": [2],
            "n_incomplete": [0],
            "n_success": [0],
            "pass_at_1": [0.0],
            "pass_hat_1": [0.0],
            "pass_hat_2": [0.0],
            "flaky": [False],
        }
    )
    gates = pl.DataFrame(
        [
            {
                "gate": "tool_args",
                "status": "fail",
                "owner": "agent",
                "reason": "args valid dropped",
                "metric": "args_valid_rate",
                "baseline_run_id": "base",
                "baseline_value": 0.9,
                "candidate_value": 0.5,
                "delta": -40.0,
                "threshold": 2.0,
                "blocking_cases": ["a1"],
                "excluded_cases": [],
            },
            {
                "gate": "task_success",
                "status": "pass",
                "owner": "agent",
                "reason": "ok",
                "metric": "pass_at_1",
                "baseline_run_id": "base",
                "baseline_value": 0.5,
                "candidate_value": 0.5,
                "delta": 0.0,
                "threshold": 2.0,
                "blocking_cases": [],
                "excluded_cases": ["a1", "a9"],
            },
            {
                "gate": "other",
                "status": "fail",
                "owner": "agent",
                "reason": "x",
                "metric": "tool_call_f1",
                "baseline_run_id": "base",
                "baseline_value": 1.0,
                "candidate_value": 0.0,
                "delta": -100.0,
                "threshold": 2.0,
                "blocking_cases": ["a9"],
                "excluded_cases": [],
            },
        ],
        schema=GATE_SCHEMA,
    )
    stages = pl.concat(
        [_stages(TRACES[0], "a1", 1, "agent", AGENT_STAGES), _stages(TRACES[1], "a1", 2, "agent", AGENT_STAGES)]
    )
    return CaseTables(
        run_id=RUN,
        manifest={"candidate": "assistant@2"},
        frames={
            "deid_cases": cases,
            "deid_traces": traces,
            "stage_results": stages,
            "tool_call_diffs": diffs,
            "tool_scores": tools,
            "outcome_scores": outcomes,
            "reliability": reliability,
            "gate_results": gates,
        },
    )


ATTEMPT_1 = [
    "attempt 1 — cand:a1#1 (harness ok)",
    "  agent: FAIL at tool_arguments (owner: agent tool calling (argument construction))",
    "    why: issue_refund.amount differs",
    "  stages (agent):",
    "    policy           pass",
    "    tool_selection   pass",
    "    tool_arguments   fail             issue_refund.amount differs",
    "    tool_order       pass",
    "    loop             pass",
    "    recovery         not_applicable   no injected fault",
    "    outcome          fail             milestone refunded failed",
    "  tool calls (path reference, match ordered): F1 0.8000, precision –, recall –, args valid 0.5000, "
    "order accuracy 1.0000, unnecessary –",
    '    call 1: get_order({"order_id":"88171"})  = reference',
    '    call 2: issue_refund({"amount":89,"order_id":"88171"})  ≠ reference '
    'issue_refund({"amount":10,"order_id":"88171"})',
    '    call 3: (never called) notify({"to":"customer"})  ✘ missing',
    "  wrong arguments:",
    "    issue_refund.amount: expected 10, got 89",
    "  tool errors:",
    "    step 2 notify: error — mail server down",
    "  milestones:",
    "    refunded: ✘ failed — orders.88171.refund eq 10 (final state: 89)",
    "  outcome: success no (claimed yes), no injected fault; 4 steps, 0.002100 USD",
    '  answer: "Refunded 89 EUR."',
]


def test_agent_story_text_with_wrong_argument_gate_and_twin_attempt():
    lines = case_story_text(build_story(_agent_tables(), "a1")).splitlines()
    assert lines[:5] == [
        "case a1 in run cand (candidate assistant@2)",
        "  input: Refund the duplicate charge",
        "  lanes: agent · criticality: high · revision 2",
        '  reference calls (ordered): get_order({"order_id":"88171"}) → issue_refund({"amount":10,"order_id":"88171"})',
        "  milestones: refunded: orders.88171.refund eq 10",
    ]
    assert lines[5:10] == [
        "",
        "gates:",
        "  blocks gate tool_args (fail, owner agent, against base): args valid dropped; this case: "
        "args_valid_rate 0.5000",
        "  excluded from gate(s) task_success: flaky in the baseline, or out of the gate's scope",
        "",
    ]
    assert lines[10:33] == ATTEMPT_1
    # the second attempt failed the same way: said once, not printed again
    assert lines[33:] == [
        "",
        "attempt 2 — cand:a1#2 (harness ok)",
        "  same stages, evidence and answer as attempt 1",
        "",
        "reliability (agent): 0 of 2 complete attempts succeeded (0 incomplete) · pass@1 0.0000 · pass^1 0.0000 "
        "pass^2 0.0000 · flaky no",
    ]


def test_focus_shows_one_attempt_and_lists_the_others():
    story = build_story(_agent_tables(), "a1", trace_id="cand:a1#2")
    lines = case_story_text(story).splitlines()
    assert "attempt 1 — cand:a1#1 (harness ok)" not in lines
    assert lines[lines.index("attempt 2 — cand:a1#2 (harness ok)") + 1] == ATTEMPT_1[1]
    assert lines[lines.index("other attempts:") + 1] == "  cand:a1#1: agent fail at tool_arguments"


def test_argument_diffs_of_the_agent_view():
    view = build_story(_agent_tables(), "a1").attempts[0].agent
    assert view.argument_diffs.rows() == [(2, "issue_refund.amount", "10", "89")]
    assert view.step_errors.rows() == [(2, "notify", "error", "mail server down")]
    assert view.milestones.rows() == [("refunded", "orders.88171.refund", "eq", "10", "89", False)]


def test_baseline_side_by_side_pairs_attempts():
    base_stages = _stages("base:a1#1", "a1", 1, "agent", [(s, "pass", None) for s, _, _ in AGENT_STAGES], run="base")
    base_tools = pl.DataFrame(
        {
            "trace_id": ["base:a1#1"],
            "case_id": ["a1"],
            "tool_call_f1": [1.0],
            "args_valid_rate": [1.0],
            "strict_order_accuracy": [1.0],
        }
    )
    reliability = (
        _agent_tables().frame("reliability").with_columns(pl.lit(1).alias("n_success"), pl.lit(0.5).alias("pass_at_1"))
    )
    base = build_story(
        CaseTables(
            run_id="base", frames={"stage_results": base_stages, "tool_scores": base_tools, "reliability": reliability}
        ),
        "a1",
    )
    story = build_story(_agent_tables(), "a1")
    stages, metrics = side_by_side(story, base)
    assert stages.filter(pl.col("changed")).select("attempt", "stage", "baseline", "candidate").rows() == [
        (1, "tool_arguments", "pass", "fail"),
        (1, "recovery", "pass", "not_applicable"),
        (1, "outcome", "pass", "fail"),
        *((2, stage, None, status) for stage, status, _ in AGENT_STAGES),
    ]
    assert metrics.filter(pl.col("attempt") == 1).select(
        "metric", "baseline", "candidate", "delta", "changed"
    ).rows() == [
        ("tool_call_f1", "1.0000", "0.8000", "-0.2000", True),
        ("strict_order_accuracy", "1.0000", "1.0000", "+0", False),
        ("args_valid_rate", "1.0000", "0.5000", "-0.5000", True),
        ("success", "–", "no", None, True),
        ("success_claimed", "–", "yes", None, True),
        ("n_steps", "–", "4", None, True),
        ("cost_usd", "–", "0.002100", None, True),
    ]
    case = metrics.filter(pl.col("attempt").is_null())
    assert case.filter(pl.col("changed")).select("metric", "baseline", "candidate", "delta").rows() == [
        ("n_success", "1", "0", "-1"),
        ("pass_at_1", "0.5000", "0.0000", "-0.5000"),
    ]
    text = case_story_text(story, base).splitlines()
    assert (
        "  blocks gate tool_args (fail, owner agent, against base): args valid dropped; this case: args_valid_rate "
        "1.0000 → 0.5000" in text
    )
    start = text.index("against baseline base (baseline → cand):")
    assert text[start + 1 : start + 2] == ["  attempt 1: base:a1#1 → cand:a1#1"]
    assert "    agent tool_arguments: pass → fail  ✘ changed" in text[start:]
    assert "    no value in base: success, success_claimed, n_steps, cost_usd" in text[start:]
    assert "  attempt 2: (no attempt) → cand:a1#2" in text[start:]


def test_case_missing_from_a_run():
    story = build_story(_agent_tables(), "zz-404")
    assert not story.known
    assert case_story_text(story).splitlines() == [
        "case zz-404 in run cand (candidate assistant@2)",
        "  case: not in this run's de-identified cases",
        "",
        "no attempt of this case in the run",
    ]
    baseline = build_story(CaseTables(run_id="base"), "a1")
    assert case_story_text(build_story(_agent_tables(), "a1"), baseline).splitlines()[-1] == (
        "against baseline base: the case is not in that run"
    )


def test_harness_failure_shows_its_error_and_no_evidence():
    tables = _agent_tables()
    traces = tables.frame("deid_traces").with_columns(
        pl.when(pl.col("attempt") == 1).then(pl.lit("timeout")).otherwise(pl.col("status")).alias("status"),
        pl.when(pl.col("attempt") == 1).then(pl.lit("no reply in 30 s")).otherwise(pl.col("error")).alias("error"),
    )
    stages = tables.frame("stage_results").with_columns(
        pl.when(pl.col("attempt") == 1).then(pl.lit("incomplete")).otherwise(pl.col("status")).alias("status"),
        pl.when(pl.col("attempt") == 1).then(pl.lit("harness timeout")).otherwise(pl.col("reason")).alias("reason"),
    )
    story = build_story(
        CaseTables(run_id=RUN, frames={**tables.frames, "deid_traces": traces, "stage_results": stages}), "a1"
    )
    first = story.attempts[0]
    assert (first.harness_status, first.agent, story.attempts[1].agent is not None) == ("timeout", None, True)
    lines = case_story_text(story).splitlines()
    head = lines.index("attempt 1 — cand:a1#1 (harness timeout: no reply in 30 s)")
    assert lines[head + 1] == (
        "  agent: INCOMPLETE (owner: harness (evaluation infrastructure)) — policy incomplete: harness timeout"
    )
    assert lines[head + 9] == "    outcome          incomplete       harness timeout"
    assert lines[head + 10] == '  answer: "Refunded 89 EUR."'


def test_tables_split_by_case_keep_whole_run_tables():
    tables = _agent_tables()
    parts = tables.split_by_case(["a1", "zz"])
    assert parts["a1"].frame("tool_call_diffs").height == 6
    assert parts["zz"].frame("tool_call_diffs").height == 0
    assert parts["zz"].frame("gate_results").height == 3
    assert tables.for_cases(["zz"]).frame("deid_traces").height == 0


def test_split_stories_are_the_stories_of_the_whole_tables():
    # attempt 1's outcome is stored, attempt 2's is computed: by split_by_case for all cases at once, or for the one
    # case
    tables = _agent_tables()
    stored = pl.DataFrame(
        {
            "trace_id": [TRACES[0]],
            "case_id": ["a1"],
            "lane": ["agent"],
            "outcome": ["fail"],
            "first_failing_stage": ["tool_arguments"],
            "owner": ["stored owner"],
            "reason": ["stored reason"],
            "hazard": [None],
        },
        schema_overrides={"hazard": pl.String},
    )
    tables = CaseTables(run_id=RUN, manifest=tables.manifest, frames={**tables.frames, "attribution": stored})
    split = build_story(tables.split_by_case(["a1", "zz"])["a1"], "a1")
    whole = build_story(tables, "a1")
    assert (
        [a.outcomes.rows() for a in split.attempts]
        == [a.outcomes.rows() for a in whole.attempts]
        == [
            [("agent", "fail", "tool_arguments", "stored owner", "stored reason", None)],
            [
                (
                    "agent",
                    "fail",
                    "tool_arguments",
                    "agent tool calling (argument construction)",
                    "issue_refund.amount differs",
                    None,
                )
            ],
        ]
    )
    assert case_story_text(split) == case_story_text(whole)
    assert case_page_html(split) == case_page_html(whole)


def test_case_page_html_links_back_to_the_reports():
    story = build_story(_agent_tables(), "a1", trace_id="cand:a1#1")
    html = case_page_html(story)
    assert "<title>Case a1 — run cand (trace cand:a1#1)</title>" in html
    assert (
        '<body><nav class="reports"><a href="../rag.html">RAG lane report</a> · '
        '<a href="../agent.html">Agent lane report</a> · <a href="../gate.html">Gate report</a></nav><h1>'
    ) in html
    assert "<h3>Wrong arguments</h3>" in html
    assert "<td>issue_refund.amount</td><td>10</td><td>89</td>" in html
    titles = [s.title for s in case_sections(story)]
    assert titles == [
        "Case",
        "Verdict",
        "Attempt 1: cand:a1#1",
        "Tool calls",
        "Wrong arguments",
        "Milestones and outcome",
        "Other attempts",
        "Reliability",
    ]


def test_case_page_escapes_trace_text():
    tables = _rag_tables()
    traces = tables.frame("deid_traces").with_columns(pl.lit("<script>alert(1)</script>").alias("answer_text"))
    html = case_page_html(build_story(CaseTables(run_id=RUN, frames={**tables.frames, "deid_traces": traces}), "c1"))
    assert "<script>" not in html
    assert "answer: &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_field_diffs_compare_values_strictly():
    assert field_diffs(
        {"a": 1, "b": [1, 2], "c": {"d": True}, "s": "88171"},
        {"a": 1.0, "b": [1, 3], "c": {"d": 1}, "e": None, "s": 88171},
    ) == [("b[1]", "2", "3"), ("c.d", "true", "1"), ("e", ABSENT, "null"), ("s", '"88171"', "88171")]
    assert field_diffs([1, 2], [1, 2, 3]) == [("", "[1,2]", "[1,2,3]")]
    assert field_diffs({"x": {"y": 1}}, {"x": {"y": 1}}) == []


def test_call_argument_diffs():
    assert call_argument_diffs(
        'issue_refund({"amount":10,"order_id":"88171"})', 'issue_refund({"amount":89,"order_id":"88171"})'
    ) == [("issue_refund.amount", "10", "89")]
    assert call_argument_diffs('get_order({"id":1})', 'get_orders({"id":1})') == [
        ("get_orders (tool)", '"get_order"', '"get_orders"')
    ]
    # equal as values: the scorer's own rules decided, so the whole calls are shown
    assert call_argument_diffs('a({"x":10})', 'a({"x":10.0})') == [("a (arguments)", 'a({"x":10})', 'a({"x":10.0})')]
    assert call_argument_diffs("a(1)", "a(2)") == [("a", "1", "2")]


def test_small_formatters():
    assert split_call('get_order({"id":"7"})') == ("get_order", {"id": "7"})
    assert split_call("get_order(not json)") == ("get_order", "not json")
    assert split_call("no_brackets") == ("no_brackets", None)
    assert split_call(None) == (None, None)
    assert json_text({"b": 1, "a": "x"}) == '{"a":"x","b":1}' and json_text(ABSENT) == ABSENT
    assert [
        fmt(None),
        fmt(True),
        fmt(0.123456),
        fmt(0.123456, 2),
        fmt(float("nan")),
        fmt([1.0, False]),
        fmt([]),
        fmt(7),
    ] == ["–", "yes", "0.1235", "0.12", "nan", "1.0000, no", "–", "7"]
    assert [
        delta_cell(2.0, "n_steps"),
        delta_cell(-0.25, "recall_at_10"),
        delta_cell(0.0001, "cost_usd"),
        delta_cell(None, "x"),
    ] == ["+2", "-0.2500", "+0.000100", None]
    assert case_page_name("a/b c#1") == "a%2Fb%20c%231.html"


def test_reliability_explains_successes_that_failed_a_process_stage():
    # both attempts reach the verified world state but call the tools in the wrong order: pass@1 1.0, both failed
    ordered = [
        ("policy", "pass", None),
        ("tool_selection", "pass", None),
        ("tool_arguments", "pass", None),
        ("tool_order", "fail", "get_ticket came after get_order"),
        ("loop", "pass", None),
        ("recovery", "not_applicable", "no injected fault"),
        ("outcome", "pass", None),
    ]
    tables = _agent_tables()
    stages = pl.concat([_stages(TRACES[0], "a1", 1, "agent", ordered), _stages(TRACES[1], "a1", 2, "agent", ordered)])
    reliability = tables.frame("reliability").with_columns(
        n_success=pl.lit(2, pl.Int64), pass_at_1=pl.lit(1.0), pass_hat_1=pl.lit(1.0), pass_hat_2=pl.lit(1.0)
    )
    story = build_story(
        CaseTables(
            run_id=RUN,
            manifest=tables.manifest,
            frames={**tables.frames, "stage_results": stages, "reliability": reliability},
        ),
        "a1",
    )
    lines = case_story_text(story).splitlines()
    at = lines.index(
        "reliability (agent): 2 of 2 complete attempts succeeded (0 incomplete) · pass@1 1.0000 · "
        "pass^1 1.0000 pass^2 1.0000 · flaky no"
    )
    assert lines[at + 1] == (
        "  pass@1 and pass^k count an attempt a success when its verified outcome passed, not every "
        "stage: 2 of 2 attempt(s) failed a process stage (tool_order)"
    )
    section = {s.title: s for s in case_sections(story)}["Reliability"]
    assert section.table.select("lane", "n_success", "failed_process_stage", "pass_at_1").rows() == [
        ("agent", 2, 2, 1.0)
    ]
    assert section.table.columns.index("failed_process_stage") == section.table.columns.index("n_success") + 1
    # no note where nothing succeeded: pass@1 0.0 and the failed stages do not disagree
    plain = case_story_text(build_story(_agent_tables(), "a1"))
    assert "failed a process stage" not in plain
