"""The openai backend, driven through the real `openai` client against the loopback server."""

from __future__ import annotations

import json
import math
import os

import polars as pl
import pytest

from eval_pipeline.judge import JudgeConfigError, make_judge
from eval_pipeline.judge.cache import VerdictCache
from eval_pipeline.judge.openai_backend import estimate_calls, retry_after_seconds
from eval_pipeline.scoring.claims import extract_claims, judge_claims
from eval_pipeline.scoring.grounding import score_grounding
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.loopback_server import Fault, canned_responder
from eval_pipeline_harness.records import traces_frame_from_records

REFUND_SENTENCE = "Annual SMB plans have a 14 day refund window."
SUPPORTED_CLAIM = "Annual SMB plans can be refunded within 14 days."
FABRICATED_CLAIM = "Annual SMB plans can be refunded within 30 days."
VERDICTS = {
    SUPPORTED_CLAIM: {
        "verdict": "SUPPORTED",
        "evidence_quote": REFUND_SENTENCE,
        "evidence_doc_id": "policy/refunds-2025",
    },
    # The model invents a sentence to back its verdict.
    FABRICATED_CLAIM: {
        "verdict": "SUPPORTED",
        "evidence_quote": "Annual SMB plans have a 30 day refund window.",
        "evidence_doc_id": "policy/refunds-2025",
    },
}


def _judge(loopback, judge_key, **options):
    settings = {
        "model": "judge-model",
        "base_url": loopback.base_url,
        "api_key_env": judge_key,
        "backoff_base_s": 0.01,
        "timeout_s": 5.0,
        "concurrency": 1,
        **options,
    }
    return make_judge("openai", api_key=os.environ[judge_key], **settings)


def _requests(context, claims=(SUPPORTED_CLAIM,)):
    evidence = [{"doc_id": c["doc_id"], "text": c["text"]} for c in context]
    return pl.DataFrame(
        {
            "request_key": [f"k{i}" for i in range(len(claims))],
            "claim": list(claims),
            "evidence": [evidence] * len(claims),
        }
    )


def test_canned_verdicts_go_through_the_real_client_with_the_structured_output_contract(loopback, judge_key, context):
    loopback.state.responder = canned_responder(VERDICTS)
    judge = _judge(loopback, judge_key, price_input_per_1k=0.5, price_output_per_1k=1.5, seed=7)
    results = judge.judge_claims(
        _requests(context, (SUPPORTED_CLAIM, FABRICATED_CLAIM, "Gift cards never expire."))
    ).to_dicts()
    assert [(r["verdict"], r["quote_verified"]) for r in results] == [
        ("SUPPORTED", True),
        ("NOT_IN_EVIDENCE", False),
        ("NOT_IN_EVIDENCE", False),
    ]
    assert results[1]["reason"] == "quote not found in the evidence: SUPPORTED downgraded to NOT_IN_EVIDENCE"
    assert {r["judge_version"] for r in results} == {"openai:judge-model:grounding-claim-v1"}
    sent = [r.body for r in loopback.requests]
    assert len(sent) == 3
    assert {(b["model"], b["temperature"], b["seed"], b["response_format"]["type"]) for b in sent} == {
        ("judge-model", 0, 7, "json_schema")
    }
    # The judge sees the claim and the evidence only: the user message is exactly {claim, evidence}.
    assert json.loads(sent[0]["messages"][1]["content"]) == {
        "claim": SUPPORTED_CLAIM,
        "evidence": [{"doc_id": c["doc_id"], "text": c["text"]} for c in context],
    }
    # The server counts ceil(characters / 4) tokens per message; cost = in/1000 * 0.5 + out/1000 * 1.5.
    expected_in = sum(math.ceil(len(m["content"]) / 4) for m in sent[0]["messages"])
    expected_out = math.ceil(len(json.dumps({"claim": SUPPORTED_CLAIM, **VERDICTS[SUPPORTED_CLAIM]})) / 4)
    first = results[0]
    assert (first["input_tokens"], first["output_tokens"]) == (expected_in, expected_out)
    assert first["cost_usd"] == pytest.approx(expected_in / 1000 * 0.5 + expected_out / 1000 * 1.5)
    assert first["latency_ms"] > 0 and first["cached"] is False


def test_429_waits_the_retry_after_the_server_asked_for(loopback, judge_key, context):
    loopback.state.responder = canned_responder(VERDICTS)
    loopback.inject(Fault("http", status=429, retry_after=1))
    judge = _judge(loopback, judge_key)
    result = judge.judge_claims(_requests(context)).to_dicts()[0]
    assert (result["verdict"], result["status"]) == ("SUPPORTED", "ok")
    first, second = loopback.requests
    assert (first.status, second.status) == (429, 200)
    # Retry-After: 1 replaces the 0.01 s backoff.
    assert judge.stats.waits_s == [1.0]
    assert second.received_at - first.received_at >= 1.0


