"""No line can crash a batch: what the columnar parse cannot hold is a reject with its reason, and every line is
exactly one trace, one reject or one skipped blank."""

import json

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_pipeline.io import ingest, trace_per_line
from eval_pipeline.io.json_limits import MAX_JSON_DEPTH, depth_of, limit_breach

from .test_ingest import parse, trace, write_run


def test_lines_the_columnar_parse_cannot_hold_are_rejects_and_the_batch_survives(tmp_path):
    valid = json.dumps(trace("ok-1"))
    lines = [
        valid.encode(),  # 1 kept
        json.dumps(trace("t2"))[:-1].encode() + b', "attempt": 18446744073709551616}',  # 2 int beyond 64 bits
        json.dumps(trace("t3"))[:-1].encode() + b', "usage": {"cost_usd": 1e400}}',  # 3 beyond float64
        json.dumps(trace("t4"))[:-1].encode() + b', "attempt": 2, "attempt": "two"}',  # 4 duplicate key, two types
        json.dumps(trace("t5"))[:-1].encode() + b', "attempt": 2, "attempt": 3}',  # 5 duplicate key, one type
        json.dumps({**trace("t6"), "answer": None})[:-1].encode()[: -len(', "answer": null')]
        + b', "answer": {"text": "a", "text": "b"}}',  # 6 nested duplicate
        json.dumps(trace("t7"))[:-1].encode() + b', "usage": {"latency_ms": NaN}}',  # 7 NaN literal
        json.dumps(trace("t8"))[:-1].encode() + b', "x": -Infinity}',  # 8 Infinity, unknown field
        json.dumps(trace("t9"))[:-1].encode() + b', "extra": ' + b"[" * 140 + b"]" * 140 + b"}",  # 9 too deep
        json.dumps(trace("t10", input="\\ud800"), ensure_ascii=False)
        .replace("\\\\", "\\")
        .encode(),  # 10 lone surrogate
        json.dumps(trace("ok-11", input="😀 café 1e300 NaNa")).encode(),  # 11 kept: suspect, fine
        json.dumps(
            trace("ok-12", steps=[{"index": 0, "kind": "tool_call", "tool": "t", "args": {"n": 9223372036854775807}}])
        ).encode(),  # 12 kept: int64 max
    ]
    write_run(tmp_path, lines)
    parsed = parse(tmp_path)
    assert parsed.traces["trace_id"].to_list() == ["ok-1", "ok-11", "ok-12"]
    assert parsed.traces["input"][1] == "😀 café 1e300 NaNa"
    reasons = dict(zip(parsed.rejects["line"].to_list(), parsed.rejects["reason"].to_list(), strict=True))
    assert reasons == {
        2: "integer 18446744073709551616 is outside the 64-bit range",
        3: "number 1e400 is beyond the range of a 64-bit float",
        4: "attempt: Input should be a valid integer",
        5: "duplicate key 'attempt': a field may be given once",
        6: "duplicate key 'answer.text': a field may be given once",
        7: "invalid JSON: NaN is not a JSON number",
        8: "invalid JSON: -Infinity is not a JSON number",
        9: f"JSON nested deeper than {MAX_JSON_DEPTH} levels",
        10: "invalid JSON: a string holds a lone surrogate (U+D800), which is not text",
    }
    assert parsed.rejects.filter(pl.col("line") == 2)["trace_id"].to_list() == ["t2"]


def test_a_byte_order_mark_at_the_start_of_a_file_or_of_a_joined_file_is_not_part_of_the_line(tmp_path):
    bom = b"\xef\xbb\xbf"
    write_run(
        tmp_path,
        [
            bom + json.dumps(trace("t1")).encode(),
            json.dumps(trace("t2")).encode(),
            bom + json.dumps(trace("t3")).encode(),
        ],
    )
    parsed = parse(tmp_path)
    assert parsed.traces["trace_id"].to_list() == ["t1", "t2", "t3"] and parsed.rejects.height == 0


def test_a_refused_line_does_not_hide_a_later_line_with_its_trace_id(tmp_path):
    first = json.dumps(trace("t1"))[:-1].encode() + b', "attempt": 1, "attempt": 1}'
    write_run(tmp_path, [first, json.dumps(trace("t1")).encode()])
    parsed = parse(tmp_path)
    assert parsed.traces["source_line"].to_list() == [2]
    assert parsed.rejects["line"].to_list() == [1]


def test_a_refused_line_in_a_large_block_is_found_by_bisection():
    good = [json.dumps(trace(f"t{i}")).encode() for i in range(1000)]
    bad = json.dumps(trace("bad"))[:-1].encode() + b', "attempt": 1, "attempt": 1}'
    table, rows, reasons = trace_per_line.columnar_parse([*good[:637], bad, *good[637:]])
    assert list(reasons) == [637] and table.num_rows == 1000
    assert rows[636] == 636 and rows[638] == 637 and 637 not in rows


def test_limit_breach_reads_numbers_not_text():
    assert limit_breach('{"a": "18446744073709551616 NaN Infinity 1e999"}') is None
    assert limit_breach('{"a": -9223372036854775808, "b": 1.7e308, "c": 1e-400}') is None
    assert limit_breach('{"a": -9223372036854775809}') == "integer -9223372036854775809 is outside the 64-bit range"
    assert (
        limit_breach('{"a": ' + "9" * 5000 + "}")
        == "integer 999999999999…(5000 characters) is outside the 64-bit range"
    )
    assert depth_of({"a": [1, {"b": []}]}) == 4 and depth_of(5) == 0


