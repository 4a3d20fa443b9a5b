"""tool_scores and tool_call_diffs on hand-written trajectories (SPEC §5 "Agent tool calls", §11 "Agent stages")."""

from __future__ import annotations

import json

import jsonschema
import pytest

from eval_pipeline.contracts import frames
from eval_pipeline.scoring.tools import score_tools
from eval_pipeline.scoring.tools.arguments import fast_check
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

GET_KEY = 'get_order({"order_id":"88131"})'
REFUND_KEY = 'issue_refund({"amount":49,"order_id":"88131"})'
STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop")


def stages(r: dict) -> dict[str, str]:
    return {s: r[f"{s}_stage"] for s in STAGES}


def test_reference_path_followed_exactly_passes_every_stage(build, score):
    c = build.call
    ts, _ = score(
        [
            build.trace(
                [c(**build.GET), c("issue_refund", {"order_id": "88131", "amount": 49.0}), build.finish("Done.")]
            )
        ],
        [build.case()],
    )
    r = build.row(ts)
    # 2 calls, 2 path calls, both keys match (49.0 is canonical 49): precision = recall = f1 = 2/2
    assert (r["n_calls"], r["n_path_calls"], r["matched_path"]) == (2, 2, "reference")
    assert (r["tool_call_precision"], r["tool_call_recall"], r["tool_call_f1"]) == (1.0, 1.0, 1.0)
    assert (r["strict_order_accuracy"], r["args_valid_rate"], r["unnecessary_call_rate"]) == (1.0, 1.0, 0.0)
    assert (r["missing_calls"], r["unexpected_calls"], r["order_violations"]) == ([], [], [])
    assert (r["loop_detected"], r["policy_violation"], r["adapter_divergence"]) == (False, False, None)
    assert r["status"] == "scored" and r["reason"] is None
    assert stages(r) == dict.fromkeys(STAGES, "pass")
    assert all(r[f"{s}_reason"] is None for s in STAGES)


def test_multiset_match_keeps_duplicates(build, score):
    c = build.call
    reference = [build.GET, build.GET, build.REFUND]
    actual = [c(**build.GET), c(**build.REFUND), c(**build.REFUND), c(**build.REFUND)]
    ts, _ = score([build.trace(actual)], [build.case(reference_tool_calls=reference, tool_match="unordered")])
    r = build.row(ts)
    # matched = min(get: 1 actual, 2 ref) + min(refund: 3 actual, 1 ref) = 1 + 1 = 2
    # precision 2/4, recall 2/3, f1 = 2*2/(4+3) = 4/7
    assert r["tool_call_precision"] == 0.5
    assert r["tool_call_recall"] == pytest.approx(2 / 3)
    assert r["tool_call_f1"] == pytest.approx(4 / 7)
    assert r["missing_calls"] == [GET_KEY]
    assert r["unexpected_calls"] == [REFUND_KEY, REFUND_KEY]


def test_alternative_with_higher_f1_becomes_the_matched_path(build, score):
    c = build.call
    ticket = {"name": "get_ticket", "args": {"ticket_id": "T-1042"}}
    alternatives = [[{"name": "verify_identity", "args": {}}, build.REFUND], [ticket, build.REFUND]]
    ts, diffs = score([build.trace([c(**ticket), c(**build.REFUND)])], [build.case(alternatives=alternatives)])
    r = build.row(ts)
    # reference: matched 1 of 2 → f1 0.5; alternative 1: 1 → 0.5; alternative 2: 2 → 1.0
    assert r["matched_path"] == "alternative:2"
    assert (r["tool_call_f1"], r["strict_order_accuracy"], r["missing_calls"]) == (1.0, 1.0, [])
    assert r["tool_selection_stage"] == "pass" and r["tool_order_stage"] == "pass"
    assert diffs["matched_path"].unique().to_list() == ["alternative:2"]


