"""`export … --format langfuse`: score objects as files and through the batch ingestion API of a loopback receiver."""

from __future__ import annotations

import base64
import json

import polars as pl
import pytest

from eval_pipeline.exports.langfuse import METRICS, SCORE_TABLES, score_id

PUBLIC, SECRET = "pk-lf-test", "sk-lf-test"
AUTH = "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()


@pytest.fixture()
def keys(monkeypatch):
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)


def langfuse_server(receiver, planted: set[str] = frozenset()):
    """A Langfuse-like ingestion endpoint: checks basic auth, answers 207 with an error for each planted score id."""

    def respond(request):
        if request.path != "/api/public/ingestion":
            return 404, {"message": "not found"}
        if request.headers.get("authorization") != AUTH:
            return 401, {"message": "Invalid credentials"}
        events = request.json()["batch"]
        errors = [
            {"id": e["id"], "status": 400, "message": "planted refusal", "error": "invalid"}
            for e in events
            if e["body"]["id"] in planted
        ]
        successes = [{"id": e["id"], "status": 201} for e in events if e["body"]["id"] not in planted]
        return 207, {"successes": successes, "errors": errors}

    return receiver(respond)


def _received_scores(server) -> list[dict]:
    return [event["body"] for request in server.requests for event in request.json()["batch"]]


def _expected_counts(warehouse, run: str | None) -> dict[str, int]:
    """Scores per name that the tables call for: every stage row, and every non-null metric of a complete row."""
    counts: dict[str, int] = {}
    stages = warehouse.read("stage_results", run)
    for (lane, stage), group in stages.group_by("lane", "stage"):
        counts[f"eval.{lane}.{stage}"] = group.height
    for table, (lane, metrics) in METRICS.items():
        frame = warehouse.read(table, run).filter(pl.col("status") != "incomplete")
        for metric in metrics:
            counts[f"eval.{lane}.{metric}"] = frame[metric].drop_nulls().len()
    return counts


def test_every_score_is_received(export, sample, receiver, keys, capsys):
    server = langfuse_server(receiver)
    assert export("scores", "--run", "cand-42", "--format", "langfuse", "--endpoint", server.url) == 0
    events = [event for request in server.requests for event in request.json()["batch"]]
    assert server.requests and all(len(r.json()["batch"]) <= 100 for r in server.requests)
    assert all(e["type"] == "score-create" and e["timestamp"].endswith("Z") and e["id"] for e in events)
    assert len({e["id"] for e in events}) == len(events)
    scores = _received_scores(server)
    warehouse = sample["warehouse"]
    counts: dict[str, int] = {}
    for score in scores:
        counts[score["name"]] = counts.get(score["name"], 0) + 1
    expected = _expected_counts(warehouse, "cand-42")
    assert counts == {name: n for name, n in expected.items() if n}
    assert len(scores) == sum(expected.values())
    assert len({s["id"] for s in scores}) == len(scores)
    # the rows of the stage table, one score each
    assert sum(1 for s in scores if s["dataType"] == "CATEGORICAL") == warehouse.read("stage_results", "cand-42").height
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"sent {len(scores):,} of {len(scores):,} Langfuse scores of scores (run cand-42) to {server.url}")
    )


def test_score_shapes_and_values(export, sample, receiver, keys):
    server = langfuse_server(receiver)
    assert export("scores", "--format", "langfuse", "--endpoint", server.url) == 0
    scores = {(s["traceId"], s["name"]): s for s in _received_scores(server)}
    stage = scores[("cand-42:rag-001#1", "eval.rag.retrieval")]
    assert stage == {
        "id": score_id("cand-42", "cand-42:rag-001#1", "eval.rag.retrieval"),
        "traceId": "cand-42:rag-001#1",
        "name": "eval.rag.retrieval",
        "value": "fail",
        "dataType": "CATEGORICAL",
        "comment": "no relevant doc in the top 10; failure_class stale_version_outranks_current (policy/refunds-2025)",
        "metadata": {
            "run_id": "cand-42",
            "case_id": "rag-001",
            "attempt": 1,
            "lane": "rag",
            "source": "stage_results.status",
            "code_version": stage["metadata"]["code_version"],
        },
    }
    assert scores[("cand-42:rag-001#1", "eval.rag.grounding")]["value"] == "pass"
    assert "comment" not in scores[("cand-42:rag-001#1", "eval.rag.grounding")]
    ndcg = scores[("cand-42:rag-001#1", "eval.rag.ndcg_at_10")]
    assert ndcg["dataType"] == "NUMERIC" and ndcg["value"] == pytest.approx(0.346332821766451)
    assert scores[("cand-42:rag-001#1", "eval.rag.recall_at_10")]["value"] == 0.0  # a real zero is sent
    assert scores[("cand-42:rag-001#1", "eval.rag.token_f1")]["value"] == pytest.approx(2 / 9)
    success = [s for s in scores.values() if s["name"] == "eval.agent.success"]
    assert success and {s["dataType"] for s in success} == {"BOOLEAN"} and {s["value"] for s in success} <= {0, 1}
    outcomes = sample["warehouse"].read("outcome_scores")
    for row in outcomes.filter(pl.col("success").is_not_null()).iter_rows(named=True):
        assert scores[(row["trace_id"], "eval.agent.success")]["value"] == int(row["success"])