# ---------------------------------------------------------------- the invariant on generated lines

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
_FIELDS = {
    "trace_id": st.one_of(st.text(min_size=1, max_size=8), st.integers()),
    "case_id": st.sampled_from(["rag-1", "rag-1", "nope", ""]),
    "attempt": st.one_of(st.integers(min_value=-(2**66), max_value=2**66), st.text(max_size=3)),
    "status": st.sampled_from(["ok", "error", "timeout", "other"]),
    "input": st.text(max_size=20),
    "answer": st.one_of(st.fixed_dictionaries({"text": st.text(max_size=20)}), _JSON),
    "context": st.one_of(
        st.lists(st.fixed_dictionaries({"doc_id": st.text(max_size=5), "text": st.text(max_size=10)}), max_size=2),
        _JSON,
    ),
    "steps": st.one_of(
        st.lists(
            st.fixed_dictionaries(
                {"index": st.integers(0, 3), "kind": st.just("tool_call"), "tool": st.text(max_size=4), "args": _JSON}
            ),
            max_size=2,
        ),
        _JSON,
    ),
    "usage": st.one_of(st.fixed_dictionaries({"cost_usd": st.floats(allow_nan=False, allow_infinity=False)}), _JSON),
    "extra": _JSON,
}


@st.composite
def trace_lines(draw) -> bytes:
    """A trace line: valid, mutated, or hostile (extreme numbers, duplicate keys, deep nesting, odd bytes)."""
    keys = draw(st.lists(st.sampled_from(sorted(_FIELDS)), unique=True, max_size=len(_FIELDS)))
    record = {key: draw(_FIELDS[key]) for key in keys}
    text = json.dumps(record, ensure_ascii=draw(st.booleans()))
    mutation = draw(
        st.sampled_from(
            ["none", "none", "duplicate", "nan", "huge", "deep", "truncate", "bytes", "bom", "blank", "surrogate"]
        )
    )
    if mutation == "duplicate" and keys:
        key = draw(st.sampled_from(keys))
        text = text[:-1] + (", " if record else "") + f'"{key}": {json.dumps(draw(_JSON))}' + "}"
    elif mutation == "nan":
        text = (
            text[:-1]
            + (", " if record else "")
            + f'"usage": {{"latency_ms": {draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))}}}'
            + "}"
        )
    elif mutation == "huge":
        text = (
            text[:-1]
            + (", " if record else "")
            + f'"attempt": {draw(st.sampled_from(["1e400", "18446744073709551616", "-1e999", "1" * 400]))}'
            + "}"
        )
    elif mutation == "deep":
        depth = draw(st.integers(100, 1200))
        text = text[:-1] + (", " if record else "") + '"extra": ' + "[" * depth + "]" * depth + "}"
    elif mutation == "truncate":
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif mutation == "surrogate":
        text = text[:-1] + (", " if record else "") + '"input": "\\udc00x"}'
    raw = text.encode("utf-8", "surrogatepass")
    if mutation == "bytes":
        raw = raw[: len(raw) // 2] + draw(st.binary(min_size=1, max_size=4)) + raw[len(raw) // 2 :]
    elif mutation == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif mutation == "blank":
        raw = draw(st.sampled_from([b"", b"  ", b"\t", b"\r"]))
    return raw.replace(b"\n", b" ")


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(trace_lines(), min_size=1, max_size=12))
def test_every_generated_line_is_exactly_one_trace_reject_or_blank(lines):
    valid = json.dumps(trace("anchor")).encode()
    raws = [valid, *lines, valid]
    frame = pl.DataFrame(
        {"run_id": "r1", "source_file": "traces/r1/batch.jsonl", "line": list(range(1, len(raws) + 1)), "raw": raws},
        schema=ingest.RAW_LINES_SCHEMA,
    )
    parsed = ingest.parse_traces(frame, {"rag-1": 2}, "r1")
    kept, rejected = parsed.traces["source_line"].to_list(), parsed.rejects["line"].to_list()
    blank = [number for number, raw in enumerate(raws, start=1) if not raw.strip()]
    assert sorted(kept + rejected + blank) == list(range(1, len(raws) + 1))
    assert parsed.blank_lines == len(blank)
    assert kept[0] == 1 and len(raws) not in kept  # the anchor, and its later duplicate is a reject
    assert parsed.rejects["reason"].null_count() == 0
    assert parsed.traces["trace_id"].n_unique() == parsed.traces.height


def test_label_and_corpus_lines_beyond_the_limits_are_rejects_not_a_failed_load(tmp_path):
    from eval_pipeline.io import labels
    from eval_pipeline.io.storage import open_location

    qrels = tmp_path / "labels" / "qrels"
    qrels.mkdir(parents=True)
    (qrels / "q.jsonl").write_bytes(
        b"\n".join(
            [
                b'{"query_id": "q1", "doc_id": "d1", "grade": 18446744073709551616}',
                b'{"query_id": "q1", "doc_id": "d\\ud800", "grade": 1}',
                b'{"query_id": "q1", "doc_id": "d2", "grade": 1}',
            ]
        )
    )
    loaded = labels.load_judgments(open_location(tmp_path))
    assert loaded.frame["doc_id"].to_list() == ["d2"]
    assert [r["reason"] for r in loaded.rejects] == [
        "integer 18446744073709551616 is outside the 64-bit range",
        "invalid JSON: a string holds a lone surrogate (U+D800), which is not text",
    ]
