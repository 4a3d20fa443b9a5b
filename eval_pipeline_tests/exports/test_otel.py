"""`export … --format otlp`: OTLP/JSON spans with gen_ai.evaluation.result events, to a file and a loopback receiver."""

from __future__ import annotations

import argparse
import json
import re

import polars as pl
import pytest

from eval_pipeline.cli.exports import register
from eval_pipeline.exports import otel

# 2026-03-02T02:10:00Z, cand-42's run.yaml created_at, in Unix nanoseconds
CAND_42_TIME = "1772417400000000000"


def otlp_server(receiver, respond=None):
    """An OTLP/HTTP JSON receiver: parses every request and answers 200 with an empty ExportTraceServiceResponse."""
    return receiver(respond or (lambda request: (200, {})))


def _spans(requests) -> list[dict]:
    return [
        span
        for request in requests
        for resource in request["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _attrs(items: list[dict]) -> dict:
    """OTLP KeyValues as a plain dict of Python values."""
    out = {}
    for item in items:
        ((kind, value),) = item["value"].items()
        out[item["key"]] = int(value) if kind == "intValue" else value
    return out


@pytest.fixture(scope="module")
def sent_spans(sample, tmp_path_factory):
    """The spans of `export scores --format otlp` (every run), as a receiver would parse them from the file."""
    out = tmp_path_factory.mktemp("otlp") / "spans.jsonl"
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["export", "scores", "--format", "otlp", "--output", str(out), "--warehouse", str(sample["root"])]
    )
    assert args.handler(args) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_posted_requests(export, sample, receiver, monkeypatch, capsys):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc%3D1,x-team=eval")
    server = otlp_server(receiver)
    assert export("scores", "--format", "otlp", "--endpoint", server.url + "/") == 0
    assert server.requests
    for request in server.requests:
        assert request.path == "/v1/traces"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["x-api-key"] == "abc=1" and request.headers["x-team"] == "eval"
        body = request.json()
        assert len(body["resourceSpans"]) == 1
        resource = body["resourceSpans"][0]
        assert _attrs(resource["resource"]["attributes"]) == {"service.name": "eval_pipeline"}
        assert 0 < len(resource["scopeSpans"][0]["spans"]) <= 512
    spans = _spans(r.json() for r in server.requests)
    stages = sample["warehouse"].read("stage_results")
    lanes = stages.select("run_id", "trace_id", "lane").unique()
    assert len(spans) == lanes.height
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"sent {len(spans):,} spans (") and err.endswith(f"to {server.url}/v1/traces")


def test_one_span_per_trace_and_lane(sent_spans, sample):
    spans = _spans(sent_spans)
    stages = sample["warehouse"].read("stage_results")
    expected = stages.group_by("run_id", "trace_id").agg(pl.col("lane").unique().sort())
    by_trace: dict[tuple[str, str], list[dict]] = {}
    for span in spans:
        attrs = _attrs(span["attributes"])
        by_trace.setdefault((attrs["eval_pipeline.run_id"], attrs["eval_pipeline.trace_id"]), []).append(span)
    assert len(by_trace) == expected.height
    for row in expected.iter_rows(named=True):
        group = by_trace[(row["run_id"], row["trace_id"])]
        assert sorted(_attrs(s["attributes"])["eval_pipeline.lane"] for s in group) == row["lane"]
        # both lanes of one trace are spans of one OTel trace
        assert len({s["traceId"] for s in group}) == 1
    assert sum(1 for g in by_trace.values() if len(g) == 2) == 18  # the sample's both-lane cases
    assert len({s["spanId"] for s in spans}) == len(spans)
    for span in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and span["traceId"] != "0" * 32
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"]) and span["spanId"] != "0" * 16
        assert span["kind"] == 1 and span["name"].startswith("eval ")
        assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])


def test_ids_are_deterministic(sent_spans):
    span = next(s for s in _spans(sent_spans) if s["name"] == "eval rag cand-42:rag-001#1")
    assert span["traceId"] == otel.otel_trace_id("cand-42", "cand-42:rag-001#1")
    assert span["spanId"] == otel.otel_span_id("cand-42", "cand-42:rag-001#1", "rag")


