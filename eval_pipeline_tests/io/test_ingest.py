"""Bad input never crashes a run and is never lost: each bad line is a reject row with file, line and reason."""

import json
import subprocess
import sys

import polars as pl
import pytest
import yaml

from eval_pipeline.contracts import frames
from eval_pipeline.io import ingest, inputs, loaders, trace_per_line
from eval_pipeline.io.storage import InputError, open_location

CASE = {"case_id": "rag-1", "case_revision": 2, "lanes": ["rag"], "input": "q", "required_doc_ids": ["d1"]}


def trace(trace_id: str, **extra) -> dict:
    return {"trace_id": trace_id, "case_id": "rag-1", "attempt": 1, "status": "ok", "answer": {"text": "a"}, **extra}


def write_run(root, lines: list[bytes], run_id: str = "r1") -> None:
    (root / "cases" / "ds").mkdir(parents=True)
    (root / "cases" / "ds" / "rag-1.yaml").write_text(yaml.safe_dump(CASE))
    run = root / "traces" / run_id
    run.mkdir(parents=True)
    (run / "run.yaml").write_text(
        yaml.safe_dump({"run_id": run_id, "candidate": "bot", "corpus_version": "c", "dataset_version": "ds"})
    )
    (run / "batch.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def parse(root, run_id: str = "r1", **kwargs) -> ingest.ParsedTraces:
    location = open_location(root)
    cases = inputs.load_cases(location, "ds").frame
    return ingest.parse_traces(ingest.read_raw_lines(location, run_id), cases, run_id, **kwargs)


def test_every_kind_of_bad_line_becomes_a_reject_and_valid_lines_are_kept(tmp_path):
    huge_context = [{"doc_id": "d1", "text": "x" * (3 * 1024 * 1024)}]
    lines = [
        json.dumps(trace("t1")).encode(),  # 1 valid
        b'{"trace_id": "t2", "case_id": "rag-1", "att',  # 2 truncated JSON
        b"[1, 2, 3]",  # 3 not an object
        json.dumps(trace("t4", attempt="two")).encode(),  # 4 wrong field type
        json.dumps({**trace("t5"), "case_id": "nope"}).encode(),  # 5 unknown case
        json.dumps(trace("t1")).encode(),  # 6 duplicate trace_id
        b'{"trace_id": "t7", "case_id": "rag-1", "input": "caf\xe9"}',  # 7 invalid UTF-8
        b"",  # 8 blank: skipped, not rejected
        json.dumps(trace("t9", context=huge_context)).encode(),  # 9 a 3 MB line that is valid
        json.dumps(trace("t10", case_revision=1)).encode(),  # 10 stale case revision
        b"   ",  # 11 blank
    ]
    write_run(tmp_path, lines)
    parsed = parse(tmp_path)
    assert parsed.traces["trace_id"].to_list() == ["t1", "t9"]
    assert parsed.blank_lines == 2
    reasons = dict(zip(parsed.rejects["line"].to_list(), parsed.rejects["reason"].to_list(), strict=True))
    assert set(reasons) == {2, 3, 4, 5, 6, 7, 10}
    assert reasons[2].startswith("invalid JSON")
    assert reasons[3] == "not a JSON object: a list"
    assert reasons[4].startswith("attempt: Input should be a valid integer")
    assert reasons[5] == "unknown case_id 'nope'"
    assert reasons[6] == "duplicate trace_id 't1' (first occurrence kept)"
    assert reasons[7] == "invalid UTF-8 at byte offset 52"
    assert reasons[10] == "case_revision 1 does not match case 'rag-1' revision 2"
    assert set(parsed.rejects["source_file"].to_list()) == {"traces/r1/batch.jsonl"}
    assert parsed.rejects.filter(pl.col("line") == 5)["trace_id"].to_list() == ["t5"]
    # nothing lost: non-blank lines = traces + rejects
    assert 11 - parsed.blank_lines == parsed.traces.height + parsed.rejects.height


def test_a_line_over_the_size_limit_is_rejected_with_its_size(tmp_path):
    write_run(tmp_path, [json.dumps(trace("t1", input="y" * 5000)).encode()])
    parsed = parse(tmp_path, max_line_bytes=4096)
    assert parsed.traces.height == 0
    assert parsed.rejects["reason"][0].startswith("line of 5") and parsed.rejects["reason"][0].endswith(
        "exceeds the 4096-byte limit"
    )


def test_a_batch_where_everything_is_rejected_still_parses_to_an_empty_frame(tmp_path):
    write_run(tmp_path, [b"not json", b"{}"])
    parsed = parse(tmp_path)
    assert parsed.traces.height == 0 and parsed.traces.schema == frames.TRACES_SCHEMA
    assert parsed.rejects["reason"].to_list() == [
        "invalid JSON: Expecting value at column 1",
        "trace_id: Field required; case_id: Field required",
    ]


def test_harness_error_traces_are_kept(tmp_path):
    write_run(tmp_path, [json.dumps(trace("t1", status="timeout", error="judge deadline")).encode()])
    parsed = parse(tmp_path)
    assert parsed.traces.select("status", "error").row(0) == ("timeout", "judge deadline")


def test_missing_inputs_raise_one_clear_error(tmp_path):
    location = open_location(tmp_path)
    with pytest.raises(InputError, match="run 'ghost' not found"):
        ingest.read_raw_lines(location, "ghost")
    with pytest.raises(InputError, match="dataset version 'ds' not found"):
        inputs.load_cases(location, "ds")
    with pytest.raises(InputError, match="has no manifest"):
        loaders.load_manifest(location, "ghost")


def test_bad_case_files_become_rejects(tmp_path):
    folder = tmp_path / "cases" / "ds"
    folder.mkdir(parents=True)
    (folder / "a.yaml").write_text(yaml.safe_dump(CASE))
    (folder / "b.yaml").write_text("case_id: [unclosed")
    (folder / "c.yaml").write_text(yaml.safe_dump({**CASE, "case_id": "rag-2", "lanes": ["video"]}))
    (folder / "d.yaml").write_text(yaml.safe_dump(CASE))
    loaded = inputs.load_cases(open_location(tmp_path), "ds")
    assert loaded.frame["case_id"].to_list() == ["rag-1"]
    reasons = {r["source_file"]: r["reason"] for r in loaded.rejects}
    assert reasons["cases/ds/b.yaml"].startswith("invalid YAML")
    assert reasons["cases/ds/c.yaml"].startswith("lanes.0: Input should be 'rag' or 'agent'")
    assert reasons["cases/ds/d.yaml"] == "duplicate case_id 'rag-1'"


HANDLER_THAT_DEFERS_SIGTERM = """
import json, signal
from eval_pipeline.io import trace_per_line
signal.signal(signal.SIGTERM, lambda *_: None)  # what Dagster does while a step runs
raws = [json.dumps({"trace_id": f"t{i}", "case_id": "c"}).encode() for i in range(trace_per_line.PARALLEL_LINES + 10)]
print(sum(len(trace_per_line.check_lines(raws, 1 << 24)) for _ in range(6)))
"""


@pytest.mark.slow
def test_the_parallel_line_check_finishes_inside_a_process_that_defers_sigterm():
    """Workers forked inside a Dagster step inherit its SIGTERM handler; the check must not wait on them forever."""
    result = subprocess.run(
        [sys.executable, "-c", HANDLER_THAT_DEFERS_SIGTERM], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout) == 6 * (trace_per_line.PARALLEL_LINES + 10)
