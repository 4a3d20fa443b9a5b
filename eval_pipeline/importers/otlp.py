"""`eval-pipeline import otlp FILE...`: OpenTelemetry traces as OTLP/JSON, one attempt per OTel trace.

Reads the OpenTelemetry Collector file exporter's shape (one `ExportTraceServiceRequest` object per line), a single
(pretty-printed) JSON document of that shape, or a directory of such files. Ids may be hex (the OTLP/JSON rule) or
base64 (protobuf's generic JSON mapping); enums numbers or names. Spans are streamed: a trace is converted as soon
as all of its spans have been read (a first cheap pass counts them), so memory holds the traces still open, never
every span of the file. Each trace is read in the dialect its spans speak: OpenInference (`openinference.span.kind`)
or the OpenTelemetry GenAI semantic conventions (`gen_ai.*` attributes or events).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from eval_pipeline.importers.attempts import ImportRun, Matching, import_attempts
from eval_pipeline.importers.common import ImporterError, ImportSummary
from eval_pipeline.importers.source import SourceAttempt, Span, SpanEvent, Unreadable

FORMAT = "otlp"
_TRACE_ID = re.compile(rb'"traceId"\s*:\s*"([^"]*)"')
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_UNSET": "UNSET", "STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"}

Converter = Callable[..., "SourceAttempt | Unreadable"]


class OtlpError(ValueError):
    """A value of an OTLP/JSON document that does not have the OTLP shape."""


def hex_id(value: Any, size: int) -> str | None:
    """A trace id (16 bytes) or span id (8 bytes) as lowercase hex, from hex or base64; None when empty."""
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise OtlpError(f"an id is a {type(value).__name__}, not a string")
    if len(value) == 2 * size and all(c in "0123456789abcdefABCDEF" for c in value):
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
    return {p["key"]: any_value(p.get("value")) for p in pairs if isinstance(p, dict) and isinstance(p.get("key"), str)}


def decode_span(raw: dict[str, Any], scope: str | None) -> Span:
    """One OTLP/JSON span; OtlpError when a field has the wrong shape."""
    trace_id, span_id = hex_id(raw.get("traceId"), 16), hex_id(raw.get("spanId"), 8)
    if trace_id is None or span_id is None:
        raise OtlpError("a span without traceId or spanId")
    status = raw.get("status") or {}
    events = [SpanEvent(str(e.get("name", "")), int(e.get("timeUnixNano") or 0), attributes(e.get("attributes")))
              for e in raw.get("events") or [] if isinstance(e, dict)]
    return Span(trace_id=trace_id, span_id=span_id, parent_id=hex_id(raw.get("parentSpanId"), 8), name=str(raw.get("name", "")),
                start_ns=int(raw.get("startTimeUnixNano") or 0), end_ns=int(raw.get("endTimeUnixNano") or 0),
                status=_STATUS.get(status.get("code", 0), "UNSET"), status_message=status.get("message") or None,
                attributes=attributes(raw.get("attributes")), events=events, scope=scope)


def request_spans(request: Any) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """(raw trace id, raw span, scope name) of every span of one ExportTraceServiceRequest."""
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans", []), list):
        raise OtlpError("not an ExportTraceServiceRequest: no resourceSpans list")
    for resource in request.get("resourceSpans", []):
        for scope_spans in (resource or {}).get("scopeSpans") or (resource or {}).get("instrumentationLibrarySpans") or []:
            scope = ((scope_spans or {}).get("scope") or (scope_spans or {}).get("instrumentationLibrary") or {}).get("name")
            for span in (scope_spans or {}).get("spans") or []:
                if not isinstance(span, dict):
                    raise OtlpError("a span is not an object")
                yield str(span.get("traceId", "")), span, scope


def source_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files to read: each file given, and every file under each directory given (sorted, hidden ones skipped)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
        else:
            found.append(path)
    return found


def _documents(path: Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """(line, request or None, why not) of a file: JSONL of requests, or one JSON document spanning the file."""
    with path.open("rb") as handle:
        first = b""
        for first in handle:
            if first.strip():
                break
        try:
            orjson.loads(first)
        except orjson.JSONDecodeError:
            # not one request a line: the whole file is one JSON document
            handle.seek(0)
            data = handle.read()
            try:
                yield 1, orjson.loads(data), None
            except orjson.JSONDecodeError as exc:
                yield 1, None, f"neither JSONL nor one JSON document: {exc}"
            return
        handle.seek(0)
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line), None
            except orjson.JSONDecodeError as exc:
                yield number, None, f"invalid JSON: {exc}"


def _span_counts(files: Iterable[Path]) -> Counter[bytes]:
    """How many times each raw trace id appears in the files (a cheap scan, no JSON decoding); an upper bound of
    each trace's span count, used only to convert a trace as soon as all of its spans are in."""
    counts: Counter[bytes] = Counter()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                counts.update(_TRACE_ID.findall(line))
    return counts


