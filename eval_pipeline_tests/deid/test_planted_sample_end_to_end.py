"""Issue 14's personal data planted into a copy of the bundled sample reaches no unrestricted table, report or log.

None of it reaches any warehouse table outside the restricted area, any report, or Dagster's event log.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline_tests.fixtures.sample_runs import run_planted_copy

pytestmark = pytest.mark.slow

TRACE_ID = "cand-42:agent-001#1"
NOTE = (
    "DNI 48291735S, Steuer-ID 36574261809, Festnetz 030 901820, card 4111 1111\n1111 1111, "
    "IBAN DE89 3704\t0044 0532 0130 00, mobile +44 20  7946 0958, mail maria.lopez @example.com"
)
# Every raw spelling that must not survive (the split forms are searched by their halves, which are unique here).
RAW = ("48291735S", "36574261809", "030 901820", "901820", "4111 1111", "0044 0532", "7946 0958", "maria.lopez",
       "Obermeier")  # fmt: skip


def _plant(root: Path) -> None:
    case = root / "cases" / "golden-2026.03" / "agent-001.yaml"
    text = case.read_text()
    assert "      name: Dana Whitfield\n" in text
    case.write_text(
        text.replace("      name: Dana Whitfield\n", "      name: Dana Whitfield\n      national_id: 48291735S\n", 1)
    )
    traces = root / "traces" / "cand-42" / "agent.jsonl"
    lines = traces.read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line) if line.strip() else None
        if record and record.get("trace_id") == TRACE_ID:
            step = next(s for s in record["steps"] if isinstance(s.get("result"), dict))
            step["result"].update({"signed_by": "Klaus Obermeier", "note": NOTE})
            record["input"] += " " + NOTE
            lines[i] = json.dumps(record)
            break
    else:
        raise AssertionError(f"{TRACE_ID} not in the sample")
    traces.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    return run_planted_copy(tmp_path_factory, "planted", _plant)


def _leaks(text: str) -> list[str]:
    return [raw for raw in RAW if raw in text]


def test_the_raw_traces_hold_the_planted_values(planted_run):
    raw = Warehouse.at(planted_run["warehouse"]).read("traces", "cand-42", restricted=True)
    text = json.dumps(raw.filter(pl.col("trace_id") == TRACE_ID).to_dicts(), default=str)
    # The checks below can fail: every planted value is in the restricted raw table (the split card as JSON `\n`).
    assert _leaks(text) == list(RAW)


def test_no_planted_value_reaches_a_table_report_or_event_log(planted_run):
    assert planted_run["code"] == 0
    warehouse = Warehouse.at(planted_run["warehouse"])
    tables = sorted(p.name for p in planted_run["warehouse"].iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert {"deid_traces", "deid_cases", "claims", "attribution", "tool_call_diffs", "deid_report"} <= set(tables)
    leaked = {}
    for table in tables:
        for run in ("base-41", "cand-42"):
            frame = warehouse.read(table, run)
            if frame is not None and (found := _leaks(json.dumps(frame.to_dicts(), default=str, ensure_ascii=False))):
                leaked[f"{table}/{run}"] = found
    assert leaked == {}
    reports = [p for p in planted_run["reports"].rglob("*") if p.is_file()]
    assert len(reports) >= 4
    assert {p.name: _leaks(p.read_text()) for p in reports if _leaks(p.read_text())} == {}
    instance = planted_run["instance"]
    runs = instance.get_runs()
    assert runs
    events = "\n".join(str(e) for r in runs for e in instance.all_logs(r.run_id))
    assert _leaks(events) == []


def test_the_planted_values_became_tokens_and_the_name_key_was_learned(planted_run):
    warehouse = Warehouse.at(planted_run["warehouse"])
    traces = warehouse.read("deid_traces", "cand-42").filter(pl.col("trace_id") == TRACE_ID)
    result = next(
        json.loads(s["result_json"])
        for s in traces.row(0, named=True)["steps"]
        if s["result_json"] and "signed_by" in s["result_json"]
    )
    assert result["signed_by"].startswith("<PERSON_") and result["signed_by"].count("<PERSON_") == 2
    for kind in ("NATIONAL_ID", "PHONE", "CARD", "IBAN", "EMAIL"):
        assert f"<{kind}_" in result["note"], kind
    fixtures = json.loads(
        warehouse.read("deid_cases", "cand-42").filter(pl.col("case_id") == "agent-001")["fixtures_json"][0]
    )
    national_id = fixtures["customers"]["c-771"]["national_id"]
    assert national_id.startswith("<NATIONAL_ID_") and national_id in traces["input"][0]