def test_f1_tie_between_reference_and_alternative_keeps_the_reference(build, score):
    c = build.call
    alternatives = [[build.GET, {"name": "issue_refund", "args": {"order_id": "88131", "amount": 50}}]]
    ts, _ = score([build.trace([c(**build.GET)])], [build.case(alternatives=alternatives)])
    r = build.row(ts)
    # both paths share get_order only: f1 = 2*1/(1+2) = 2/3 for each → the reference wins the tie
    assert r["matched_path"] == "reference"
    assert r["tool_call_f1"] == pytest.approx(2 / 3)
    assert r["missing_calls"] == [REFUND_KEY]


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        # reference [get_order, verify_identity, issue_refund]; position 0 equal, 1: refund vs verify → 1/max(2,3)
        (["get", "refund"], 1 / 3),
        # all three equal, the fourth has no reference position → 3/max(4,3)
        (["get", "verify", "refund", "get"], 3 / 4),
        # nothing called: 0/max(0,3)
        ([], 0.0),
    ],
)
def test_strict_order_accuracy_over_the_longer_list(build, score, actual, expected):
    c = build.call
    verify = {"name": "verify_identity", "args": {}}
    named = {"get": c(**build.GET), "verify": c(**verify), "refund": c(**build.REFUND)}
    ts, _ = score(
        [build.trace([named[n] for n in actual])], [build.case(reference_tool_calls=[build.GET, verify, build.REFUND])]
    )
    assert build.row(ts)["strict_order_accuracy"] == pytest.approx(expected)


def test_dependency_events_name_each_violated_edge_once(build, score):
    c = build.call
    dependencies = [["get_order", "issue_refund"], ["verify_identity", "issue_refund"], ["get_ticket", "send_email"]]
    actual = [c(**build.REFUND), c(**build.GET), c(**build.REFUND), c("verify_identity", {})]
    ts, _ = score([build.trace(actual)], [build.case(tool_match="unordered", dependencies=dependencies)])
    r = build.row(ts)
    # first issue_refund is call 1: get_order (call 2) and verify_identity (call 4) come later → two events;
    # the second refund adds none; send_email is never called → no event for the third edge
    assert r["order_violations"] == ["get_order->issue_refund", "verify_identity->issue_refund"]
    assert r["tool_order_stage"] == "fail"
    assert r["tool_order_reason"] == "dependency events: get_order->issue_refund, verify_identity->issue_refund"


def test_path_order_is_checked_for_strict_order_only(build, score):
    c = build.call
    swapped = [build.trace([c(**build.REFUND), c(**build.GET)])]
    strict, _ = score(swapped, [build.case(tool_match="strict_order")])
    unordered, _ = score(swapped, [build.case(tool_match="unordered")])
    unordered_deps, _ = score(
        swapped, [build.case(tool_match="unordered", dependencies=[["get_order", "issue_refund"]])]
    )
    r = build.row(strict)
    assert r["tool_order_stage"] == "fail"
    assert r["tool_order_reason"] == f"path order: {GET_KEY} (path call 1) came after path call 2"
    # same calls, same multiset: f1 1.0 in every mode, strict position accuracy 0/2
    assert (r["tool_call_f1"], r["strict_order_accuracy"]) == (1.0, 0.0)
    assert build.row(unordered)["tool_order_stage"] == "not_applicable"
    assert build.row(unordered)["tool_order_reason"] == "tool_match unordered and no dependencies declared"
    assert build.row(unordered_deps)["tool_order_stage"] == "fail"
    assert build.row(unordered_deps)["order_violations"] == ["get_order->issue_refund"]


def test_retry_and_recheck_do_not_break_strict_order(build, score):
    c = build.call
    bad_refund = c("issue_refund", {"order_id": "88131", "amount": 50})
    ts, _ = score([build.trace([c(**build.GET), bad_refund, c(**build.REFUND), c(**build.GET)])], [build.case()])
    r = build.row(ts)
    # matched calls (get #1 → path 1, refund #3 → path 2) keep path order; the wrong-args refund is an argument failure
    assert r["tool_order_stage"] == "pass"
    assert r["tool_arguments_stage"] == "fail"
    assert r["unnecessary_call_rate"] == 0.25  # the second get_order repeats an ok, non-empty call: 1/4


