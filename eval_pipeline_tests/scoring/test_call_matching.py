"""Call matching by multiset with per-argument accepted values and declared value rules (SPEC §11, issue 13)."""

from __future__ import annotations

import polars as pl
import pytest

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import ToolRegistry
from eval_pipeline.scoring.tools import score_tools
from eval_pipeline.scoring.values import (
    Rules,
    call_matches,
    normalized_text,
    resolve_rules,
    strict_type_error,
    values_equal,
)
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

WEATHER_ARGS = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"type": "string"},
        "days": {"type": "integer"},
        "ratio": {"type": "number"},
    },
    "required": ["location"],
    "additionalProperties": False,
}
HOTEL_ARGS = {
    "type": "object",
    "properties": {"hotel": {"type": "string"}, "nights": {"type": "integer"}},
    "required": ["hotel"],
}
SUMMARY_ARGS = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}


def registry(value_rules=None, tool_rules=None) -> pl.DataFrame:
    """Weather and hotel tools (writes, as BFCL treats every call), a read-only lookup and a hand-off."""
    tools = [
        {"name": "get_current_weather", "read_only": False, "args": WEATHER_ARGS},
        {
            "name": "book_hotel",
            "read_only": False,
            "args": HOTEL_ARGS,
            **({"value_rules": tool_rules} if tool_rules else {}),
        },
        {
            "name": "get_reservation",
            "read_only": True,
            "args": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
        {
            "name": "transfer_to_human_agents",
            "read_only": False,
            "args": SUMMARY_ARGS,
            "value_rules": {"args": {"summary": "any"}},
        },
    ]
    spec = {"environment_version": "e", "tools": tools, **({"value_rules": value_rules} if value_rules else {})}
    return frames.tools_frame_from_registry(ToolRegistry.model_validate(spec))


def case(calls, **fields):
    return {"case_id": "c1", "lanes": ["agent"], "reference_tool_calls": calls, "tool_match": "unordered", **fields}


def call(tool, args=None, **extra):
    return {"kind": "tool_call", "tool": tool, "args": args or {}, "status": "ok", "result": {"ok": True}, **extra}


def score(calls, cases_calls, tools=None, trace_extra=None, **case_fields):
    steps = [{"index": i, **c} for i, c in enumerate(calls, start=1)]
    trace = {"trace_id": "t1", "case_id": "c1", "attempt": 1, "steps": steps, **(trace_extra or {})}
    ts, diffs = score_tools(
        traces_frame_from_records([trace]),
        cases_frame_from_records([case(cases_calls, **case_fields)]),
        tools if tools is not None else registry(),
    )
    return ts.to_dicts()[0], diffs


STAGES = ("policy_stage", "tool_selection_stage", "tool_arguments_stage", "tool_order_stage", "loop_stage")


def stages(row):
    return {s: row[s] for s in STAGES if row[s] != "not_applicable"}


def all_pass(row):
    return all(v == "pass" for v in stages(row).values())


BOSTON = {
    "name": "get_current_weather",
    "args": {"location": "Boston, MA"},
    "accepted": {"location": ["Boston, MA", "Boston"], "unit": ["", "fahrenheit"]},
    "optional": ["unit"],
}
SF = {
    "name": "get_current_weather",
    "args": {"location": "San Francisco, CA"},
    "accepted": {"location": ["San Francisco, CA"], "unit": ["", "fahrenheit"]},
    "optional": ["unit"],
}


# ---------------------------------------------------------------- pure value rules


def test_normalized_text_is_bfcl_standardisation():
    assert normalized_text("San Francisco, CA") == "sanfranciscoca"
    assert normalized_text("HILTON") == normalized_text("Hilton")
    assert normalized_text("it's 2024-01-02 a_b*c^d/e.f") == 'it"s20240102abcdef'


@pytest.mark.parametrize(
    ("actual", "expected", "rule", "equal"),
    [
        (49, 49.0, "exact", True),
        (True, 1, "exact", False),
        ("Hilton", "HILTON", "exact", False),
        ("Hilton", "HILTON", "normalized", True),
        (["New York", "LA"], ["new york", "la"], "normalized", True),
        (["a"], ["a", "b"], "normalized", False),
        ({"city": "Paris"}, {"city": "PARIS"}, "normalized", True),
        ({"City": "Paris"}, {"city": "Paris"}, "normalized", False),
        (49.004, 49.0, "numeric", False),
        (None, "", "exact", False),
        ("anything at all", "the reference summary", "any", True),
    ],
)
def test_values_equal_per_rule(actual, expected, rule, equal):
    assert values_equal(actual, expected, rule) is equal


def test_numeric_tolerance_is_absolute():
    assert values_equal(49.004, 49.0, "numeric", 0.005)
    assert not values_equal(49.006, 49.0, "numeric", 0.005)


def test_call_matches_accepted_values_optional_and_unexpected_arguments():
    rules = Rules()
    accepted = {"location": ["Boston, MA", "Boston"], "unit": ["", "fahrenheit"]}
    assert call_matches({"location": "Boston"}, {"location": "Boston, MA"}, accepted, ["unit"], rules)
    assert call_matches({"location": "Boston", "unit": "fahrenheit"}, {}, accepted, ["unit"], rules)
    assert not call_matches({"location": "Boston", "unit": "celsius"}, {}, accepted, ["unit"], rules)
    assert not call_matches({"unit": "fahrenheit"}, {}, accepted, ["unit"], rules)  # location is required
    assert not call_matches(
        {"location": "Boston", "days": 3}, {}, accepted, ["unit"], rules
    )  # not a reference argument


def test_rules_resolve_case_over_tool_over_registry():
    tool_level = frames.canonical_json({"match": "normalized", "args": {"nights": "numeric"}, "strict_types": True})
    case_level = frames.canonical_json({"args": {"book_hotel.hotel": "exact", "note": "any"}, "strict_types": False})
    rules = resolve_rules(case_level, tool_level, "book_hotel")
    assert rules.for_arg("hotel")[0] == "exact"  # case, tool-qualified
    assert rules.for_arg("note")[0] == "any"  # case, any tool
    assert rules.for_arg("nights")[0] == "numeric"  # tool
    assert rules.for_arg("city")[0] == "normalized"  # tool default
    assert rules.strict_types is False
    assert resolve_rules(None, None, "x") == Rules()


def test_strict_type_error_names_the_integer_argument():
    assert strict_type_error(HOTEL_ARGS, '["nights"]') == (
        "schema: nights: a whole-number float where the schema wants an integer (strict_types)"
    )
    assert strict_type_error(WEATHER_ARGS, '["ratio"]') is None  # a number may be 2.0
    assert strict_type_error(HOTEL_ARGS, None) is None


# ---------------------------------------------------------------- scored: the BFCL perturbation kinds


def test_parallel_calls_in_any_order_pass_every_stage():
    row, _ = score(
        [
            call("get_current_weather", {"location": "San Francisco, CA"}),
            call("get_current_weather", {"location": "Boston", "unit": "fahrenheit"}),
        ],
        [BOSTON, SF],
    )
    assert all_pass(row), stages(row)
    assert (row["tool_call_f1"], row["args_valid_rate"], row["missing_calls"], row["unexpected_calls"]) == (
        1.0,
        1.0,
        [],
        [],
    )


def test_dropped_parallel_call_fails_tool_selection():
    row, _ = score([call("get_current_weather", {"location": "Boston, MA"})], [BOSTON, SF])
    assert row["tool_selection_stage"] == "fail"
    assert row["tool_selection_reason"] == "path calls not made: get_current_weather (1 of 2 made)"
    assert row["tool_arguments_stage"] == "pass"


def test_duplicate_call_is_a_surplus():
    row, _ = score([call("get_current_weather", {"location": "Boston, MA"})] * 2, [BOSTON])
    assert row["tool_selection_stage"] == "fail"
    assert row["tool_selection_reason"] == "surplus calls: get_current_weather (2 made, the path holds 1)"
    assert row["unexpected_calls"] == ['get_current_weather({"location":"Boston, MA"})']


def test_invented_function_is_unknown_tool_not_incomplete():
    row, _ = score(
        [call("hotel_booking_v2", {"hotel": "Hilton"})], [{"name": "book_hotel", "args": {"hotel": "Hilton"}}]
    )
    assert row["status"] == "scored"
    assert row["tool_selection_stage"] == "fail"
    assert (
        row["tool_selection_reason"]
        == "unknown_tool: hotel_booking_v2 (not in the tool registry); path tools never called: book_hotel"
    )


def test_other_offered_function_fails_tool_selection():
    row, _ = score([call("book_hotel", {"hotel": "Boston"})], [BOSTON])
    assert row["tool_selection_stage"] == "fail"
    assert row["tool_selection_reason"] == (
        "path tools never called: get_current_weather; non-read-only tools outside the path called: book_hotel"
    )


@pytest.mark.parametrize(
    ("args", "reason_part"),
    [
        ({"location": "Chicago"}, "args match no reference call"),  # wrong value
        ({"unit": "fahrenheit"}, "'location' is a required property"),  # missing required argument
        ({"location": 7}, "7 is not of type 'string'"),  # wrong type
        ({"location": "Boston", "days": 3}, "args match no reference call"),  # extra argument
    ],
)
def test_argument_defects_fail_tool_arguments(args, reason_part):
    row, _ = score([call("get_current_weather", args)], [BOSTON])
    assert row["tool_selection_stage"] == "pass"
    assert row["tool_arguments_stage"] == "fail"
    assert reason_part in row["tool_arguments_reason"]


def test_case_change_passes_only_under_normalized():
    ref = [{"name": "book_hotel", "args": {"hotel": "Hilton"}}]
    exact, _ = score([call("book_hotel", {"hotel": "HILTON"})], ref)
    assert exact["tool_arguments_stage"] == "fail"
    by_registry, _ = score([call("book_hotel", {"hotel": "HILTON"})], ref, tools=registry(value_rules="bfcl"))
    assert all_pass(by_registry), stages(by_registry)
    by_case, _ = score([call("book_hotel", {"hotel": "HILTON"})], ref, value_rules={"args": {"hotel": "normalized"}})
    assert all_pass(by_case)
    # the case overrides the registry
    strict_case, _ = score(
        [call("book_hotel", {"hotel": "HILTON"})],
        ref,
        tools=registry(value_rules="bfcl"),
        value_rules={"match": "exact"},
    )
    assert strict_case["tool_arguments_stage"] == "fail"


def test_integer_given_as_float_is_a_type_error_under_strict_types_only():
    ref = [{"name": "book_hotel", "args": {"hotel": "Hilton", "nights": 2}}]
    lenient, _ = score([call("book_hotel", {"hotel": "Hilton", "nights": 2.0})], ref)
    assert all_pass(lenient)
    strict, _ = score(
        [call("book_hotel", {"hotel": "Hilton", "nights": 2.0})], ref, tools=registry(tool_rules={"strict_types": True})
    )
    assert strict["tool_arguments_stage"] == "fail"
    assert strict["invalid_calls"] == [
        'book_hotel({"hotel":"Hilton","nights":2}) '
        "(schema: nights: a whole-number float where the schema wants an integer (strict_types))"
    ]
    written_as_int, _ = score(
        [call("book_hotel", {"hotel": "Hilton", "nights": 2})], ref, tools=registry(tool_rules={"strict_types": True})
    )
    assert all_pass(written_as_int)


def test_numeric_rule_with_tolerance_from_the_case():
    ref = [{"name": "book_hotel", "args": {"hotel": "Hilton", "nights": 2}}]
    row, _ = score(
        [call("book_hotel", {"hotel": "Hilton", "nights": 2.0000001})],
        ref,
        tools=registry(),
        value_rules={"args": {"nights": {"match": "numeric", "tolerance": 0.001}}},
    )
    assert row["tool_arguments_stage"] == "fail"  # the schema still wants an integer
    ref = [{"name": "get_current_weather", "args": {"location": "Oslo", "ratio": 0.5}}]
    close, _ = score(
        [call("get_current_weather", {"location": "Oslo", "ratio": 0.5004})],
        ref,
        value_rules={"args": {"ratio": {"match": "numeric", "tolerance": 0.001}}},
    )
    assert all_pass(close)


def test_free_text_summary_declared_any_is_not_compared():
    ref = [{"name": "transfer_to_human_agents", "args": {"summary": "User wants a refund for a cancelled flight."}}]
    row, _ = score([call("transfer_to_human_agents", {"summary": "Customer asks for refund."})], ref)
    assert all_pass(row), stages(row)
    missing, _ = score([call("transfer_to_human_agents", {})], ref)
    assert missing["tool_arguments_stage"] == "fail"  # the schema requires a summary


def test_read_only_calls_need_only_their_schema_and_are_optional():
    ref = [{"name": "get_reservation", "args": {"id": "R1"}}, {"name": "book_hotel", "args": {"hotel": "Hilton"}}]
    # a lookup of another reservation is not a wrong argument; the reference lookup left out is not missing
    other, _ = score([call("get_reservation", {"id": "R2"}), call("book_hotel", {"hotel": "Hilton"})], ref)
    assert all_pass(other), stages(other)
    skipped, _ = score([call("book_hotel", {"hotel": "Hilton"})], ref)
    assert all_pass(skipped), stages(skipped)
    assert skipped["missing_calls"] == ['get_reservation({"id":"R1"})']  # still reported in the metrics
    assert skipped["tool_call_recall"] == 0.5


def test_overlapping_accepted_values_use_a_maximum_matching():
    # the first path call accepts x=1 or x=2, the second only x=2; calls x=1 then x=2 can cover both
    wide = {"name": "book_hotel", "args": {"hotel": "A"}, "accepted": {"hotel": ["A", "B"]}}
    narrow = {"name": "book_hotel", "args": {"hotel": "B"}}
    row, diffs = score([call("book_hotel", {"hotel": "A"}), call("book_hotel", {"hotel": "B"})], [wide, narrow])
    assert all_pass(row) and row["tool_call_f1"] == 1.0
    reversed_row, _ = score([call("book_hotel", {"hotel": "B"}), call("book_hotel", {"hotel": "A"})], [wide, narrow])
    assert all_pass(reversed_row) and reversed_row["tool_call_f1"] == 1.0
    assert diffs["match"].to_list() == ["same", "same"]


def test_accepted_values_under_strict_order_keep_the_path_order():
    first = {"name": "book_hotel", "args": {"hotel": "A"}, "accepted": {"hotel": ["A", "a hotel"]}}
    second = {"name": "get_current_weather", "args": {"location": "Oslo"}}
    good, _ = score(
        [call("book_hotel", {"hotel": "a hotel"}), call("get_current_weather", {"location": "Oslo"})],
        [first, second],
        tool_match="strict_order",
    )
    assert all_pass(good) and good["strict_order_accuracy"] == 1.0
    swapped, _ = score(
        [call("get_current_weather", {"location": "Oslo"}), call("book_hotel", {"hotel": "a hotel"})],
        [first, second],
        tool_match="strict_order",
    )
    assert swapped["tool_order_stage"] == "fail"
    assert swapped["strict_order_accuracy"] == 0.0


def test_accepted_values_must_not_be_empty_unless_optional():
    with pytest.raises(ValueError, match="accepted values of unit are empty"):
        cases_frame_from_records([case([{"name": "f", "accepted": {"unit": []}}])])
    cases_frame_from_records([case([{"name": "f", "accepted": {"unit": []}, "optional": ["unit"]}])])


def test_unknown_value_rules_profile_is_rejected():
    with pytest.raises(ValueError, match="unknown value rules profile 'loose'"):
        ToolRegistry.model_validate({"environment_version": "e", "value_rules": "loose", "tools": []})


def test_unknown_tool_outside_allowed_tools_is_a_selection_failure_not_a_policy_violation():
    row, _ = score(
        [call("hotel_booking_v2", {"hotel": "Hilton"}), call("book_hotel", {"hotel": "Hilton"})],
        [{"name": "book_hotel", "args": {"hotel": "Hilton"}}],
        allowed_tools=["book_hotel"],
    )
    assert (row["policy_stage"], row["policy_violations"]) == ("pass", [])
    assert row["tool_selection_reason"] == "unknown_tool: hotel_booking_v2 (not in the tool registry)"
    forbidden, _ = score([call("hotel_booking_v2", {})], [], forbidden_tools=["hotel_booking_v2"])
    assert forbidden["policy_violations"] == ["tool hotel_booking_v2 is forbidden"]


def test_diffs_show_the_path_call_a_call_matched_through_accepted_values():
    _, diffs = score([call("get_current_weather", {"location": "Boston", "unit": "fahrenheit"})], [BOSTON])
    assert diffs.select("expected_call", "actual_call", "match").rows() == [
        (
            'get_current_weather({"location":"Boston, MA"})',
            'get_current_weather({"location":"Boston","unit":"fahrenheit"})',
            "same",
        )
    ]


def test_strict_types_cover_arguments_and_list_items_not_values_inside_objects():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "ns": {"type": "array", "items": {"type": "integer"}},
            "body": {"type": "object", "properties": {"temp": {"type": "integer"}}},
        },
    }
    assert strict_type_error(schema, '["ns.1"]') == (
        "schema: ns/1: a whole-number float where the schema wants an integer (strict_types)"
    )
    assert (
        strict_type_error(schema, '["body.temp"]') is None
    )  # BFCL checks types of arguments and their list items only