def read_otlp(paths: Sequence[str | Path], convert: Callable[[list[Span], str, int], SourceAttempt | Unreadable]
              ) -> Iterator[SourceAttempt | Unreadable]:
    """Every OTel trace of the files converted by `convert(spans, file name, record)` in the order its last span is
    read, and an Unreadable for each line or span that is not OTLP/JSON."""
    files = source_files(paths)
    counts = _span_counts(files)
    open_traces: dict[str, tuple[list[Span], str, int]] = {}
    seen: Counter[str] = Counter()
    for path in files:
        for number, request, problem in _documents(path):
            if problem is not None:
                yield Unreadable(path.name, number, problem)
                continue
            try:
                spans = list(request_spans(request))
            except OtlpError as exc:
                yield Unreadable(path.name, number, str(exc))
                continue
            for raw_id, raw, scope in spans:
                try:
                    span = decode_span(raw, scope)
                except (OtlpError, ValueError, TypeError, KeyError) as exc:
                    yield Unreadable(path.name, number, f"span {raw.get('name', '')!r}: {exc}")
                    continue
                spans_of, _, _ = open_traces.setdefault(span.trace_id, ([], path.name, number))
                spans_of.append(span)
                seen[raw_id] += 1
                if seen[raw_id] >= counts.get(raw_id.encode(), 0):
                    yield _finish(open_traces.pop(span.trace_id), convert)
    for group in list(open_traces.values()):
        yield _finish(group, convert)


def _finish(group: tuple[list[Span], str, int], convert: Callable[[list[Span], str, int], SourceAttempt | Unreadable]
            ) -> SourceAttempt | Unreadable:
    spans, name, number = group
    spans.sort(key=lambda s: (s.start_ns, s.span_id))
    return convert(spans, name, number)


def convert_trace(spans: list[Span], source_file: str, record: int, *, case_key: str = "case_id") -> SourceAttempt | Unreadable:
    """One OTel trace read in the dialect its spans speak (OpenInference first, then the GenAI conventions)."""
    from eval_pipeline.importers.genai import genai_attempt, is_genai
    from eval_pipeline.importers.openinference import is_openinference, openinference_attempt

    if is_openinference(spans):
        return openinference_attempt(spans, source_file, record, case_key=case_key)
    if is_genai(spans):
        return genai_attempt(spans, source_file, record, case_key=case_key)
    names = ", ".join(sorted({s.name for s in spans})[:5])
    return Unreadable(source_file, record, f"OTel trace {spans[0].trace_id} has {len(spans)} spans ({names}) and none in "
                      "OpenInference (openinference.span.kind) or GenAI (gen_ai.*) form")


def import_otlp(sources: Sequence[str | Path], run: ImportRun, matching: Matching = Matching()) -> ImportSummary:
    """Import OTLP/JSON files (or directories of them) as one run: one attempt per OTel trace."""
    given = [Path(s) for s in sources]
    missing = [str(p) for p in given if not p.exists()]
    if missing:
        raise ImporterError(f"no such file or directory: {', '.join(missing)}")
    files = source_files(given)
    if not files:
        raise ImporterError(f"no files under {', '.join(map(str, given))}")
    traces = read_otlp(files, lambda spans, name, record: convert_trace(spans, name, record, case_key=matching.case_key))
    return import_attempts(FORMAT, given, traces, run, matching)


__all__ = ["FORMAT", "convert_trace", "import_otlp", "OtlpError", "any_value", "attributes", "decode_span", "hex_id", "read_otlp", "request_spans", "source_files"]
