"""TREC qrels and run files: reading, writing, and run files exported from traces."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.trec.formats import (
    read_trec_qrels,
    read_trec_run,
    run_frame_from_traces,
    write_trec_qrels,
    write_trec_run,
    write_trec_runs,
)
from eval_pipeline.trec.trec_eval import evaluate
from eval_pipeline_harness.records import traces_frame_from_records


def test_qrels_round_trip(tmp_path: Path):
    qrels = pl.DataFrame(
        {"query_id": ["rag-2", "rag-1", "rag-1"], "doc_id": ["d9", "policy/refunds-2025", "d3"], "grade": [-1, 2, 0]}
    )
    path = write_trec_qrels(qrels, tmp_path / "q.txt")
    # Sorted by query then doc, iteration column 0, negative grades kept.
    assert path.read_text().splitlines() == ["rag-1 0 d3 0", "rag-1 0 policy/refunds-2025 2", "rag-2 0 d9 -1"]
    assert read_trec_qrels(path).sort("query_id", "doc_id").to_dicts() == qrels.sort("query_id", "doc_id").to_dicts()


def test_run_reading_accepts_tabs_and_padding_and_reports_bad_lines(tmp_path: Path):
    run = read_trec_run("301\tQ0\tFR1\t104\t  2.129133\tSTANDARD\n\n302 Q0 FR2 1 -0.5 other\n")
    assert run.to_dicts() == [
        {"query_id": "301", "doc_id": "FR1", "rank": 104, "score": 2.129133, "tag": "STANDARD"},
        {"query_id": "302", "doc_id": "FR2", "rank": 1, "score": -0.5, "tag": "other"},
    ]
    with pytest.raises(ValueError, match="malformed run line 2"):
        read_trec_run("301 Q0 FR1 1 2.0 t\n301 Q0 FR2 2\n")
    with pytest.raises(ValueError, match="score 'high' is not a number"):
        read_trec_run("301 Q0 FR1 1 high t\n")
    with pytest.raises(ValueError, match="grade 'x' is not an integer"):
        read_trec_qrels("301 0 FR1 x\n")
    with pytest.raises(FileNotFoundError):
        read_trec_run(str(tmp_path / "missing.run"))


def _traces() -> pl.DataFrame:
    def trace(trace_id: str, case_id: str, attempt: int, rounds: list[list[str]]) -> dict:
        return {
            "trace_id": trace_id,
            "case_id": case_id,
            "attempt": attempt,
            "retrieval": [
                {"round": i + 1, "variant": "dense", "query": "q", "hits": [{"doc_id": d, "score": 0.5} for d in docs]}
                for i, docs in enumerate(rounds)
            ],
        }

    return traces_frame_from_records(
        [
            trace("t1", "c1", 1, [["a", "b"], ["b", "c"]]),
            trace("t2", "c1", 2, [["c"]]),
            trace("t3", "c2", 1, [["x"]]),
        ],
        run_id="cand-12",
    )


def test_run_file_from_traces_keeps_our_ranking(tmp_path: Path):
    traces = _traces()
    # Attempt 1: t1's list is a, b, c (b of round 2 dropped as a repeat); scores n + 1 - rank = 3, 2, 1.
    path = write_trec_run(traces, tmp_path / "run.txt", attempt=1)
    assert path.read_text().splitlines() == [
        "c1 Q0 a 1 3.0 cand-12",
        "c1 Q0 b 2 2.0 cand-12",
        "c1 Q0 c 3 1.0 cand-12",
        "c2 Q0 x 1 1.0 cand-12",
    ]
    # trec_eval re-sorts by score: the exported scores reproduce our rank order (c relevant at rank 3 -> RR 1/3).
    qrels = read_trec_qrels("c1 0 c 1\n")
    assert evaluate(qrels, read_trec_run(path), measures=["recip_rank"]).summary["recip_rank"] == pytest.approx(1 / 3)


def test_several_attempts_need_a_choice(tmp_path: Path):
    traces = _traces()
    with pytest.raises(ValueError, match="case c1 has 2 traces"):
        run_frame_from_traces(traces)
    by_trace = run_frame_from_traces(traces, query_id="trace_id", tag="mine")
    assert by_trace.select("query_id", "doc_id", "rank").rows() == [
        ("t1", "a", 1),
        ("t1", "b", 2),
        ("t1", "c", 3),
        ("t2", "c", 1),
        ("t3", "x", 1),
    ]
    assert by_trace.get_column("tag").unique().to_list() == ["mine"]
    paths = write_trec_runs(traces, tmp_path / "runs")
    assert [p.name for p in paths] == ["cand-12.attempt1.run", "cand-12.attempt2.run"]
    assert paths[1].read_text().splitlines() == ["c1 Q0 c 1 1.0 cand-12"]
