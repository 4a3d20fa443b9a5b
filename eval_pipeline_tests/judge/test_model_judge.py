"""The model judge: an ONNX NLI classifier from a local folder (a tiny one the test builds).

Its thresholds come from a judge profile.
"""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from eval_pipeline.cli import main as cli
from eval_pipeline.judge import JudgeConfigError, make_judge
from eval_pipeline.judge.profile import JudgeProfile

pytest.importorskip("onnxruntime", reason="the model judge's extra (onnxruntime) is part of .[test]")
pytest.importorskip("onnx", reason="onnx builds the tiny test model; it is part of .[test]")

from eval_pipeline_tests.judge.tiny_nli import build  # noqa: E402

REFUND = "Refunds are issued within 14 days."


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("tiny-nli"))


def _judge(judge, claim: str, evidence: list[str]) -> dict:
    requests = pl.DataFrame(
        {
            "request_key": ["k"],
            "claim": [claim],
            "evidence": [[{"doc_id": str(i), "text": t} for i, t in enumerate(evidence)]],
        }
    )
    return judge.judge_claims(requests).to_dicts()[0]


def _softmax(logits: list[float]) -> list[float]:
    exps = [math.exp(x - max(logits)) for x in logits]
    return [x / sum(exps) for x in exps]


def test_entailment_contradiction_and_neutral_map_to_verdicts(model_dir):
    judge = make_judge("model", model_dir=str(model_dir))
    supported = _judge(judge, "Refunds take 14 days.", [REFUND])
    # Tokens: [CLS] refunds are issued within 14 days . [SEP] refunds take 14 days . [SEP]: two 14s give entailment
    # 12; the 13 other tokens 0.2 each towards neutral.
    expected = _softmax([0.0, 12.0, 13 * 0.2])[1]
    assert supported["verdict"] == "SUPPORTED" and supported["score"] == round(expected, 4)
    assert (supported["evidence_quote"], supported["quote_verified"], supported["evidence_doc_id"]) == (
        REFUND,
        True,
        "0",
    )
    assert supported["reason"] == f"model: support {round(expected, 4)} >= 0.5 on the quoted passage"
    contradicted = _judge(judge, "Refunds take 30 days.", [REFUND])
    assert (
        contradicted["verdict"] == "CONTRADICTED"
        and contradicted["score"] < 0.01
        and contradicted["quote_verified"] is True
    )
    neutral = _judge(judge, "Gift cards expire.", ["Shipping is free."])
    assert neutral["verdict"] == "NOT_IN_EVIDENCE" and neutral["reason"].startswith("model: support ")
    assert _judge(judge, "Gift cards expire.", [])["reason"] == "no evidence"


def test_the_best_passage_decides_and_is_the_quote(model_dir):
    result = _judge(
        make_judge("model", model_dir=str(model_dir)), "Refunds take 14 days.", ["Shipping is free.", REFUND]
    )
    assert (result["verdict"], result["evidence_doc_id"], result["evidence_quote"]) == ("SUPPORTED", "1", REFUND)


def test_the_profile_threshold_decides_and_names_the_version(model_dir, tmp_path):
    strict = tmp_path / "strict.yaml"
    strict.write_text(JudgeProfile(backend="model", support_threshold=0.9999999, source="t").to_yaml())
    default, picky = (
        make_judge("model", model_dir=str(model_dir)),
        make_judge("model", model_dir=str(model_dir), profile=str(strict)),
    )
    assert _judge(picky, "Refunds take 14 days.", [REFUND])["verdict"] == "NOT_IN_EVIDENCE"
    assert default.version.startswith(f"model:{model_dir.name}@") and default.version != picky.version
    assert default.deterministic is True


def test_other_label_names_and_bad_folders(model_dir, tmp_path):
    renamed = build(tmp_path / "renamed", labels={0: "refuted", 1: "consistent", 2: "unknown"})
    assert (
        _judge(make_judge("model", model_dir=str(renamed)), "Refunds take 14 days.", [REFUND])["verdict"] == "SUPPORTED"
    )
    odd = build(tmp_path / "odd", labels={0: "A", 1: "B", 2: "C"})
    with pytest.raises(JudgeConfigError, match="no id2label entry reads as entailment"):
        make_judge("model", model_dir=str(odd))
    config = json.loads((odd / "config.json").read_text())
    (odd / "config.json").write_text(
        json.dumps({**config, "eval_pipeline_labels": {"supported": "B", "contradicted": "A"}})
    )
    assert (
        _judge(make_judge("model", model_dir=str(odd)), "Refunds take 30 days.", [REFUND])["verdict"] == "CONTRADICTED"
    )
    with pytest.raises(JudgeConfigError, match="needs a model folder"):
        make_judge("model")
    with pytest.raises(JudgeConfigError, match="lacks model.onnx"):
        make_judge("model", model_dir=str(tmp_path))


def test_the_judge_command_runs_the_model_backend(model_dir, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps({"id": 1, "context": [REFUND], "answer": "Refunds take 14 days. Refunds take 30 days."}) + "\n"
    )
    out = tmp_path / "out.jsonl"
    assert (
        cli(
            ["judge", str(source), "--output", str(out), "--backend", "model", "--model-dir", str(model_dir), "--quiet"]
        )
        == 0
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["id"], line["claim_index"], line["verdict"]) for line in lines] == [
        (1, 0, "SUPPORTED"),
        (1, 1, "CONTRADICTED"),
    ]
    assert {line["judge_version"] for line in lines} == {make_judge("model", model_dir=str(model_dir)).version}
