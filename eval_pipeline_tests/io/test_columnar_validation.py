"""Validation is columnar first, and the per-line validator stays the reference: for any lines, parse_traces and
load_cases give the traces, cases and rejects (reasons and order included, byte for byte) that validating each line on
its own gives. The references below are the per-line code paths as they were before the columnar read."""

import json
import random
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from eval_pipeline.contracts import frames
from eval_pipeline.contracts.cases import Case
from eval_pipeline.io import ingest, inputs, loaders, trace_columnar, trace_per_line, trace_schema
from eval_pipeline.io.case_columnar import columnar_cases
from eval_pipeline.io.columnar import jsonl_lines
from eval_pipeline.io.storage import Location, open_location

from .case_lines import case_lines, case_records
from .trace_lines import CASES, JSON, trace_lines, trace_records

SOURCE = "traces/r1/batch.jsonl"


def raw_frame(raws: list[bytes], first_line: int = 1) -> pl.DataFrame:
    return pl.DataFrame(
        {"run_id": "r1", "source_file": SOURCE, "line": list(range(first_line, first_line + len(raws))), "raw": raws},
        schema=ingest.RAW_LINES_SCHEMA,
    )


def per_line_parse(
    raw_lines: pl.DataFrame,
    revisions: dict[str, int],
    run_id: str,
    max_line_bytes: int = loaders.DEFAULT_MAX_LINE_BYTES,
    seen: set[str] | None = None,
) -> ingest.ParsedTraces:
    """parse_traces as each line validated on its own gives it: the contract check of every line, the columnar parse
    of the accepted ones, then the run's rules line by line."""
    seen = set() if seen is None else seen
    sources, numbers, raws = (raw_lines[c].to_list() for c in ("source_file", "line", "raw"))
    checked_lines = trace_per_line.check_lines(raws, max_line_bytes, trace_per_line.suspect_lines(raw_lines["raw"]))
    valid = [i for i, checked in enumerate(checked_lines) if checked is not None and checked[0] == "ok"]
    table, rows_of, unreadable = trace_per_line.columnar_parse([raws[i] for i in valid])
    row_of_line = {valid[position]: row for position, row in rows_of.items()}
    columnar_reasons = {valid[position]: reason for position, reason in unreadable.items()}
    kept_rows, kept, texts, rejected, blank = [], [], [], [], 0
    for index, (source, number, checked) in enumerate(zip(sources, numbers, checked_lines, strict=True)):
        if checked is None:
            blank += 1
            continue
        if checked[0] == "reject":
            _, reason, trace_id, case_id = checked
            rejected.append(loaders.reject(run_id, "trace", source, number, reason, trace_id=trace_id, case_id=case_id))
            continue
        _, trace_id, case_id, case_revision, free_form = checked
        keys = {"trace_id": trace_id, "case_id": case_id}
        expected = revisions.get(case_id)
        if index in columnar_reasons:
            rejected.append(loaders.reject(run_id, "trace", source, number, columnar_reasons[index], **keys))
        elif expected is None:
            rejected.append(loaders.reject(run_id, "trace", source, number, f"unknown case_id {case_id!r}", **keys))
        elif case_revision is not None and case_revision != expected:
            rejected.append(
                loaders.reject(
                    run_id,
                    "trace",
                    source,
                    number,
                    f"case_revision {case_revision} does not match case {case_id!r} revision {expected}",
                    **keys,
                )
            )
        elif trace_id in seen:
            rejected.append(
                loaders.reject(
                    run_id, "trace", source, number, f"duplicate trace_id {trace_id!r} (first occurrence kept)", **keys
                )
            )
        else:
            seen.add(trace_id)
            kept_rows.append(row_of_line[index])
            kept.append((source, number))
            texts.append(free_form)
    if not kept:
        return ingest.ParsedTraces(frames.empty(frames.TRACES_SCHEMA), loaders.rejects_frame(rejected), blank)
    parsed = pl.from_arrow(table.take(pa.array(kept_rows, type=pa.int64())))
    steps = pl.DataFrame(
        {
            name: [text for columns, _ in texts for text in columns[i]]
            for i, name in enumerate(trace_schema.FREE_FORM_STEP_FIELDS)
        },
        schema={name: pl.String for name in trace_schema.FREE_FORM_STEP_FIELDS},
    )
    traces = ingest.lines_to_frame(
        parsed,
        pl.Series([final for _, final in texts], dtype=pl.String),
        steps,
        pl.Series([s for s, _ in kept], dtype=pl.String),
        pl.Series([n for _, n in kept], dtype=pl.Int64),
        run_id,
    )
    return ingest.ParsedTraces(traces, loaders.rejects_frame(rejected), blank)


