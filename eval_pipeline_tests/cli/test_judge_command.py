"""`eval-pipeline judge` on JSONL files, `calibrate` on answer-level verdicts, and `calibrate --fit` writing a profile
that the judge then uses — the way a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main as cli
from eval_pipeline.judge import make_judge
from eval_pipeline.judge.profile import default_profile, load_profile

REFUNDS = "Refunds are issued within 14 days. They go back to the original payment method."


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


INPUT = [
    {"id": "a", "context": REFUNDS, "answer": "Refunds are issued within 14 days. Thanks for asking!"},
    {
        "id": 7,
        "context": [REFUNDS, {"doc_id": "faq", "text": "Gift cards never expire."}],
        "answer": "Refunds are issued within 30 days. Gift cards never expire.",
    },
    {"id": "c", "context": [{"text": REFUNDS}], "claim": "Refunds go back to the original payment method."},
    {"id": "q", "context": REFUNDS, "answer": "Would you like a refund?"},
]


def test_claim_level_output_has_one_line_per_claim_and_keeps_every_input(tmp_path, capsys):
    source = _write(tmp_path / "in.jsonl", INPUT)
    out = tmp_path / "out.jsonl"
    assert cli(["judge", str(source), "--output", str(out)]) == 0
    lines = _read(out)
    version = make_judge("local").version
    assert [(line["id"], line["claim_index"], line["verdict"]) for line in lines] == [
        ("a", 0, "SUPPORTED"),
        (7, 0, "CONTRADICTED"),
        (7, 1, "SUPPORTED"),
        ("c", 0, "SUPPORTED"),
        ("q", None, None),
    ]
    assert set(lines[0]) == {
        "id",
        "claim_index",
        "claim",
        "verdict",
        "score",
        "evidence_quote",
        "reason",
        "judge_version",
        "status",
    }
    assert {line["judge_version"] for line in lines} == {version}
    assert lines[2]["evidence_quote"] == "Gift cards never expire." and lines[2]["score"] == 1.0
    assert lines[4]["reason"].startswith("the answer has no checkable claim")
    err = capsys.readouterr().err
    # one summary line: the progress line of the last batch would say the same again
    assert err.splitlines() == [f"judge {version}: 4 lines judged (4 claims), 0 skipped; wrote {out}"]


def test_progress_lines_come_between_batches_and_the_summary_once(tmp_path, capsys):
    source = _write(tmp_path / "in.jsonl", INPUT)
    out = tmp_path / "out.jsonl"
    assert cli(["judge", str(source), "--output", str(out), "--batch-lines", "2"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "judge: 2 lines, 3 claims judged, 0 skipped so far"
    assert len(err) == 2 and err[1].endswith(f"4 lines judged (4 claims), 0 skipped; wrote {out}")


def test_a_line_that_is_not_json_is_reported_in_plain_words(tmp_path, capsys):
    source = _write(tmp_path / "in.jsonl", [INPUT[0], "nope, not json", '{"id": "c", "context": "x"'])
    assert cli(["judge", str(source), "--output", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "in.jsonl:2: skipped: not valid JSON: Expecting value at column 1" in err
    assert "in.jsonl:3: skipped: not valid JSON: Expecting ',' delimiter at column 27 (the text ends there)" in err
    # orjson's own wording never reaches the user
    assert "invalid literal" not in err and "char " not in err


def test_answer_level_output_is_grounded_only_when_every_claim_is_supported(tmp_path):
    source = _write(tmp_path / "in.jsonl", INPUT)
    out = tmp_path / "out.jsonl"
    assert cli(["judge", str(source), "--output", str(out), "--level", "answer", "--quiet"]) == 0
    rows = {json.dumps(line["id"]): line for line in _read(out)}
    assert [(r["grounded"], r["n_claims"], r["n_supported"]) for r in rows.values()] == [
        (True, 1, 1),
        (False, 2, 1),
        (True, 1, 1),
        (False, 0, 0),
    ]
    assert rows['"a"']["score"] == 1.0 and rows["7"]["score"] < 0.5
    assert rows["7"]["reason"].startswith("claim 0: CONTRADICTED: contradicted (support")
    assert rows['"q"']["score"] is None and rows['"q"']["reason"].startswith("the answer has no checkable claim")


def test_bad_lines_are_reported_with_their_number_and_skipped(tmp_path, capsys):
    source = _write(
        tmp_path / "in.jsonl",
        [
            INPUT[0],
            "{not json",
            "[1, 2]",
            {"context": REFUNDS, "answer": "x"},
            {"id": "a", "context": REFUNDS, "answer": "dup"},
            {"id": "n", "context": 5, "answer": "x"},
            {"id": "m", "context": REFUNDS},
            {"id": "b", "context": REFUNDS, "answer": "x", "claim": "y"},
            "",
            INPUT[2],
        ],
    )
    out = tmp_path / "out.jsonl"
    assert cli(["judge", str(source), "--output", str(out), "--level", "answer"]) == 0
    assert [line["id"] for line in _read(out)] == ["a", "c"]
    err = capsys.readouterr().err
    for number, reason in [
        (2, "not valid JSON"),
        (3, "a line must be a JSON object"),
        (4, "id is required"),
        (5, "duplicate id 'a' (first on line 1)"),
        (6, "context must be a string or a list"),
        (7, "give either answer or claim"),
        (8, "give either answer or claim"),
    ]:
        assert f"in.jsonl:{number}: skipped: {reason}" in err
    assert "2 lines judged (2 claims), 7 skipped" in err
    nothing = _write(tmp_path / "bad.jsonl", ["{not json"])
    assert cli(["judge", str(nothing), "--output", str(out)]) == 2


def test_a_missing_file_or_profile_is_a_clear_error(tmp_path, capsys):
    assert cli(["judge", str(tmp_path / "none.jsonl"), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    source = _write(tmp_path / "in.jsonl", INPUT[:1])
    assert (
        cli(["judge", str(source), "--output", str(tmp_path / "o.jsonl"), "--profile", str(tmp_path / "p.yaml")]) == 2
    )
    assert "judge profile" in capsys.readouterr().err


def test_calibrate_reads_answer_level_verdicts_and_the_judge_output(tmp_path, capsys):
    verdicts = _write(tmp_path / "v.jsonl", [{"id": f"t{i}", "grounded": i % 2 == 0} for i in range(60)])
    # humans agree on all but t0 and t1
    labels = _write(
        tmp_path / "l.jsonl", [{"trace_id": f"t{i}", "answer_grounded": (i % 2 == 0) != (i < 2)} for i in range(60)]
    )
    assert cli(["calibrate", "--verdicts", str(verdicts), "--labels", str(labels), "--json", "--n-boot", "50"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["level"], r["n"], r["agreement"]) for r in rows] == [("answer", 60, pytest.approx(58 / 60))]
    # p_e = 0.5 (30/30 on both sides): κ = (58/60 − 0.5) / 0.5
    assert rows[0]["cohen_kappa"] == pytest.approx((58 / 60 - 0.5) / 0.5) and rows[0]["may_gate"] is True
    source = _write(tmp_path / "in.jsonl", INPUT)
    out = tmp_path / "claims.jsonl"
    assert cli(["judge", str(source), "--output", str(out), "--quiet"]) == 0
    # "q" states no claim: grounded, as the pipeline's judge_calibration reads it (nothing in it is unsupported)
    answer_labels = _write(
        tmp_path / "al.jsonl",
        [{"id": "a", "grounded": True}, {"id": 7, "grounded": False}, {"id": "q", "grounded": True}],
    )
    assert cli(["calibrate", "--verdicts", str(out), "--labels", str(answer_labels), "--json", "--n-boot", "20"]) == 0
    answer = [r for r in json.loads(capsys.readouterr().out) if r["level"] == "answer"][0]
    assert (answer["n"], answer["agreement"], answer["n_unmatched_labels"]) == (3, 1.0, 0)


def test_fit_writes_a_profile_that_maximises_balanced_accuracy_and_the_judge_uses_it(tmp_path, capsys):
    # Claim-level scores (what `judge` writes) for two label sets; the best threshold separates 0.7 from 0.9.
    verdicts = _write(
        tmp_path / "v.jsonl",
        [
            *(
                {"id": f"w{i}", "claim": "c", "verdict": "NOT_IN_EVIDENCE", "score": s, "judge_version": "local-2.0+x"}
                for i, s in enumerate([0.55, 0.6, 0.7, 0.9, 0.95, 1.0])
            ),
            *(
                {"id": f"b{i}", "grounded": s > 0.8, "score": s, "judge_version": "local-2.0+x"}
                for i, s in enumerate([0.52, 0.7, 0.92, 1.0])
            ),
        ],
    )
    wice = _write(
        tmp_path / "wice.jsonl",
        [{"id": f"w{i}", "grounded": g} for i, g in enumerate([False, False, False, True, True, True])],
    )
    begin = _write(
        tmp_path / "begin.jsonl", [{"id": f"b{i}", "grounded": g} for i, g in enumerate([False, False, True, True])]
    )
    profile_path = tmp_path / "fitted.yaml"
    assert (
        cli(
            [
                "calibrate",
                "--fit",
                "--verdicts",
                str(verdicts),
                "--labels",
                str(wice),
                "--labels",
                str(begin),
                "--output",
                str(profile_path),
                "--n-boot",
                "100",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "support threshold 0.8: balanced accuracy 1.0000" in out
    profile = load_profile(profile_path)
    assert (profile.backend, profile.support_threshold, profile.contradiction_overlap) == ("local", 0.8, 0.75)
    document = yaml.safe_load(profile_path.read_text())
    assert [s["labels"] for s in document["fitted"]["label_sets"]] == ["wice.jsonl", "begin.jsonl"]
    assert (
        document["fitted"]["balanced_accuracy"] == 1.0 and document["fitted"]["by"] == "eval-pipeline calibrate --fit"
    )
    # The fitted profile decides: 4 of 6 claim words (0.6667) pass the shipped threshold, not this one.
    source = _write(
        tmp_path / "in.jsonl",
        [{"id": "x", "context": REFUNDS, "claim": "Refunds are issued within 14 days by card and cheque."}],
    )
    out_path = tmp_path / "o.jsonl"
    assert cli(["judge", str(source), "--output", str(out_path), "--quiet"]) == 0
    assert (_read(out_path)[0]["score"], _read(out_path)[0]["verdict"]) == (0.6667, "SUPPORTED")
    assert cli(["judge", str(source), "--output", str(out_path), "--profile", str(profile_path), "--quiet"]) == 0
    line = _read(out_path)[0]
    assert (line["score"], line["verdict"]) == (0.6667, "NOT_IN_EVIDENCE")
    assert line["judge_version"] == f"local-2.0+{profile.digest}" != make_judge("local").version


def test_fit_reads_the_answer_level_output_of_judge_answers_without_claims_included(tmp_path, capsys):
    source = _write(tmp_path / "in.jsonl", INPUT)
    out = tmp_path / "answers.jsonl"
    assert cli(["judge", str(source), "--output", str(out), "--level", "answer", "--quiet"]) == 0
    labels = _write(
        tmp_path / "l.jsonl",
        [
            {"id": "a", "grounded": True},
            {"id": 7, "grounded": False},
            {"id": "c", "grounded": True},
            {"id": "q", "grounded": True},
        ],
    )
    assert (
        cli(
            [
                "calibrate",
                "--fit",
                "--verdicts",
                str(out),
                "--labels",
                str(labels),
                "--output",
                str(tmp_path / "p.yaml"),
            ]
        )
        == 0
    )
    assert "l.jsonl: n 4 (3 grounded), balanced accuracy 1.0000" in capsys.readouterr().out


def test_fit_refuses_verdicts_without_scores(tmp_path, capsys):
    verdicts = _write(
        tmp_path / "v.jsonl",
        [
            {"id": "a", "claim": "c", "verdict": "SUPPORTED", "judge_version": "local-2.0+x"},
            {"id": "b", "claim": "c", "verdict": "NOT_IN_EVIDENCE", "judge_version": "local-2.0+x"},
        ],
    )
    labels = _write(tmp_path / "l.jsonl", [{"id": "a", "grounded": True}, {"id": "b", "grounded": False}])
    assert (
        cli(
            [
                "calibrate",
                "--fit",
                "--verdicts",
                str(verdicts),
                "--labels",
                str(labels),
                "--output",
                str(tmp_path / "p.yaml"),
            ]
        )
        == 2
    )
    assert "without a score" in capsys.readouterr().err
    openai = _write(
        tmp_path / "o.jsonl",
        [{"id": "a", "claim": "c", "verdict": "SUPPORTED", "judge_version": "openai:gpt:claim-v1"}],
    )
    assert (
        cli(
            [
                "calibrate",
                "--fit",
                "--verdicts",
                str(openai),
                "--labels",
                str(labels),
                "--output",
                str(tmp_path / "p.yaml"),
            ]
        )
        == 2
    )
    assert "gives no support scores" in capsys.readouterr().err


def test_the_shipped_profile_is_fitted_on_the_development_sets_and_says_so():
    profile = default_profile("local")
    assert profile.support_threshold > 0.5
    assert [s["labels"] for s in profile.fitted["label_sets"]] == ["wice.labels.jsonl", "begin.labels.jsonl"]
    assert profile.fitted["by"] == "eval-pipeline calibrate --fit"
