"""Hostile trace lines for the columnar-versus-per-line comparison: valid traces of every shape, then mutated the
ways a harness, an editor or an attacker may break a line (types, nulls, duplicates, escapes, numbers, bytes)."""

from __future__ import annotations

import json
import random

from hypothesis import strategies as st

CASES = {"rag-1": 2, "agent-1": 1, "c\u00e9": 1}

_TEXT = st.one_of(
    st.text(alphabet="abcxyz _-.:0123456789", max_size=8),
    st.sampled_from(["caf\u00e9", "\u2028", "\U0001f600", "\\u0041", '"', "\\"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6),
)
_KEYS = st.one_of(
    _TEXT,
    st.sampled_from(["text", "status", "attempt", "round", "hits", "citations", "path", "args", "a", "b", "x.y", "0"]),
)
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 49.0, 1e16, 1e20, 0.1, 12.5, 1e-7, 5e-324, 1.7976931348623157e308]),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT)
JSON = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3), max_leaves=10
)
_OBJECT = st.dictionaries(_KEYS, JSON, max_size=4)


def _maybe(strategy, *others):
    return st.one_of(strategy, *others) if others else strategy


def _optional_field(draw, record: dict, key: str, strategy, full: bool = False) -> None:
    """Leave a field out (unless `full`), set it to null, or give it a drawn value."""
    choice = draw(st.integers(1 if full else 0, 5))
    if choice == 0:
        return
    record[key] = None if choice == 1 else draw(strategy)


_DOC = st.fixed_dictionaries({"doc_id": _TEXT}, optional={"score": _maybe(_NUMBERS, st.none())})


def _optional(draw, record: dict, key: str, strategy) -> None:
    _optional_field(draw, record, key, strategy)


@st.composite
def _step(draw) -> dict:
    step: dict = {"index": draw(st.integers(0, 5)), "kind": draw(st.sampled_from(["tool_call", "finish", "message"]))}
    _optional(draw, step, "tool", _TEXT)
    _optional(draw, step, "args", _OBJECT)
    _optional(draw, step, "status", st.sampled_from(["ok", "error"]))
    _optional(draw, step, "result", JSON)
    _optional(draw, step, "error", _TEXT)
    _optional(
        draw,
        step,
        "state_diff",
        st.lists(
            st.fixed_dictionaries({"path": _TEXT}, optional={"before": JSON, "after": JSON, "extra": JSON}), max_size=3
        ),
    )
    _optional(draw, step, "dispatched", st.fixed_dictionaries({"tool": _TEXT}, optional={"args": _OBJECT}))
    _optional(draw, step, "content", _TEXT)
    return step


@st.composite
def trace_records(draw) -> dict:
    """A trace as a harness writes it: every field of the contract present, absent or null where it may be."""
    full = draw(st.booleans())  # every field given: no default stands in for a null

    def _optional(draw, record, key, strategy):
        _optional_field(draw, record, key, strategy, full)

    record: dict = {
        "trace_id": draw(st.sampled_from(["t1", "t2", "t3"]) | _TEXT.filter(bool)),
        "case_id": draw(st.sampled_from(sorted(CASES))),
    }
    _optional(draw, record, "case_revision", st.integers(0, 3))
    if full or draw(st.integers(0, 3)):
        record["attempt"] = draw(st.integers(1, 3))
    if full or draw(st.integers(0, 3)):
        record["status"] = draw(st.sampled_from(["ok", "error", "timeout"]))
    _optional(draw, record, "error", _TEXT)
    _optional(draw, record, "input", _TEXT)
    _optional(
        draw,
        record,
        "retrieval",
        st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "round": st.integers(1, 3),
                    "tool": _TEXT,
                    "variant": _TEXT,
                    "query": _TEXT,
                    "candidates": st.lists(_DOC, max_size=3),
                    "hits": st.lists(_DOC, max_size=3),
                },
            ),
            max_size=2,
        ),
    )
    _optional(
        draw,
        record,
        "context",
        st.lists(
            st.fixed_dictionaries({"doc_id": _TEXT}, optional={"text": _TEXT, "tokens": st.integers(0, 500)}),
            max_size=2,
        ),
    )
    _optional(
        draw,
        record,
        "answer",
        st.fixed_dictionaries(
            {},
            optional={
                "text": _maybe(_TEXT, st.none()),
                "refused": _maybe(st.booleans(), st.none()),
                "citations": st.lists(
                    st.fixed_dictionaries(
                        {"doc_id": _TEXT}, optional={"quote": _TEXT, "claim_index": st.integers(0, 3)}
                    ),
                    max_size=2,
                ),
            },
        ),
    )
    _optional(draw, record, "steps", st.lists(_step(), max_size=3))
    _optional(draw, record, "final_state", _OBJECT)
    _optional(
        draw,
        record,
        "usage",
        st.fixed_dictionaries(
            {},
            optional={
                "input_tokens": st.integers(0, 10**6),
                "output_tokens": st.integers(0, 10**6),
                "cost_usd": _maybe(_NUMBERS, st.none()),
                "latency_ms": _maybe(_NUMBERS, st.none()),
            },
        ),
    )
    if draw(st.integers(0, 3)) == 0:
        record[draw(_KEYS)] = draw(JSON)
    return record