def assert_same(
    raws: list[bytes],
    max_line_bytes: int = loaders.DEFAULT_MAX_LINE_BYTES,
    seen: tuple[str, ...] = (),
    revisions: dict[str, int] | None = None,
) -> ingest.ParsedTraces:
    revisions = dict(CASES) if revisions is None else revisions
    columnar_seen, reference_seen = set(seen), set(seen)
    parsed = ingest.parse_traces(raw_frame(raws), revisions, "r1", max_line_bytes=max_line_bytes, seen=columnar_seen)
    reference = per_line_parse(raw_frame(raws), revisions, "r1", max_line_bytes=max_line_bytes, seen=reference_seen)
    assert parsed.traces.schema == reference.traces.schema
    assert parsed.traces.equals(reference.traces), (parsed.traces.to_dicts(), reference.traces.to_dicts())
    assert parsed.rejects.equals(reference.rejects), (parsed.rejects.to_dicts(), reference.rejects.to_dicts())
    assert parsed.blank_lines == reference.blank_lines
    assert columnar_seen == reference_seen
    return parsed


def columnar_count(raws: list[bytes], max_line_bytes: int = loaders.DEFAULT_MAX_LINE_BYTES) -> int:
    """How many of the lines the columnar pass vouches for (the rest take the per-line path)."""
    return len(trace_columnar.columnar_lines(pl.Series(raws, dtype=pl.Binary), max_line_bytes).positions)


def trace(trace_id: str = "t1", **fields) -> dict:
    return {"trace_id": trace_id, "case_id": "rag-1", "case_revision": 2, "attempt": 1, "status": "ok", **fields}


AGENT_STEPS = [
    {
        "index": 1,
        "kind": "tool_call",
        "tool": "get_order",
        "args": {"order_id": "81096", "amount": 12.0, "rooms": [{"n": 2.0}]},
        "status": "ok",
        "result": {"amount": 12.5, "refunded": 0, "items": [{"price": 3.0}]},
        "error": None,
        "state_diff": [{"path": "orders.1.status", "before": "new", "after": "paid", "note": "dropped"}, {"path": "x"}],
        "dispatched": {"tool": "get_order", "args": {"order_id": "81096", "amount": 12.0, "rooms": [{"n": 2.0}]}},
    },
    {
        "index": 2,
        "kind": "tool_call",
        "tool": "refund",
        "args": {"amount": 1e16, "note": "1.0"},
        "dispatched": {"tool": "refund", "args": {"amount": 1e16, "note": 1.0}},
    },
    {"index": 3, "kind": "tool_call", "tool": "x", "dispatched": {"tool": "x"}},
    {"index": 4, "kind": "finish", "content": "done"},
]


def ordinary_lines() -> list[bytes]:
    return [
        json.dumps(
            trace(
                "t1",
                input="q",
                retrieval=[
                    {
                        "round": 1,
                        "query": "q",
                        "candidates": [{"doc_id": "d1", "score": 0.5}],
                        "hits": [{"doc_id": "d1", "score": 1}],
                    }
                ],
                context=[{"doc_id": "d1", "text": "x", "tokens": 3}],
                answer={"text": "a", "citations": [{"doc_id": "d1", "quote": "x", "claim_index": 0}], "refused": False},
                usage={"input_tokens": 3, "output_tokens": 2, "cost_usd": 1, "latency_ms": 12.5},
            )
        ).encode(),
        json.dumps(
            trace(
                "t2",
                case_id="agent-1",
                case_revision=None,
                steps=AGENT_STEPS,
                final_state={"orders": {"1": {"amount": 12.0, "status": "paid"}}, "b": [], "a": None},
            )
        ).encode(),
        json.dumps({"trace_id": "t3", "case_id": "agent-1", "steps": [], "final_state": {}}).encode(),
        json.dumps(trace("t4", input="caf\u00e9 \U0001f600", answer={"text": "\u00e9"})).encode(),
        json.dumps(trace("t5", input="caf\u00e9", answer={"text": "\u00e9"}), ensure_ascii=False).encode(),
    ]


