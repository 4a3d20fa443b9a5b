"""deidentify over traces, cases and corpus built from SPEC-shaped records with planted personal data."""

from __future__ import annotations

import hashlib
import hmac
import json

import polars as pl
import pytest

from eval_pipeline.contracts.frames import CASES_SCHEMA, CORPUS_SCHEMA, TRACES_SCHEMA, call_key
from eval_pipeline.deid import DEMO_KEY, REPORT_SCHEMA, collect_names, deidentify
from eval_pipeline.deid.scan import scan_frame
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records


def _text_of(*frames: pl.DataFrame) -> str:
    """Every value of the frames as one JSON document, to search for raw values."""
    return json.dumps([f.to_dicts() for f in frames], default=str, ensure_ascii=False)


def _expected_token(entity_type: str, normal_form: str, key: bytes = DEMO_KEY) -> str:
    """The token computed independently: HMAC-SHA256 over `TYPE\\x1fnormal form`, first 16 hex characters (64 bits)."""
    digest = hmac.new(key, f"{entity_type}\x1f{normal_form}".encode(), hashlib.sha256).hexdigest()
    return f"<{entity_type}_{digest[:16]}>"


def _step(frame: pl.DataFrame, row: int, index: int) -> dict:
    return frame.row(row, named=True)["steps"][index]


def test_no_planted_value_survives_in_any_output_frame(planted_frames, pii):
    traces, cases, corpus = planted_frames
    names = collect_names(traces, cases)
    # The raw frames do hold every planted value (so the checks below can fail).
    raw_text = _text_of(traces, cases, corpus)
    assert [v for v in pii.PLANTED if v not in raw_text] == []

    result = deidentify(traces, cases, corpus, DEMO_KEY)

    for table, frame in (("traces", result.traces), ("cases", result.cases), ("corpus", result.corpus)):
        assert scan_frame(frame, table, names).height == 0
    out_text = _text_of(result.traces, result.cases, result.corpus)
    assert [v for v in pii.PLANTED if v in out_text] == []
    # Ordinary ids, dates, SKUs, error codes, doc ids and checksum-invalid look-alikes are left as they were.
    assert [v for v in pii.DECOYS if v not in out_text] == []


def test_schemas_rows_and_identifiers_are_unchanged(planted_frames):
    traces, cases, corpus = planted_frames
    result = deidentify(traces, cases, corpus, DEMO_KEY)
    assert result.traces.schema == pl.Schema(TRACES_SCHEMA)
    assert result.cases.schema == pl.Schema(CASES_SCHEMA)
    assert result.corpus.schema == pl.Schema(CORPUS_SCHEMA)
    assert (result.traces.height, result.cases.height, result.corpus.height) == (2, 1, 2)
    # Join keys and every non-text column are byte-for-byte the same.
    same_traces = [
        "run_id",
        "trace_id",
        "case_id",
        "case_revision",
        "attempt",
        "status",
        "has_answer",
        "input_tokens",
        "cost_usd",
    ]
    assert result.traces.select(same_traces).equals(traces.select(same_traces))
    same_cases = ["case_id", "lanes", "required_doc_ids", "allowed_tools", "dependencies", "tool_match"]
    assert result.cases.select(same_cases).equals(cases.select(same_cases))
    assert result.corpus["doc_id"].to_list() == ["policy/refunds-2025", "faq/contact"]
    steps = result.traces.select(pl.col("steps").list.eval(pl.element().struct.field("tool")))["steps"].to_list()
    assert steps == [["get_order", "send_email", None], ["get_order", "send_email", None]]
    calls = result.cases.select(pl.col("reference_tool_calls").list.eval(pl.element().struct.field("name")))
    assert calls.item().to_list() == ["get_order", "send_email"]
    assert result.traces.row(0, named=True)["context"][0]["doc_id"] == "policy/refunds-2025"
    assert result.cases.row(0, named=True)["milestones"][0]["name"] == "customer_notified"