def test_known_failed_trace(sent_spans):
    """cand-42:rag-001#1, read off tables by hand: retrieval fails (stale version outranks), answer lacks 14 days."""
    span = next(s for s in _spans(sent_spans) if s["name"] == "eval rag cand-42:rag-001#1")
    assert span["startTimeUnixNano"] == span["endTimeUnixNano"] == CAND_42_TIME
    attrs = _attrs(span["attributes"])
    assert attrs == {
        "eval_pipeline.run_id": "cand-42",
        "eval_pipeline.trace_id": "cand-42:rag-001#1",
        "eval_pipeline.case_id": "rag-001",
        "eval_pipeline.attempt": 1,
        "eval_pipeline.lane": "rag",
        "eval_pipeline.outcome": "fail",
        "eval_pipeline.first_failing_stage": "retrieval",
        "eval_pipeline.owner": "retrieval (index, retriever, query rewriting)",
        "eval_pipeline.candidate": "support-assistant@2.4.0-rc1",
    }
    assert span["status"]["code"] == 2 and span["status"]["message"].startswith(
        "first failing stage retrieval: no relevant doc"
    )
    assert {e["name"] for e in span["events"]} == {"gen_ai.evaluation.result"}
    assert all(e["timeUnixNano"] == CAND_42_TIME for e in span["events"])
    events = [_attrs(e["attributes"]) for e in span["events"]]
    assert [e["gen_ai.evaluation.name"] for e in events] == [
        "retrieval",
        "context_assembly",
        "grounding",
        "citation",
        "answer",
        "recall_at_10",
        "ndcg_at_10",
        "mrr",
        "grounding_rate",
        "citation_precision",
        "citation_recall",
        "token_f1",
    ]
    by_name = {e["gen_ai.evaluation.name"]: e for e in events}
    assert by_name["retrieval"] == {
        "gen_ai.evaluation.name": "retrieval",
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "no relevant doc in the top 10; failure_class stale_version_outranks_current "
        "(policy/refunds-2025)",
        "eval_pipeline.source": "stage_results.status",
    }
    assert by_name["context_assembly"]["gen_ai.evaluation.score.label"] == "not_applicable"
    assert by_name["grounding"]["gen_ai.evaluation.score.label"] == "pass"
    assert "gen_ai.evaluation.explanation" not in by_name["grounding"]
    assert by_name["answer"]["gen_ai.evaluation.explanation"] == "answer lacks expected: 14 days"
    assert by_name["recall_at_10"]["gen_ai.evaluation.score.value"] == 0.0
    assert by_name["ndcg_at_10"]["gen_ai.evaluation.score.value"] == pytest.approx(0.346332821766451)
    assert by_name["mrr"]["gen_ai.evaluation.score.value"] == 0.0
    assert by_name["grounding_rate"]["gen_ai.evaluation.score.value"] == 1.0
    assert by_name["citation_precision"]["gen_ai.evaluation.score.value"] == 1.0
    assert by_name["token_f1"]["gen_ai.evaluation.score.value"] == pytest.approx(2 / 9)
    assert by_name["token_f1"]["eval_pipeline.source"] == "answer_scores.token_f1"
    assert all("error.type" not in e for e in events)
    # doubles are JSON numbers in doubleValue, never strings
    value = next(a for e in span["events"] for a in e["attributes"] if a["key"] == "gen_ai.evaluation.score.value")
    assert isinstance(value["value"]["doubleValue"], float)


def test_incomplete_trace_has_no_scores(sent_spans):
    """cand-42:both-001#2: the harness crashed; both lanes are incomplete, every stage says so, no number is sent."""
    spans = [s for s in _spans(sent_spans) if _attrs(s["attributes"])["eval_pipeline.trace_id"] == "cand-42:both-001#2"]
    assert sorted(s["name"] for s in spans) == ["eval agent cand-42:both-001#2", "eval rag cand-42:both-001#2"]
    for span in spans:
        attrs = _attrs(span["attributes"])
        assert attrs["eval_pipeline.outcome"] == "incomplete" and "eval_pipeline.first_failing_stage" not in attrs
        assert attrs["eval_pipeline.owner"] == "harness (evaluation infrastructure)"
        assert span["status"] == {"code": 0}
        events = [_attrs(e["attributes"]) for e in span["events"]]
        assert len(events) == (5 if attrs["eval_pipeline.lane"] == "rag" else 7)
        for event in events:
            assert event["gen_ai.evaluation.score.label"] == "incomplete" and event["error.type"] == "incomplete"
            assert "gen_ai.evaluation.score.value" not in event
            assert (
                event["gen_ai.evaluation.explanation"]
                == "harness status error: sandbox crashed: connection reset by peer"
            )