def test_unnecessary_calls_follow_section_11(build, score):
    c = build.call
    steps = [
        c(**build.GET, result={"order": "88131"}),  # 1 first call
        c(**build.GET),  # 2 read-only repeat of an ok, non-empty call → unnecessary
        c("get_ticket", {"id": "9"}, result={}),  # 3 ok but empty result
        c("get_ticket", {"id": "9"}),  # 4 repeat of an empty result → needed
        c("get_order", {"order_id": "2"}, status="error"),  # 5 failed
        c("get_order", {"order_id": "2"}),  # 6 repeat of a failed call → needed
        c(**build.REFUND),  # 7
        c(**build.REFUND),  # 8 repeat, but not read-only → not counted
    ]
    ts, _ = score([build.trace(steps)], [build.case(tool_match="unordered")])
    r = build.row(ts)
    assert r["n_calls"] == 8
    assert r["unnecessary_call_rate"] == 1 / 8
    assert r["loop_detected"] is False


def test_loop_detected_at_three_identical_keys(build, score):
    c = build.call
    three = build.trace([c(**build.GET), c(**build.GET), c(**build.GET), c(**build.REFUND)], trace_id="three")
    two = build.trace([c(**build.GET), c(**build.GET), c(**build.REFUND)], trace_id="two", attempt=2)
    ts, _ = score([three, two], [build.case()])
    assert build.row(ts, "three")["loop_detected"] is True
    assert build.row(ts, "three")["loop_calls"] == [f"{GET_KEY} x3"]
    assert build.row(ts, "three")["loop_stage"] == "fail"
    assert build.row(ts, "three")["loop_reason"] == f"loop_detected: {GET_KEY} x3"
    assert build.row(ts, "two")["loop_detected"] is False
    assert build.row(ts, "two")["loop_stage"] == "pass"


def test_args_valid_rate_checks_schema_and_reference_values(build, score):
    c = build.call
    steps = [
        c("get_order", {"order_id": 88131}),  # schema: order_id must be a string
        c("issue_refund", {"order_id": "88131", "amount": 50}),  # schema ok, matches no reference refund
        c("issue_refund", {"order_id": "88131", "amount": 49.0}),  # valid: canonical 49 equals the reference
        c("send_email", {"to": "c-771"}),  # not a path tool: schema only → valid
        c("frobnicate", {}),  # not in the registry → invalid
    ]
    ts, _ = score([build.trace(steps)], [build.case(tool_match="unordered", allowed_tools=None)])
    r = build.row(ts)
    assert r["args_valid_rate"] == 2 / 5
    assert r["invalid_calls"] == [
        "get_order({\"order_id\":88131}) (schema: order_id: 88131 is not of type 'string')",
        'issue_refund({"amount":50,"order_id":"88131"}) '
        "(args match no reference call of issue_refund: amount 50, expected 49)",
        "frobnicate({}) (tool frobnicate is not in the tool registry)",
    ]
    assert r["tool_arguments_stage"] == "fail"
    assert r["tool_arguments_reason"].startswith("invalid calls: get_order(")
    # selection counts calls per tool: an unknown tool, a second refund (a surplus) and a write outside the path
    assert r["tool_selection_stage"] == "fail"
    assert r["tool_selection_reason"] == (
        "unknown_tool: frobnicate (not in the tool registry); surplus calls: issue_refund (2 made, the path holds 1); "
        "non-read-only tools outside the path called: send_email"
    )