def test_ordinary_lines_are_read_columnar_and_give_what_the_per_line_path_gives():
    lines = ordinary_lines()
    parsed = assert_same(lines)
    assert parsed.traces["trace_id"].to_list() == ["t1", "t2", "t3", "t4", "t5"]
    assert columnar_count(lines) == len(lines)
    steps = parsed.traces.filter(pl.col("trace_id") == "t2")["steps"][0].to_list()
    assert steps[0]["args_float_paths"] == '["amount", "rooms.0.n"]'
    assert (
        steps[0]["state_diff_json"]
        == '[{"after":"paid","before":"new","path":"orders.1.status"},{"after":null,"before":null,"path":"x"}]'
    )
    assert [s["dispatched_args_json"] for s in steps] == [
        '{"amount":12,"order_id":"81096","rooms":[{"n":2}]}',
        '{"amount":10000000000000000,"note":1}',
        "{}",
        None,
    ]


# Lines the columnar pass must not vouch for, each next to an ordinary one: the per-line path gives the reason.
HOSTILE = [
    b"null",  # pyarrow's reader crashes on a bare null: such a line must never reach it
    b"[1]",
    b'"x"',
    b"1",
    b"{}",
    b"{} {}",
    b"{}null",
    b'{"trace_id": "t1"}{"trace_id": "t2"}',
    b" ",
    b"\r",
    b"\xef\xbb\xbf",
    json.dumps(trace("s1", attempt="1")).encode(),
    json.dumps(trace("s2", attempt=1.0)).encode(),
    json.dumps(trace("s3", attempt=True)).encode(),
    json.dumps(trace("s4", attempt=None)).encode(),
    json.dumps(trace("s5", status=None)).encode(),
    json.dumps(trace("s6", status="other")).encode(),
    json.dumps(trace("", case_id="rag-1")).encode(),
    json.dumps({"trace_id": "s7", "case_id": ""}).encode(),
    json.dumps({"case_id": "rag-1"}).encode(),
    json.dumps(trace("s8", usage={"cost_usd": True})).encode(),
    json.dumps(trace("s9", usage={"cost_usd": "1"})).encode(),
    json.dumps(trace("s10", retrieval=[None])).encode(),
    json.dumps(trace("s11", retrieval=[{"round": None}])).encode(),
    json.dumps(trace("s12", retrieval=[{"hits": None}])).encode(),
    json.dumps(trace("s13", retrieval=[{"hits": [{"score": 1}]}])).encode(),
    json.dumps(trace("s14", context=[{"doc_id": "d", "text": None}])).encode(),
    json.dumps(trace("s15", answer={"citations": None})).encode(),
    json.dumps(trace("s16", answer={"citations": [{"quote": "q"}]})).encode(),
    json.dumps(trace("s17", steps=[{"index": 1}])).encode(),
    json.dumps(trace("s18", steps=[None])).encode(),
    json.dumps(trace("s19", steps=[{"index": 1, "kind": "k", "args": []}])).encode(),
    json.dumps(trace("s20", steps=[{"index": 1, "kind": "k", "dispatched": {"tool": "t", "args": None}}])).encode(),
    json.dumps(trace("s21", steps=[{"index": 1, "kind": "k", "dispatched": {"args": {}}}])).encode(),
    json.dumps(trace("s22", steps=[{"index": 1, "kind": "k", "state_diff": [{"before": 1}]}])).encode(),
    json.dumps(trace("s23", steps=[{"index": 1, "kind": "k", "state_diff": {"path": "p"}}])).encode(),
    json.dumps(trace("s24", final_state=[1])).encode(),
    json.dumps(trace("s25", steps=[{"index": 1.0, "kind": "k"}])).encode(),
    json.dumps(trace("s26"))[:-1].encode() + b', "attempt": 2}',  # a field given twice
    json.dumps(trace("s27"))[:-1].encode() + b', "\\u0061ttempt": 2}',  # ... once spelt with an escape
    json.dumps(trace("s28"))[:-1].encode() + b', "final_state": {"a": 1}, "final_state": null}',
    json.dumps(trace("s29", steps=[{"index": 1, "kind": "k", "args": {"a": 1}}]))[:-3].encode() + b', "args": null}]}',
    json.dumps(trace("s30", steps=[{"index": 1, "kind": "k", "args": {"b": 1}}]))
    .encode()
    .replace(b'{"b": 1}', b'{"a": 1.0, "b": 2.0, "a": 2, "c": {"d": 1.0, "d": 3.0}}'),
    json.dumps({"trace_id": "s31", "case_id": "rag-1", "\\u0061ttempt": None}).encode().replace(b"\\\\u", b"\\u"),
    json.dumps(trace("s32", usage={"cost_usd": 18446744073709551616})).encode(),
    json.dumps(trace("s33", extra=18446744073709551616)).encode(),
    json.dumps(trace("s34", final_state={"n": 18446744073709551616})).encode(),
    json.dumps(trace("s35", final_state={"n": 9223372036854775807, "m": -9223372036854775808})).encode(),
    json.dumps(trace("s36", final_state={"n": 12345678901234567890.5})).encode(),
    json.dumps(trace("s37"))[:-1].encode() + b', "x": NaN}',
    json.dumps(trace("s38"))[:-1].encode() + b', "usage": {"latency_ms": Infinity}}',
    json.dumps(trace("s39"))[:-1].encode() + b', "x": -Inf}',
    json.dumps(trace("s40"))[:-1].encode() + b', "x": 1e400}',
    json.dumps(trace("s41"))[:-1].encode() + b', "x": "\\ud800"}',
    json.dumps(trace("s42"))[:-1].encode() + b', "x": "\xff"}',
    json.dumps(trace("s43"))[:-1].encode() + b', "x": "\xed\xa0\x80"}',
    json.dumps(trace("s44"))[:-1].encode() + b', "x": "a\tb"}',
    json.dumps(trace("s45"))[:-1].encode() + b', "x": ' + b"[" * 127 + b"]" * 127 + b"}",
    json.dumps(trace("s46"))[:-1].encode() + b', "x": ' + b"[" * 128 + b"]" * 128 + b"}",
    json.dumps(trace("s47", final_state={"a": "[" * 200})).encode(),
    json.dumps(trace("s48", input="x\x00y")).encode(),
    json.dumps(trace("s49")).encode() + b" ",
    b" " + json.dumps(trace("s50")).encode(),
    json.dumps(trace("s51")).encode().replace(b", ", b",\r "),
    json.dumps(trace("s52")).encode().replace(b", ", b",\x0c"),
    b"\xef\xbb\xbf" + json.dumps(trace("s53")).encode(),
    json.dumps(trace("s54", case_id="nope")).encode(),
    json.dumps(trace("s55", case_revision=1)).encode(),
    json.dumps(trace("t1")).encode(),  # a duplicate of the ordinary t1
    json.dumps(trace("s56", input="x" * 5000)).encode(),  # beyond the smaller line limit
]


