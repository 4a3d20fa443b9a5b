"""Issue 34: what the independent scan finds is replaced too (union, not veto); lookalikes are no personal data.

The blocking check fails only on a value both detectors missed; dates are never national ids and identifiers named
after `token` or `passwd` are no secrets, in either detector.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.deid import (
    DEMO_KEY,
    Deidentifier,
    Pseudonymizer,
    deidentify,
    independent_scan,
    scan_frame,
    scan_text,
)
from eval_pipeline.importers import ImportRun, import_tau_bench
from eval_pipeline.quality.contracts import check_no_personal_data
from eval_pipeline_harness.records import cases_frame_from_records, traces_frame_from_records

TAU_SAMPLE = Path(__file__).resolve().parents[1] / "reference_data" / "tau_bench" / "gpt-4o-airline.sample.json"
DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def _dni_letter(digits: str) -> str:
    """The letter that makes `digits` + letter a valid Spanish DNI."""
    return DNI_LETTERS[int(digits) % 23]


# Values only the independent scan reads (grouped with dots or dashes, which the replacement's regexes do not take).
ONLY_INDEPENDENT = {
    "card grouped with dots": ("Card 4111.1111.1111.1111 on file", "CARD", "4111111111111111"),
    "IBAN grouped with dashes": ("IBAN GB82-WEST-1234-5698-7654-32 on file", "IBAN", "GB82WEST12345698765432"),
}


@pytest.mark.parametrize("name", list(ONLY_INDEPENDENT))
def test_a_value_only_the_independent_scan_finds_is_replaced_and_the_check_passes(name):
    text, entity_type, compact = ONLY_INDEPENDENT[name]
    frame = pl.DataFrame({"text": [text]})
    # the replacement's own detectors miss it, the independent scan finds it
    assert scan_frame(frame, "t", independent=False).height == 0
    assert independent_scan(frame, "t")["entity_type"].to_list() == [entity_type]
    out, report = Deidentifier(DEMO_KEY, []).corpus(frame)
    token = Pseudonymizer(DEMO_KEY).token(entity_type, compact)
    assert out["text"].to_list() == [text.split(" ", 1)[0] + f" {token} on file"]
    assert report.rows() == [("corpus", "text", entity_type, 1)]
    verdict = check_no_personal_data("deid_corpus", out, independent=True)
    assert verdict.passed and verdict.metadata["findings"] == 0


def test_the_union_gives_the_plain_spelling_s_pseudonym():
    out, _ = Deidentifier(DEMO_KEY, []).corpus(pl.DataFrame({"text": ["4111.1111.1111.1111", "4111 1111 1111 1111"]}))
    assert out["text"].n_unique() == 1 and out["text"][0].startswith("<CARD_")


def test_a_planted_leak_in_a_written_table_still_fails_the_check():
    traces = traces_frame_from_records([{
        "trace_id": "t-1", "case_id": "c-1", "case_revision": 1, "attempt": 1, "status": "ok", "error": None,
        "input": "Refund to mia.li@example.com please.", "answer": {"text": "Done.", "citations": []}, "steps": [],
    }], run_id="r-1")  # fmt: skip
    out = deidentify(
        traces,
        cases_frame_from_records([{"case_id": "c-1", "case_revision": 1, "lanes": ["agent"], "input": "hi"}]),
        None,
        DEMO_KEY,
    )
    assert check_no_personal_data("deid_traces", out.traces, independent=True).passed
    # a value written after de-identification (a defect of some later step) survives both passes: the check fails
    leaked = out.traces.with_columns(
        pl.lit("sent to ｍｉａ．ｌｉ＠ｅｘａｍｐｌｅ．ｃｏｍ and 4111.1111.1111.1111").alias("error")
    )
    verdict = check_no_personal_data("deid_traces", leaked, independent=True)
    assert not verdict.passed
    assert verdict.metadata["findings"] == 2
    assert verdict.metadata["where"] == "deid_traces.error: CARD ×1\ndeid_traces.error: EMAIL ×1"
    assert "example" not in verdict.description and "4111" not in verdict.description


# Dates in common formats, each followed by a capitalised word whose first letter makes the digits a valid DNI.
DATES = ("1989-12-13", "1989/12/13", "1989.12.13", "13.12.1989", "13/12/1989", "12/13/1989", "13-12-1989")


@pytest.mark.parametrize("date", DATES)
def test_a_date_before_a_capitalised_word_is_no_national_id(date):
    letter = _dni_letter(date.replace("-", "").replace("/", "").replace(".", ""))
    for text in (
        f"Date of Birth: {date}\n\n{letter}ayment method: gift card",
        f"DOB {date} {letter}assenger 2",
        f"DNI: {date} {letter}",
    ):
        frame = pl.DataFrame({"text": [text]})
        assert scan_frame(frame, "t").height == 0, text
        assert Deidentifier(DEMO_KEY, []).corpus(frame)[0]["text"].to_list() == [text]


def test_a_real_dni_beside_a_date_is_still_found():
    text = "Date of Birth: 1989-12-13, DNI 48291735S"
    assert scan_frame(pl.DataFrame({"text": [text]}), "t")["entity_type"].to_list() == ["NATIONAL_ID"]
    assert independent_scan(pl.DataFrame({"text": [text]}), "t")["entity_type"].to_list() == ["NATIONAL_ID"]


@pytest.mark.parametrize(
    "text",
    [
        "token: token-run-1",
        "passwd: passwd_reset_eval",
        "run_token=token-run-1",
        '{"secret":"secret-key-rotation-2"}',
        "Authorization: Bearer token-run-20260301",
        "baseline passwd=passwd_reset_eval",
    ],
)
def test_identifiers_named_after_secret_words_are_no_secrets(text):
    frame = pl.DataFrame({"text": [text]})
    assert scan_frame(frame, "t").height == 0
    assert scan_text(f"# Run report\n{text}\n", "report").height == 0
    assert Deidentifier(DEMO_KEY, []).corpus(frame)[0]["text"].to_list() == [text]


@pytest.mark.parametrize(
    "text",
    [
        "token: 9f8e7d6c5b4a39",
        "passwd: hunter2-Secret",
        "password=correct-horse-battery",
        "secret: s3cr3t-value",
        "password=my-secret-pass",
    ],
)
def test_real_secrets_are_still_found(text):
    assert scan_frame(pl.DataFrame({"text": [text]}), "t")["entity_type"].to_list() == ["SECRET"]


def _tau_with_a_date_of_birth(tmp_path: Path, run_id: str) -> Path:
    """The τ-bench sample imported as `run_id` into a new data root, with the line of the full airline file that failed
    the run (a date of birth, a blank line, a capitalised word) added to its first assistant message."""
    records = json.loads(TAU_SAMPLE.read_text())
    message = next(m for m in records[0]["traj"] if m["role"] == "assistant" and m.get("content"))
    message["content"] += "\n\n- Date of Birth: 1989-12-13\n\nPayment Method: gift card"
    source = tmp_path / "tau.json"
    source.write_text(json.dumps(records))
    root = tmp_path / "data"
    import_tau_bench(source, ImportRun(run_id=run_id, data_root=root))
    return root


def test_the_tau_bench_sample_with_a_date_of_birth_line_has_no_finding(tmp_path):
    root = _tau_with_a_date_of_birth(tmp_path, "tau")
    lines = [json.loads(line) for path in sorted((root / "traces" / "tau").glob("*.jsonl")) for line in path.open()]
    cases = [json.loads(line) for path in sorted((root / "cases").glob("*/*.jsonl")) for line in path.open()]
    traces = traces_frame_from_records(lines, run_id="tau")
    assert traces.height == 12
    assert independent_scan(traces, "traces").filter(pl.col("entity_type") == "NATIONAL_ID").height == 0
    out = deidentify(traces, cases_frame_from_records(cases), None, DEMO_KEY)
    assert "1989-12-13" in " ".join(out.traces["steps"].explode().struct.field("content").drop_nulls().to_list())
    assert out.report.filter(pl.col("entity_type") == "NATIONAL_ID").height == 0
    verdict = check_no_personal_data("deid_traces", out.traces, independent=True)
    assert verdict.passed, verdict.description


def test_the_check_of_a_de_identified_input_runs_both_detectors_unless_told_otherwise():
    frame = pl.DataFrame({"text": ["Card 4111.1111.1111.1111 on file"]})  # only the independent scan reads it
    corpus = check_no_personal_data("deid_corpus", frame)
    assert (corpus.passed, corpus.metadata["where"]) == (False, "deid_corpus.text: CARD ×1")
    assert check_no_personal_data("deid_corpus", frame, independent=False).passed
    # tables computed from the de-identified inputs keep the replacement's detectors only
    assert check_no_personal_data("claims", frame).passed


@pytest.mark.slow
def test_the_tau_bench_sample_runs_through_the_pipeline_with_no_finding_and_no_failed_check(tmp_path):
    import io

    import dagster as dg

    from eval_pipeline.io.warehouse import Warehouse
    from eval_pipeline.runner import run_pipeline

    # a run id holding `token`, which the independent scan once read as a secret
    root = _tau_with_a_date_of_birth(tmp_path, "token-tau")
    instance = dg.DagsterInstance.ephemeral()
    code = run_pipeline(
        data=str(root),
        warehouse=str(tmp_path / "wh"),
        reports=str(tmp_path / "reports"),
        deid_demo=True,
        quiet=True,
        instance=instance,
        stream=io.StringIO(),
    )
    assert code == 0
    evaluations = [
        e.dagster_event.event_specific_data
        for r in instance.get_runs()
        for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    ]
    assert [(e.asset_key.to_user_string(), e.check_name) for e in evaluations if not e.passed] == []
    privacy = [e for e in evaluations if e.check_name in ("no_personal_data", "report_has_no_personal_data")]
    # every unrestricted table and every report file checked, none with a residual finding
    assert len(privacy) >= 40 and {e.metadata["findings"].value for e in privacy} == {0}
    report = Warehouse.at(tmp_path / "wh").read("deid_report", "token-tau")
    assert set(report["entity_type"].to_list()) <= {"PERSON", "EMAIL"}
    assert len(list((tmp_path / "reports" / "token-tau").glob("*.html"))) == 3