@pytest.mark.parametrize(
    ("fault", "statuses", "waits"),
    [
        (Fault("http", status=500), [500, 200], [0.01]),
        (Fault("http", status=503), [503, 200], [0.01]),
        (Fault("malformed"), [200, 200], [0.01]),
        (Fault("bad_schema"), [200, 200], [0.01]),
    ],
)
def test_server_errors_and_malformed_replies_are_retried(loopback, judge_key, context, fault, statuses, waits):
    loopback.state.responder = canned_responder(VERDICTS)
    loopback.inject(fault, fault)
    judge = _judge(loopback, judge_key)
    result = judge.judge_claims(_requests(context)).to_dicts()[0]
    assert (result["verdict"], result["status"]) == ("SUPPORTED", "ok")
    # Two faults then success: backoff 0.01 * 2^0, then 0.01 * 2^1.
    assert [r.status for r in loopback.requests] == [statuses[0], statuses[0], 200]
    assert judge.stats.waits_s == [waits[0], waits[0] * 2]
    assert judge.stats.attempts == 3


def test_a_timeout_is_retried(loopback, judge_key, context):
    loopback.state.responder = canned_responder(VERDICTS)
    # The first reply comes after 2 s; the client gives up at 0.5 s and the retry is answered at once.
    loopback.inject(Fault("timeout", delay_s=2.0))
    judge = _judge(loopback, judge_key, timeout_s=0.5)
    result = judge.judge_claims(_requests(context)).to_dicts()[0]
    assert (result["verdict"], result["status"], judge.stats.attempts, judge.stats.retries) == ("SUPPORTED", "ok", 2, 1)


def test_a_call_that_fails_after_retries_leaves_its_claims_incomplete(
    loopback, judge_key, context, rag_cases, tmp_path
):
    loopback.state.responder = canned_responder(VERDICTS)
    loopback.inject(*[Fault("http", status=500)] * 3)
    judge = _judge(loopback, judge_key, max_retries=2, cache_path=str(tmp_path / "cache.sqlite"))
    traces = traces_frame_from_records(
        [{"trace_id": "t1", "case_id": "c1", "context": context, "answer": {"text": SUPPORTED_CLAIM}}]
    )
    judged = judge_claims(extract_claims(traces), traces, judge)
    assert judged.select("verdict", "status", "reason", "quote_verified").to_dicts() == [
        {"verdict": None, "status": "incomplete", "reason": "failed after 3 attempts: HTTP 500", "quote_verified": None}
    ]
    score = score_grounding(judged, traces, rag_cases, ScoringSettings()).to_dicts()[0]
    assert (score["grounding_rate"], score["grounding_stage"]) == (None, "incomplete")
    # Nothing incomplete is cached: the next run calls again and gets its verdict.
    again = judge_claims(extract_claims(traces), traces, judge)
    assert again.select("verdict", "status", "cached").to_dicts() == [
        {"verdict": "SUPPORTED", "status": "ok", "cached": False}
    ]
    assert loopback.count() == 4


def test_a_client_error_is_not_retried(loopback, judge_key, context):
    loopback.inject(Fault("http", status=401))
    judge = _judge(loopback, judge_key)
    result = judge.judge_claims(_requests(context)).to_dicts()[0]
    assert (result["status"], result["verdict"], result["reason"]) == (
        "incomplete",
        None,
        "HTTP 401: injected HTTP 401",
    )
    assert loopback.count() == 1


def test_the_cache_makes_a_rescore_of_unchanged_inputs_call_nothing(loopback, judge_key, context, tmp_path):
    loopback.state.responder = canned_responder(VERDICTS)
    cache = str(tmp_path / "verdicts.sqlite")
    requests = _requests(context, (SUPPORTED_CLAIM, FABRICATED_CLAIM, SUPPORTED_CLAIM))
    first = _judge(loopback, judge_key, cache_path=cache).judge_claims(requests)
    # Three requests, two distinct inputs: two calls.
    assert loopback.count() == 2
    again = _judge(loopback, judge_key, cache_path=cache).judge_claims(requests)
    assert loopback.count() == 2
    assert again["cached"].to_list() == [True, True, True]
    assert again["cost_usd"].to_list() == [0.0, 0.0, 0.0]
    assert again.select("verdict", "evidence_quote", "quote_verified").equals(
        first.select("verdict", "evidence_quote", "quote_verified")
    )
    # Another model or prompt version is another key.
    _judge(loopback, judge_key, cache_path=cache, model="other-model").judge_claims(requests)
    assert loopback.count() == 4


def test_batch_mode_uses_files_and_batches_and_no_chat_calls(loopback, judge_key, context, tmp_path):
    loopback.state.responder = canned_responder(VERDICTS)
    loopback.state.batch_polls = 2
    judge = _judge(
        loopback,
        judge_key,
        batch=True,
        batch_poll_s=0.01,
        price_input_per_1k=1.0,
        cache_path=str(tmp_path / "c.sqlite"),
    )
    results = judge.judge_claims(_requests(context, (SUPPORTED_CLAIM, FABRICATED_CLAIM))).to_dicts()
    assert [(r["verdict"], r["status"]) for r in results] == [("SUPPORTED", "ok"), ("NOT_IN_EVIDENCE", "ok")]
    paths = [(r.method, r.path.split("/")[2]) for r in loopback.requests]
    # upload, create, two polls (completed on the second), then the output file
    assert paths == [("POST", "files"), ("POST", "batches"), ("GET", "batches"), ("GET", "batches"), ("GET", "files")]
    assert loopback.requests[0].body == {"purpose": "batch"}
    # Batch calls are billed at half price: cost = input_tokens / 1000 * 1.0 * 0.5.
    assert results[0]["cost_usd"] == pytest.approx(results[0]["input_tokens"] / 1000 * 0.5)
    assert len(judge.stats.batches) == 1
    # The batch results are cached like any other.
    judge.judge_claims(_requests(context, (SUPPORTED_CLAIM, FABRICATED_CLAIM)))
    assert len(loopback.requests) == 5


