"""Issue 34: personal data in Unicode disguise is found by both detectors and replaced over the span a reader sees.

The disguises: full-width, other scripts' digits, zero-width characters, IDN and percent-encoded e-mails, non-ASCII
local parts.
"""

from __future__ import annotations

import re

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.deid import DEMO_KEY, Deidentifier, Pseudonymizer, deidentify, independent_scan, scan_frame
from eval_pipeline.deid.columns import VALUE, leaf_values
from eval_pipeline.deid.folding import fold, fold_text
from eval_pipeline.deid.tables import TRACE_TEXT_PATHS
from eval_pipeline.quality.contracts import check_no_personal_data
from eval_pipeline_harness.records import traces_frame_from_records

FULL_WIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
DEVANAGARI = str.maketrans("0123456789", "०१२३४५६७८९")

# (disguised spelling, the plain spelling it stands for, entity type)
DISGUISES = {
    "full-width e-mail": ("jane.doe@example.com".translate(FULL_WIDTH), "jane.doe@example.com", "EMAIL"),
    "full-width card": ("4111 1111 1111 1111".translate(FULL_WIDTH), "4111 1111 1111 1111", "CARD"),
    "Arabic-Indic card": ("4111 1111 1111 1111".translate(ARABIC_INDIC), "4111 1111 1111 1111", "CARD"),
    "Devanagari phone": ("+1 415-555-0132".translate(DEVANAGARI), "+1 415-555-0132", "PHONE"),
    "zero-width in e-mail": ("jane\u200b.doe@exa\u200dmple.com", "jane.doe@example.com", "EMAIL"),
    "zero-width in card": ("4111\u200b1111\u20601111\ufeff1111", "4111111111111111", "CARD"),
    "soft hyphen and bidi in IBAN": ("GB82\u00adWEST\u202e1234 5698 7654 32", "GB82 WEST 1234 5698 7654 32", "IBAN"),
    "IDN e-mail domain": ("jane.doe@bücher.example", "jane.doe@xn--bcher-kva.example", "EMAIL"),
    "percent-encoded e-mail": ("jane.doe%40example.com", "jane.doe@example.com", "EMAIL"),
    "non-ASCII local part": ("josé.garcía@ejemplo.es", "jose\u0301.garci\u0301a@ejemplo.es", "EMAIL"),
}
IDS = list(DISGUISES)


def _trace(text: str) -> dict:
    """A trace carrying `text` in its input, answer, a tool call's arguments and result, and its final state."""
    return {
        "trace_id": "t-1", "case_id": "c-1", "case_revision": 1, "attempt": 1, "status": "ok", "error": None,
        "input": f"Customer wrote: {text}.",
        "answer": {"text": f"Noted {text} on file.", "citations": []},
        "steps": [
            {"index": 1, "kind": "tool_call", "tool": "lookup", "args": {"q": text}, "status": "ok",
             "result": {"contact": f"({text})"}},
            {"index": 2, "kind": "finish", "content": f"done;{text};done"},
        ],
        "final_state": {"note": text},
    }  # fmt: skip


def _texts(frame: pl.DataFrame) -> list[str]:
    return [v for path in TRACE_TEXT_PATHS for v in leaf_values(frame, path)[VALUE].to_list()]


def _compact(text: str) -> str:
    """The folded text without separators, lowercase: what any spelling of a value leaves behind."""
    return re.sub(r"[\s\-.]", "", fold_text(text)).lower()


@pytest.mark.parametrize("name", IDS)
def test_a_disguised_value_in_every_text_field_survives_in_no_spelling(name):
    disguised, plain, entity_type = DISGUISES[name]
    traces = traces_frame_from_records([_trace(disguised)], run_id="r-1")
    out = deidentify(traces, _cases(), None, DEMO_KEY)
    texts = _texts(out.traces)
    needle = _compact(fold_text(plain))
    assert len(texts) == 6
    for text in texts:
        assert disguised not in text
        assert needle not in _compact(text), (name, text)
    token = Pseudonymizer(DEMO_KEY).token(entity_type, fold_text(plain))
    # the disguised and the plain spelling share one pseudonym, and each field holds it exactly once
    assert [text.count(token) for text in texts] == [1] * 6
    assert out.report.filter(pl.col("entity_type") == entity_type)["replacements"].sum() == 6
    assert check_no_personal_data("deid_traces", out.traces, independent=True).passed


def _cases() -> pl.DataFrame:
    from eval_pipeline_harness.records import cases_frame_from_records

    return cases_frame_from_records([{"case_id": "c-1", "case_revision": 1, "lanes": ["agent"], "input": "hi"}])


