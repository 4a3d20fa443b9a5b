"""Decision slices on hand-built cases: membership (tool risk precedence, several corpus families, tags), the cases of a
segment, and the per-slice rollups with hand-computed counts, rates and stage shares."""

import polars as pl
import pytest

from eval_pipeline.contracts.frames import CASES_SCHEMA
from eval_pipeline.scoring.attribution import OUTCOME_SCHEMA
from eval_pipeline.scoring.slices import segment_key, slice_cases, slice_membership, slice_rollups

COLUMNS = [
    "case_id",
    "lanes",
    "criticality",
    "required_doc_ids",
    "reference_tool_calls",
    "alternatives",
    "allowed_tools",
    "tags",
]
TOOLS = pl.DataFrame(
    {
        "name": ["get_order", "issue_refund", "set_status", "odd"],
        "read_only": [True, False, False, True],
        "destructive": [False, True, False, True],
    }
)
CORPUS = pl.DataFrame(
    {
        "doc_id": ["policy/refunds-2025", "policy/refunds-2024", "kb/x-1", "kb/y-1"],
        "family": ["policy/refunds", "policy/refunds", None, ""],
        "text": ["…"] * 4,
    }
)


def call(name: str) -> dict:
    return {"name": name, "args_json": "{}", "accepted_json": None, "optional": []}


def case(case_id, lanes=("agent",), criticality="normal", docs=(), reference=(), alternatives=(), allowed=None, **tags):
    return {
        "case_id": case_id,
        "lanes": list(lanes),
        "criticality": criticality,
        "required_doc_ids": list(docs),
        "reference_tool_calls": [call(n) for n in reference],
        "alternatives": [[call(n) for n in alt] for alt in alternatives],
        "allowed_tools": allowed,
        "tags": [{"name": k, "value": v} for k, v in sorted(tags.items())],
    }


def cases(*rows) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema={c: CASES_SCHEMA[c] for c in COLUMNS})


def members(frame: pl.DataFrame, dimension: str) -> dict:
    """case → sorted values of one dimension."""
    out = {}
    for case_id, value in frame.filter(pl.col("dimension") == dimension).select("case_id", "value").iter_rows():
        out.setdefault(case_id, []).append(value)
    return {k: sorted(v) for k, v in out.items()}


def test_tool_risk_takes_the_riskiest_tool_of_the_path_and_alternatives():
    frame = slice_membership(
        cases(
            case("destructive", reference=["get_order", "set_status"], alternatives=[["issue_refund"]]),
            case("write", reference=["get_order", "set_status"]),
            case("read_only", reference=["get_order"], alternatives=[["get_order"]]),
            # not in the registry: not known to be read-only
            case("unknown", reference=["get_order", "mystery"]),
            # flagged read-only and destructive: destructive wins
            case("flagged", reference=["odd"]),
            # nothing to match (goal_only without reference): the tools it may use
            case("goal_only", allowed=["get_order", "issue_refund"]),
            case("no_tools"),
            case("rag_only", lanes=("rag",), docs=["kb/x-1"], reference=["issue_refund"]),
        ),
        CORPUS,
        TOOLS,
    )
    assert members(frame, "tool_risk") == {
        "destructive": ["destructive"],
        "write": ["write"],
        "read_only": ["read_only"],
        "unknown": ["write"],
        "flagged": ["destructive"],
        "goal_only": ["destructive"],
        "no_tools": ["read_only"],
    }


def test_a_case_is_in_each_family_of_its_required_docs_once():
    frame = slice_membership(
        cases(
            # two versions of one family count once; no family or an empty one, or a doc the corpus lacks: the doc id
            case(
                "multi",
                lanes=("rag",),
                docs=["policy/refunds-2025", "policy/refunds-2024", "kb/x-1", "kb/y-1", "gone/doc-1"],
            ),
            case("refusal", lanes=("rag",)),
        ),
        CORPUS,
        TOOLS,
    )
    assert members(frame, "corpus_family") == {"multi": ["gone/doc-1", "kb/x-1", "kb/y-1", "policy/refunds"]}
    # without a corpus no family is known: the dimension is left out, never guessed (the agent lane reads no corpus)
    bare = slice_membership(cases(case("multi", lanes=("rag",), docs=["policy/refunds-2025"])), None, TOOLS)
    assert members(bare, "corpus_family") == {} and members(bare, "criticality") == {"multi": ["normal"]}


def test_criticality_and_each_tag_are_dimensions():
    frame = slice_membership(
        cases(case("a1", criticality="high", intent="refund", language="de"), case("a2")), CORPUS, TOOLS
    )
    assert frame.filter(pl.col("case_id") == "a1").select("dimension", "value").rows() == [
        ("criticality", "high"),
        ("tool_risk", "read_only"),
        ("tags.intent", "refund"),
        ("tags.language", "de"),
    ]
    assert members(frame, "criticality") == {"a1": ["high"], "a2": ["normal"]}
    # a frame without a tags column (a warehouse written before tags): no tag slice, the rest as before
    old = slice_membership(cases(case("a1", intent="refund")).drop("tags"), CORPUS, TOOLS)
    assert set(old["dimension"].to_list()) == {"criticality", "tool_risk"}


def test_a_segment_holds_the_cases_in_every_one_of_its_slices():
    frame = slice_membership(
        cases(
            case("a1", criticality="high", intent="refund"), case("a2", intent="refund"), case("a3", criticality="high")
        ),
        CORPUS,
        TOOLS,
    )
    assert slice_cases(frame, {"tags.intent": "refund"}) == ["a1", "a2"]
    assert slice_cases(frame, {"tags.intent": "refund", "criticality": "high"}) == ["a1"]
    assert slice_cases(frame, {"tags.intent": "cancel"}) == []
    assert segment_key({"tags.intent": "refund", "criticality": "high"}) == "criticality=high, tags.intent=refund"
    assert segment_key(None) is None