def test_args_valid_rate_is_null_without_calls(build, score):
    ts, _ = score([build.trace([build.finish("Nothing to do.")])], [build.case()])
    r = build.row(ts)
    assert (r["args_valid_rate"], r["unnecessary_call_rate"], r["tool_call_precision"]) == (None, None, None)
    assert (r["tool_call_recall"], r["tool_call_f1"]) == (0.0, 0.0)
    # get_order is read-only: a read-only path tool is optional (SPEC §11)
    assert r["tool_selection_reason"] == "path tools never called: issue_refund"


def test_tool_selection_tolerates_extra_read_only_calls_only(build, score):
    c = build.call
    extra_read = build.trace([c("get_ticket", {"id": "1"}), c(**build.GET), c(**build.REFUND)], trace_id="read")
    extra_write = build.trace([c(**build.GET), c(**build.REFUND), c("send_email", {})], trace_id="write", attempt=2)
    missing = build.trace([c(**build.GET)], trace_id="missing", attempt=3)
    ts, _ = score([extra_read, extra_write, missing], [build.case()])
    assert build.row(ts, "read")["tool_selection_stage"] == "pass"
    assert build.row(ts, "write")["tool_selection_stage"] == "fail"
    assert build.row(ts, "write")["tool_selection_reason"] == "non-read-only tools outside the path called: send_email"
    assert build.row(ts, "missing")["tool_selection_reason"] == "path tools never called: issue_refund"


def test_policy_allowed_forbidden_and_scope(build, score):
    c = build.call
    scope = {"order_id": ["88131"], "customer_id": "c-771"}
    allowed = ["get_ticket", "get_order", "verify_identity", "issue_refund", "send_email", "escalate_to_human"]
    cases = [build.case(scope=scope, allowed_tools=allowed)]
    traces = [
        build.trace([c(**build.GET), c(**build.REFUND)], trace_id="clean"),
        build.trace(
            [c(**build.GET), c("close_account", {"customer_id": "c-771"}), c(**build.REFUND)],
            trace_id="forbidden",
            attempt=2,
        ),
        build.trace([c(**build.GET), c("set_status", {}), c(**build.REFUND)], trace_id="outside", attempt=3),
        build.trace(
            [c("get_order", {"order_id": "99999"}), c("send_email", {"to": {"customer_id": "c-9"}}), c(**build.REFUND)],
            trace_id="scope",
            attempt=4,
        ),
    ]
    ts, _ = score(traces, cases)
    assert (build.row(ts, "clean")["policy_violation"], build.row(ts, "clean")["policy_stage"]) == (False, "pass")
    forbidden = build.row(ts, "forbidden")
    # close_account is both outside allowed_tools and forbidden: two reasons, one violation
    assert forbidden["policy_violations"] == [
        "tool close_account is not in allowed_tools",
        "tool close_account is forbidden",
    ]
    assert forbidden["policy_stage"] == "fail"
    assert (
        forbidden["policy_reason"]
        == "policy_violation: tool close_account is not in allowed_tools; tool close_account is forbidden"
    )
    assert build.row(ts, "outside")["policy_violations"] == ["tool set_status is not in allowed_tools"]
    # scope: a top-level order_id and a nested customer_id with values the case does not allow
    assert build.row(ts, "scope")["policy_violations"] == [
        'scope: get_order called with order_id="99999" outside the case scope ("88131")',
        'scope: send_email called with customer_id="c-9" outside the case scope ("c-771")',
    ]


def test_goal_only_scores_the_outcome_only(build, score):
    c = build.call
    steps = [
        c(**build.REFUND),
        c("issue_refund", {"order_id": 1}),
        c("close_account", {}),
        c(**build.GET),
        c(**build.GET),
        c(**build.GET),
    ]
    ts, _ = score(
        [build.trace(steps)], [build.case(tool_match="goal_only", dependencies=[["get_order", "issue_refund"]])]
    )
    r = build.row(ts)
    assert r["tool_selection_stage"] == r["tool_arguments_stage"] == r["tool_order_stage"] == "not_applicable"
    assert r["tool_selection_reason"] == "tool_match goal_only: scored on the outcome only"
    # policy and loop still apply, and the metrics are still reported
    assert (r["policy_stage"], r["loop_stage"]) == ("fail", "fail")
    assert r["order_violations"] == ["get_order->issue_refund"]
    assert r["tool_call_f1"] == pytest.approx(2 * 2 / (6 + 2))


