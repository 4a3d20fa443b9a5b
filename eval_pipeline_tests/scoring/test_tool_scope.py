"""Scope violations of tool calls read once per distinct args text: the same reasons, in walk order, as reading every
(call, scope) pair on its own — nested and listed arguments, escaped names, non-list and empty scopes."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.scoring.tools.policy import allowed_values, scope_frame


def _walked(tool: str | None, args_json: str, scope_json: str) -> list[str]:
    """Reference: every argument of a scoped name at any depth, checked by walking the parsed args."""
    allowed = allowed_values(scope_json)
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                if name in allowed and canonical_json(inner) not in allowed[name]:
                    found.append(
                        f"scope: {tool} called with {name}={canonical_json(inner)} outside the case scope "
                        f"({', '.join(sorted(allowed[name]))})"
                    )
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    if allowed:
        walk(json.loads(args_json))
    return found


SCOPES = [
    json.dumps({"customer_id": ["c-1", "c-2"], "order_id": "88131"}),
    json.dumps({"customer_id": "c-1"}),
    json.dumps({"region": [{"eu": True}, "us"]}),
    json.dumps({}),
    json.dumps(["customer_id"]),
]
ARGS = [
    {"customer_id": "c-1"},
    {"customer_id": "c-9", "order_id": "88131"},
    {"to": {"customer_id": "c-9", "cc": [{"customer_id": "c-2"}, {"customer_id": "c-3"}]}, "order_id": 88131},
    {"customer_id": ["c-1"]},
    {"region": {"eu": True}},
    {"region": {"eu": 1}, "note": "customer_id"},
    {"amount": 5},
    [{"customer_id": "c-7"}],
]
# Names written escaped are still names: a text with a backslash is always read.
ESCAPED = ['{"customer\\u005fid":"c-9"}', '{"note":"say \\"hi\\"","order_id":"1"}']


def test_scope_reasons_match_a_walk_of_every_call_and_scope():
    rows = [
        (tool, text, scope)
        for scope in SCOPES
        for tool in ("get_order", None)
        for text in [canonical_json(a) for a in ARGS] + ESCAPED
    ]
    calls = pl.DataFrame(
        rows + [("get_order", canonical_json(ARGS[0]), None)], schema=["tool", "args_json", "scope_json"], orient="row"
    )
    frame = scope_frame(calls)
    assert frame.height == len(set(rows))
    got = {(tool, text, scope): found for tool, text, scope, found in frame.iter_rows()}
    expected = {(tool, text, scope): _walked(tool, text, scope) for tool, text, scope in rows}
    assert got == expected
    # the cases reach nested, listed, repeated and escaped arguments
    assert len(got[("get_order", canonical_json(ARGS[2]), SCOPES[0])]) == 3
    assert got[("get_order", ESCAPED[0], SCOPES[1])] == [
        'scope: get_order called with customer_id="c-9" outside the case scope ("c-1")'
    ]
