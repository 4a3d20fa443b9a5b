"""Issue 14: hardened detectors (national ids, phones, split values, spaced e-mails, learned name keys), residual scan.

National ids are validated with python-stdnum and phones with libphonenumber; the independent residual scan is tested
too.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from eval_pipeline.defs.deid.checks import batch_checks
from eval_pipeline.deid import DEMO_KEY, NameCollector, collect_names, deidentify, independent_scan, leak_summary
from eval_pipeline.deid.identifiers import locale_regions
from eval_pipeline.deid.scan import scan_frame, scan_text
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

# Valid under python-stdnum: each has correct check digits.
DNI = "48291735S"
NIE = "X1234567L"
STEUER_ID = "36574261809"
NIR = "1 70 83 72 803 210 25"
CODICE_FISCALE = "RSSMRA85T10A562S"
BSN = "778052424"
CPF = "689.367.273-03"
AADHAAR = "9606 8872 9950"
BERLIN = "030 901820"


def _types(text: str, locale: str | None = None) -> list[str]:
    return scan_text(text, "t", locale=locale)["entity_type"].to_list()


@pytest.mark.parametrize(
    ("text", "entity_type"),
    [
        (f"DNI {DNI} on file", "NATIONAL_ID"),
        (f'{{"national_id":"{DNI}"}}', "NATIONAL_ID"),
        (f"NIE {NIE} on file", "NATIONAL_ID"),
        (f"Steuer-ID: {STEUER_ID}", "NATIONAL_ID"),
        (f'{{"tax_id":"{STEUER_ID}"}}', "NATIONAL_ID"),
        ("IdNr 36 574 261 809 bitte", "NATIONAL_ID"),
        (f"NIR {NIR}", "NATIONAL_ID"),
        (f"CF {CODICE_FISCALE}", "NATIONAL_ID"),
        (f"BSN {BSN}", "NATIONAL_ID"),
        (f"CPF {CPF}", "NATIONAL_ID"),
        (f"aadhaar {AADHAAR}", "NATIONAL_ID"),
        (f"ruf an {BERLIN} an", "PHONE"),
        ("card 4111 1111\\n1111 1111 ok", "CARD"),
        ("IBAN DE89 3704\t0044 0532 0130 00 x", "IBAN"),
        ("call +44 20  7946 0958 now", "PHONE"),
        ("mail maria.lopez @example.com now", "EMAIL"),
        ("mail maria.lopez@ example.com now", "EMAIL"),
    ],
)
def test_issue_values_are_found(text, entity_type):
    assert _types(text) == [entity_type]


def test_a_value_split_across_report_lines_is_found_at_its_first_line():
    found = scan_text("# Report\ncard 4111 1111\n1111 1111 on file\n", "r.md")
    assert found.select("row", "entity_type").rows() == [(1, "CARD")]


@pytest.mark.parametrize(
    "text",
    [
        f"order {STEUER_ID} shipped",  # a valid Steuer-ID's digits, but bare and without a keyword or locale
        f"order {BSN} shipped",
        "order 68936727303 shipped",  # CPF digits, bare
        "ref 960688729950 done",  # Aadhaar digits, bare
        "DNI 48291735T wrong letter",  # check letter fails
        "Steuer-ID: 36574261808",  # check digit fails
        "amount 030 12 qty",
        "doc 0.5 12 and 2026-03-01T12:00:00Z, agreement 0.986111 and 0.597222",
        "postal code 01304-001",
    ],
)
def test_look_alikes_are_not_flagged(text):
    assert _types(text) == []


def test_the_run_locale_turns_on_bare_digit_ids_of_its_country_only():
    assert locale_regions("de-DE") == {"DE"} and locale_regions("pt_BR") == {"BR"} and locale_regions(None) == set()
    assert _types(f"order {STEUER_ID} shipped", locale="de-DE") == ["NATIONAL_ID"]
    assert _types(f"order {STEUER_ID} shipped", locale="nl-NL") == []
    assert _types(f"order {BSN} shipped", locale="nl-NL") == ["NATIONAL_ID"]
    assert _types("order 12345678901 shipped", locale="de-DE") == []  # check digit fails


def test_deidentify_replaces_the_issue_values_with_one_token_per_value():
    note = (
        f"DNI {DNI}; Steuer-ID {STEUER_ID}; call {BERLIN}; card 4111 1111\n1111 1111; "
        "IBAN DE89 3704\t0044 0532 0130 00; phone +44 20  7946 0958; mail maria.lopez @example.com"
    )
    trace = {
        "trace_id": "t-1",
        "case_id": "c-1",
        "input": note,
        "steps": [
            {
                "index": 1,
                "kind": "tool_call",
                "tool": "lookup",
                "args": {"q": "x"},
                "result": {"note": note, "signed_by": "Klaus Obermeier"},
            }
        ],
    }
    case = {"case_id": "c-1", "lanes": ["agent"], "fixtures": {"customers": {"c-1": {"national_id": DNI}}}}
    result = deidentify(traces_frame_from_records([trace]), cases_frame_from_records([case]), None, DEMO_KEY)
    text = json.dumps([result.traces.to_dicts(), result.cases.to_dicts()], default=str)
    for raw in (DNI, STEUER_ID, "901820", "4111", "0044", "7946", "maria.lopez", "Obermeier", "Klaus"):
        assert raw not in text, raw
    fixtures = json.loads(result.cases["fixtures_json"][0])
    dni_token = fixtures["customers"]["c-1"]["national_id"]
    assert dni_token.startswith("<NATIONAL_ID_") and len(dni_token) == len("<NATIONAL_ID_>") + 16
    # The same DNI in the trace's free text and in the case fixture is the same token.
    assert result.traces["input"][0].startswith(f"DNI {dni_token}; ")
    counts = dict(result.report.group_by("entity_type").agg(pl.col("replacements").sum()).iter_rows())
    # input + result note: DNI and Steuer-ID (2 each x 2 fields) + the fixture's DNI.
    assert counts["NATIONAL_ID"] == 5
    assert counts["PHONE"] == 4 and counts["CARD"] == 2 and counts["IBAN"] == 2 and counts["EMAIL"] == 2
    assert counts["PERSON"] >= 2


def test_name_keys_are_learned_from_the_data():
    trace = {
        "trace_id": "t-1",
        "case_id": "c-1",
        "steps": [
            {
                "index": 1,
                "kind": "tool_call",
                "tool": "a",
                "args": {"q": "x"},
                "result": {"signed_by": "Klaus Obermeier", "city": "Lisbon", "plan": "Team Plus"},
            },
            # `reviewer_on_duty` is in no list: it is learned because its value is a name found under `full_name`.
            {
                "index": 2,
                "kind": "tool_call",
                "tool": "b",
                "args": {"q": "x"},
                "result": {"reviewer_on_duty": "Ana Silva", "queue": "General Billing"},
            },
        ],
    }
    case = {"case_id": "c-1", "lanes": ["agent"], "fixtures": {"people": {"p": {"full_name": "Ana Silva"}}}}
    collector = NameCollector()
    collector.add_traces(traces_frame_from_records([trace]))
    collector.add_cases(cases_frame_from_records([case]))
    assert {"signed_by", "reviewer_on_duty", "full_name"} <= collector.name_keys()
    assert not {"city", "plan", "queue"} & collector.name_keys()
    assert collector.names() == {"Klaus Obermeier", "Ana Silva"}
    words = collect_names(traces_frame_from_records([trace]), cases_frame_from_records([case]))
    assert "Klaus" in words and "Obermeier" in words and "Lisbon" not in words and "Billing" not in words


def test_the_residual_scan_finds_names_under_role_and_learned_keys():
    frame = pl.DataFrame(
        {
            "result_json": [
                '{"signed_by":"Klaus Obermeier"}',
                '{"approved_by":"System"}',
                '{"reviewer_on_duty":"Ana Silva"}',
            ]
        }
    )
    assert scan_frame(frame, "x").select("row", "entity_type").rows() == [(0, "PERSON")]
    learned = scan_frame(frame, "x", name_keys=["reviewer_on_duty"])
    assert learned.select("row", "entity_type").rows() == [(0, "PERSON"), (2, "PERSON")]


@pytest.mark.parametrize(
    ("value", "entity_type"),
    [
        (f"DNI {DNI}", "NATIONAL_ID"),
        (f"Steuer-ID {STEUER_ID}", "NATIONAL_ID"),
        (f"CF {CODICE_FISCALE}", "NATIONAL_ID"),
        (f"call {BERLIN}", "PHONE"),
        ("call +44 20\\n7946 0958", "PHONE"),
        ("card 4111 1111\n1111 1111", "CARD"),
        ("iban DE89 3704\\t0044 0532 0130 00", "IBAN"),
        ("mail maria.lopez @example.com", "EMAIL"),
        ("SSN 078-05-1120", "NATIONAL_ID"),
    ],
)
def test_the_independent_scan_alone_finds_each_value(value, entity_type):
    # The second opinion on its own, without the replacement's detectors: a miss of theirs is still caught.
    found = independent_scan(pl.DataFrame({"notes": ["clean text, order 88131", value]}), "deid_traces")
    assert found.select("row", "entity_type").rows() == [(1, entity_type)]


def test_the_independent_scan_ignores_tokens_and_ordinary_values():
    frame = pl.DataFrame(
        {
            "v": [
                "<CARD_4111111111111111> <PHONE_0309018201234567> &lt;IBAN_1234567890123456&gt;",
                "order 88131, amount 49.00, at 2026-03-01T12:00:00Z, 01.02.2024 14:30, doc policy/refunds-2025",
                "trace cand-42:agent-001#1 latency 2300 ms, tokens 1900, cost 0.0042, tracking 1Z999AA10123456784",
            ]
        }
    )
    assert independent_scan(frame, "t").height == 0
    assert scan_frame(frame, "t").height == 0


def test_a_leak_fails_the_blocking_check_naming_table_column_and_type_never_the_value():
    leaked = traces_frame_from_records(
        [
            {
                "trace_id": "t-1",
                "case_id": "c-1",
                "steps": [
                    {
                        "index": 1,
                        "kind": "tool_call",
                        "tool": "a",
                        "args": {"q": "x"},
                        "result": {"national_id": DNI, "note": f"call {BERLIN}"},
                    }
                ],
            }
        ]
    )
    findings = scan_frame(leaked, "deid_traces")
    summary = leak_summary(findings)
    assert summary == {"deid_traces.steps.result_json: NATIONAL_ID": 1, "deid_traces.steps.result_json: PHONE": 1}
    check = next(c for c in batch_checks(findings.height, summary, 0, 1, []) if c.check_name == "no_personal_data")
    assert check.passed is False
    shown = check.description + json.dumps({k: str(v) for k, v in check.metadata.items()})
    assert "deid_traces.steps.result_json: NATIONAL_ID x1" in shown and "PHONE x1" in shown
    for raw in (DNI, "48291735", "901820", "030 9"):
        assert raw not in shown
