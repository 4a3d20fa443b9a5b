"""The OTLP/JSON reader: spans recorded by the real SDK, read from the Collector's JSONL, one JSON document or a
directory; ids in hex or base64; a trace split across lines converted once, when its last span is read."""

from __future__ import annotations

import json

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.trace import Status, StatusCode

from eval_pipeline.importers.otlp import read_otlp
from eval_pipeline.importers.source import Unreadable
from eval_pipeline_tests.importers.fixtures.otlp_json import otlp_request, recording, write_otlp_jsonl


def _record_two_traces():
    """Two traces of three spans each, with attributes of every OTLP value kind and an error status."""
    with recording() as (provider, exporter):
        tracer = provider.get_tracer("test")
        for n in range(2):
            with tracer.start_as_current_span(
                f"root-{n}", attributes={"n": n, "ratio": 0.5, "ok": True, "tags": ["a", "b"]}
            ) as root:
                with tracer.start_as_current_span("child-a"):
                    pass
                with tracer.start_as_current_span("child-b") as child:
                    child.add_event("note", {"text": "hello"})
                if n == 1:
                    root.set_status(Status(StatusCode.ERROR, "boom"))
        return list(exporter.get_finished_spans())


def _collect(paths):
    seen = []

    def convert(spans, name, record):
        seen.append((name, record, [s.name for s in spans]))
        return spans

    return list(read_otlp(paths, convert)), seen


def test_jsonl_batches_that_split_a_trace_give_each_trace_once_with_every_span_and_value(tmp_path):
    spans = _record_two_traces()  # finished order: child-a, child-b, root-0, child-a, child-b, root-1
    path = write_otlp_jsonl(tmp_path / "spans.jsonl", [spans[:2], spans[2:4], spans[4:]])
    out, seen = _collect([path])
    # trace 0 is complete on line 2 (its root), trace 1 on line 3; each is converted once, spans in start order
    assert seen == [
        ("spans.jsonl", 1, ["root-0", "child-a", "child-b"]),
        ("spans.jsonl", 2, ["root-1", "child-a", "child-b"]),
    ]
    first, second = out
    root = first[0]
    assert root.parent_id is None and len(root.trace_id) == 32 and len(root.span_id) == 16
    assert root.attributes == {"n": 0, "ratio": 0.5, "ok": True, "tags": ["a", "b"]}
    assert [s.parent_id for s in first[1:]] == [root.span_id, root.span_id]
    assert [(e.name, e.attributes) for e in first[2].events] == [("note", {"text": "hello"})]
    assert (second[0].status, second[0].status_message, first[0].status) == ("ERROR", "boom", "UNSET")
    assert root.end_ns >= root.start_ns > 0


def test_one_pretty_printed_document_with_base64_ids_reads_like_the_collector_lines(tmp_path):
    spans = _record_two_traces()
    lines, _ = _collect([write_otlp_jsonl(tmp_path / "a.jsonl", [spans])])
    # protobuf's generic JSON mapping: base64 ids, enum names
    (tmp_path / "doc").mkdir()
    (tmp_path / "doc" / "export.json").write_text(json.dumps(MessageToDict(encode_spans(spans)), indent=2))
    document, seen = _collect([tmp_path / "doc"])
    assert [[(s.trace_id, s.span_id, s.parent_id, s.status, s.attributes) for s in t] for t in document] == [
        [(s.trace_id, s.span_id, s.parent_id, s.status, s.attributes) for s in t] for t in lines
    ]
    assert [record for _, record, _ in seen] == [1, 1]


def test_lines_that_are_not_otlp_are_unreadable_rows_and_the_good_lines_still_count(tmp_path):
    spans = _record_two_traces()
    good = json.dumps(otlp_request(spans))
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [
                good,
                "{not json",
                json.dumps({"resourceSpans": "nope"}),
                json.dumps(
                    {
                        "resourceSpans": [
                            {
                                "scopeSpans": [
                                    {"spans": [{"traceId": "zz", "spanId": "0102030405060708", "name": "bad-id"}]}
                                ]
                            }
                        ]
                    }
                ),
            ]
        )
        + "\n"
    )
    out, _ = _collect([path])
    unreadable = [(u.record, u.reason) for u in out if isinstance(u, Unreadable)]
    assert [r for r, _ in unreadable] == [2, 3, 4]
    # in Python's JSON reader's words, never orjson's ("unexpected character ...: line 1 column 2 (char 1)")
    assert unreadable[0][1] == "invalid JSON: Expecting property name enclosed in double quotes at column 2"
    assert unreadable[1][1] == "not an ExportTraceServiceRequest: no resourceSpans list"
    assert unreadable[2][1] == "span 'bad-id': id 'zz' is neither 32 hex digits nor 16 bytes in base64"
    assert sum(not isinstance(t, Unreadable) for t in out) == 2


