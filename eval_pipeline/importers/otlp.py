"""`eval-pipeline import otlp FILE...`: OpenTelemetry traces as OTLP/JSON, one attempt per OTel trace.

Reads the OpenTelemetry Collector file exporter's shape (one `ExportTraceServiceRequest` object per line), a single
(pretty-printed) JSON document of that shape, or a directory of such files. Ids may be hex (the OTLP/JSON rule) or
base64 (protobuf's generic JSON mapping); enums numbers or names. Spans are streamed: a trace is converted as soon
as all of its spans have been read (a first cheap pass counts them), so memory holds the traces still open, never
every span of the file. Each trace is read in the dialect its spans speak: OpenInference (`openinference.span.kind`)
or the OpenTelemetry GenAI semantic conventions (`gen_ai.*` attributes or events).

Log records (`ExportLogsServiceRequest` lines, in the same files or others given with them) that name a span are
that span's events: instrumentations before GenAI conventions 1.37 emit their message events as log records. Log
records without a trace id belong to no trace and are not read; one without a span id (or naming a span the trace
lacks) is an event of the trace's root span.

Over 400 lines because the streaming read (counting spans, grouping spans and log records by trace, decoding ids
and enums) is one pass whose parts share its state.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from eval_pipeline.importers.attempts import Matching, import_attempts
from eval_pipeline.importers.common import ImporterError, ImportSummary, parses_as_json
from eval_pipeline.importers.genai import genai_attempt, is_genai
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.importers.openinference import is_openinference, openinference_attempt
from eval_pipeline.importers.reader_process import read_in_child
from eval_pipeline.importers.source import SourceAttempt, Span, SpanEvent, Unreadable
from eval_pipeline.io.json_errors import invalid_json, json_problem

FORMAT = "otlp"
# from this size on, the files are read in a second process while this one writes (starting it takes about a second)
READER_PROCESS_BYTES = 64 << 20
_TRACE_ID = re.compile(rb'"traceId"\s*:\s*"([^"]*)"')
_HEX = re.compile(r"[0-9a-fA-F]+")
_STATUS = {
    0: "UNSET",
    1: "OK",
    2: "ERROR",
    "STATUS_CODE_UNSET": "UNSET",
    "STATUS_CODE_OK": "OK",
    "STATUS_CODE_ERROR": "ERROR",
}

Converter = Callable[..., "SourceAttempt | Unreadable"]


class OtlpError(ValueError):
    """A value of an OTLP/JSON document that does not have the OTLP shape."""


def hex_id(value: Any, size: int) -> str | None:
    """A trace id (16 bytes) or span id (8 bytes) as lowercase hex, from hex or base64; None when empty."""
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise OtlpError(f"an id is a {type(value).__name__}, not a string")
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise OtlpError(f"id {value[:40]!r} is neither {2 * size} hex digits nor {size} bytes in base64")
    return raw.hex()


def any_value(value: Any) -> Any:
    """An OTLP AnyValue as a Python value (intValue arrives as a string in OTLP/JSON)."""
    if not isinstance(value, dict) or not value:
        return None
    if "stringValue" in value:  # most attributes: skip the generic path
        return value["stringValue"]
    kind, inner = next(iter(value.items()))
    if kind == "stringValue":
        return inner
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind == "boolValue":
        return bool(inner)
    if kind == "arrayValue":
        return [any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return attributes((inner or {}).get("values", []))
    if kind == "bytesValue":
        return inner
    raise OtlpError(f"unknown AnyValue kind {kind!r}")


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key/value pairs as a dict."""
    if not isinstance(pairs, list):
        return {}
    try:  # the common shape in one comprehension; anything odd takes the checked path below
        return {p["key"]: (v["stringValue"] if "stringValue" in (v := p["value"]) else any_value(v)) for p in pairs}
    except (KeyError, TypeError):
        pass
    found: dict[str, Any] = {}
    for pair in pairs:
        if isinstance(pair, dict) and isinstance(key := pair.get("key"), str):
            value = pair.get("value")
            found[key] = value["stringValue"] if type(value) is dict and "stringValue" in value else any_value(value)
    return found


