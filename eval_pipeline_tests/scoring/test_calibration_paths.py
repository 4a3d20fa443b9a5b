"""`eval-pipeline calibrate` and the judge_calibration asset give the same κ and interval for the same verdicts and
labels."""

from __future__ import annotations

import json

import polars as pl
import pytest

from eval_pipeline.cli import main
from eval_pipeline.scoring.calibration import calibrate
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import grounding_labels_frame_from_records

VERSION = "local-2.0+test"
# trace: the verdicts of its claims; [] is an answer that states no claim (a question, a refusal).
ANSWERS = {
    "t01": ["SUPPORTED", "SUPPORTED"],
    "t02": ["SUPPORTED", "NOT_IN_EVIDENCE"],
    "t03": ["CONTRADICTED"],
    "t04": ["SUPPORTED"],
    "t05": [],
    "t06": ["NOT_IN_EVIDENCE", "SUPPORTED"],
    "t07": ["SUPPORTED"],
    "t08": [],
    "t09": ["SUPPORTED", "CONTRADICTED"],
    "t10": ["SUPPORTED"],
    "t11": [],
    "t12": ["NOT_IN_EVIDENCE"],
}
HUMAN_ANSWERS = {
    "t01": True,
    "t02": False,
    "t03": False,
    "t04": True,
    "t05": False,
    "t06": True,
    "t07": True,
    "t08": True,
    "t09": False,
    "t10": False,
    "t11": False,
    "t12": False,
}
HUMAN_CLAIMS = {
    ("t02", 1): "SUPPORTED",
    ("t03", 0): "CONTRADICTED",
    ("t06", 0): "NOT_IN_EVIDENCE",
    ("t09", 1): "SUPPORTED",
}


def _claim(trace: str, index: int) -> str:
    return f"Claim {index} of answer {trace} holds."


def _label_records() -> list[dict]:
    claims = [{"trace_id": t, "claim": _claim(t, i), "verdict": v} for (t, i), v in HUMAN_CLAIMS.items()]
    return [*claims, *({"trace_id": t, "answer_grounded": g} for t, g in HUMAN_ANSWERS.items())]


def _asset_inputs() -> tuple[pl.DataFrame, pl.DataFrame]:
    """(claims, grounding_scores) as the judge_calibration asset reads them from the warehouse."""
    claims = pl.DataFrame(
        [
            {
                "run_id": "r",
                "trace_id": t,
                "case_id": t,
                "attempt": 1,
                "claim_index": i,
                "claim": _claim(t, i),
                "verdict": v,
                "score": 1.0 if v == "SUPPORTED" else 0.2,
                "judge_version": VERSION,
                "status": "ok",
            }
            for t, verdicts in ANSWERS.items()
            for i, v in enumerate(verdicts)
        ]
    )
    scores = pl.DataFrame(
        [
            {
                "run_id": "r",
                "trace_id": t,
                "n_claims": len(v),
                "grounding_stage": "pass" if all(x == "SUPPORTED" for x in v) else "fail",
                "judge_version": VERSION,
            }
            for t, v in ANSWERS.items()
        ]
    )
    return claims, scores


def _judge_output_lines() -> list[dict]:
    """The same verdicts as `eval-pipeline judge` writes them: a line per claim, a null-claim line for an answer without
    one."""
    lines = []
    for trace, verdicts in ANSWERS.items():
        for index, verdict in enumerate(verdicts):
            lines.append(
                {
                    "id": trace,
                    "claim_index": index,
                    "claim": _claim(trace, index),
                    "verdict": verdict,
                    "score": 1.0 if verdict == "SUPPORTED" else 0.2,
                    "evidence_quote": None,
                    "reason": "r",
                    "judge_version": VERSION,
                    "status": "ok",
                }
            )
        if not verdicts:
            lines.append(
                {
                    "id": trace,
                    "claim_index": None,
                    "claim": None,
                    "verdict": None,
                    "score": None,
                    "evidence_quote": None,
                    "reason": "the answer has no checkable claim",
                    "judge_version": VERSION,
                    "status": "ok",
                }
            )
    return lines


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("n_boot, seed", [(1000, 0), (300, 7)])
def test_calibrate_command_and_the_asset_agree_on_kappa_and_its_interval(tmp_path, capsys, n_boot, seed):
    claims, scores = _asset_inputs()
    labels = grounding_labels_frame_from_records(_label_records())
    settings = ScoringSettings(min_kappa=0.6, min_n=50)
    asset = {
        row["level"]: row
        for row in calibrate(claims, labels, settings, grounding_scores=scores, n_boot=n_boot, seed=seed).to_dicts()
    }
    verdicts = _write(tmp_path / "verdicts.jsonl", _judge_output_lines())
    label_file = _write(tmp_path / "labels.jsonl", reversed(_label_records()))
    assert (
        main(
            [
                "calibrate",
                "--verdicts",
                verdicts,
                "--labels",
                label_file,
                "--json",
                "--n-boot",
                str(n_boot),
                "--seed",
                str(seed),
            ]
        )
        == 0
    )
    command = {row["level"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(command) == set(asset) == {"claim", "answer"}
    for level in ("claim", "answer"):
        keys = ("n", "agreement", "cohen_kappa", "kappa_ci_low", "kappa_ci_high", "balanced_accuracy", "confusion")
        assert {k: command[level][k] for k in keys} == {k: asset[level][k] for k in keys}, level
    # the three answers without a claim are judged grounded, as the grounding stage passes them
    assert asset["answer"]["n"] == 12 and json.loads(asset["answer"]["confusion"])["not_grounded"]["grounded"] == 3


def test_disagreeing_labels_give_the_same_numbers_in_any_file_order(tmp_path, capsys):
    claims, scores = _asset_inputs()
    first = _label_records()
    # a second annotator disagrees on one claim and one answer
    second = [
        {"trace_id": "t03", "claim": _claim("t03", 0), "verdict": "SUPPORTED"},
        {"trace_id": "t01", "answer_grounded": False},
    ]
    a, b = _write(tmp_path / "a.jsonl", first), _write(tmp_path / "b.jsonl", second)
    outputs = []
    for order in ([a, b], [b, a]):
        argv = [
            "calibrate",
            "--verdicts",
            _write(tmp_path / "v.jsonl", _judge_output_lines()),
            "--json",
            "--n-boot",
            "200",
        ]
        assert main([*argv, *(x for path in order for x in ("--labels", path))]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    asset = [
        calibrate(
            claims, grounding_labels_frame_from_records(records), ScoringSettings(), grounding_scores=scores, n_boot=200
        )
        for records in ([*first, *second], [*second, *first])
    ]
    assert asset[0].equals(asset[1])
    assert asset[0].drop("self_consistency_note").to_dicts() == [
        {k: v for k, v in row.items() if k != "self_consistency_note"} for row in outputs[0]
    ]