@pytest.mark.parametrize("max_line_bytes", [loaders.DEFAULT_MAX_LINE_BYTES, 4096])
def test_hostile_lines_take_the_per_line_path_and_give_its_reasons(max_line_bytes):
    ordinary = ordinary_lines()
    lines = [*ordinary, *[line for hostile in HOSTILE for line in (hostile, ordinary[0])]]
    parsed = assert_same(lines, max_line_bytes)
    assert parsed.rejects.height > len(HOSTILE) // 2
    # of the hostile lines, only those the contract takes as they are (their rules aside) are read columnar
    columnar = trace_columnar.columnar_lines(pl.Series(HOSTILE, dtype=pl.Binary), max_line_bytes).positions
    assert sorted(json.loads(HOSTILE[i])["trace_id"] for i in columnar) == sorted(
        ["s29", "s30", "s36", "s45", "s48", "s54", "s55", "t1", *(["s56"] if max_line_bytes > 5000 else [])]
    )


def test_a_duplicate_in_a_later_chunk_and_a_reject_do_not_hide_each_other():
    first = [json.dumps(trace("t1")).encode(), json.dumps(trace("t2", attempt="x")).encode()]
    second = [json.dumps(trace("t2")).encode(), json.dumps(trace("t1")).encode(), json.dumps(trace("t2")).encode()]
    seen: set[str] = set()
    ingest.parse_traces(raw_frame(first), dict(CASES), "r1", seen=seen)
    parsed = assert_same(second, seen=tuple(seen))
    assert parsed.traces["trace_id"].to_list() == ["t2"]
    assert parsed.rejects["reason"].to_list() == [
        "duplicate trace_id 't1' (first occurrence kept)",
        "duplicate trace_id 't2' (first occurrence kept)",
    ]


