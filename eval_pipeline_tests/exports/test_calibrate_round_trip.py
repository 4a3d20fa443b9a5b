"""`export claims --format jsonl` is a verdict file that `calibrate --verdicts` reads as is."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.cli.judge import register as register_judge

LABELS = sorted((Path(__file__).resolve().parents[2] / "data" / "labels" / "grounding").glob("*.jsonl"))


def _calibrate(capsys, verdicts: Path, labels: list[Path]) -> list[dict]:
    parser = argparse.ArgumentParser()
    register_judge(parser.add_subparsers())
    argv = ["calibrate", "--verdicts", str(verdicts), "--json"]
    for path in labels:
        argv += ["--labels", str(path)]
    args = parser.parse_args(argv)
    capsys.readouterr()
    assert args.handler(args) == 0
    return json.loads(capsys.readouterr().out)


def test_sample_labels_calibrate_like_the_pipeline(export, sample, tmp_path, capsys):
    # the sample's human grounding labels are keyed by base-41's trace ids
    assert LABELS and all('"base-41:' in path.read_text() for path in LABELS)
    verdicts = tmp_path / "verdicts.jsonl"
    assert export("claims", "--run", "base-41", "--format", "jsonl", "--output", str(verdicts)) == 0
    rows = {row["level"]: row for row in _calibrate(capsys, verdicts, LABELS)}
    table = sample["warehouse"].read("judge_calibration", "base-41")
    assert table.height == 2
    for expected in table.iter_rows(named=True):
        got = rows[expected["level"]]
        assert got["judge_version"] == expected["judge_version"]
        assert got["n"] == expected["n"] > 0
        assert got["n_unmatched_labels"] == expected["n_unmatched_labels"] == 0
        for key in ("agreement", "cohen_kappa", "balanced_accuracy", "kappa_ci_low", "kappa_ci_high"):
            assert got[key] == pytest.approx(expected[key]), key
        assert json.loads(got["confusion"]) == json.loads(expected["confusion"])
        assert got["may_gate"] == expected["may_gate"]


def test_cand_42_claims_calibrate_against_labels_of_their_own(export, sample, tmp_path, capsys):
    """The documented command: `export claims --run cand-42 --format jsonl --output v.jsonl`, then calibrate it."""
    verdicts = tmp_path / "v.jsonl"
    assert export("claims", "--run", "cand-42", "--format", "jsonl", "--output", str(verdicts)) == 0
    claims = sample["warehouse"].read("claims", "cand-42")
    # labels a person could have written for five cand-42 claims: four agree with the judge, one does not
    picked = claims.filter(pl.col("verdict").is_not_null()).sort("trace_id", "claim_index").head(5)
    labels = tmp_path / "labels.jsonl"
    lines = []
    for number, row in enumerate(picked.iter_rows(named=True)):
        verdict = (
            row["verdict"] if number else ("NOT_IN_EVIDENCE" if row["verdict"] != "NOT_IN_EVIDENCE" else "SUPPORTED")
        )
        lines.append(json.dumps({"trace_id": row["trace_id"], "claim": row["claim"], "verdict": verdict}))
    labels.write_text("\n".join(lines) + "\n")
    claim_level = next(row for row in _calibrate(capsys, verdicts, [labels]) if row["level"] == "claim")
    assert claim_level["judge_version"] == claims["judge_version"][0]
    assert claim_level["n"] == 5 and claim_level["n_unmatched_labels"] == 0
    assert claim_level["agreement"] == pytest.approx(4 / 5)