def test_estimate_counts_calls_tokens_and_cost_after_the_cache(loopback, judge_key, context, tmp_path):
    loopback.state.responder = canned_responder(VERDICTS)
    cache_path = tmp_path / "verdicts.sqlite"
    _judge(loopback, judge_key, cache_path=str(cache_path)).judge_claims(_requests(context, (SUPPORTED_CLAIM,)))
    requests = _requests(context, (SUPPORTED_CLAIM, FABRICATED_CLAIM, FABRICATED_CLAIM))
    estimate = estimate_calls(
        requests, VerdictCache(cache_path), "judge-model", {"input_per_1k": 2.0, "output_per_1k": 4.0}
    )
    # The call the judge sent for FABRICATED_CLAIM would be the same messages; the server's count is ceil(chars/4)
    # per message while the estimate takes ceil(all chars / 4) once.
    _judge(loopback, judge_key).judge_claims(_requests(context, (FABRICATED_CLAIM,)))
    messages = loopback.requests[-1].body["messages"]
    tokens = math.ceil(sum(len(m["content"]) for m in messages) / 4)
    assert estimate == {
        "model": "judge-model",
        "prompt_version": "grounding-claim-v1",
        "requests": 3,
        "unique_inputs": 2,
        "cached": 1,
        "calls": 1,
        "est_input_tokens": tokens,
        "est_output_tokens": 60,
        "est_cost_usd": round(tokens / 1000 * 2.0 + 60 / 1000 * 4.0, 6),
    }


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past: no wait
    assert retry_after_seconds({}) is None


def test_configuration_errors_are_reported(monkeypatch):
    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    with pytest.raises(JudgeConfigError, match=r"\$NO_SUCH_JUDGE_KEY, which is not set"):
        make_judge("openai", model="m", api_key_env="NO_SUCH_JUDGE_KEY")
    with pytest.raises(JudgeConfigError, match="unknown prompt version 'v9'"):
        make_judge("openai", model="m", prompt_version="v9")
    with pytest.raises(JudgeConfigError, match="unknown judge backend 'magic'"):
        make_judge("magic")


def test_self_consistency_asks_the_server_again_past_the_cache(loopback, judge_key, context, tmp_path):
    from eval_pipeline.scoring.calibration import self_consistency

    loopback.state.responder = canned_responder(VERDICTS)
    judge = _judge(loopback, judge_key, cache_path=str(tmp_path / "cache.sqlite"))
    requests = _requests(context, (SUPPORTED_CLAIM, FABRICATED_CLAIM))
    judged = judge.judge_claims(requests)
    judge.judge_claims(requests)
    assert len(loopback.requests) == 2 and judge.deterministic is False  # the second pass came from the cache
    result = self_consistency(judge, judged, requests, sample=10, seed=0)
    # both asked again through the client (the cache would have answered), and the canned server never changes its mind
    assert len(loopback.requests) == 4
    assert (result["self_consistency_n"], result["self_consistency_flip_rate"]) == (2, 0.0)


def test_the_judge_command_uses_the_openai_backend_configured_in_the_environment(
    loopback, judge_key, context, tmp_path, monkeypatch
):
    from eval_pipeline.cli import main as cli

    loopback.state.responder = canned_responder(VERDICTS)
    for name, value in {
        "BACKEND": "openai",
        "MODEL": "judge-model",
        "BASE_URL": loopback.base_url,
        "API_KEY_ENV": judge_key,
        "CACHE": str(tmp_path / "cache.sqlite"),
    }.items():
        monkeypatch.setenv(f"EVAL_PIPELINE_JUDGE_{name}", value)
    evidence = [{"doc_id": c["doc_id"], "text": c["text"]} for c in context]
    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(
            json.dumps({"id": i, "context": evidence, "claim": c}) + "\n"
            for i, c in enumerate((SUPPORTED_CLAIM, FABRICATED_CLAIM))
        )
    )
    out = tmp_path / "out.jsonl"
    assert cli(["judge", str(source), "--output", str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    # the fabricated quote is downgraded here too; the openai judge gives no score
    assert [(line["verdict"], line["score"], line["judge_version"]) for line in lines] == [
        ("SUPPORTED", None, "openai:judge-model:grounding-claim-v1"),
        ("NOT_IN_EVIDENCE", None, "openai:judge-model:grounding-claim-v1"),
    ]
    assert len(loopback.requests) == 2