def test_a_block_with_refused_lines_is_read_again_in_pieces():
    ordinary = ordinary_lines()
    lines = [ordinary[i % len(ordinary)].replace(b'"trace_id": "t', b'"trace_id": "n%d-' % i, 1) for i in range(3000)]
    for at in (5, 1700, 2999):
        lines[at] = json.dumps(trace(f"bad{at}", attempt=1.5)).encode()
    lines[900] = json.dumps(trace("bad900"))[:-1].encode() + b', "attempt": 2}'
    parsed = assert_same(lines)
    assert sorted(parsed.rejects["line"].to_list()) == [6, 901, 1701, 3000]
    assert columnar_count(lines) == 2996


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.lists(trace_lines(), min_size=1, max_size=16),
    st.sampled_from([loaders.DEFAULT_MAX_LINE_BYTES, 300]),
    st.lists(st.sampled_from(["t1", "t2"]), max_size=1),
)
def test_generated_lines_give_what_the_per_line_path_gives(lines, max_line_bytes, seen):
    assert_same(lines, max_line_bytes, tuple(seen))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(trace_records(), min_size=1, max_size=8), st.integers(0, 2**32))
def test_generated_traces_written_as_harnesses_write_them_give_what_the_per_line_path_gives(records, seed):
    rng = random.Random(seed)
    lines = [json.dumps(record, ensure_ascii=rng.random() < 0.5).encode() for record in records]
    assert_same(lines)


@settings(deadline=None)
@given(JSON)
def test_free_form_texts_of_the_columnar_pass_are_those_of_the_validated_model(value):
    step = {
        "index": 1,
        "kind": "k",
        "args": value if isinstance(value, dict) else {"v": value},
        "result": value,
        "state_diff": [{"path": "p", "before": value, "after": [value]}],
        "dispatched": {"tool": "t", "args": {"v": value}},
    }
    line = json.dumps(trace("t1", steps=[step], final_state={"v": value})).encode()
    assert_same([line])


# ---------------------------------------------------------------- splitting the run's files into lines


@dataclass(frozen=True)
class SmallBlocks(Location):
    """A location that reads files in blocks of a few bytes (lines then straddle blocks)."""

    block_bytes: int = 1

    def iter_blocks(self, *parts: str, block_bytes: int = 0):
        return Location.iter_blocks(self, *parts, block_bytes=self.block_bytes)


def reference_lines(data: bytes) -> list[bytes]:
    """iter_raw_lines as it split a file: newlines, then one CR and one byte-order mark off each line."""
    pieces = data.split(b"\n")
    tail = pieces.pop()
    lines = [*pieces, tail] if tail else pieces
    lines = [raw[:-1] if raw.endswith(b"\r") else raw for raw in lines]
    return [raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw for raw in lines]


@settings(deadline=None)
@given(
    st.lists(
        st.sampled_from([b"a", b"{}", b"\n", b"\r", b"\r\n", b"\xef\xbb\xbf", b"\xef", b" ", b"\xff"]), max_size=40
    ),
    st.integers(1, 9),
    st.integers(1, 5),
)
def test_files_are_split_into_lines_as_before_whatever_the_blocks_and_chunks(
    tmp_path_factory, pieces, block_bytes, chunk_lines
):
    root = tmp_path_factory.mktemp("run")
    run = root / "traces" / "r1"
    run.mkdir(parents=True)
    data = b"".join(pieces)
    (run / "a.jsonl").write_bytes(data)
    (run / "b.jsonl").write_bytes(data[::-1])
    location = open_location(root)
    location = SmallBlocks(location.fs, location.root, location.uri, block_bytes)
    chunks = list(ingest.iter_raw_lines(location, "r1", chunk_lines=chunk_lines))
    assert all(chunk.height <= chunk_lines for chunk in chunks)
    lines = pl.concat(chunks) if chunks else frames.empty(ingest.RAW_LINES_SCHEMA)
    expected = [
        (name, number, raw)
        for name, content in (("a", data), ("b", data[::-1]))
        for number, raw in enumerate(reference_lines(content), start=1)
    ]
    assert list(zip(lines["source_file"], lines["line"], lines["raw"], strict=True)) == [
        (f"traces/r1/{name}.jsonl", number, raw) for name, number, raw in expected
    ]


# ---------------------------------------------------------------- cases


