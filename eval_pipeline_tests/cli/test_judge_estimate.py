"""`eval-pipeline judge-estimate` counts the verdicts judge_verdicts already holds, as a pipeline run reuses them."""

import json

import polars as pl
import pytest

from eval_pipeline.cli import main


@pytest.fixture()
def local_judge(monkeypatch):
    for name in ("BACKEND", "PROFILE", "MODEL", "CACHE"):
        monkeypatch.delenv(f"EVAL_PIPELINE_JUDGE_{name}", raising=False)


def test_after_a_run_the_estimate_needs_no_call_and_names_judge_verdicts(scored, local_judge, capsys, monkeypatch):
    warehouse = scored["warehouse"]
    claims = warehouse.read("claims", "cand-42")
    version = claims["judge_version"].unique().item()
    # --data defaults to ./data, as in every other command
    monkeypatch.chdir(scored["data"].parent)
    assert main(["judge-estimate", "--run", "cand-42", "--warehouse", warehouse.root, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    grounding = report["grounding"]
    assert (report["judge_version"], report["inputs"], report["claims"]) == (version, "warehouse", claims.height)
    # by hand: the distinct (claim, context) inputs of cand-42's claims with a context, all stored by the run
    judged = claims.filter(pl.col("reason").ne_missing("no_context_logged"))
    assert grounding["unique_inputs"] == grounding["in_judge_verdicts"] > 0
    assert grounding["requests"] == judged.height
    assert (grounding["calls"], report["citations_at_most"]["calls"], report["total_at_most"]["calls"]) == (0, 0, 0)
    assert main(["judge-estimate", "--run", "cand-42", "--warehouse", warehouse.root]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        f"cache: judge_verdicts holds {grounding['in_judge_verdicts']} of {grounding['unique_inputs']} claims "
        f"for {version}; 0 calls needed" in lines
    )
    assert "total (at most): 0 calls, ~$0.0000" in lines


def test_another_judge_needs_every_call(scored, local_judge, capsys):
    argv = [
        "judge-estimate",
        "--data",
        str(scored["data"]),
        "--warehouse",
        scored["warehouse"].root,
        "--run",
        "cand-42",
        "--model",
        "gpt-4o-mini",
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["judge_version"] == "openai:gpt-4o-mini:grounding-claim-v1"
    assert (
        report["grounding"]["in_judge_verdicts"] == 0
        and report["grounding"]["calls"] == report["grounding"]["unique_inputs"] > 0
    )