@pytest.mark.parametrize("name", IDS)
def test_both_detectors_find_a_disguised_value_without_the_replacement_pass(name):
    disguised, _, entity_type = DISGUISES[name]
    frame = pl.DataFrame({"text": [f"Customer wrote: {disguised}."]})
    assert scan_frame(frame, "t", independent=False)["entity_type"].to_list() == [entity_type]
    independent = independent_scan(frame, "t")["entity_type"].to_list()
    assert independent == [entity_type]
    verdict = check_no_personal_data("deid_traces", frame, independent=True)
    assert not verdict.passed and f"deid_traces.text: {entity_type}" in verdict.description


def test_the_token_covers_the_original_span_the_reader_sees():
    deid = Deidentifier(DEMO_KEY, ["Maria"])
    text = "From ma\u200bria.lo\u200dpez%40example.com ｏｒ ＋１ ４１５ ５５５ ０１３２, signed Ma\u200bria."
    out, _ = deid.corpus(pl.DataFrame({"text": [text]}))
    tokens = Pseudonymizer(DEMO_KEY)
    expected = (
        f"From {tokens.token('EMAIL', 'maria.lopez@example.com')} ｏｒ {tokens.token('PHONE', '+1 415 555 0132')}, "
        f"signed {tokens.token('PERSON', 'Maria')}."
    )
    assert out["text"].to_list() == [expected]


def test_fold_keeps_the_original_span_of_every_character():
    text = "a\u200bｂ%40٣e\u0301"
    folded = fold(text)
    assert folded.text == "ab@3é"
    assert [folded.source(i, i + 1) for i in range(len(folded.text))] == [(0, 1), (2, 3), (3, 6), (6, 7), (7, 9)]


def test_ascii_text_is_not_folded():
    from eval_pipeline.deid.folding import may_be_disguised

    values = pl.Series(["plain ascii 123", "50% off", "a%40b", "café", "caf\u200be", "٣", None])
    assert may_be_disguised(values).to_list() == [False, False, True, False, True, True, False]


DISGUISE_FUNCTIONS = {
    "full-width": lambda v, _: v.translate(FULL_WIDTH),
    "arabic-indic digits": lambda v, _: v.translate(ARABIC_INDIC),
    "devanagari digits": lambda v, _: v.translate(DEVANAGARI),
    "zero-width inside": lambda v, at: v[: 1 + at % (len(v) - 1)] + "\u200b" + v[1 + at % (len(v) - 1) :],
    "word joiner and BOM": lambda v, at: "\u2060".join(v[: 1 + at % 4]) + v[1 + at % 4 :].replace("1", "\ufeff1", 1),
    "percent-encoded @": lambda v, _: v.replace("@", "%40"),
}
VALUES = {
    "EMAIL": "mia.okafor@mail.example.org",
    "CARD": "5500 0000 0000 0004",
    "PHONE": "+44 20 7946 0958",
    "IBAN": "DE89 3704 0044 0532 0130 00",
}
LEAVES = ("input", "answer", "args", "result", "content", "final_state")


def _trace_with(leaf: str, text: str) -> dict:
    record = _trace("nothing personal")
    if leaf == "input":
        record["input"] = text
    elif leaf == "answer":
        record["answer"]["text"] = text
    elif leaf == "args":
        record["steps"][0]["args"] = {"q": text}
    elif leaf == "result":
        record["steps"][0]["result"] = {"contact": text}
    elif leaf == "content":
        record["steps"][1]["content"] = text
    else:
        record["final_state"] = {"note": text}
    return record


@settings(deadline=None)
@given(
    disguise=st.sampled_from(sorted(DISGUISE_FUNCTIONS)),
    entity_type=st.sampled_from(sorted(VALUES)),
    leaf=st.sampled_from(LEAVES),
    at=st.integers(min_value=0, max_value=40),
    before=st.sampled_from(["", "Contact: ", "see (", 'name="x" ']),
)
def test_every_disguise_in_every_text_leaf_is_replaced(disguise, entity_type, leaf, at, before):
    plain = VALUES[entity_type]
    disguised = DISGUISE_FUNCTIONS[disguise](plain, at)
    traces = traces_frame_from_records([_trace_with(leaf, f"{before}{disguised} thanks")], run_id="r-1")
    out = deidentify(traces, _cases(), None, DEMO_KEY)
    token = Pseudonymizer(DEMO_KEY).token(entity_type, plain)
    joined = " ".join(_texts(out.traces))
    assert _compact(plain) not in _compact(joined)
    assert joined.count(token) == 1
    assert check_no_personal_data("deid_traces", out.traces, independent=True).passed