# Values a mutation puts where a field was: each breaks some rule of the contract, or only looks as if it did.
_ODD_VALUES = [
    b"null",
    b"1",
    b"1.0",
    b"-0",
    b"true",
    b'"1"',
    b'""',
    b"[]",
    b"{}",
    b"[null]",
    b"[{}]",
    b'"ok"',
    b'"other"',
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"1e400",
    b"-1e999",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"Inf",
    b"1E2",
    b"2.5",
    b"0.0",
    b'"\\ud800"',
    b'"\\udc00x"',
    b'"\\ud83d\\ude00"',
    b'"\\u0000"',
    b'"\\u00e9"',
    b'"caf\xc3\xa9"',
    b'"\xff"',
    b'"\xed\xa0\x80"',
    b'"a\tb"',
    b'"\x7f"',
    b'{"a": 1, "a": 2.0}',
    b'{"path": "p"}',
    b'[{"path": 1}]',
    b'{"tool": "t"}',
    b'{"tool": "t", "args": null}',
    b'{"doc_id": null}',
    b"[" * 130 + b"]" * 130,
    b"[" * 60 + b"]" * 60,
]
_FIELD_NAMES = [
    b"trace_id",
    b"case_id",
    b"case_revision",
    b"attempt",
    b"status",
    b"error",
    b"input",
    b"retrieval",
    b"context",
    b"answer",
    b"steps",
    b"final_state",
    b"usage",
    b"text",
    b"round",
    b"hits",
    b"citations",
    b"args",
    b"result",
    b"state_diff",
    b"dispatched",
    b"doc_id",
    b"index",
    b"kind",
    b"path",
    b"tool",
    b"score",
    b"cost_usd",
    b"tokens",
    b"refused",
    b"extra",
]


def _escaped(key: bytes) -> bytes:
    """The key with its first letter written as a \\u escape (the same key to a JSON reader)."""
    return b"\\u%04x" % key[0] + key[1:]


def _value_end(text: bytes, start: int) -> int:
    """Where the JSON value starting at `start` ends (at the , } or ] after it)."""
    depth, end, in_string, escape = 0, start, False, False
    while end < len(text):
        c = text[end : end + 1]
        if in_string:
            if escape:
                escape = False
            elif c == b"\\":
                escape = True
            elif c == b'"':
                in_string = False
        elif c == b'"':
            in_string = True
        elif c in b"[{":
            depth += 1
        elif c in b"]}":
            if depth == 0:
                break
            depth -= 1
        elif c == b"," and depth == 0:
            break
        end += 1
    return end


def _a_key(text: bytes, keys: list[bytes], rng: random.Random) -> tuple[bytes, int, int]:
    """A key of the line, anywhere in it: (key, where its value starts, where it ends)."""
    key = rng.choice(keys)
    found = [
        i for i in range(len(text)) if text.startswith(b'"' + key + b'":', i) or text.startswith(b'"' + key + b'" :', i)
    ]
    if not found:
        return key, -1, -1
    colon = text.index(b":", rng.choice(found) + len(key) + 2) + 1
    return key, colon, _value_end(text, colon)