def decode_span(raw: dict[str, Any], scope: str | None) -> Span:
    """One OTLP/JSON span; OtlpError when a field has the wrong shape."""
    trace_id, span_id = hex_id(raw.get("traceId"), 16), hex_id(raw.get("spanId"), 8)
    if trace_id is None or span_id is None:
        raise OtlpError("a span without traceId or spanId")
    status = raw.get("status") or {}
    events = [
        SpanEvent(str(e.get("name", "")), int(e.get("timeUnixNano") or 0), attributes(e.get("attributes")))
        for e in raw.get("events") or []
        if isinstance(e, dict)
    ]
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=hex_id(raw.get("parentSpanId"), 8),
        name=str(raw.get("name", "")),
        start_ns=int(raw.get("startTimeUnixNano") or 0),
        end_ns=int(raw.get("endTimeUnixNano") or 0),
        status=_STATUS.get(status.get("code", 0), "UNSET"),
        status_message=status.get("message") or None,
        attributes=attributes(raw.get("attributes")),
        events=events,
        scope=scope,
    )


def request_spans(request: Any) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """(raw trace id, raw span, scope name) of every span of one ExportTraceServiceRequest."""
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans", []), list):
        raise OtlpError("not an ExportTraceServiceRequest: no resourceSpans list")
    for resource in request.get("resourceSpans", []):
        for scope_spans in (
            (resource or {}).get("scopeSpans") or (resource or {}).get("instrumentationLibrarySpans") or []
        ):
            scope = ((scope_spans or {}).get("scope") or (scope_spans or {}).get("instrumentationLibrary") or {}).get(
                "name"
            )
            for span in (scope_spans or {}).get("spans") or []:
                if not isinstance(span, dict):
                    raise OtlpError("a span is not an object")
                yield str(span.get("traceId", "")), span, scope


def log_event(record: dict[str, Any]) -> SpanEvent:
    """A log record read as the event of its span: the event name (`eventName`, else the `event.name` attribute),
    its time (else the time it was observed), attributes with the body's fields spread in (a body that is no
    object is the attribute `body`)."""
    fields = attributes(record.get("attributes"))
    body = any_value(record.get("body"))
    name = record.get("eventName") or fields.pop("event.name", "")
    time_ns = int(record.get("timeUnixNano") or record.get("observedTimeUnixNano") or 0)
    return SpanEvent(
        str(name), time_ns, {**fields, **(body if isinstance(body, dict) else {} if body is None else {"body": body})}
    )