def test_log_records_are_the_events_of_their_spans_in_whichever_file_and_order_they_arrive(tmp_path):
    """Logs exported before the spans, in another file: each record is its span's event (name, time, attributes
    with the body's fields), one without a span id is the root's; a trace known only from logs is unreadable."""
    from opentelemetry import trace as trace_api
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    from eval_pipeline_tests.importers.fixtures.otlp_json import hex_ids

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger = logger_provider.get_logger("test")
    with recording() as (provider, exporter):
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("root") as root:
            with tracer.start_as_current_span("chat"):
                logger.emit(
                    event_name="gen_ai.user.message", body={"content": "hi"}, attributes={"gen_ai.system": "openai"}
                )
                logger.emit(body="plain text", attributes={"event.name": "gen_ai.choice"})
            unparented = trace_api.set_span_in_context(
                trace_api.NonRecordingSpan(trace_api.SpanContext(root.get_span_context().trace_id, 0, False))
            )
            logger.emit(event_name="orphan", context=unparented)
        lonely = trace_api.set_span_in_context(trace_api.NonRecordingSpan(trace_api.SpanContext(0xABC, 0xDEF, False)))
        logger.emit(event_name="lonely", context=lonely)
        spans = list(exporter.get_finished_spans())
    logger_provider.shutdown()
    log_file = tmp_path / "a-logs.jsonl"
    log_file.write_text(
        json.dumps(hex_ids(MessageToDict(encode_logs(logs.get_finished_logs())))) + "\n", encoding="utf-8"
    )
    out, seen = _collect([log_file, write_otlp_jsonl(tmp_path / "b-spans.jsonl", [spans])])
    lonely_trace, traced = out  # the logs-only trace is given up at the end, the other when its last span is read
    assert isinstance(lonely_trace, Unreadable) and "has log records but no spans" in lonely_trace.reason
    assert seen == [("b-spans.jsonl", 1, ["root", "chat"])]
    root_span, chat = traced
    assert [(e.name, e.attributes) for e in chat.events] == [
        ("gen_ai.user.message", {"gen_ai.system": "openai", "content": "hi"}),
        ("gen_ai.choice", {"body": "plain text"}),
    ]
    assert [e.name for e in root_span.events] == ["orphan"]
    assert all(e.time_ns > 0 for e in chat.events)


def test_a_broken_first_line_odd_shapes_and_repeated_exports_lose_nothing_and_count_nothing_twice(tmp_path):
    """A JSONL file whose first line is broken is still JSONL; values of the wrong shape are rejects of their line or
    span; a file given twice (and inside a folder given) is read once; a span exported twice counts once."""
    spans = _record_two_traces()
    request = otlp_request(spans)
    retried = json.loads(json.dumps(request))
    retried["resourceSpans"][0]["scopeSpans"][0]["spans"] = retried["resourceSpans"][0]["scopeSpans"][0]["spans"][:1]
    bad_status = json.loads(json.dumps(request))
    bad_status["resourceSpans"][0]["scopeSpans"][0]["spans"] = [
        {**span, "status": "ERROR", "attributes": [{"key": "tags", "value": {"arrayValue": ["not", "values"]}}]}
        for span in bad_status["resourceSpans"][0]["scopeSpans"][0]["spans"][:1]
    ]
    bad_status["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "ab" * 16
    folder = tmp_path / "export"
    folder.mkdir()
    path = folder / "spans.jsonl"
    path.write_text(
        "\n".join(
            [
                "{broken",
                json.dumps(request),
                json.dumps(retried),
                json.dumps({"resourceSpans": ["x"]}),
                json.dumps(bad_status),
            ]
        )
        + "\n"
    )
    out, seen = _collect([path, folder])
    unreadable = [(u.record, u.reason) for u in out if isinstance(u, Unreadable)]
    assert [(record, reason.split(":")[0]) for record, reason in unreadable] == [
        (1, "invalid JSON"),
        (4, "not an OTLP request"),
        (5, "span 'child-a'"),
    ]
    # the two traces once each, every span once: trace 0 is complete once its span exported again on line 3 is in
    assert [(name, record, names) for name, record, names in seen] == [
        ("spans.jsonl", 2, ["root-1", "child-a", "child-b"]),
        ("spans.jsonl", 2, ["root-0", "child-a", "child-b"]),
    ]
