"""Hostile case lines for the columnar-versus-per-line comparison of load_cases: valid cases of every shape (RAG,
agent, tool calls, milestones, fixtures), then mutated as trace_lines mutates traces."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from .trace_lines import _OBJECT, _TEXT, JSON, line_of

_NAMES = [
    name.encode()
    for name in (
        "case_id",
        "case_revision",
        "lanes",
        "input",
        "criticality",
        "required_doc_ids",
        "expected_answer_contains",
        "reference_answer",
        "expect_refusal",
        "multi_hop",
        "allowed_tools",
        "forbidden_tools",
        "reference_tool_calls",
        "tool_match",
        "alternatives",
        "dependencies",
        "fixtures",
        "clock",
        "milestones",
        "fault",
        "unsafe_after_fault",
        "escalation_tools",
        "scope",
        "value_rules",
        "name",
        "args",
        "accepted",
        "optional",
        "path",
        "equals",
        "not_equals",
        "exists",
        "absent",
        "gte",
        "lte",
        "contains",
        "kind",
        "tool",
        "match",
        "tolerance",
    )
]


def _mostly(good, bad):
    """Usually `good`, now and then `bad`."""
    return st.integers(0, 9).flatmap(lambda pick: bad if pick == 7 else good)


_TOOLS = _mostly(st.sampled_from(["get_order", "refund", "send_email"]), st.just(""))
_STRINGS = st.lists(st.one_of(_TOOLS, _TEXT), max_size=3)


def _optional_field(
    draw, record: dict, key: str, strategy, nullable: bool = False, clean: bool = False, full: bool = False
) -> None:
    """Leave a field out or give it a drawn value; null now and then (where the contract allows none, a reject)."""
    choice = draw(st.integers(6 if full else 0, 24))
    if choice < 6:
        return
    record[key] = None if choice < (10 if nullable else 6 if clean else 7) else draw(strategy)


@st.composite
def _tool_call(draw) -> dict:
    call: dict = {"name": draw(_TOOLS)}
    if draw(st.booleans()):
        call["args"] = draw(_OBJECT)
    if draw(st.integers(0, 3)) == 0:
        call["accepted"] = draw(st.dictionaries(st.sampled_from(["a", "b"]), st.lists(JSON, max_size=2), max_size=2))
    if draw(st.integers(0, 3)) == 0:
        call["optional"] = draw(st.lists(st.sampled_from(["a", "b"]), max_size=2))
    return call


@st.composite
def _milestone(draw) -> dict:
    milestone: dict = {"path": draw(st.sampled_from(["orders.1.amount", "a", ""]))}
    for operator in draw(
        st.lists(
            st.sampled_from(["equals", "not_equals", "exists", "absent", "gte", "lte", "contains"]),
            min_size=0,
            max_size=2,
            unique=True,
        )
        | st.sampled_from([["equals"], ["gte"], ["exists"]])
    ):
        if operator in ("gte", "lte"):
            milestone[operator] = draw(
                st.one_of(
                    st.integers(-(2**60), 2**60),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.none(),
                    st.sampled_from([129.0, 12.5, "5", True]),
                )
            )
        elif operator in ("exists", "absent"):
            milestone[operator] = draw(st.one_of(st.booleans(), st.none(), st.sampled_from([1, "true"])))
        else:
            milestone[operator] = draw(JSON)
    return milestone


@st.composite
def case_records(draw, clean: bool = False) -> dict:
    """A case as a dataset export writes it: RAG, agent or both, with what each lane may state (`clean`: no null where
    the contract allows none)."""

    full = draw(st.booleans())  # every field given: no default stands in for a null

    def _optional(draw, record, key, strategy, nullable=False):
        _optional_field(draw, record, key, strategy, nullable, clean, full)

    lanes = draw(
        _mostly(
            st.lists(st.sampled_from(["rag", "agent"]), min_size=1, max_size=2, unique=True),
            st.sampled_from([[], ["video"], ["rag", "rag"]]),
        )
    )
    record: dict = {"case_id": draw(_mostly(st.sampled_from(["c1", "c2", "c3"]), _TEXT)), "lanes": lanes}
    _optional(draw, record, "case_revision", st.integers(0, 3))
    _optional(draw, record, "input", _TEXT)
    _optional(draw, record, "criticality", _mostly(st.sampled_from(["high", "normal"]), st.just("low")))
    if "rag" in lanes or full or draw(st.booleans()):
        _optional(draw, record, "required_doc_ids", _mostly(st.lists(_TEXT, min_size=1, max_size=3), _STRINGS))
        _optional(draw, record, "expected_answer_contains", _STRINGS)
        _optional(draw, record, "reference_answer", nullable=True, strategy=_TEXT)
        _optional(draw, record, "expect_refusal", st.booleans())
        _optional(draw, record, "multi_hop", st.booleans())
    if "agent" in lanes or full or draw(st.booleans()):
        _optional(draw, record, "allowed_tools", nullable=True, strategy=_STRINGS)
        _optional(draw, record, "forbidden_tools", _STRINGS)
        _optional(draw, record, "reference_tool_calls", st.lists(_tool_call(), max_size=3))
        _optional(
            draw,
            record,
            "tool_match",
            _mostly(st.sampled_from(["strict_order", "unordered", "goal_only"]), st.just("any")),
        )
        _optional(draw, record, "alternatives", st.lists(st.lists(_tool_call(), max_size=2), max_size=2))
        _optional(
            draw,
            record,
            "dependencies",
            st.lists(_mostly(st.lists(_TOOLS, min_size=2, max_size=2), st.lists(_TOOLS, max_size=3)), max_size=2),
        )
        _optional(draw, record, "fixtures", _OBJECT)
        _optional(draw, record, "clock", nullable=True, strategy=st.sampled_from(["2026-03-02T09:30:00Z", ""]))
        _optional(
            draw,
            record,
            "milestones",
            st.dictionaries(st.sampled_from(["refunded", "notified", "x"]), _milestone(), max_size=2),
        )
        _optional(
            draw,
            record,
            "fault",
            nullable=True,
            strategy=st.fixed_dictionaries(
                {"kind": _mostly(st.sampled_from(["tool_error", "timeout"]), st.just("crash")), "tool": _TOOLS}
            ),
        )
        _optional(draw, record, "unsafe_after_fault", _STRINGS)
        _optional(draw, record, "escalation_tools", _STRINGS)
        _optional(draw, record, "scope", nullable=True, strategy=_OBJECT)
    if draw(st.integers(0, 6)) == 0:
        record["value_rules"] = draw(st.sampled_from(["exact", "bfcl", {"match": "numeric", "tolerance": 0.5}, "nope"]))
    return record


@st.composite
def case_lines(draw) -> bytes:
    """A case line: valid, or mutated into something hostile."""
    return line_of(draw(case_records(clean=draw(st.booleans()))), random.Random(draw(st.integers(0, 2**32))), _NAMES)
