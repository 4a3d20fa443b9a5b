"""Issue 17: de-identification, name learning and the residual scans work on distinct values, as over every row.

The results are what a pass over every row gives (rows repeated, values shared between leaves, nulls inside lists).
"""

from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.contracts.frames import TRACES_SCHEMA
from eval_pipeline.deid import (
    DEMO_KEY,
    Deidentifier,
    NameCollector,
    collect_names,
    deidentify,
    merge_reports,
    scan_frame,
    tables,
)
from eval_pipeline.deid.columns import distinct_values, leaf_values
from eval_pipeline.deid.detectors import ESCAPED_TOKEN_PATTERN, TOKEN_PATTERN
from eval_pipeline.deid.name_learning import MAY_START_NAME, NOT_IN_NAMES
from eval_pipeline.deid.names import person_name
from eval_pipeline.deid.residual import BARE_IDS, independent_scan, judge, judged_elsewhere, normalized


def _repeated(frame: pl.DataFrame, times: int) -> pl.DataFrame:
    """Each row `times` times, in a row, with distinct trace ids."""
    out = pl.concat([frame] * times).sort("trace_id", maintain_order=True)
    return out.with_columns(pl.format("{}~{}", "trace_id", pl.int_range(pl.len())).alias("trace_id"))


def test_repeated_rows_get_the_same_tokens_and_are_counted_every_time(planted_frames):
    traces, cases, corpus = planted_frames
    once = deidentify(traces, cases, corpus, DEMO_KEY)
    thrice = deidentify(_repeated(traces, 3), cases, corpus, DEMO_KEY)
    text_columns = [c for c in traces.columns if c != "trace_id"]
    assert thrice.traces.select(text_columns).equals(_repeated(once.traces, 3).select(text_columns))
    by = ["table", "field", "entity_type"]
    tripled = once.report.with_columns(
        pl.when(pl.col("table") == "traces").then(pl.col("replacements") * 3).otherwise("replacements")
    )
    assert thrice.report.sort(by).equals(tripled.sort(by))


def test_each_row_alone_gives_the_rows_of_the_whole_frame(planted_frames, pii):
    traces, cases, _ = planted_frames
    inputs = [traces["input"][0], f"Nothing here but {pii.IPV4} and {pii.CARD_BAD_LUHN}."]
    frame = pl.concat([traces, traces]).with_columns(
        pl.Series("input", inputs * 2), pl.Series("trace_id", list("abcd"))
    )
    deid = Deidentifier(DEMO_KEY, collect_names(frame, cases))
    whole, report = deid.traces(frame)
    alone = [deid.traces(frame[i : i + 1]) for i in range(frame.height)]
    assert whole.equals(pl.concat([out for out, _ in alone]))
    by = ["table", "field", "entity_type"]
    summed = pl.concat([r for _, r in alone]).group_by(by).agg(pl.col("replacements").sum())
    assert report.sort(by).equals(summed.sort(by))


def test_scan_findings_follow_the_rows_and_the_text_order():
    one = ["mail b.two@example.com then a.one@example.com", "x", "+1 415-555-0132 and b.two@example.com"]
    frame = pl.DataFrame({"trace_id": ["t"] * 6, "notes": one + one, "tags": [one[:1], [], one, None, [one[2]], one]})
    found = scan_frame(frame, "t")
    # two e-mails of one cell in the order they are written, not in the order of the distinct matches
    emails = found.filter((pl.col("column") == "notes") & (pl.col("row") == 0))["masked_excerpt"].to_list()
    assert emails == ["b." + "*" * 13 + "om", "a." + "*" * 13 + "om"]
    for row in range(6):
        alone = scan_frame(frame[row : row + 1], "t").with_columns(pl.lit(row, dtype=pl.Int64).alias("row"))
        assert found.filter(pl.col("row") == row).equals(alone)


def test_independent_scan_of_repeated_rows_repeats_its_findings(pii):
    frame = pl.DataFrame(
        {
            "text": [f"id {pii.SSN} and 0068528", "ok", f"IBAN {pii.IBAN}"] * 4,
            "more": [[f"card {pii.CARD}", f"card {pii.CARD}"], [], None] * 4,
        }
    )
    found = independent_scan(frame, "t")
    first = independent_scan(frame[:3], "t")
    expected = pl.concat([first.with_columns(pl.col("row") + 3 * k) for k in range(4)])
    # the same card twice in one cell is one finding of that cell
    assert found.sort("column", "row", maintain_order=True).equals(expected.sort("column", "row", maintain_order=True))
    assert found.filter(pl.col("column") == "more").height == 4


@settings(deadline=None)
@given(st.text(alphabet="0123456789", min_size=6, max_size=24), st.sampled_from(sorted(BARE_IDS) + ["US"]))
def test_digit_runs_skipped_before_judging_hold_nothing(digits, region):
    regions = frozenset({region})
    skipped = pl.DataFrame({"match": [digits]}).select(judged_elsewhere(regions))["match"][0]
    if skipped:
        assert judge(digits, regions) == ()


def _normalized_step_by_step(text: str) -> str:
    for pattern, replacement in ((TOKEN_PATTERN, " ~ "), (ESCAPED_TOKEN_PATTERN, " ~ "), (r"\\[nrt]", " ")):
        text = re.sub(pattern, replacement, text)
    text = re.sub(r"[\t\n\x0b\x0c\r\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]", " ", text)
    return re.sub(" {2,}", " ", text)