def test_incomplete_is_never_sent_as_zero(export, sample, receiver, keys):
    server = langfuse_server(receiver)
    assert export("scores", "--format", "langfuse", "--endpoint", server.url) == 0
    scores = _received_scores(server)
    warehouse = sample["warehouse"]
    stages = warehouse.read("stage_results")
    incomplete = stages.filter(pl.col("status") == "incomplete")
    assert incomplete.height > 0
    by_key = {(s["traceId"], s["name"]): s for s in scores}
    for row in incomplete.iter_rows(named=True):
        score = by_key[(row["trace_id"], f"eval.{row['lane']}.{row['stage']}")]
        assert score["value"] == "incomplete" and score["dataType"] == "CATEGORICAL"
    # every trace with an incomplete metric row: no number at all for that metric
    for table, (lane, metrics) in METRICS.items():
        frame = warehouse.read(table)
        for row in frame.iter_rows(named=True):
            for metric in metrics:
                sent = by_key.get((row["trace_id"], f"eval.{lane}.{metric}"))
                if row["status"] == "incomplete" or row[metric] is None:
                    assert sent is None, (table, row["trace_id"], metric)
    # the harness-crashed trace of both lanes: only `incomplete` categories
    crashed = [s for s in scores if s["traceId"] == "cand-42:both-001#2"]
    assert len(crashed) == stages.filter(pl.col("trace_id") == "cand-42:both-001#2").height == 12
    assert {(s["dataType"], s["value"]) for s in crashed} == {("CATEGORICAL", "incomplete")}


def test_refused_score_is_named(export, sample, receiver, keys, capsys):
    planted = score_id("cand-42", "cand-42:rag-001#1", "eval.rag.retrieval")
    server = langfuse_server(receiver, {planted})
    assert export("stage_results", "--run", "cand-42", "--format", "langfuse", "--endpoint", server.url) == 1
    err = capsys.readouterr().err
    assert f"score {planted} (trace cand-42:rag-001#1, eval.rag.retrieval): 400 planted refusal" in err
    rows = sample["warehouse"].read("stage_results", "cand-42").height
    assert f"sent {rows - 1:,} of {rows:,} Langfuse scores" in err and "1 refused" in err
    # the other batches were still sent
    assert len(_received_scores(server)) == rows


def test_wrong_key_stops_with_the_status(export, receiver, monkeypatch, capsys):
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-wrong")
    server = langfuse_server(receiver)
    assert export("stage_results", "--format", "langfuse", "--endpoint", server.url) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "Invalid credentials" in err
    assert len(server.requests) == 1  # the first refusal stops the send


def test_missing_keys_is_a_usage_error(export, receiver, monkeypatch, capsys):
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.delenv("LANGFUSE_SECRET_KEY", raising=False)
    server = langfuse_server(receiver)
    assert export("scores", "--format", "langfuse", "--endpoint", server.url) == 2
    assert "LANGFUSE_PUBLIC_KEY" in capsys.readouterr().err and not server.requests


def test_unreachable_endpoint(export, keys, capsys):
    assert export("stage_results", "--format", "langfuse", "--endpoint", "http://127.0.0.1:9", "--timeout", "5") == 1
    assert "cannot reach http://127.0.0.1:9/api/public/ingestion" in capsys.readouterr().err


def test_resending_sends_the_same_score_ids(export, receiver, keys):
    first, second = langfuse_server(receiver), langfuse_server(receiver)
    assert export("outcome_scores", "--format", "langfuse", "--endpoint", first.url) == 0
    assert export("outcome_scores", "--format", "langfuse", "--endpoint", second.url) == 0
    assert [s["id"] for s in _received_scores(first)] == [s["id"] for s in _received_scores(second)]
    events = lambda server: {e["id"] for r in server.requests for e in r.json()["batch"]}  # noqa: E731
    assert not events(first) & events(second)  # event ids are per send; score ids make it idempotent


@pytest.mark.parametrize("table", SCORE_TABLES)
def test_file_is_one_score_per_line(export, sample, tmp_path, table):
    out = tmp_path / "scores.jsonl"
    assert export(table, "--format", "langfuse", "--output", str(out)) == 0
    scores = [json.loads(line) for line in out.read_text().splitlines()]
    warehouse = sample["warehouse"]
    if table == "stage_results":
        expected = warehouse.read(table).height
    else:
        frame = warehouse.read(table).filter(pl.col("status") != "incomplete")
        expected = sum(frame[metric].drop_nulls().len() for metric in METRICS[table][1])
    assert len(scores) == expected > 0
    for score in scores:
        assert set(score) <= {"id", "traceId", "name", "value", "dataType", "comment", "metadata"}
        assert score["dataType"] in {"NUMERIC", "BOOLEAN", "CATEGORICAL"}
        assert isinstance(score["value"], str) == (score["dataType"] == "CATEGORICAL")
    again = tmp_path / "again.jsonl"
    assert export(table, "--format", "langfuse", "--output", str(again)) == 0
    assert again.read_bytes() == out.read_bytes()


def test_table_without_scores_is_refused(export, capsys):
    assert export("claims", "--format", "langfuse") == 2
    err = capsys.readouterr().err
    assert "holds no per-trace scores" in err and "scores, stage_results, retrieval_scores" in err