def test_failed_and_timed_out_calls_are_calls(build, score):
    c = build.call
    steps = [c(**build.GET, status="timeout", result={}), c(**build.REFUND, status="error", error="500")]
    ts, _ = score([build.trace(steps)], [build.case()])
    r = build.row(ts)
    assert (r["n_calls"], r["tool_call_f1"], r["args_valid_rate"]) == (2, 1.0, 1.0)


@pytest.mark.parametrize(
    ("evaluated", "dispatched", "first_difference"),
    [
        # the runtime dispatched cancel_subscription, the adapter handed the evaluator close_account
        (
            ("close_account", {"order_id": "88131"}),
            {"tool": "cancel_subscription", "args": {"order_id": "88131"}},
            "step 1: dispatched cancel_subscription, evaluated close_account (dispatched 2 calls, evaluated 2)",
        ),
        (
            ("get_order", {"order_id": "88131"}),
            {"tool": "get_order", "args": {"order_id": "88132"}},
            'step 1: get_order dispatched with {"order_id":"88132"}, evaluated with {"order_id":"88131"} '
            "(dispatched 2 calls, evaluated 2)",
        ),
        (
            ("get_order", {"order_id": "88131"}),
            None,
            f"step 1: evaluated call {GET_KEY} has no dispatch record (dispatched 1 calls, evaluated 2)",
        ),
    ],
)
def test_adapter_divergence_makes_the_trace_incomplete(build, score, evaluated, dispatched, first_difference):
    first = build.call(*evaluated)
    if dispatched is not None:
        first["dispatched"] = dispatched
    second = {**build.call(**build.REFUND), "dispatched": {"tool": "issue_refund", "args": build.REFUND["args"]}}
    ts, _ = score([build.trace([first, second])], [build.case()])
    r = build.row(ts)
    assert r["adapter_divergence"] == first_difference
    assert r["status"] == "incomplete"
    assert r["reason"] == f"adapter_divergence: {first_difference}"
    assert stages(r) == dict.fromkeys(STAGES, "incomplete")
    assert all(r[f"{s}_reason"] == r["reason"] for s in STAGES)
    # the agent is not scored on calls the harness mangled
    assert r["tool_call_f1"] is None and r["policy_violation"] is None


def test_dispatch_without_an_evaluated_call_is_a_count_divergence(build, score):
    c = build.call
    steps = [
        {**c(**build.GET), "dispatched": {"tool": "get_order", "args": {"order_id": "88131"}}},
        {
            "kind": "message",
            "content": "Refunding now.",
            "dispatched": {"tool": "issue_refund", "args": build.REFUND["args"]},
        },
    ]
    ts, _ = score([build.trace(steps)], [build.case()])
    assert build.row(ts)["adapter_divergence"] == (
        f"step 2: dispatched {REFUND_KEY} was not evaluated as a tool call (dispatched 2 calls, evaluated 1)"
    )


def test_without_dispatch_records_there_is_nothing_to_compare(build, score):
    c = build.call
    ts, _ = score([build.trace([c(**build.GET), c(**build.REFUND)])], [build.case()])
    assert build.row(ts)["adapter_divergence"] is None