def request_logs(request: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(raw trace id, raw log record) of every log record of one ExportLogsServiceRequest that names a trace."""
    if not isinstance(request, dict) or not isinstance(request.get("resourceLogs", []), list):
        raise OtlpError("not an ExportLogsServiceRequest: resourceLogs is no list")
    for resource in request.get("resourceLogs", []):
        for scope_logs in (resource or {}).get("scopeLogs") or []:
            for record in (scope_logs or {}).get("logRecords") or []:
                if not isinstance(record, dict):
                    raise OtlpError("a log record is not an object")
                if record.get("traceId"):
                    yield str(record["traceId"]), record


def source_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files to read, each once: each file given, and every file under each directory given (sorted, hidden
    ones skipped)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        else:
            found.append(path)
    # a file given twice (itself and its folder, say) is read once
    return list({p.resolve(): p for p in reversed(found)}.values())[::-1]


def _is_one_document(path: Path) -> bool:
    """Whether the file is one (pretty-printed) JSON document rather than JSONL: neither of its first two non-blank
    lines is JSON on its own. A JSONL file whose first line is broken stays JSONL (that line is a reject)."""
    with path.open("rb") as handle:
        lines = []
        for line in handle:
            if line.strip():
                lines.append(line)
                if len(lines) == 2:
                    break
    return bool(lines) and not any(map(parses_as_json, lines))


def _documents(path: Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """(line, request or None, why not) of a file: JSONL of requests, or one JSON document spanning the file."""
    if _is_one_document(path):
        try:
            yield 1, orjson.loads(path.read_bytes()), None
        except orjson.JSONDecodeError:
            yield 1, None, f"neither JSONL nor one JSON document: {json_problem(path.read_bytes())}"
        return
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line), None
            except orjson.JSONDecodeError:
                yield number, None, invalid_json(line)


def _span_counts(files: Iterable[Path]) -> dict[str, int]:
    """How many times each raw trace id appears in the files (a cheap scan, no JSON decoding); an upper bound of
    each trace's span and log record count, used only to convert a trace as soon as all of its spans are in."""
    counts: Counter[bytes] = Counter()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                counts.update(_TRACE_ID.findall(line))
    return {raw.decode("utf-8", "replace"): count for raw, count in counts.items()}


@dataclass
class _OpenTrace:
    """The spans of one trace read so far, and events (from log records) of spans not read yet."""

    source_file: str
    record: int
    spans: list[Span] = field(default_factory=list)
    events: dict[str, list[SpanEvent]] = field(default_factory=dict)  # span id -> its log events


def read_otlp(
    paths: Sequence[str | Path], convert: Callable[[list[Span], str, int], SourceAttempt | Unreadable]
) -> Iterator[SourceAttempt | Unreadable]:
    """Every OTel trace of the files converted by `convert(spans, file name, record)` in the order its last span or
    log record is read, and an Unreadable for each line, span or log record that is not OTLP/JSON."""
    files = source_files(paths)
    remaining = _span_counts(files)  # raw trace id -> spans and log records not read yet
    open_traces: dict[str, _OpenTrace] = {}

    def arrived(raw_id: str, trace_id: str) -> SourceAttempt | Unreadable | None:
        left = remaining.get(raw_id, 0) - 1
        if left > 0:
            remaining[raw_id] = left
            return None
        remaining.pop(raw_id, None)
        return _finish(trace_id, open_traces.pop(trace_id), convert)

    def opened(trace_id: str, source_file: str, record: int) -> _OpenTrace:
        trace = open_traces.get(trace_id)
        if trace is None:
            trace = open_traces[trace_id] = _OpenTrace(source_file, record)
        return trace

    for path in files:
        for number, request, problem in _documents(path):
            if problem is not None:
                yield Unreadable(path.name, number, problem)
                continue
            try:
                spans, logs = list(request_spans(request)), list(request_logs(request))
            except (OtlpError, AttributeError, TypeError) as exc:
                yield Unreadable(
                    path.name, number, f"not an OTLP request: {exc}" if not isinstance(exc, OtlpError) else str(exc)
                )
                continue
            for raw_id, raw, scope in spans:
                try:
                    span = decode_span(raw, scope)
                except (OtlpError, ValueError, TypeError, KeyError, AttributeError) as exc:
                    yield Unreadable(path.name, number, f"span {raw.get('name', '')!r}: {exc}")
                    continue
                trace = opened(span.trace_id, path.name, number)
                if not trace.spans:  # a trace is named by the line of its first span, not of a log record
                    trace.source_file, trace.record = path.name, number
                trace.spans.append(span)
                if (done := arrived(raw_id, span.trace_id)) is not None:
                    yield done
            for raw_id, raw in logs:
                try:
                    trace_id, span_id = hex_id(raw_id, 16), hex_id(raw.get("spanId"), 8)
                    event = log_event(raw)
                except (OtlpError, ValueError, TypeError, KeyError, AttributeError) as exc:
                    yield Unreadable(path.name, number, f"log record: {exc}")
                    continue
                trace = opened(trace_id, path.name, number)
                trace.events.setdefault(span_id or "", []).append(event)
                if (done := arrived(raw_id, trace_id)) is not None:
                    yield done
    for trace_id, trace in list(open_traces.items()):
        yield _finish(trace_id, trace, convert)


def _finish(
    trace_id: str, trace: _OpenTrace, convert: Callable[[list[Span], str, int], SourceAttempt | Unreadable]
) -> SourceAttempt | Unreadable:
    spans = trace.spans
    if not spans:
        return Unreadable(trace.source_file, trace.record, f"OTel trace {trace_id} has log records but no spans")
    by_id: dict[str, Span] = {}
    for span in spans:  # a span exported twice (a retried export) counts once
        by_id.setdefault(span.span_id, span)
    if len(by_id) < len(spans):
        spans = list(by_id.values())
    for span_id, events in trace.events.items():
        # a log record without a span id, or naming a span the trace lacks, is an event of the trace's root
        owner = by_id.get(span_id) or next((s for s in spans if s.parent_id not in by_id), spans[0])
        owner.events.extend(events)
        owner.events.sort(key=lambda e: e.time_ns)
    spans.sort(key=lambda s: (s.start_ns, s.span_id))
    return convert(spans, trace.source_file, trace.record)


def convert_trace(
    spans: list[Span], source_file: str, record: int, *, case_key: str = "case_id"
) -> SourceAttempt | Unreadable:
    """One OTel trace read in the dialect its spans speak (OpenInference first, then the GenAI conventions)."""
    try:
        if is_openinference(spans):
            return openinference_attempt(spans, source_file, record, case_key=case_key)
        if is_genai(spans):
            return genai_attempt(spans, source_file, record, case_key=case_key)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        # a value of a shape the dialect reader does not expect: this trace is a reject, the import goes on
        return Unreadable(
            source_file,
            record,
            f"OTel trace {spans[0].trace_id} could not be read: {type(exc).__name__}: {exc}",
            trace_id=spans[0].trace_id,
        )
    names = ", ".join(sorted({s.name for s in spans})[:5])
    return Unreadable(
        source_file,
        record,
        f"OTel trace {spans[0].trace_id} has {len(spans)} spans ({names}) and none in "
        "OpenInference (openinference.span.kind) or GenAI (gen_ai.*) form",
    )


def converted(files: Sequence[Path], case_key: str) -> Iterator[SourceAttempt | Unreadable]:
    """Every OTel trace of the files as an attempt (or why it cannot be one), in the order `read_otlp` gives them."""
    return read_otlp(files, partial(convert_trace, case_key=case_key))


def import_otlp(
    sources: Sequence[str | Path],
    run: ImportRun,
    matching: Matching = Matching(),
    *,
    reader_process: bool | None = None,
) -> ImportSummary:
    """Import OTLP/JSON files (or directories of them) as one run: one attempt per OTel trace. The files are read in
    a second process when `reader_process` is True, or when it is None and they hold READER_PROCESS_BYTES or more."""
    given = [Path(s) for s in sources]
    missing = [str(p) for p in given if not p.exists()]
    if missing:
        raise ImporterError(f"no such file or directory: {', '.join(missing)}")
    files = source_files(given)
    if not files:
        raise ImporterError(f"no files under {', '.join(map(str, given))}")
    if reader_process is None:  # an embedded interpreter may have no executable to start a second one with
        reader_process = bool(sys.executable) and sum(f.stat().st_size for f in files) >= READER_PROCESS_BYTES
    traces = (
        read_in_child(converted, files, matching.case_key) if reader_process else converted(files, matching.case_key)
    )
    return import_attempts(FORMAT, given, traces, run, matching)


__all__ = [
    "FORMAT",
    "READER_PROCESS_BYTES",
    "OtlpError",
    "any_value",
    "attributes",
    "convert_trace",
    "converted",
    "decode_span",
    "hex_id",
    "import_otlp",
    "log_event",
    "read_otlp",
    "request_logs",
    "request_spans",
    "source_files",
]