def per_line_cases(location, dataset_version: str) -> loaders.Loaded:
    """load_cases as each line validated on its own gives it."""
    folder = ("cases", dataset_version)
    rows, rejects, seen = [], [], set()

    def accept(value, source, line):
        if not isinstance(value, dict):
            rejects.append(loaders.reject(None, "case", source, line, f"not a mapping: a {type(value).__name__}"))
            return
        try:
            case = Case.model_validate(value)
        except ValidationError as exc:
            rejects.append(
                loaders.reject(
                    None, "case", source, line, loaders.describe_validation_error(exc), case_id=value.get("case_id")
                )
            )
            return
        add(case, source, line)

    def add(case, source, line):
        if case.case_id in seen:
            rejects.append(
                loaders.reject(None, "case", source, line, f"duplicate case_id {case.case_id!r}", case_id=case.case_id)
            )
        else:
            seen.add(case.case_id)
            rows.append(frames.case_row(case, dataset_version, source))

    for name in location.files(*folder, suffixes=(".yaml", ".yml", ".jsonl")):
        source = "/".join([*folder, name])
        data = location.read_bytes(*folder, name)
        if not name.endswith(".jsonl"):
            accept(loaders.parse_yaml(data, source).value, source, 1)
            continue
        for number, raw in loaders.iter_lines(data):
            if not raw.strip():
                continue
            case = None
            if not raw.startswith(b"\xef\xbb\xbf") and not loaders.may_break_limits(raw):
                try:
                    case = Case.model_validate_json(raw)
                except ValidationError:
                    case = None
            if case is not None:
                add(case, source, number)
                continue
            value, reason = loaders.parse_json_line(raw)
            if value is None:
                rejects.append(loaders.reject(None, "case", source, number, reason or "invalid"))
            else:
                accept(value, source, number)
    return loaders.Loaded(frames.cases_frame(rows), rejects)