def test_every_json_field_stays_valid_json_with_the_same_keys(planted_frames):
    traces, cases, corpus = planted_frames
    result = deidentify(traces, cases, corpus, DEMO_KEY)
    for before, after in zip(traces.iter_rows(named=True), result.traces.iter_rows(named=True), strict=True):
        assert json.loads(after["final_state_json"]).keys() == json.loads(before["final_state_json"]).keys()
        for s_before, s_after in zip(before["steps"], after["steps"], strict=True):
            for field in ("args_json", "result_json", "state_diff_json", "dispatched_args_json"):
                if s_before[field] is not None:
                    parsed = json.loads(s_after[field])
                    assert type(parsed) is type(json.loads(s_before[field]))
    case = result.cases.row(0, named=True)
    fixtures = json.loads(case["fixtures_json"])
    assert sorted(fixtures["customers"]["c-771"]) == ["email", "full_name", "iban", "office", "phone", "ssn"]
    assert fixtures["orders"]["88131"] == {"amount": 49, "date": "2026-03-01", "sku": "SKU-88-B"}


def test_same_value_gets_the_same_token_in_every_trace_table_and_field(planted_frames, pii):
    traces, cases, corpus = planted_frames
    result = deidentify(traces, cases, corpus, DEMO_KEY)
    email = _expected_token("EMAIL", "jane.doe@example.com")
    phone = _expected_token("PHONE", "14155550132")
    # Both traces' inputs: `Refund order 88131 for <email>; she called from <phone>.`
    assert result.traces["input"].to_list() == [f"Refund order 88131 for {email}; she called from {phone}."] * 2
    case = result.cases.row(0, named=True)
    assert case["input"] == f"Refund order 88131 for {email}; she called from {phone}."
    assert json.loads(case["fixtures_json"])["customers"]["c-771"]["email"] == email
    assert case["expected_answer_contains"] == [email, "14 days"]
    assert case["milestones"][0]["value_json"] == f'"{email}"'
    # The upper-case spelling in a tool result normalizes to the same token.
    result_json = json.loads(_step(result.traces, 1, 0)["result_json"])
    assert result_json["customer"]["email"] == email
    # `+1 415-555-0132` (fixtures, retrieval) and `(415) 555-0132` (input) are one phone number.
    assert json.loads(case["fixtures_json"])["customers"]["c-771"]["phone"] == phone
    assert result.traces.row(0, named=True)["retrieval"][0]["query"] == f"refund {email} {phone}"
    # The SSN written bare in a finish message and under the `ssn` key of the fixtures.
    ssn = _expected_token("NATIONAL_ID", "078051120")
    assert _step(result.traces, 0, 2)["content"].endswith(f"SSN {ssn}")
    assert json.loads(case["fixtures_json"])["customers"]["c-771"]["ssn"] == ssn


def test_tool_call_keys_still_match_the_reference_after_deidentification(planted_frames):
    traces, cases, corpus = planted_frames
    result = deidentify(traces, cases, corpus, DEMO_KEY)

    def keys(trace_frame: pl.DataFrame, case_frame: pl.DataFrame) -> tuple[str, str, str]:
        reference = case_frame.row(0, named=True)["reference_tool_calls"][1]
        step = _step(trace_frame, 0, 1)
        return (
            call_key(reference["name"], reference["args_json"]),
            call_key(step["tool"], step["args_json"]),
            call_key(step["dispatched_tool"], step["dispatched_args_json"]),
        )

    before = keys(traces, cases)
    after = keys(result.traces, result.cases)
    assert before[0] == before[1] == before[2]
    assert after[0] == after[1] == after[2]
    email = _expected_token("EMAIL", "jane.doe@example.com")
    card = _expected_token("CARD", "4111111111111111")
    mia, li = _expected_token("PERSON", "mia"), _expected_token("PERSON", "li")
    assert after[0] == f'send_email({{"body":"Dear {mia} {li}, card {card} refunded.","to":"{email}"}})'
    # An argument-free-of-personal-data call is untouched: get_order(order_id 88131).
    assert call_key("get_order", _step(result.traces, 0, 0)["args_json"]) == 'get_order({"order_id":"88131"})'