def test_harness_error_and_missing_steps_are_incomplete(build, score):
    c = build.call
    traces = [
        build.trace([c(**build.GET)], trace_id="error", status="error", error="sandbox crashed"),
        build.trace([], trace_id="timeout", attempt=2, status="timeout", error=None),
        build.trace(None, trace_id="nosteps", attempt=3),
    ]
    ts, _ = score(traces, [build.case()])
    assert build.row(ts, "error")["reason"] == "harness status error: sandbox crashed"
    assert build.row(ts, "timeout")["reason"] == "harness status timeout: no error message"
    assert build.row(ts, "nosteps")["reason"] == "trace has no steps: the agent lane needs the trajectory"
    for trace_id in ("error", "timeout", "nosteps"):
        assert stages(build.row(ts, trace_id)) == dict.fromkeys(STAGES, "incomplete")


def test_only_agent_lane_traces_get_rows(build, score):
    rag_case = {"case_id": "rag-1", "lanes": ["rag"], "required_doc_ids": ["policy/refunds-2025"]}
    traces = [build.trace([build.call(**build.GET)]), {"trace_id": "r1", "case_id": "rag-1", "attempt": 1}]
    ts, diffs = score(traces, [build.case(), rag_case])
    assert ts["trace_id"].to_list() == ["t1"]
    assert set(diffs["trace_id"].to_list()) == {"t1"}


def test_tool_call_diffs_show_expected_and_actual_calls(build, score):
    c = build.call
    steps = [
        c("issue_refund", {"order_id": "88131", "amount": 50}, status="error"),
        c(**build.GET),
        c("get_ticket", {"id": "1"}),
    ]
    reference = [build.GET, build.REFUND, {"name": "send_email", "args": {"to": "c-771"}}]
    _, diffs = score([build.trace(steps)], [build.case(reference_tool_calls=reference)])
    rows = diffs.select(
        "position", "actual_index", "expected_index", "expected_call", "actual_call", "actual_status", "match"
    ).rows()
    # actual calls in order (the wrong refund pairs with the missing reference refund), then path calls never made
    assert rows == [
        (1, 1, 2, REFUND_KEY, 'issue_refund({"amount":50,"order_id":"88131"})', "error", "args_differ"),
        (2, 2, 1, GET_KEY, GET_KEY, "ok", "same"),
        (3, 3, None, None, 'get_ticket({"id":"1"})', "ok", "unexpected"),
        (4, None, 3, 'send_email({"to":"c-771"})', None, None, "missing"),
    ]
    assert diffs["matched_path"].to_list() == ["reference"] * 4


def test_empty_registry_checks_reference_values_only(build):
    traces = traces_frame_from_records(
        [
            build.trace(
                [build.call("get_order", {"order_id": 1}), build.call("anything", {"x": 1}), build.call(**build.REFUND)]
            )
        ]
    )
    ts, _ = score_tools(
        traces, cases_frame_from_records([build.case(tool_match="unordered")]), frames.empty(frames.TOOLS_SCHEMA)
    )
    # no schemas: get_order({order_id: 1}) fails only its reference value, `anything` needs nothing, the refund matches
    assert build.row(ts)["args_valid_rate"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "instance",
    [
        {"order_id": "1", "amount": 2},
        {"order_id": "1", "amount": 2.5},
        {"order_id": "1"},
        {"order_id": 1, "amount": 2},
        {"order_id": "1", "amount": True},
        {"order_id": "1", "amount": 2, "note": "x"},
        {"order_id": "1", "amount": None},
        {"order_id": "1", "amount": 2, "cabin": "economy"},
        {"order_id": "1", "amount": 2, "cabin": "first"},
        [],
        "x",
    ],
)
@pytest.mark.parametrize("extra", [False, True])
def test_fast_schema_check_never_accepts_what_jsonschema_rejects(instance, extra):
    schema = {
        "type": "object",
        "required": ["order_id", "amount"],
        "additionalProperties": extra,
        "properties": {
            "order_id": {"type": "string"},
            "amount": {"type": ["number", "null"]},
            "cabin": {"type": "string", "enum": ["economy", "business"]},
            "note": {"type": "string"},
        },
    }
    fast = fast_check(schema)
    assert fast is not None
    assert fast(json.loads(json.dumps(instance))) == jsonschema.Draft202012Validator(schema).is_valid(instance)