def write_cases(root, lines: list[bytes], yaml_case: dict | None = None, bom: bool = False) -> None:
    folder = root / "cases" / "ds"
    folder.mkdir(parents=True, exist_ok=True)
    if yaml_case is not None:
        (folder / "a.yaml").write_text(yaml.safe_dump(yaml_case))
    (folder / "b.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + b"\n")
    (folder / "c.jsonl").write_bytes(b"\r\n".join(lines[::-1]))


def assert_same_cases(root) -> loaders.Loaded:
    location = open_location(root)
    loaded, reference = inputs.load_cases(location, "ds"), per_line_cases(location, "ds")
    assert loaded.frame.schema == reference.frame.schema
    assert loaded.frame.equals(reference.frame), (loaded.frame.to_dicts(), reference.frame.to_dicts())
    assert loaded.rejects == reference.rejects
    return loaded


AGENT_CASE = {
    "case_id": "agent-1",
    "lanes": ["agent"],
    "input": "refund",
    "allowed_tools": ["get_order", "refund"],
    "reference_tool_calls": [
        {"name": "get_order", "args": {"order_id": "1"}},
        {"name": "refund", "args": {"amount": 12.0}, "accepted": {"amount": [12, 12.0]}, "optional": ["note"]},
    ],
    "alternatives": [[{"name": "refund"}], []],
    "dependencies": [["get_order", "refund"]],
    "fixtures": {"orders": {"1": {"amount": 12.5, "items": [1.0]}}},
    "clock": "2026-03-02T09:30:00Z",
    "milestones": {
        "refunded": {"path": "orders.1.refunded", "gte": 12},
        "paid": {"path": "orders.1.amount", "equals": 12.0},
        "gone": {"path": "orders.2", "absent": True},
        "any": {"path": "a", "contains": None},
    },
    "fault": {"kind": "timeout", "tool": "refund"},
    "scope": {"customer_id": ["c-1"], "limit": 2.0},
}
RAG_CASE = {
    "case_id": "rag-1",
    "case_revision": 2,
    "lanes": ["rag"],
    "input": "q",
    "criticality": "high",
    "required_doc_ids": ["d1"],
    "expected_answer_contains": ["x"],
    "expect_refusal": False,
    "multi_hop": False,
}


def test_ordinary_cases_are_read_columnar_and_give_what_the_per_line_path_gives(tmp_path):
    lines = [
        json.dumps(RAG_CASE).encode(),
        json.dumps(AGENT_CASE).encode(),
        json.dumps(
            {"case_id": "rag-2", "lanes": ["rag", "agent"], "expect_refusal": True}, ensure_ascii=False
        ).encode(),
        json.dumps({**RAG_CASE, "case_id": "caf\u00e9", "input": "\u00e9"}).encode(),
    ]
    write_cases(tmp_path, lines)
    loaded = assert_same_cases(tmp_path)
    assert loaded.frame["case_id"].to_list() == ["rag-1", "agent-1", "rag-2", "caf\u00e9"]
    assert [r["reason"] for r in loaded.rejects] == [
        "duplicate case_id 'caf\u00e9'",
        "duplicate case_id 'rag-2'",
        "duplicate case_id 'agent-1'",
        "duplicate case_id 'rag-1'",
    ]
    raw = pl.Series(jsonl_lines(b"\n".join(lines)), dtype=pl.Binary)
    assert len(columnar_cases(raw, "ds", "s")[0]) == len(lines)


HOSTILE_CASES = [
    {"case_revision": "2"},
    {"case_revision": 2.0},
    {"case_revision": None},
    {"case_revision": True},
    {"lanes": []},
    {"lanes": ["video"]},
    {"lanes": None},
    {"lanes": "rag"},
    {"input": None},
    {"input": 5},
    {"criticality": "low"},
    {"criticality": None},
    {"required_doc_ids": []},
    {"required_doc_ids": [None]},
    {"expect_refusal": "true"},
    {"expect_refusal": 1},
    {"multi_hop": None},
    {"allowed_tools": None},
    {"tool_match": "any"},
    {"dependencies": [["a"]]},
    {"dependencies": [["a", None]]},
    {"fixtures": None},
    {"fixtures": []},
    {"clock": 5},
    {"clock": None},
    {"fault": {"kind": "crash", "tool": "t"}},
    {"fault": {"kind": "timeout"}},
    {"scope": None},
    {"scope": [1]},
    {"value_rules": "bfcl"},
    {"value_rules": "nope"},
    {"value_rules": {"match": "numeric", "tolerance": 0.5}},
    {"reference_tool_calls": [{"name": ""}]},
    {"reference_tool_calls": [{"name": "t", "args": None}]},
    {"reference_tool_calls": [{"name": "t", "accepted": {"a": []}}]},
    {"reference_tool_calls": [{"name": "t", "accepted": {"a": []}, "optional": ["a"]}]},
    {"reference_tool_calls": [{"name": "t", "accepted": {"a": 1}}]},
    {"reference_tool_calls": [None]},
    {"reference_tool_calls": [{"name": "t", "optional": [1]}]},
    {"alternatives": [[None]]},
    {"alternatives": [None]},
    {"milestones": {"m": {"path": "p"}}},
    {"milestones": {"m": {"path": "p", "equals": 1, "gte": 2}}},
    {"milestones": {"m": {"path": "p", "gte": "5"}}},
    {"milestones": {"m": {"path": "p", "gte": True}}},
    {"milestones": {"m": {"path": "p", "gte": 2**60}}},
    {"milestones": {"m": {"path": "p", "lte": None}}},
    {"milestones": {"m": {"path": "p", "exists": 1}}},
    {"milestones": {"m": {"path": "p", "exists": None}}},
    {"milestones": {"m": {"path": "", "equals": 1}}},
    {"milestones": {"m": {"path": "p", "equals": 1, "note": 2}}},
    {"milestones": None},
    {"milestones": {"m": None}},
    {"case_id": ""},
    {"case_id": None},
    {"case_id": 5},
]


# every field with a default given, but for the free-form ones (which are decoded when given)
FULL_RAG_CASE = {
    **RAG_CASE,
    "reference_answer": None,
    "allowed_tools": None,
    "forbidden_tools": [],
    "tool_match": "unordered",
    "dependencies": [],
    "unsafe_after_fault": [],
    "escalation_tools": [],
    "clock": None,
    "fault": None,
}


@pytest.mark.parametrize(
    "field",
    [
        "fixtures",
        "milestones",
        "reference_tool_calls",
        "alternatives",
        "input",
        "tool_match",
        "case_revision",
        "forbidden_tools",
        "dependencies",
    ],
)
def test_a_null_where_the_contract_has_a_default_is_a_reject_even_with_every_other_field_given(tmp_path, field):
    lines = [
        json.dumps(FULL_RAG_CASE).encode(),
        json.dumps({**FULL_RAG_CASE, "case_id": "rag-2", field: None}).encode(),
    ]
    write_cases(tmp_path, lines)
    loaded = assert_same_cases(tmp_path)
    assert loaded.frame["case_id"].to_list() == ["rag-1"] and loaded.rejects[0]["reason"].startswith(field)


def test_hostile_cases_take_the_per_line_path_and_give_its_reasons(tmp_path):
    lines = [
        json.dumps({**AGENT_CASE, "case_id": f"h{i}", **changed}).encode() for i, changed in enumerate(HOSTILE_CASES)
    ]
    lines += [
        json.dumps({**RAG_CASE, "case_id": f"r{i}", **changed}).encode() for i, changed in enumerate(HOSTILE_CASES)
    ]
    lines += [
        b"null",
        b"[1]",
        b"{}",
        b"{} {}",
        b" ",
        b"",
        b"\xef\xbb\xbf" + json.dumps(RAG_CASE).encode(),
        json.dumps(RAG_CASE)[:-1].encode() + b', "input": "again"}',
        json.dumps(RAG_CASE)[:-1].encode() + b', "\\u0069nput": null}',
        json.dumps(AGENT_CASE)[:-1].encode() + b', "milestones": {}}',
        json.dumps(AGENT_CASE)[:-1].encode() + b', "\\u0076alue_rules": "exact"}',
        json.dumps({**RAG_CASE, "input": "1e5 NaN"}).encode(),
        json.dumps({**RAG_CASE, "x": 1e300}).encode(),
        json.dumps({**RAG_CASE, "x": "\\ud83d\\ude00"}).encode(),
        json.dumps({**RAG_CASE, "x": 12345678901234567890}).encode(),
        json.dumps(RAG_CASE)[:-1].encode() + b', "x": NaN}',
        json.dumps(RAG_CASE)[:-1].encode() + b', "x": "\xff"}',
    ]
    write_cases(tmp_path, lines, yaml_case={**RAG_CASE, "case_id": "h0"}, bom=True)
    loaded = assert_same_cases(tmp_path)
    assert len(loaded.rejects) > len(lines)


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(st.lists(case_lines(), min_size=1, max_size=12), st.booleans(), st.booleans())
def test_generated_case_lines_give_what_the_per_line_path_gives(tmp_path_factory, lines, with_yaml, bom):
    root = tmp_path_factory.mktemp("cases")
    write_cases(root, lines, yaml_case={"case_id": "c1", "lanes": ["agent"]} if with_yaml else None, bom=bom)
    assert_same_cases(root)


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(st.lists(case_records(clean=True), min_size=1, max_size=8), st.integers(0, 2**32))
def test_generated_clean_cases_give_what_the_per_line_path_gives(tmp_path_factory, records, seed):
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("cases")
    write_cases(root, [json.dumps(record, ensure_ascii=rng.random() < 0.5).encode() for record in records])
    assert_same_cases(root)


def test_every_case_line_of_a_large_file_is_accounted_for_once(tmp_path):
    lines = [
        json.dumps({**(AGENT_CASE if i % 3 else RAG_CASE), "case_id": f"c{i % 5000}"}).encode() for i in range(6000)
    ]
    lines[17] = b"{broken"
    write_cases(tmp_path, lines)
    loaded = assert_same_cases(tmp_path)
    assert loaded.frame.height == 5000 and len(loaded.rejects) == 2 * 6000 - 5000
    assert np.unique(loaded.frame["case_id"].to_numpy()).size == 5000


# ---------------------------------------------------------------- canonical texts, written in one walk


def reference_canonical_args(value) -> tuple[str, str | None]:
    """canonical_args as it was: the value normalised, then walked again for its whole-number floats."""
    text = frames.json_bytes(value)
    if b".0" in text or b"e+" in text or b"E+" in text:
        return frames.json_bytes(frames.normalize(value)).decode(), frames.integral_float_paths(value)
    return text.decode(), None


_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.text(max_size=5),
        st.sampled_from([1.0, 2.0, -0.0, 1e16, 1e20, 0.5, 12.0]),
        st.dates(),
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 3)), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(deadline=None)
@given(_VALUES)
def test_canonical_texts_are_those_of_the_two_walks(value):
    assert frames.canonical_args(value) == reference_canonical_args(value)
    assert frames.canonical_json(value) == reference_canonical_args(value)[0]
    assert frames.sorted_json(value) == frames.json_bytes(value).decode()