def _outcomes(*rows) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "run_id": "r",
                "trace_id": f"r:{c}#{n}",
                "case_id": c,
                "attempt": n,
                "lane": lane,
                "outcome": outcome,
                "first_failing_stage": stage,
                "reason": None,
                "owner": None,
                "hazard": None,
            }
            for c, n, lane, outcome, stage in rows
        ],
        schema=OUTCOME_SCHEMA,
    )


OUTCOMES = _outcomes(
    ("a1", 1, "agent", "fail", "policy"),
    ("a1", 2, "agent", "fail", "policy"),
    ("a1", 3, "agent", "pass", None),
    ("a2", 1, "agent", "pass", None),
    ("a2", 2, "agent", "incomplete", None),
    ("a3", 1, "agent", "fail", "tool_order"),
    ("a3", 2, "agent", "fail", "tool_selection"),
    # another lane's trace is not the agent lane's
    ("a1", 1, "rag", "fail", "retrieval"),
)
RELIABILITY = pl.DataFrame({"case_id": ["a1", "a2", "a3"], "pass_at_1": [1 / 3, 1.0, 0.0]})
SLICE_CASES = cases(
    case("a1", criticality="high", reference=["issue_refund"], intent="refund"),
    case("a2", reference=["set_status"], intent="refund"),
    case("a3", reference=["get_order"], intent="status"),
)


def test_slice_rollup_counts_rates_and_failed_cases():
    table, _ = slice_rollups(OUTCOMES, slice_membership(SLICE_CASES, CORPUS, TOOLS), RELIABILITY, "agent")
    rows = {r["slice"]: r for r in table.iter_rows(named=True)}
    assert table["slice"].to_list() == [
        "criticality=high",
        "criticality=normal",
        "tool_risk=destructive",
        "tool_risk=read_only",
        "tool_risk=write",
        "tags.intent=refund",
        "tags.intent=status",
    ]
    pick = (
        "n_cases",
        "n_traces",
        "traces_passed",
        "traces_failed",
        "traces_incomplete",
        "traces_not_applicable",
        "pass_at_1_cases",
        "failed_case_ids",
        "top_failing_stage",
    )
    # a1: 3 traces, 1 passed, 2 failed at policy; pass@1 1/3
    assert tuple(rows["criticality=high"][c] for c in pick) == (1, 3, 1, 2, 0, 0, 1, ["a1"], "policy")
    assert rows["criticality=high"]["pass_rate"] == pytest.approx(1 / 3) and rows["criticality=high"][
        "pass_at_1"
    ] == pytest.approx(1 / 3)
    # a2 + a3: 4 traces, 1 passed, 2 failed, 1 incomplete (out of the rate): 1/3; pass@1 (1.0 + 0.0) / 2;
    # tool_selection and tool_order fail once each: the earlier stage is the top one
    assert tuple(rows["criticality=normal"][c] for c in pick) == (2, 4, 1, 2, 1, 0, 2, ["a3"], "tool_selection")
    assert (
        rows["criticality=normal"]["pass_rate"] == pytest.approx(1 / 3)
        and rows["criticality=normal"]["pass_at_1"] == 0.5
    )
    # a2 alone: nothing failed, the incomplete trace is not a failure
    assert tuple(rows["tool_risk=write"][c] for c in pick) == (1, 2, 1, 0, 1, 0, 1, [], None)
    assert rows["tool_risk=write"]["pass_rate"] == 1.0
    # a1 + a2: 5 traces, 2 passed, 2 failed: 0.5; pass@1 (1/3 + 1) / 2
    assert rows["tags.intent=refund"]["pass_rate"] == 0.5 and rows["tags.intent=refund"]["pass_at_1"] == pytest.approx(
        2 / 3
    )
    assert rows["tool_risk=read_only"]["pass_rate"] == 0.0 and rows["tool_risk=read_only"]["failed_case_ids"] == ["a3"]
    assert set(table["lane"].to_list()) == {"agent"}


def test_slice_attribution_shares_sum_to_one_per_slice():
    _, stages = slice_rollups(OUTCOMES, slice_membership(SLICE_CASES, CORPUS, TOOLS), RELIABILITY, "agent")
    normal = stages.filter(pl.col("slice") == "criticality=normal").filter(pl.col("failures") > 0)
    assert normal.select("stage", "failures", "share").rows() == [("tool_selection", 1, 0.5), ("tool_order", 1, 0.5)]
    # every stage of the lane is listed per slice, in stage order
    assert stages.filter(pl.col("slice") == "criticality=high")["stage"].to_list() == [
        "policy",
        "tool_selection",
        "tool_arguments",
        "tool_order",
        "loop",
        "recovery",
        "outcome",
    ]
    sums = stages.filter(pl.col("share").is_not_null()).group_by("slice").agg(pl.col("share").sum())
    assert sorted(sums["slice"].to_list()) == [
        "criticality=high",
        "criticality=normal",
        "tags.intent=refund",
        "tags.intent=status",
        "tool_risk=destructive",
        "tool_risk=read_only",
    ]
    assert sums["share"].to_list() == pytest.approx([1.0] * sums.height)
    # a slice without failures has no share, as the lane rollup
    assert stages.filter(pl.col("slice") == "tool_risk=write")["share"].is_null().all()


def test_a_lane_without_traces_of_any_slice_has_empty_rollups():
    table, stages = slice_rollups(OUTCOMES, slice_membership(SLICE_CASES, CORPUS, TOOLS), RELIABILITY, "rag_other")
    assert table.height == 0 and stages.height == 0 and "failed_case_ids" in table.columns
