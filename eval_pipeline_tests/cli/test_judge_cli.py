"""`calibrate` and `judge-estimate` as the command line runs them."""

from __future__ import annotations

import argparse
import json
import math

from eval_pipeline.cli.judge import register

HUMAN = ["SUPPORTED"] * 5 + ["NOT_IN_EVIDENCE"] * 3 + ["CONTRADICTED"] * 2
JUDGE = ["SUPPORTED"] * 4 + ["NOT_IN_EVIDENCE"] * 3 + ["SUPPORTED", "CONTRADICTED", "NOT_IN_EVIDENCE"]


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_calibrate_prints_the_statistics_of_verdicts_made_elsewhere(tmp_path, capsys):
    verdicts = _write_jsonl(
        tmp_path / "verdicts.jsonl",
        [
            {"trace_id": f"t{i}", "claim": f"Claim {i}.", "verdict": v, "judge_version": "gpt-x"}
            for i, v in enumerate(JUDGE)
        ],
    )
    labels = _write_jsonl(
        tmp_path / "labels.jsonl",
        [{"trace_id": f"t{i}", "claim": f"claim {i}", "verdict": v} for i, v in enumerate(HUMAN)]
        + [{"trace_id": "t0", "answer_grounded": True}, {"trace_id": "t9", "answer_grounded": True}],
    )
    assert (
        _run(
            [
                "calibrate",
                "--verdicts",
                verdicts,
                "--labels",
                labels,
                "--min-n",
                "10",
                "--min-kappa",
                "0.5",
                "--n-boot",
                "200",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    # p_o 0.7, p_e 0.39: kappa 0.31/0.61 = 0.5082 >= 0.5 and n 10 >= 10
    assert out[:5] == [
        "judge gpt-x  level claim",
        "  n 10  agreement 0.7000  balanced_accuracy 0.6556",
        out[2],
        "  may_gate yes (needs kappa >= 0.5 and n >= 10)",
        "  unmatched labels 0  judge incomplete 0",
    ]
    assert out[2].startswith("  cohen_kappa 0.5082  95% CI [")
    assert "judge gpt-x  level answer" in out
    assert _run(["calibrate", "--verdicts", verdicts, "--labels", labels, "--json", "--n-boot", "50"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # t0: human grounded, judge SUPPORTED (grounded); t9: human grounded, judge NOT_IN_EVIDENCE: agreement 1/2
    assert [(r["level"], r["n"], r["agreement"], r["may_gate"]) for r in rows] == [
        ("claim", 10, 0.7, False),
        ("answer", 2, 0.5, False),
    ]


def test_calibrate_rejects_a_bad_file_with_exit_2(tmp_path, capsys):
    verdicts = _write_jsonl(tmp_path / "v.jsonl", [{"trace_id": "t1", "claim": "x", "verdict": "MAYBE"}])
    labels = _write_jsonl(tmp_path / "l.jsonl", [{"trace_id": "t1", "claim": "x", "verdict": "SUPPORTED"}])
    assert _run(["calibrate", "--verdicts", verdicts, "--labels", labels]) == 2
    assert f"{verdicts}:1: a verdict line needs" in capsys.readouterr().err
    assert _run(["calibrate", "--verdicts", str(tmp_path / "missing.jsonl"), "--labels", labels]) == 2
    assert "missing.jsonl does not exist" in capsys.readouterr().err


def _data_root(root):
    (root / "corpus" / "c1").mkdir(parents=True)
    (root / "corpus" / "c1" / "docs.jsonl").write_text(
        json.dumps({"doc_id": "policy/refunds-2025", "text": "Annual SMB plans have a 14 day refund window."}) + "\n"
    )
    (root / "cases" / "d1").mkdir(parents=True)
    (root / "cases" / "d1" / "rag-1.yaml").write_text(
        "case_id: rag-1\nlanes: [rag]\ninput: Refund window?\nrequired_doc_ids: [policy/refunds]\n"
    )
    (root / "cases" / "d1" / "agent-1.yaml").write_text("case_id: agent-1\nlanes: [agent]\ninput: Refund it\n")
    (root / "traces" / "run-1").mkdir(parents=True)
    (root / "traces" / "run-1" / "run.yaml").write_text(
        "run_id: run-1\ncandidate: bot\ncorpus_version: c1\ndataset_version: d1\n"
    )
    context = [{"doc_id": "policy/refunds-2025", "text": "Annual SMB plans have a 14 day refund window."}]
    traces = [
        {
            "trace_id": "a",
            "case_id": "rag-1",
            "context": context,
            "answer": {
                "text": "Annual SMB plans can be refunded within 14 days [doc:policy/refunds-2025]. No fee applies. "
                "Thanks!"
            },
        },
        {
            "trace_id": "b",
            "case_id": "rag-1",
            "attempt": 2,
            "context": context,
            "answer": {"text": "Annual SMB plans can be refunded within 14 days."},
        },
        {"trace_id": "c", "case_id": "agent-1", "answer": {"text": "Refund issued."}},
    ]
    (root / "traces" / "run-1" / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))


def test_judge_estimate_counts_calls_before_spending(tmp_path, capsys):
    _data_root(tmp_path)
    argv = [
        "judge-estimate",
        "--data",
        str(tmp_path),
        "--run",
        "run-1",
        "--model",
        "m",
        "--price-input-per-1k",
        "1",
        "--price-output-per-1k",
        "2",
        "--json",
    ]
    assert _run(argv) == 0
    report = json.loads(capsys.readouterr().out)
    # rag traces a and b; claims: a has 2 (the thanks is no claim), b has 1; a's first claim and b's claim are the
    # same claim against the same context, so 2 distinct grounding inputs; one (claim, cited doc) pair.
    assert (report["traces"], report["claims"], report["cache"]) == (2, 3, None)
    grounding = report["grounding"]
    assert (grounding["requests"], grounding["unique_inputs"], grounding["cached"], grounding["calls"]) == (3, 2, 0, 2)
    assert grounding["est_output_tokens"] == 2 * 60
    assert grounding["est_cost_usd"] == round(grounding["est_input_tokens"] / 1000 * 1 + 120 / 1000 * 2, 6)
    assert (report["citations_at_most"]["calls"], report["total_at_most"]["calls"]) == (1, 3)
    assert grounding["est_input_tokens"] > math.ceil(len("Annual SMB plans have a 14 day refund window.") / 4)


def test_judge_estimate_of_a_missing_run_exits_2(tmp_path, capsys):
    _data_root(tmp_path)
    assert _run(["judge-estimate", "--data", str(tmp_path), "--run", "nope"]) == 2
    assert "run 'nope' has no manifest" in capsys.readouterr().err
