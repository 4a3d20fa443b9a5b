"""The residual scan: one row per finding, naming table, column (leaf path) and row, never the raw value."""

from __future__ import annotations

import polars as pl

from eval_pipeline.deid.scan import FINDINGS_SCHEMA, scan_frame, scan_text


def test_scan_names_table_column_and_row_inside_nested_columns():
    frame = pl.DataFrame(
        {
            "trace_id": ["t-1", "t-2", "t-3"],
            "notes": ["ok", "mail jane@x.com", None],
            "steps": [
                [{"tool": "send", "args_json": '{"to":"+1 415-555-0132"}'}],
                [],
                [{"tool": "send", "args_json": "{}"}, {"tool": "log", "args_json": '{"ip":"203.0.113.77"}'}],
            ],
            "tags": [["a"], ["4111 1111 1111 1111"], []],
        }
    )
    found = scan_frame(frame, "deid_traces")
    assert found.schema == pl.Schema(FINDINGS_SCHEMA)
    # masks: 10-char email keeps 2+2, 15-char phone keeps 2+2, 12-char IP keeps 2+2, 19-char card keeps 2+2.
    assert found.rows() == [
        ("deid_traces", "notes", 1, "EMAIL", "ja******om"),
        ("deid_traces", "steps.args_json", 0, "PHONE", "+1" + "*" * 11 + "32"),
        ("deid_traces", "steps.args_json", 2, "IP", "20********77"),
        ("deid_traces", "tags", 1, "CARD", "41" + "*" * 15 + "11"),
    ]


def test_person_under_a_name_key_is_found_without_a_name_list():
    frame = pl.DataFrame(
        {
            "result_json": [
                '{"customer_name":"Mia Li"}',
                '{"customer_name":"<PERSON_3f9a2c1d04b5e6f7>"}',
                '{"tool_name":"Get Order"}',
                '{"first_name":"mia_li_3668"}',
            ]
        }
    )
    assert scan_frame(frame, "x").select("row", "entity_type", "masked_excerpt").rows() == [(0, "PERSON", "M****i")]


def test_known_names_are_found_in_free_text_only_when_given():
    frame = pl.DataFrame({"answer_text": ["Hi Mia, done.", "Mial and Lisbon"]})
    assert scan_frame(frame, "answers").height == 0
    assert scan_frame(frame, "answers", names=["Mia", "Li"]).select("row", "entity_type").rows() == [(0, "PERSON")]


def test_scan_text_reports_the_line():
    report = "# Run report\n\nAll good for <EMAIL_3f9a2c1d04b5e6f7>.\nEscalate to jane@x.com or 203.0.113.77\n"
    found = scan_text(report, "report.md")
    assert found.select("table", "column", "row", "entity_type").rows() == [
        ("report.md", "text", 3, "EMAIL"),
        ("report.md", "text", 3, "IP"),
    ]
    assert scan_text("# Clean\nnothing here: order 88131, 2026-03-01\n", "report.md").height == 0


def test_the_blocking_check_on_a_scorer_table_names_where_a_leak_is_never_the_value():
    from eval_pipeline.quality.contracts import check_no_personal_data

    leaked = pl.DataFrame(
        {
            "trace_id": ["t1", "t2"],
            "reason": ["claim cites maria.lopez @example.com", "fine"],
            "note": ["call 030 901820 or +49 30 901820", "ok"],
        }
    )
    verdict = check_no_personal_data("attribution", leaked)
    assert verdict.passed is False
    text = f"{verdict.description} {verdict.metadata}"
    assert "attribution.reason: EMAIL ×1" in text and "attribution.note: PHONE" in text
    for fragment in ("maria", "lopez", "example.com", "901820", "30 90"):
        assert fragment not in text


def test_many_documents_in_one_pass_find_what_each_finds_alone():
    """Report pages are scanned together; each finding keeps its page (column) and line (row), split values too."""
    from eval_pipeline.deid import scan_documents

    documents = [
        ("a/gate.md", "clean line\nmail jane.roe@example.com\n"),
        ("b/cases/x.html", "<p>call +44 20 7946\n0958</p>\nnothing here"),
        ("c/empty.md", ""),
        ("d/rag.md", "card 4111 1111 1111 1111 and jane.roe@example.com"),
    ]
    alone = pl.concat([scan_text(text, "r").with_columns(pl.lit(name).alias("column")) for name, text in documents])
    together = scan_documents(documents, "r")
    assert together.equals(alone)
    assert together.select("column", "row", "entity_type").rows() == [
        # the phone's first half is a number of its own on line 0, and the whole value is found across the break
        ("a/gate.md", 1, "EMAIL"),
        ("b/cases/x.html", 0, "PHONE"),
        ("b/cases/x.html", 0, "PHONE"),
        ("d/rag.md", 0, "CARD"),
        ("d/rag.md", 0, "EMAIL"),
    ]