def test_checksum_invalid_look_alikes_are_not_replaced(planted_frames, pii):
    traces, cases, corpus = planted_frames
    result = deidentify(traces, cases, corpus, DEMO_KEY)
    result_json = json.loads(_step(result.traces, 0, 0)["result_json"])
    assert result_json["declined_card"] == pii.CARD_BAD_LUHN
    assert result_json["old_iban"] == pii.IBAN_BAD
    assert result_json["card"] == _expected_token("CARD", "4111111111111111")
    assert result_json["error_code"] == "ERR-4412"


def test_names_from_records_are_replaced_as_whole_words_only(planted_frames):
    traces, cases, corpus = planted_frames
    result = deidentify(traces, cases, corpus, DEMO_KEY)
    # Each word of a collected name is its own pseudonym: `Mia Li` is two tokens, `Mia` alone the first.
    mia, li = _expected_token("PERSON", "mia"), _expected_token("PERSON", "li")
    assert result.traces["answer_text"][0] == (
        f"Hi {mia}, refund of 49.00 for order 88131 goes to {_expected_token('EMAIL', 'jane.doe@example.com')} "
        "[doc:policy/refunds-2025]."
    )
    # `Li` is a collected name, but `Lisbon` is a different word.
    assert (
        result.corpus["text"][0]
        == f"Refunds within 14 days to IBAN {_expected_token('IBAN', 'GB82WEST12345698765432')}. Lisbon office."
    )
    assert result.corpus["text"][1] == f"Escalations: {mia} {li}, {_expected_token('PHONE', '14155550132')}."
    assert collect_names(traces, cases) == ["LI", "Li", "MIA", "Mia"]


def test_values_glued_to_json_escapes_are_replaced_and_json_stays_valid():
    trace = {
        "trace_id": "t-1",
        "case_id": "c-1",
        "steps": [
            {
                "index": 1,
                "kind": "tool_call",
                "tool": "lookup",
                "args": {"q": "x"},
                "result": {"customer_name": "Ana Silva", "note": "line\nAna Silva\n4111111111111111\tjane@x.com\u0007"},
            }
        ],
    }
    traces = traces_frame_from_records([trace])
    cases = cases_frame_from_records([{"case_id": "c-1", "lanes": ["agent"]}])
    result = deidentify(traces, cases, None, DEMO_KEY)
    note = json.loads(_step(result.traces, 0, 0)["result_json"])["note"]
    person = f"{_expected_token('PERSON', 'ana')} {_expected_token('PERSON', 'silva')}"
    assert (
        note == f"line\n{person}\n{_expected_token('CARD', '4111111111111111')}\t"
        f"{_expected_token('EMAIL', 'jane@x.com')}\u0007"
    )
    assert result.corpus is None


def test_report_counts_replacements_by_table_field_and_type():
    trace = {
        "trace_id": "t-1",
        "case_id": "c-1",
        "input": "Mail jane@x.com or JANE@X.COM, call (415) 555-0132 about order 88131",
        "answer": {"text": "Sent to jane@x.com."},
        "steps": [{"index": 1, "kind": "tool_call", "tool": "send_email", "args": {"to": "jane@x.com"}}],
    }
    case = {
        "case_id": "c-1",
        "lanes": ["agent"],
        "reference_tool_calls": [{"name": "send_email", "args": {"to": "jane@x.com"}}],
    }
    result = deidentify(traces_frame_from_records([trace]), cases_frame_from_records([case]), None, DEMO_KEY)
    # input: 2 emails (two spellings) + 1 phone; answer: 1 email; step args: 1 email; reference call args: 1 email.
    expected = pl.DataFrame(
        [
            ("cases", "reference_tool_calls.args_json", "EMAIL", 1),
            ("traces", "answer_text", "EMAIL", 1),
            ("traces", "input", "EMAIL", 2),
            ("traces", "input", "PHONE", 1),
            ("traces", "steps.args_json", "EMAIL", 1),
        ],
        schema=REPORT_SCHEMA,
        orient="row",
    )
    assert result.report.equals(expected)


