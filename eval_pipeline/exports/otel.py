"""Per-trace results as OpenTelemetry spans in OTLP/JSON, written as JSON lines or POSTed to an OTLP/HTTP endpoint.

Follows the OTLP specification (the opentelemetry-proto repository's specification, "JSON Protobuf Encoding":
lowerCamelCase keys, traceId/spanId as hex, enums as integers, 64-bit integers as decimal strings; POST
{endpoint}/v1/traces with Content-Type: application/json), the OTLP file exporter's JSON lines (one TracesData object
a line), and the GenAI semantic conventions (open-telemetry/semantic-conventions-genai model/gen-ai/events.yaml and
registry.yaml): each evaluation is a `gen_ai.evaluation.result` event with `gen_ai.evaluation.name` (required),
`gen_ai.evaluation.score.value` (double), `gen_ai.evaluation.score.label`, `gen_ai.evaluation.explanation` and, for an
evaluation that could not complete, `error.type`, parented to the span of the evaluated (trace, lane). Our own
attributes are under `eval_pipeline.*`.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO

import polars as pl

from eval_pipeline.exports.http import SendError, header_secrets, post_json, scrub
from eval_pipeline.exports.langfuse import METRICS, STAGE_TABLE, score_rows
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.scoring.attribution import lane_outcomes

SERVICE_NAME = "eval_pipeline"
SCOPE = {"name": "eval_pipeline.exports.otel", "version": "1"}
EVENT_NAME = "gen_ai.evaluation.result"
TRACES_PATH = "/v1/traces"
BATCH_SPANS = 512
SPAN_KIND_INTERNAL = 1
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
KEYS = ["run_id", "trace_id", "lane"]


def otel_trace_id(run_id: str, trace_id: str) -> str:
    """The 32-hex-digit OTel trace id of an evaluated trace: both lanes of one trace share it."""
    return hashlib.sha256(f"eval_pipeline/otel\x1f{run_id}\x1f{trace_id}".encode()).hexdigest()[:32]


def otel_span_id(run_id: str, trace_id: str, lane: str) -> str:
    """The 16-hex-digit span id of one (trace, lane) evaluation."""
    return hashlib.sha256(f"eval_pipeline/otel\x1f{run_id}\x1f{trace_id}\x1f{lane}".encode()).hexdigest()[:16]


def _nanos(moment: datetime) -> str:
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000)


def run_times(warehouse: Warehouse, runs: list[str]) -> dict[str, str]:
    """Unix nanoseconds (as OTLP's decimal string) of each run's manifest created_at; now where it is missing or
    unreadable."""
    now = _nanos(datetime.now(UTC))
    manifest = (
        warehouse.read("run_manifest", columns=["run_id", "created_at"]) if warehouse.exists("run_manifest") else None
    )
    created = {} if manifest is None else dict(manifest.iter_rows())
    times = {}
    for run_id in runs:
        try:
            times[run_id] = _nanos(datetime.fromisoformat(str(created[run_id]).replace("Z", "+00:00")))
        except (KeyError, ValueError):
            times[run_id] = now
    return times


def attribute(key: str, value: object) -> dict:
    """One OTLP KeyValue; the AnyValue member follows the Python type (int64 as a decimal string)."""
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _attributes(pairs: Iterable[tuple[str, object]]) -> list[dict]:
    """KeyValues of the pairs that have a value (OTLP has no null)."""
    return [attribute(key, value) for key, value in pairs if value is not None]


def _event(row: dict, time: str) -> dict:
    """A gen_ai.evaluation.result event of one score row."""
    label = row["label"]
    if row["data_type"] == "BOOLEAN":
        label = "pass" if row["number"] else "fail"
    pairs = [
        ("gen_ai.evaluation.name", row["evaluation"]),
        ("gen_ai.evaluation.score.value", row["number"]),
        ("gen_ai.evaluation.score.label", label),
        ("gen_ai.evaluation.explanation", row["comment"]),
        # the evaluation itself could not finish: the convention's error attribute, never a score of 0
        ("error.type", "incomplete" if row["label"] == "incomplete" else None),
        ("eval_pipeline.source", row["source"]),
    ]
    return {"timeUnixNano": time, "name": EVENT_NAME, "attributes": _attributes(pairs)}


def _status(outcome: str | None, stage: str | None, reason: str | None) -> dict:
    """Span status: ERROR naming the first failing stage for a failed lane, OK for a pass, UNSET otherwise."""
    if outcome == "fail":
        return {"code": STATUS_ERROR, "message": f"first failing stage {stage}" + (f": {reason}" if reason else "")}
    return {"code": STATUS_OK} if outcome == "pass" else {"code": STATUS_UNSET}


def _evaluated(warehouse: Warehouse, tables: tuple[str, ...], run_id: str, stages: pl.DataFrame | None) -> pl.DataFrame:
    """(trace, lane) keys with case and attempt of every row of the chosen tables, scored or not."""
    parts = []
    for table in tables:
        if table == STAGE_TABLE:
            frame = stages
        else:
            frame = warehouse.read(table, run_id, columns=["run_id", "trace_id", "case_id", "attempt"])
            frame = None if frame is None else frame.with_columns(pl.lit(METRICS[table][0]).alias("lane"))
        if frame is not None:
            parts.append(frame.select(*KEYS, "case_id", "attempt"))
    if not parts:
        return pl.DataFrame(
            schema={
                "run_id": pl.String,
                "trace_id": pl.String,
                "lane": pl.String,
                "case_id": pl.String,
                "attempt": pl.Int64,
            }
        )
    return pl.concat(parts).unique(KEYS, keep="first", maintain_order=True).sort(KEYS)


def evaluation_spans(warehouse: Warehouse, tables: Iterable[str], runs: list[str]) -> Iterator[dict]:
    """One span per evaluated (trace, lane) of the chosen score tables, its evaluations as events, in run, trace,
    lane order."""
    tables = tuple(tables)
    events = score_rows(warehouse, tables, runs).with_columns(
        pl.col("name").str.strip_prefix(pl.concat_str(pl.lit("eval."), "lane", pl.lit("."))).alias("evaluation")
    )
    times = run_times(warehouse, runs)
    candidates = {}
    if warehouse.exists("run_manifest"):
        candidates = dict(warehouse.read("run_manifest", columns=["run_id", "candidate"]).iter_rows())
    verdict = ("outcome", "first_failing_stage", "reason", "owner")
    for run_id in runs:
        stages = warehouse.read(STAGE_TABLE, run_id)
        # a trace with no number in the chosen tables (incomplete, not applicable) still gets its span
        spans = _evaluated(warehouse, tables, run_id, stages)
        if stages is not None and stages.height:
            spans = spans.join(
                lane_outcomes(stages).select(*KEYS, *verdict), on=KEYS, how="left", maintain_order="left"
            )
        else:
            spans = spans.with_columns(pl.lit(None, pl.String).alias(c) for c in verdict)
        run_events = events.filter(pl.col("run_id") == run_id)
        grouped = run_events.partition_by(KEYS, as_dict=True, maintain_order=True)
        time = times[run_id]
        for span in spans.iter_rows(named=True):
            key = (span["run_id"], span["trace_id"], span["lane"])
            rows = grouped.get(key)
            attributes = _attributes(
                [
                    ("eval_pipeline.run_id", span["run_id"]),
                    ("eval_pipeline.trace_id", span["trace_id"]),
                    ("eval_pipeline.case_id", span["case_id"]),
                    ("eval_pipeline.attempt", span["attempt"]),
                    ("eval_pipeline.lane", span["lane"]),
                    ("eval_pipeline.outcome", span["outcome"]),
                    ("eval_pipeline.first_failing_stage", span["first_failing_stage"]),
                    ("eval_pipeline.owner", span["owner"]),
                    ("eval_pipeline.candidate", candidates.get(run_id)),
                ]
            )
            yield {
                "traceId": otel_trace_id(run_id, span["trace_id"]),
                "spanId": otel_span_id(run_id, span["trace_id"], span["lane"]),
                "name": f"eval {span['lane']} {span['trace_id']}",
                "kind": SPAN_KIND_INTERNAL,
                # the evaluation has no duration of its own: the span sits at the run's creation time
                "startTimeUnixNano": time,
                "endTimeUnixNano": time,
                "attributes": attributes,
                "events": [] if rows is None else [_event(row, time) for row in rows.iter_rows(named=True)],
                "status": _status(span["outcome"], span["first_failing_stage"], span["reason"]),
            }


def trace_requests(spans: Iterable[dict], batch_spans: int | None = None) -> Iterator[dict]:
    """ExportTraceServiceRequest objects of at most `batch_spans` (default BATCH_SPANS) spans each."""
    batch_spans = batch_spans or BATCH_SPANS
    resource = {"attributes": [attribute("service.name", SERVICE_NAME)]}
    batch: list[dict] = []

    def request(items: list[dict]) -> dict:
        return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": SCOPE, "spans": items}]}]}

    for span in spans:
        batch.append(span)
        if len(batch) == batch_spans:
            yield request(batch)
            batch = []
    if batch:
        yield request(batch)


def span_count(request: dict) -> int:
    return sum(len(s["spans"]) for r in request["resourceSpans"] for s in r["scopeSpans"])


def write_requests(requests: Iterable[dict], out: BinaryIO) -> tuple[int, int]:
    """Requests as JSON lines (the OTLP file exporter's format); (spans, events) written."""
    spans = events = 0
    for request in requests:
        out.write(json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        spans += span_count(request)
        events += sum(
            len(span["events"]) for r in request["resourceSpans"] for s in r["scopeSpans"] for span in s["spans"]
        )
    return spans, events


def headers_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Extra request headers from OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS (`k=v,k2=v2`) of
    `environ`, which the CLI passes in."""
    text = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    headers = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            headers[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return headers


@dataclass
class SendResult:
    """What a send achieved: spans the receiver took, and the error that stopped sending, if any."""

    accepted: int = 0
    events: int = 0
    stopped: str | None = None


def send_requests(
    requests: Iterable[dict], endpoint: str, *, headers: Mapping[str, str] | None = None, timeout: float = 30.0
) -> SendResult:
    """POST each request to {endpoint}/v1/traces with the extra `headers` (headers_from_env); stop at the first
    non-2xx answer or partial rejection."""
    url = endpoint.rstrip("/") + TRACES_PATH
    headers = {**(headers or {}), "Content-Type": "application/json"}
    result = SendResult()
    for request in requests:
        body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        try:
            status, text = post_json(url, body, headers, timeout)
        except SendError as exc:
            result.stopped = str(exc)
            return result
        spans = span_count(request)
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            answer = None
        # OTLP/HTTP answers a JSON request with an ExportTraceServiceResponse (an object, empty on full success);
        # anything else (a web page behind the URL) confirms nothing
        if not isinstance(answer, dict):
            result.stopped = f"HTTP {status} from {url} confirmed no span (the answer is not an OTLP JSON response)"
            return result
        partial = answer.get("partialSuccess") if isinstance(answer.get("partialSuccess"), dict) else {}
        try:
            rejected = int(partial.get("rejectedSpans") or 0)
        except (TypeError, ValueError):
            rejected = spans  # an answer that cannot say how many it took confirmed none
        result.accepted += spans - rejected
        result.events += sum(
            len(span["events"]) for r in request["resourceSpans"] for s in r["scopeSpans"] for span in s["spans"]
        )
        if rejected:
            reason = scrub(str(partial.get("errorMessage") or "no reason given"), header_secrets(headers))
            result.stopped = f"{url} rejected {rejected} of {spans} spans: {reason}"
            return result
    return result
