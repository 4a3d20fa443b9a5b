"""Synthetic benchmark batches: a complete data root the pipeline can ingest, deterministic per seed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from eval_pipeline.contracts.cases import Case, CorpusDoc, ToolRegistry
from eval_pipeline.contracts.labels import GroundingLabel, QrelsJudgment
from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.contracts.traces import RunManifest, Trace
from eval_pipeline_harness.sample_data.synthetic import write_synthetic


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("synthetic")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval_pipeline_harness.sample_data",
            "--out",
            str(root),
            "--traces",
            "2000",
            "--seed",
            "3",
            "--run-id",
            "bench-a",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return root, result


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_layout_and_progress(batch):
    root, result = batch
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == [
        "cases/synth-3-2000/cases.jsonl",
        "corpus/synth-kb-3/docs.jsonl",
        "labels/grounding/synthetic.jsonl",
        "labels/qrels/synthetic.jsonl",
        "policy/gates.yaml",
        "tools/synth-env-1/tools.yaml",
        "traces/bench-a/run.yaml",
        "traces/bench-a/traces-00001.jsonl",
    ]
    progress = [line for line in result.stderr.splitlines() if line.startswith("[synthetic]")]
    # a progress line every 2000 // 10 = 200 traces
    assert len(progress) == 10 and progress[-1].startswith("[synthetic] 2000/2000 traces")


def test_every_file_validates(batch):
    root, _ = batch
    traces = [Trace.model_validate(t) for t in _lines(root / "traces/bench-a/traces-00001.jsonl")]
    cases = {c.case_id: c for c in (Case.model_validate(c) for c in _lines(root / "cases/synth-3-2000/cases.jsonl"))}
    docs = [CorpusDoc.model_validate(d) for d in _lines(root / "corpus/synth-kb-3/docs.jsonl")]
    assert len(traces) == 2000 and len({t.trace_id for t in traces}) == 2000
    assert all(t.case_id in cases for t in traces)
    assert {d.current for d in docs} == {True, False} and {d.indexed for d in docs} == {True, False}
    for q in _lines(root / "labels/qrels/synthetic.jsonl"):
        QrelsJudgment.model_validate(q)
    labels = [GroundingLabel.model_validate(g) for g in _lines(root / "labels/grounding/synthetic.jsonl")]
    assert len(labels) >= 50
    manifest = RunManifest.model_validate(yaml.safe_load((root / "traces/bench-a/run.yaml").read_text()))
    assert (manifest.run_id, manifest.dataset_version, manifest.corpus_version) == (
        "bench-a",
        "synth-3-2000",
        "synth-kb-3",
    )
    ToolRegistry.model_validate(yaml.safe_load((root / "tools/synth-env-1/tools.yaml").read_text()))
    assert GatePolicy.model_validate(yaml.safe_load((root / "policy/gates.yaml").read_text())).baseline_run_id is None


def test_mix_of_lanes_attempts_and_sizes(batch):
    root, _ = batch
    raw = (root / "traces/bench-a/traces-00001.jsonl").read_bytes().splitlines()
    traces = [json.loads(line) for line in raw]
    per_case = Counter(t["case_id"] for t in traces)
    agent = [c for c in per_case if c.startswith("agent-")]
    assert all(per_case[c] == 3 for c in agent)
    assert all(per_case[c] in (1, 2) for c in per_case if c.startswith("rag-"))
    agent_share = sum(per_case[c] for c in agent) / len(traces)
    assert 0.3 < agent_share < 0.5
    sizes = sorted(len(line) for line in raw)
    assert sizes[0] > 300 and sizes[-1] < 8000
    # Failures of several kinds are mixed in: refusals, harness timeouts, dispatch divergences.
    assert any(t["status"] == "timeout" for t in traces)
    assert any("couldn't find" in (t.get("answer") or {}).get("text", "") for t in traces)
    calls = [s for t in traces for s in t.get("steps") or [] if s["kind"] == "tool_call"]
    assert any(s["dispatched"]["args"] != s["args"] for s in calls)


def test_ingestion_accepts_the_whole_batch(batch):
    from eval_pipeline.io import ingest, inputs, storage

    root, _ = batch
    location = storage.open_location(str(root))
    cases = inputs.load_cases(location, "synth-3-2000")
    parsed = ingest.parse_traces(ingest.read_raw_lines(location, "bench-a"), cases.frame, "bench-a")
    assert (cases.rejects, parsed.traces.height, parsed.rejects.height) == ([], 2000, 0)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        write_synthetic(tmp_path / name, 300, seed=seed)
    a, b, c = (
        sorted(
            (p.relative_to(tmp_path / n).as_posix(), p.read_bytes()) for p in (tmp_path / n).rglob("*") if p.is_file()
        )
        for n in ("a", "b", "c")
    )
    assert a == b
    assert a != c