def test_report_of_planted_frames_counts_each_occurrence(planted_frames):
    traces, cases, corpus = planted_frames
    report = deidentify(traces, cases, corpus, DEMO_KEY).report

    def count(table: str, field: str, entity_type: str) -> int:
        rows = report.filter(table=table, field=field, entity_type=entity_type)
        return int(rows["replacements"].sum()) if rows.height else 0

    assert count("traces", "steps.result_json", "IP") == 4  # IPv4 + IPv6 in get_order's result, two traces
    assert count("traces", "steps.result_json", "PERSON") == 4  # first_name Mia + last_name Li, two traces
    assert count("traces", "steps.result_json", "API_KEY") == 4  # OpenAI + AWS keys, two traces
    assert count("traces", "steps.content", "API_KEY") == 4  # GitHub + Slack tokens, two traces
    assert count("traces", "steps.error", "URL") == 2  # the credential URL, two traces
    assert count("traces", "steps.error", "SECRET") == 2  # the bearer token, two traces
    assert count("cases", "fixtures_json", "IBAN") == 1
    assert count("corpus", "text", "PHONE") == 1
    assert count("traces", "steps.result_json", "CARD") == 2  # the valid card only; the bad-Luhn one is not counted
    # `Mia Li` counts two (one token per word). cases 20: input 2, reference_answer 3, expected_answer_contains 1,
    #   reference call 4, alternative 2, fixtures 6, milestone value 1, scope 1; corpus 4: IBAN, two name words,
    #   phone; each trace 36: input 2, query 2, context 1, answer 2, quote 1, get_order result 7, send_email args 4
    #   + error 2 + result 3 + state_diff 1 + dispatched 4, finish content 6, final_state 1. 20 + 4 + 2 * 36 = 96.
    assert report["replacements"].sum() == 96


def test_deidentified_output_is_a_fixed_point(planted_frames):
    traces, cases, corpus = planted_frames
    once = deidentify(traces, cases, corpus, DEMO_KEY)
    twice = deidentify(once.traces, once.cases, once.corpus, DEMO_KEY)
    assert twice.traces.equals(once.traces)
    assert twice.cases.equals(once.cases)
    assert twice.corpus.equals(once.corpus)
    assert twice.report.height == 0


def test_another_key_gives_other_tokens_for_the_same_values(planted_frames):
    traces, cases, corpus = planted_frames
    other_key = b"another-secret-key-of-32-bytes!!"
    a = deidentify(traces, cases, corpus, DEMO_KEY)
    b = deidentify(traces, cases, corpus, other_key)
    assert b.traces["input"][0] == (
        f"Refund order 88131 for {_expected_token('EMAIL', 'jane.doe@example.com', other_key)}; "
        f"she called from {_expected_token('PHONE', '14155550132', other_key)}."
    )
    assert a.traces["input"][0] != b.traces["input"][0]
    assert a.report.equals(b.report)


def test_missing_text_column_is_an_error_not_a_silent_leak(planted_frames):
    traces, cases, corpus = planted_frames
    with pytest.raises(KeyError, match="answer_text"):
        deidentify(traces.drop("answer_text"), cases, corpus, DEMO_KEY)


def test_values_run_together_are_all_replaced_by_a_later_pass():
    # The phone's digit groups run into the card; the email takes the `_` before the IP as its edge. The first
    # pass replaces the phone and the email, the second finds the card and the IP next to their tokens.
    trace = {
        "trace_id": "t-1",
        "case_id": "c-1",
        "input": "call +44 20 7946 0958 4111 1111 1111 1111 or jane@x.com_203.0.113.7",
    }
    traces = traces_frame_from_records([trace])
    cases = cases_frame_from_records([{"case_id": "c-1", "lanes": ["agent"]}])
    result = deidentify(traces, cases, None, DEMO_KEY)
    phone, card = _expected_token("PHONE", "442079460958"), _expected_token("CARD", "4111111111111111")
    email, ip = _expected_token("EMAIL", "jane@x.com"), _expected_token("IP", "203.0.113.7")
    assert result.traces["input"][0] == f"call {phone} {card} or {email}_{ip}"
    assert result.report.select("entity_type", "replacements").rows() == [
        ("CARD", 1),
        ("EMAIL", 1),
        ("IP", 1),
        ("PHONE", 1),
    ]
    assert scan_frame(result.traces, "traces").height == 0