BOUNDED = {
    "type": "object",
    "required": ["order_id", "amount"],
    "additionalProperties": False,
    "properties": {
        "order_id": {"type": "string", "pattern": "^[0-9]{5}$", "description": "five digits"},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
        "count": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
        "note": {"type": "string", "minLength": 1, "maxLength": 3},
        "any": {"minimum": 2, "pattern": "^a", "minLength": 2},
        "reason": {"type": "string", "enum": ["damaged", "late"]},
        "address": {
            "type": "object",
            "required": ["country"],
            "additionalProperties": False,
            "properties": {
                "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
                "line1": {"type": "string", "minLength": 1},
            },
        },
    },
}


@pytest.mark.parametrize(
    "instance",
    [
        {"order_id": "12345", "amount": 10},
        {"order_id": "12345", "amount": 0},
        {"order_id": "12345", "amount": 500.0},
        {"order_id": "12345", "amount": 500.5},
        {"order_id": "12345\n", "amount": 1},
        {"order_id": "1234", "amount": 1},
        {"order_id": "١٢٣٤٥", "amount": 1},
        {"order_id": 12345, "amount": 1},
        {"order_id": "12345", "amount": True},
        {"order_id": "12345", "amount": 1, "count": 1},
        {"order_id": "12345", "amount": 1, "count": 10},
        {"order_id": "12345", "amount": 1, "count": 2.0},
        {"order_id": "12345", "amount": 1, "count": 2.5},
        {"order_id": "12345", "amount": 1, "count": 0},
        {"order_id": "12345", "amount": 1, "note": ""},
        {"order_id": "12345", "amount": 1, "note": "abc"},
        {"order_id": "12345", "amount": 1, "note": "abcd"},
        {"order_id": "12345", "amount": 1, "note": "ééé"},
        {"order_id": "12345", "amount": 1, "any": 1},
        {"order_id": "12345", "amount": 1, "any": 3},
        {"order_id": "12345", "amount": 1, "any": "ab"},
        {"order_id": "12345", "amount": 1, "any": "b"},
        {"order_id": "12345", "amount": 1, "any": [1]},
        {"order_id": "12345", "amount": 1, "any": None},
        {"order_id": "12345", "amount": 1, "reason": "late"},
        {"order_id": "12345", "amount": 1, "reason": "lost"},
        {"order_id": "12345", "amount": 1, "reason": ["late"]},
        {"order_id": "12345", "amount": 1, "address": {"country": "DE"}},
        {"order_id": "12345", "amount": 1, "address": {"country": "de"}},
        {"order_id": "12345", "amount": 1, "address": {"country": "DE", "line1": ""}},
        {"order_id": "12345", "amount": 1, "address": {"line1": "x"}},
        {"order_id": "12345", "amount": 1, "address": {"country": "DE", "zip": "1"}},
        {"order_id": "12345", "amount": 1, "address": "DE"},
        {"order_id": "12345", "amount": 1, "extra": 1},
    ],
)
def test_fast_schema_check_reads_patterns_lengths_bounds_and_nested_objects_as_jsonschema_does(instance):
    fast = fast_check(BOUNDED)
    assert fast is not None
    assert fast(json.loads(json.dumps(instance))) == jsonschema.Draft202012Validator(BOUNDED).is_valid(instance)


def test_fast_schema_check_declines_schemas_it_does_not_cover():
    assert fast_check({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}) is None
    assert fast_check({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}) is None
    assert fast_check({"type": "object", "properties": {"n": {"type": "integer", "minimum": "0"}}}) is None
    assert fast_check({"type": "object", "properties": {"a": {"type": "object", "minProperties": 1}}}) is None
    assert fast_check({"type": "object", "properties": {"a": {"type": ["object", "null"], "properties": {}}}}) is None
    assert fast_check({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"}) is None
    assert fast_check({"type": "object", "oneOf": [{"required": ["a"]}]}) is None
