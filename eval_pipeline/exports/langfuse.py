"""Per-trace results as Langfuse score objects, written as JSON lines or sent through Langfuse's batch ingestion API.

Shapes follow Langfuse's public API (OpenAPI https://cloud.langfuse.com/generated/api/openapi.yml, as read through the
generated clients `langfuse-client-base` on docs.rs and @langfuse/core on js.reference.langfuse.com): a score is the
`POST /api/public/scores` / `ScoreBody` object {id, traceId, name, value, dataType NUMERIC|BOOLEAN|CATEGORICAL, comment,
observationId, configId, metadata}; CATEGORICAL values are strings, BOOLEAN values 1 or 0. Sending uses
`POST /api/public/ingestion` with HTTP basic auth (public key : secret key) and body {"batch": [{"id" (event id, UUID),
"type": "score-create", "timestamp" (ISO 8601, ms), "body": score}]}; it answers 207 with {"successes": [{id, status}],
"errors": [{id, status, message, error}]}, ids being event ids, so input errors never come back as a 4xx.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

import polars as pl

from eval_pipeline.exports.http import SendError, post_json, scrub
from eval_pipeline.io.warehouse import Warehouse

STAGE_TABLE = "stage_results"
ALL_SCORES = "scores"

# table -> (lane, per-trace metric columns); a Boolean column becomes a BOOLEAN score, any other a NUMERIC one.
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "retrieval_scores": ("rag", ("recall_at_10", "ndcg_at_10", "mrr")),
    "grounding_scores": ("rag", ("grounding_rate",)),
    "citation_scores": ("rag", ("citation_precision", "citation_recall")),
    "answer_scores": ("rag", ("token_f1",)),
    "tool_scores": ("agent", ("tool_call_f1", "args_valid_rate")),
    "outcome_scores": ("agent", ("success",)),
}
SCORE_TABLES = (STAGE_TABLE, *METRICS)

BATCH_EVENTS = 100
INGESTION_PATH = "/api/public/ingestion"
# Fixed namespace of the score ids: the same (run, trace, name) always gives the same id, so re-sending overwrites.
SCORE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "eval_pipeline/exports/langfuse/score")

SCORE_ROWS_SCHEMA = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "lane": pl.String,
    "name": pl.String,
    "data_type": pl.String,
    "number": pl.Float64,
    "label": pl.String,
    "comment": pl.String,
    "source": pl.String,
    "code_version": pl.String,
}


def tables_of(table: str) -> tuple[str, ...]:
    """The score tables a table argument stands for (`scores`: all of them)."""
    return SCORE_TABLES if table == ALL_SCORES else (table,)


def score_id(run_id: str, trace_id: str, name: str) -> str:
    """The deterministic id of one score: a UUID (v5) of run, trace and score name."""
    return str(uuid.uuid5(SCORE_NAMESPACE, "\x1f".join((run_id, trace_id, name))))


def stage_score_rows(stages: pl.DataFrame) -> pl.DataFrame:
    """One CATEGORICAL score row per (trace, lane, stage): the status (incomplete stays `incomplete`), the reason."""
    return stages.sort("run_id", "trace_id", "lane", "stage_order").select(
        "run_id",
        "trace_id",
        "case_id",
        "attempt",
        "lane",
        pl.concat_str(pl.lit("eval."), "lane", pl.lit("."), "stage").alias("name"),
        pl.lit("CATEGORICAL").alias("data_type"),
        pl.lit(None, pl.Float64).alias("number"),
        pl.col("status").alias("label"),
        pl.col("reason").alias("comment"),
        pl.lit(f"{STAGE_TABLE}.status").alias("source"),
        "code_version",
    )


def metric_score_rows(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """One NUMERIC or BOOLEAN score row per (trace, metric) that has a value; nulls and incomplete rows send nothing."""
    lane, metrics = METRICS[table]
    kinds = {m: "BOOLEAN" if frame.schema[m] == pl.Boolean else "NUMERIC" for m in metrics}
    long = (
        frame.with_columns(pl.col(m).cast(pl.Float64) for m in metrics)
        .unpivot(
            index=["run_id", "trace_id", "case_id", "attempt", "status", "reason", "code_version"],
            on=list(metrics),
            variable_name="metric",
            value_name="number",
        )
        # an evaluation that did not complete has no number; one that slipped through is still not sent as a value
        .filter(pl.col("number").is_not_null() & pl.col("number").is_not_nan() & (pl.col("status") != "incomplete"))
    )
    order = {m: i for i, m in enumerate(metrics)}
    return long.sort("run_id", "trace_id", pl.col("metric").replace_strict(order, return_dtype=pl.Int64)).select(
        "run_id",
        "trace_id",
        "case_id",
        "attempt",
        pl.lit(lane).alias("lane"),
        pl.concat_str(pl.lit(f"eval.{lane}."), "metric").alias("name"),
        pl.col("metric").replace_strict(kinds, return_dtype=pl.String).alias("data_type"),
        "number",
        pl.lit(None, pl.String).alias("label"),
        pl.col("reason").alias("comment"),
        pl.concat_str(pl.lit(f"{table}."), "metric").alias("source"),
        "code_version",
    )


def score_rows(warehouse: Warehouse, tables: Iterable[str], runs: list[str]) -> pl.DataFrame:
    """The score rows of the chosen score tables and runs, in table, run, trace order."""
    parts = []
    for table in tables:
        for run_id in runs:
            frame = warehouse.read(table, run_id)
            if frame is None or frame.is_empty():
                continue
            rows = stage_score_rows(frame) if table == STAGE_TABLE else metric_score_rows(table, frame)
            parts.append(rows.cast(SCORE_ROWS_SCHEMA))
    return pl.concat(parts) if parts else pl.DataFrame(schema=SCORE_ROWS_SCHEMA)


def score_objects(rows: pl.DataFrame) -> Iterator[dict]:
    """Langfuse score objects of score rows (the body of POST /api/public/scores)."""
    for row in rows.iter_rows(named=True):
        if row["data_type"] == "CATEGORICAL":
            value: float | int | str = row["label"]
        elif row["data_type"] == "BOOLEAN":
            value = int(row["number"])
        else:
            value = row["number"]
        score = {
            "id": score_id(row["run_id"], row["trace_id"], row["name"]),
            "traceId": row["trace_id"],
            "name": row["name"],
            "value": value,
            "dataType": row["data_type"],
        }
        if row["comment"] is not None:
            score["comment"] = row["comment"]
        score["metadata"] = {
            "run_id": row["run_id"],
            "case_id": row["case_id"],
            "attempt": row["attempt"],
            "lane": row["lane"],
            "source": row["source"],
            "code_version": row["code_version"],
        }
        yield score


def write_scores(scores: Iterable[dict], out: BinaryIO) -> int:
    """Score objects as JSON lines; the number written."""
    count = 0
    for score in scores:
        out.write(json.dumps(score, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        count += 1
    return count


@dataclass
class Failure:
    """A score the server did not take."""

    score_id: str
    trace_id: str
    name: str
    status: int | None
    message: str


@dataclass
class SendResult:
    """What a send achieved: scores accepted, scores refused, and the error that stopped sending, if any."""

    accepted: int = 0
    failures: list[Failure] = field(default_factory=list)
    stopped: str | None = None


def _timestamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _batches(items: Iterable[dict], size: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _authorization(public_key: str, secret_key: str) -> str:
    return "Basic " + base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()


def send_scores(
    scores: Iterable[dict],
    endpoint: str,
    public_key: str,
    secret_key: str,
    *,
    batch_events: int = BATCH_EVENTS,
    timeout: float = 30.0,
) -> SendResult:
    """POST the scores as score-create events to {endpoint}/api/public/ingestion, at most `batch_events` a request."""
    url = endpoint.rstrip("/") + INGESTION_PATH
    headers = {"Content-Type": "application/json", "Authorization": _authorization(public_key, secret_key)}
    result = SendResult()
    for batch in _batches(scores, batch_events):
        # Event ids are fresh per send: Langfuse deduplicates events by them, while the score id (stable) is what
        # makes a resend overwrite the same score.
        events = {str(uuid.uuid4()): score for score in batch}
        body = {
            "batch": [
                {"id": event_id, "type": "score-create", "timestamp": _timestamp(), "body": score}
                for event_id, score in events.items()
            ]
        }
        try:
            status, text = post_json(url, json.dumps(body).encode(), headers, timeout, secrets=(public_key, secret_key))
        except SendError as exc:
            result.stopped = str(exc)
            return result
        try:
            answer = json.loads(text) if text.strip() else None
        except ValueError:
            answer = None
        # A score counts as sent only when the answer names its event among the successes: a 2xx from something
        # that is not Langfuse's ingestion API (a web page, an empty 200) confirms nothing.
        if not isinstance(answer, dict) or not isinstance(answer.get("successes"), list):
            result.stopped = (
                f"HTTP {status} from {url} confirmed no score (not a Langfuse ingestion answer: no `successes` list)"
            )
            return result
        failed = {}
        hidden = (public_key, secret_key)
        for error in answer.get("errors") or []:
            error = error if isinstance(error, dict) else {"message": str(error)}
            event_id = str(error.get("id"))
            message = scrub(
                str(
                    error.get("message")
                    or (json.dumps(error["error"]) if error.get("error") is not None else "refused")
                ),
                hidden,
            )
            score = events.get(event_id)
            # an error naming no event of this batch is still a failure, reported under the id the server gave
            failed[event_id] = (
                Failure(score["id"], score["traceId"], score["name"], error.get("status"), message)
                if score is not None
                else Failure(scrub(event_id, hidden), "?", "?", error.get("status"), message)
            )
        result.failures.extend(failed.values())
        confirmed = {str(s.get("id")) for s in answer["successes"] if isinstance(s, dict)} & events.keys()
        result.accepted += len(confirmed - failed.keys())
        unconfirmed = events.keys() - confirmed - failed.keys()
        if unconfirmed:
            result.stopped = (
                f"HTTP {status} from {url} neither accepted nor refused {len(unconfirmed)} of {len(events)} "
                "scores of a batch"
            )
            return result
    return result