def test_passing_agent_trace(sent_spans, sample):
    outcomes = sample["warehouse"].read("outcome_scores", "cand-42")
    tools = sample["warehouse"].read("tool_scores", "cand-42")
    span = next(s for s in _spans(sent_spans) if s["name"] == "eval agent cand-42:agent-013#1")
    assert _attrs(span["attributes"])["eval_pipeline.outcome"] == "pass" and span["status"] == {"code": 1}
    events = {e["gen_ai.evaluation.name"]: e for e in (_attrs(x["attributes"]) for x in span["events"])}
    row = outcomes.filter(pl.col("trace_id") == "cand-42:agent-013#1").row(0, named=True)
    assert events["success"]["gen_ai.evaluation.score.value"] == float(row["success"]) == 1.0
    assert events["success"]["gen_ai.evaluation.score.label"] == "pass"
    f1 = tools.filter(pl.col("trace_id") == "cand-42:agent-013#1")["tool_call_f1"][0]
    assert events["tool_call_f1"]["gen_ai.evaluation.score.value"] == pytest.approx(f1)


def test_batches_of_at_most_the_limit(export, receiver, monkeypatch, sample):
    monkeypatch.setattr(otel, "BATCH_SPANS", 100)
    server = otlp_server(receiver)
    assert export("stage_results", "--format", "otlp", "--endpoint", server.url) == 0
    sizes = [len(_spans([r.json()])) for r in server.requests]
    total = sample["warehouse"].read("stage_results").select("run_id", "trace_id", "lane").unique().height
    assert sum(sizes) == total and max(sizes) == 100 and len(sizes) == -(-total // 100)


def test_table_choice_limits_the_events(export, sample, tmp_path):
    out = tmp_path / "r.jsonl"
    assert export("retrieval_scores", "--run", "cand-42", "--format", "otlp", "--output", str(out)) == 0
    spans = _spans(json.loads(line) for line in out.read_text().splitlines())
    # a span for every row of the table, the incomplete and not applicable ones too
    assert len(spans) == sample["warehouse"].read("retrieval_scores", "cand-42").height
    assert {_attrs(s["attributes"])["eval_pipeline.lane"] for s in spans} == {"rag"}
    names = {_attrs(e["attributes"])["gen_ai.evaluation.name"] for s in spans for e in s["events"]}
    assert names == {"recall_at_10", "ndcg_at_10", "mrr"}
    crashed = next(s for s in spans if s["name"] == "eval rag cand-42:both-001#2")
    assert crashed["events"] == [] and _attrs(crashed["attributes"])["eval_pipeline.outcome"] == "incomplete"


def test_non_2xx_is_a_failure(export, receiver, capsys):
    server = otlp_server(receiver, lambda request: (503, {"message": "overloaded"}))
    assert export("scores", "--format", "otlp", "--endpoint", server.url) == 1
    assert "HTTP 503" in capsys.readouterr().err
    assert len(server.requests) == 1


def test_partial_rejection_is_a_failure(export, receiver, capsys):
    server = otlp_server(
        receiver, lambda request: (200, {"partialSuccess": {"rejectedSpans": "3", "errorMessage": "bad span"}})
    )
    assert export("scores", "--format", "otlp", "--endpoint", server.url) == 1
    assert "rejected 3 of" in capsys.readouterr().err


def test_failed_agent_trace(sent_spans):
    """cand-42:agent-001#1 calls get_ticket after the call meant to follow it: tool_order is its first failing stage."""
    span = next(s for s in _spans(sent_spans) if s["name"] == "eval agent cand-42:agent-001#1")
    attrs = _attrs(span["attributes"])
    assert attrs["eval_pipeline.outcome"] == "fail" and attrs["eval_pipeline.first_failing_stage"] == "tool_order"
    assert span["status"]["code"] == 2 and "tool_order" in span["status"]["message"]
    events = {e["gen_ai.evaluation.name"]: e for e in (_attrs(x["attributes"]) for x in span["events"])}
    assert events["tool_order"]["gen_ai.evaluation.score.label"] == "fail"
    assert events["tool_order"]["gen_ai.evaluation.explanation"].startswith("path order: get_ticket")