@settings(deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<EMAIL_0123456789abcdef>",
                "&lt;PHONE_0123456789abcdef&gt;",
                "\\n",
                "\\\\n",
                "\\t",
                "\n",
                "\t",
                " ",
                "  ",
                "\u00a0",
                "\u3000",
                "a",
                "7",
                "&lt;",
                "<",
                ">",
                "\\",
            ]
        ),
        max_size=12,
    )
)
def test_normalizing_in_fewer_passes_is_the_same_text(pieces):
    text = "".join(pieces)
    got = pl.DataFrame({"t": [text]}).select(normalized(pl.col("t")))["t"][0]
    assert got == _normalized_step_by_step(text)


def test_leaves_skip_null_structs_and_their_hidden_fields():
    child = pa.array(["hidden", "seen", None, "last"])
    structs = pa.StructArray.from_arrays([child], names=["a"], mask=pa.array([True, False, False, False]))
    frame = pl.from_arrow(pa.table({"s": pa.ListArray.from_arrays(pa.array([0, 2, 3, 4]), structs)}))
    assert leaf_values(frame, ("s", "a")).rows() == [(0, "seen"), (2, "last")]
    assert sorted(distinct_values(frame, ("s", "a")).rows()) == [("last", 1), ("seen", 1)]


@pytest.mark.parametrize("escaped", [False, True])
def test_names_are_learned_from_counts_over_repeated_and_escaped_values(escaped):
    key = "signed\\u005fby" if escaped else "signed_by"
    result = '{"customer":{"full_name":"Dana Whitfield"},"' + key + '":"Dana Whitfield"}'
    step = {"index": 1, "kind": "tool_call", "tool": "t", "args_json": "{}", "result_json": result}
    frame = pl.DataFrame(
        {"steps": [[step]] * 5 + [[{**step, "result_json": '{"signed_by":"n/a"}'}]], "final_state_json": [None] * 6},
        schema={"steps": TRACES_SCHEMA["steps"], "final_state_json": pl.String},
    )
    collector = NameCollector()
    collector.add_traces(frame)
    assert collector.name_keys() == {"full_name", "signed_by"}
    assert collector._totals["signed_by"] == 6
    assert collector._persons["signed_by"]["Dana Whitfield"] == 5
    assert json.loads(result)["signed_by"] == "Dana Whitfield"


def test_a_lone_surrogate_escape_is_counted_like_any_other_value():
    # `\ud800` decodes to a lone surrogate, which no Arrow string holds: that pair is counted in Python instead.
    step = {
        "index": 1,
        "kind": "tool_call",
        "tool": "t",
        "args_json": "{}",
        "result_json": '{"full_name":"Mia Li","signed_by":"\\ud800 x","state":"Open"}',
        "state_diff_json": '[{"path":"a.owner","before":null,"after":"\\udfff"}]',
    }
    frame = pl.DataFrame(
        {"steps": [[step]] * 2, "final_state_json": [None] * 2},
        schema={"steps": TRACES_SCHEMA["steps"], "final_state_json": pl.String},
    )
    collector = NameCollector()
    collector.add_traces(frame)
    assert collector._totals == {"full_name": 2, "signed_by": 2, "state": 2, "owner": 1}
    assert collector.names() == {"Mia Li"}


@settings(deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            list(" \t\n\x0b\x1c\x1f\x85\xa0'’-._@:0²٣aZÉéß\u0301Ωx,()") + [chr(c) for c in range(0x21, 0x7F)]
        ),
        max_size=14,
    )
)
def test_values_skipped_before_person_name_are_no_names(value):
    values = pl.Series([value])
    if not (values.str.contains(MAY_START_NAME) & ~values.str.contains(NOT_IN_NAMES))[0]:
        assert person_name(value) is None


def test_sentinels_are_chosen_among_all_distinct_values(planted_frames, pii):
    traces, _, _ = planted_frames
    taken = "".join(chr(c) for c in range(0xFDD0, 0xFDEE))  # all but the last two noncharacters
    frame = traces.with_columns(pl.Series("error", [taken, None]))
    out, _ = Deidentifier(DEMO_KEY, []).traces(frame)
    assert out["error"].to_list() == [taken, None]
    assert pii.EMAIL not in out["input"][0]
    with pytest.raises(ValueError, match="noncharacters"):
        Deidentifier(DEMO_KEY, []).traces(traces.with_columns(pl.Series("error", [taken, "\ufdee\ufdef"])))


def test_two_tables_on_two_threads_give_what_each_gives_alone(planted_frames, monkeypatch):
    # the run de-identifies cases and corpus on a thread while the traces stream; a memo kept this small is cleared
    # on nearly every pass, while the other threads read it
    monkeypatch.setattr(tables, "_VERDICTS_KEPT", 2)
    traces, cases, corpus = planted_frames
    names = collect_names(traces, cases)
    alone = Deidentifier(DEMO_KEY, names)
    expected = [alone.traces(traces), alone.cases(cases), alone.corpus(corpus)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    try:
        for _ in range(10):
            deid = Deidentifier(DEMO_KEY, names)
            with ThreadPoolExecutor(3) as pool:
                futures = [pool.submit(deid.traces, traces), pool.submit(deid.cases, cases)]
                futures.append(pool.submit(deid.corpus, corpus))
                got = [f.result() for f in futures]
            for (out, report), (want, want_report) in zip(got, expected, strict=True):
                assert out.equals(want) and merge_reports([report]).equals(merge_reports([want_report]))
    finally:
        sys.setswitchinterval(switch)