def mutate(text: bytes, rng: random.Random, names: list[bytes] = _FIELD_NAMES) -> bytes:
    """One hostile edit of a JSON line (`names`: the field names worth breaking)."""
    kind = rng.randrange(15)
    keys = [name for name in names if b'"' + name + b'"' in text]
    if kind in (0, 13, 14) and keys:
        key, start, end = _a_key(text, keys, rng)
        if start < 0:
            return text
        if kind == 0:  # a field's value replaced, at any depth
            return text[:start] + b" " + rng.choice(_ODD_VALUES) + text[end:]
        if kind == 13:  # the field given again after itself, at any depth: the second value is the one read
            return text[:end] + b', "' + key + b'": ' + rng.choice(_ODD_VALUES) + text[end:]
        # a field given before itself: the original value is the one read
        opening = text.rindex(b'"' + key + b'"', 0, start)
        return text[:opening] + b'"' + key + b'": ' + rng.choice(_ODD_VALUES) + b", " + text[opening:]
    if kind == 1 and keys:  # a field given twice at the top
        key = rng.choice(keys)
        return text[:-1] + b', "' + key + b'": ' + rng.choice(_ODD_VALUES) + b"}"
    if kind == 2 and keys:  # a key spelt with an escape
        key = rng.choice(keys)
        return text.replace(b'"' + key + b'"', b'"' + _escaped(key) + b'"', 1)
    if kind == 3:  # an extra field
        return text[:-1] + b', "' + rng.choice([*names, b"zz"]) + b'": ' + rng.choice(_ODD_VALUES) + b"}"
    if kind == 4:  # bytes around or inside the line
        return (
            rng.choice([b" ", b"\t", b"\r", b"\xef\xbb\xbf", b"\x00", b"", b"x"])
            + text
            + rng.choice([b"", b" ", b"\t", b"\r", b"\x00", b"{}", b" null", b"[]", b"x", b"}"])
        )
    if kind == 5:  # truncated
        return text[: rng.randrange(len(text))]
    if kind == 6:  # a byte replaced
        at = rng.randrange(len(text))
        return text[:at] + bytes([rng.randrange(256)]) + text[at + 1 :]
    if kind == 7:  # two objects on one line
        return text + rng.choice([b"", b" ", b"\n"[:0]]) + text
    if kind == 8:  # whitespace JSON allows, and some it does not
        return text.replace(b", ", rng.choice([b",", b" ,\t", b", \r", b",\x0c", b",\xc2\xa0"])).replace(
            b": ", rng.choice([b":", b" : ", b":\t"])
        )
    if kind == 9 and keys:  # a field left out
        key = rng.choice(keys)
        return text.replace(b'"' + key + b'"', b'"' + key + b'_gone"', 1)
    if kind == 10:  # a whole odd line
        return rng.choice(
            [
                b"null",
                b"[1]",
                b'"x"',
                b"1",
                b"{}",
                b"{} {}",
                b"{}null",
                b"",
                b"   ",
                b"\r",
                b"\xef\xbb\xbf",
                b'{"trace_id": "t1"}{"trace_id": "t2"}',
                b"{" * 200 + b"}" * 200,
            ]
        )
    if kind == 11:  # a number spelt otherwise
        return text.replace(b": 1,", rng.choice([b": 1.0,", b": 1e0,", b": 01,", b": -0,", b": 1E0,"]), 1)
    if kind == 12:  # deep nesting in a free-form value
        depth = rng.choice([60, 120, 127, 128, 129, 200])
        return text[:-1] + b', "extra": ' + b"[" * depth + b"]" * depth + b"}"
    return text


def line_of(record: dict, rng: random.Random, names: list[bytes] = _FIELD_NAMES) -> bytes:
    """A record written as a JSON line (ASCII or UTF-8), then mutated zero or more times."""
    text = json.dumps(record, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        text = mutate(text, rng, names) or text
    return text.replace(b"\n", b" ")


@st.composite
def trace_lines(draw) -> bytes:
    """A trace line: valid, or mutated into something hostile."""
    return line_of(draw(trace_records()), random.Random(draw(st.integers(0, 2**32))))
