"""The OpenTelemetry GenAI dialect of `import otlp`: traces recorded from real producers (the `openai` client under
opentelemetry-instrumentation-openai-v2 in the current conventions and on its pre-1.37 event path, retrieval and
execute_tool spans from opentelemetry-util-genai), read field by field, then imported into a golden data root and
scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.importers import ImportRun, Matching
from eval_pipeline.importers.genai import genai_attempt, is_genai
from eval_pipeline.importers.otlp import import_otlp, read_otlp
from eval_pipeline.importers.source import (
    SourceAttempt,
    SourceDoc,
    SourceRound,
    Span,
    SpanEvent,
    Unreadable,
)
from eval_pipeline_tests.importers.fixtures.genai_apps import (
    agent_app,
    genai_traced,
    loopback_client,
    rag_app,
    reply,
    scripted_client,
    write_logs,
    write_traces,
)
from eval_pipeline_tests.importers.fixtures.pipeline_run import evaluate, golden_root, refund_case

CORPUS = {
    "kb-refunds": "Refunds are issued within 14 days of the return.",
    "kb-returns": "Returns need the original receipt.",
    "kb-shipping": "Shipping takes 3 to 5 business days.",
    "kb-warranty": "Defective items are covered for two years, shipping included.",
}
TOOLS = {
    "lookup_order": lambda order_id: {"order_id": order_id, "total": 20.0},
    "issue_refund": lambda order_id, amount: {"order_id": order_id, "refunded": amount},
}


def _docs(*scored: tuple[str, float]) -> list[dict]:
    return [{"id": doc_id, "content": CORPUS[doc_id], "score": score} for doc_id, score in scored]


def _agent(traced, order: str, amounts: tuple[float, ...], case_id: str, **options) -> None:
    """An agent that looks the order up, then refunds each amount, then answers (tokens 50/5, 60/6, ...)."""
    calls = [reply(None, (f"call-{order}-1", "lookup_order", {"order_id": order}), tokens=(50, 5))]
    calls += [
        reply(None, (f"call-{order}-{n}", "issue_refund", {"order_id": order, "amount": a}), tokens=(60, 6))
        for n, a in enumerate(amounts, 2)
    ]
    calls.append(reply(f"Refunded {sum(amounts):g} on {order}.", tokens=(70, 7)))
    agent_app(traced, scripted_client(calls), f"Refund 20 on order {order}", TOOLS, case_id=case_id, **options)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The traces of both forms as the Collector's file exporter writes them (the event form's logs beside)."""
    folder = tmp_path_factory.mktemp("genai")
    with genai_traced(events=False) as traced:
        with loopback_client(lambda body: "Refunds take 14 days.") as client:
            rag_app(
                traced,
                client,
                "How long do refunds take?",
                _docs(("kb-refunds", 0.91), ("kb-returns", 0.5)),
                case_id="cur-rag",
            )
            rag_app(
                traced,
                client,
                "Is shipping free for defective items?",
                _docs(("kb-shipping", 0.8), ("kb-returns", 0.4)),
                case_id="cur-miss",
            )
            with pytest.raises(RuntimeError):  # no case id: it meets its case by its input
                rag_app(
                    traced,
                    client,
                    "How long does shipping take?",
                    _docs(("kb-shipping", 0.7)),
                    case_id=None,
                    fail="answer parser failed",
                )
        _agent(traced, "A1", (20.0,), "cur-agent")
        _agent(traced, "A2", (99.0,), "cur-overpay")
        current = write_traces(folder / "current.jsonl", traced)
    with genai_traced(events=True) as traced:
        with loopback_client(lambda body: "Refunds are issued within 14 days.") as client:
            rag_app(
                traced,
                client,
                "When are refunds issued?",
                _docs(("kb-returns", 0.9), ("kb-refunds", 0.6)),
                case_id="old-rag",
            )
        _agent(traced, "A3", (20.0,), "old-agent", tool_spans=False)
        events, logs = write_traces(folder / "events.jsonl", traced), write_logs(folder / "events-logs.jsonl", traced)
    with genai_traced(events=False) as traced:
        _agent(traced, "A4", (5.0, 15.0), "no-ids", call_ids=False)
        no_ids = write_traces(folder / "no-ids.jsonl", traced)
    with genai_traced(events=False, capture=False) as traced:
        with loopback_client(lambda body: "Refunds take 14 days.") as client:
            rag_app(traced, client, "How long do refunds take?", _docs(("kb-refunds", 0.91)), case_id="no-content")
        no_content = write_traces(folder / "no-content.jsonl", traced)
    return {"current": current, "events": events, "logs": logs, "no-ids": no_ids, "no-content": no_content}


def _traces(files: dict[str, Path], name: str) -> list[list[Span]]:
    """The spans of each trace of one file; the event form's log records read with it as its spans' events."""
    given = [files[name], files["logs"]] if name == "events" else [files[name]]
    return list(read_otlp(given, lambda spans, file, record: spans))


def _read(files: dict[str, Path], name: str) -> dict[str, SourceAttempt | Unreadable]:
    """The attempts of one file, by case key (by input where the trace has none)."""
    read = [genai_attempt(spans, files[name].name, 1) for spans in _traces(files, name)]
    return {getattr(a, "case_key", None) or getattr(a, "input", None) or a.reason: a for a in read}


@pytest.fixture(scope="module")
def current(files: dict[str, Path]) -> dict[str, SourceAttempt]:
    return _read(files, "current")


@pytest.fixture(scope="module")
def events(files: dict[str, Path]) -> dict[str, SourceAttempt]:
    return _read(files, "events")


def test_the_producers_emit_what_the_reader_reads(files: dict[str, Path]) -> None:
    spans = [s for trace in _traces(files, "current") for s in trace]
    assert sorted({s.attributes.get("gen_ai.operation.name") for s in spans} - {None}) == [
        "chat",
        "execute_tool",
        "retrieval",
    ]
    chat = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat")
    assert (
        isinstance(chat.attributes["gen_ai.input.messages"], str) and chat.scope == "opentelemetry.util.genai.handler"
    )
    retrieval = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "retrieval")
    assert json.loads(retrieval.attributes["gen_ai.retrieval.documents"])[0] == {
        "id": "kb-refunds",
        "content": CORPUS["kb-refunds"],
        "score": 0.91,
    }
    old = [s for trace in _traces(files, "events") for s in trace]
    old_chats = [s for s in old if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert {s.scope for s in old_chats} == {"opentelemetry.instrumentation.openai_v2"}
    assert not any("gen_ai.input.messages" in s.attributes for s in old_chats)
    assert [e.name for e in old_chats[0].events] == ["gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"]
    assert all(is_genai(trace) for name in ("current", "events") for trace in _traces(files, name))


def test_a_rag_trace_one_round_prompt_answer_usage(current: dict[str, SourceAttempt]) -> None:
    attempt = current["cur-rag"]
    assert attempt.input == "How long do refunds take?"
    assert attempt.rounds == [
        SourceRound(
            hits=[
                SourceDoc(id="kb-refunds", text=CORPUS["kb-refunds"], score=0.91),
                SourceDoc(id="kb-returns", text=CORPUS["kb-returns"], score=0.5),
            ],
            query="How long do refunds take?",
            tool="kb",
        )
    ]
    system = f"Answer from the context.\n{CORPUS['kb-refunds']}\n{CORPUS['kb-returns']}"
    assert attempt.prompt == f"{system}\nHow long do refunds take?"
    assert attempt.answer == "Refunds take 14 days."
    assert attempt.messages == [
        {"role": "system", "content": system},
        {"role": "user", "content": "How long do refunds take?"},
        {"role": "assistant", "content": "Refunds take 14 days."},
    ]
    # the loopback server counts 4 characters a token: ceil(108/4) + ceil(25/4) in, ceil(21/4) out
    assert (attempt.usage["input_tokens"], attempt.usage["output_tokens"]) == (27 + 7, 6)
    assert (attempt.status, attempt.error, attempt.context) == ("ok", None, None)


def test_an_error_root_is_an_error_attempt(current: dict[str, SourceAttempt]) -> None:
    attempt = current["How long does shipping take?"]
    assert (attempt.case_key, attempt.status, attempt.error) == (None, "error", "RuntimeError: answer parser failed")
    assert attempt.answer == "Refunds take 14 days."


def test_agent_calls_from_the_model_results_from_the_tool_spans(current: dict[str, SourceAttempt]) -> None:
    attempt = current["cur-agent"]
    assert attempt.input == "Refund 20 on order A1" and attempt.answer == "Refunded 20 on A1."
    assert [
        (m["role"], m.get("tool_call_id") or [c["id"] for c in m.get("tool_calls", [])]) for m in attempt.messages
    ] == [
        ("system", []),
        ("user", []),
        ("assistant", ["call-A1-1"]),
        ("tool", "call-A1-1"),
        ("assistant", ["call-A1-2"]),
        ("tool", "call-A1-2"),
        ("assistant", []),
    ]
    assert attempt.messages[4]["tool_calls"][0]["function"] == {
        "name": "issue_refund",
        "arguments": '{"order_id": "A1", "amount": 20.0}',
    }
    assert json.loads(attempt.messages[5]["content"]) == {"order_id": "A1", "refunded": 20.0}
    assert {k: attempt.usage[k] for k in ("input_tokens", "output_tokens")} == {
        "input_tokens": 180,
        "output_tokens": 18,
    }
    assert attempt.rounds == [] and attempt.prompt.startswith("You are a support agent.\nRefund 20 on order A1\n")


def _parsed(messages: list[dict]) -> list[dict]:
    """Messages with tool results as JSON values."""
    return [{**m, "content": json.loads(m["content"])} if m["role"] == "tool" else m for m in messages]


def test_the_event_form_reads_as_the_current_form(
    current: dict[str, SourceAttempt], events: dict[str, SourceAttempt]
) -> None:
    rag = events["old-rag"]
    assert [(d.id, d.score) for d in rag.rounds[0].hits] == [("kb-returns", 0.9), ("kb-refunds", 0.6)]
    assert (rag.input, rag.answer) == ("When are refunds issued?", "Refunds are issued within 14 days.")
    assert (
        rag.prompt
        == f"Answer from the context.\n{CORPUS['kb-returns']}\n{CORPUS['kb-refunds']}\nWhen are refunds issued?"
    )
    agent, reference = events["old-agent"], current["cur-agent"]
    # no tool spans: each result is the tool message the next model call was given (the same JSON, other spacing)
    assert _parsed(agent.messages) == json.loads(json.dumps(_parsed(reference.messages)).replace("A1", "A3"))
    assert (agent.answer, agent.usage["input_tokens"], agent.usage["output_tokens"]) == ("Refunded 20 on A3.", 180, 18)


def test_tool_spans_without_call_ids_answer_calls_by_name_in_order(files: dict[str, Path]) -> None:
    attempt = _read(files, "no-ids")["no-ids"]
    results = [(m["tool_call_id"], json.loads(m["content"])) for m in attempt.messages if m["role"] == "tool"]
    assert results == [
        ("call-A4-1", {"order_id": "A4", "total": 20.0}),
        ("call-A4-2", {"order_id": "A4", "refunded": 5.0}),
        ("call-A4-3", {"order_id": "A4", "refunded": 15.0}),
    ]


def test_a_trace_without_captured_content_is_unreadable_with_the_switch_named(files: dict[str, Path]) -> None:
    [(reason, unreadable)] = _read(files, "no-content").items()
    assert isinstance(unreadable, Unreadable) and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in reason


def _span(
    span_id: str,
    attributes: dict,
    *,
    parent: str | None = "root",
    start: int = 0,
    events: list[SpanEvent] | None = None,
) -> Span:
    return Span(
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent,
        name=span_id,
        start_ns=start,
        end_ns=start + 10,
        status="UNSET",
        status_message=None,
        attributes=attributes,
        events=events or [],
    )


def test_structured_values_ids_only_documents_and_the_older_usage_names() -> None:
    """Values given as structure (not JSON strings), documents as ids and scores only or as bare texts, the
    system instructions attribute, `prompt_tokens`/`completion_tokens`, and the case key in a `metadata` object."""
    spans = [
        _span("root", {"gen_ai.operation.name": "invoke_agent", "metadata": '{"case_id": "s-1"}'}, parent=None),
        _span(
            "r1",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": "q",
                "gen_ai.retrieval.documents": [{"id": "d1", "score": 0.9}, {"id": 7, "score": 1}],
            },
            start=1,
        ),
        _span(
            "r2",
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.documents": ["plain text", {"text": "t", "metadata": {"doc_id": "m"}}],
            },
            start=2,
        ),
        _span(
            "c1",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system_instructions": [{"type": "text", "content": "Be brief."}],
                "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "q"}]}],
                "gen_ai.output.messages": [
                    {"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": "a"}]}
                ],
                "gen_ai.usage.prompt_tokens": 11,
                "gen_ai.usage.completion_tokens": 3,
            },
            start=3,
        ),
    ]
    attempt = genai_attempt(spans, "f.jsonl", 4)
    assert attempt.case_key == "s-1" and (attempt.source_file, attempt.record, attempt.key) == ("f.jsonl", 4, "t" * 32)
    assert attempt.rounds == [
        SourceRound(hits=[SourceDoc(id="d1", score=0.9), SourceDoc(id="7", score=1.0)], query="q", tool="r1"),
        SourceRound(hits=[SourceDoc(text="plain text"), SourceDoc(text="t", metadata={"doc_id": "m"})], tool="r2"),
    ]
    assert attempt.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]
    assert (attempt.prompt, attempt.answer, attempt.usage) == (
        "Be brief.\nq",
        "a",
        {"latency_ms": 1e-05, "input_tokens": 11, "output_tokens": 3},
    )


def test_a_tool_span_no_model_output_dispatched_is_its_own_call_and_bad_json_is_a_reject() -> None:
    tool = _span(
        "x",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_order",
            "gen_ai.tool.call.id": "c9",
            "gen_ai.tool.call.arguments": '{"order_id": "B"}',
            "gen_ai.tool.call.result": {"total": 3},
        },
    )
    attempt = genai_attempt([_span("root", {}, parent=None), tool], "f.jsonl", 1)
    assert attempt.messages == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order_id": "B"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": '{"total": 3}'},
    ]
    broken = genai_attempt(
        [_span("root", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[{"}, parent=None)], "f.jsonl", 2
    )
    assert isinstance(broken, Unreadable) and broken.reason.startswith(
        f"OTel trace {'t' * 32}: gen_ai.input.messages is not valid JSON"
    )
    assert not is_genai([_span("root", {"http.method": "GET"}, parent=None)])


def test_event_values_of_the_wrong_shape_make_a_reject_with_the_reason_not_a_crash() -> None:
    """A choice index that is no integer, a tool call whose function is text: the trace is a reject naming the value."""

    def chat(event: SpanEvent) -> Span:
        return _span("root", {"gen_ai.operation.name": "chat"}, parent=None, events=[event])

    index = genai_attempt(
        [chat(SpanEvent("gen_ai.choice", 1, {"index": "first", "message": {"content": "a"}}))], "f.jsonl", 1
    )
    assert (
        isinstance(index, Unreadable)
        and index.reason == f"OTel trace {'t' * 32}: a gen_ai.choice index is 'first', not an integer"
    )
    calls = SpanEvent("gen_ai.assistant.message", 1, {"tool_calls": [{"id": "c1", "function": "lookup_order"}]})
    call = genai_attempt([chat(calls)], "f.jsonl", 2)
    assert isinstance(call, Unreadable) and call.reason.endswith(
        "a tool call of a gen_ai.assistant.message has a function that is a str, not an object"
    )
    fine = genai_attempt(
        [chat(SpanEvent("gen_ai.choice", 1, {"index": "0", "message": {"content": "a"}}))], "f.jsonl", 3
    )
    assert fine.answer == "a"


# ---- end to end: a golden data root, the import, the pipeline ------------------------------------------------

_RAG = {"lanes": ["rag"], "expected_answer_contains": ["14 days"]}
GOLDEN = {
    "cur-rag": {"input": "How long do refunds take?", "required_doc_ids": ["kb-refunds"], **_RAG},
    "cur-miss": {
        "input": "Is shipping free for defective items?",
        "required_doc_ids": ["kb-warranty"],
        "lanes": ["rag"],
    },
    "cur-broken": {"input": "How long does shipping take?", "required_doc_ids": ["kb-shipping"], "lanes": ["rag"]},
    "old-rag": {"input": "When are refunds issued?", "required_doc_ids": ["kb-refunds"], **_RAG},
    "cur-agent": refund_case("A1"),
    "cur-overpay": refund_case("A2"),
    "old-agent": refund_case("A3"),
}


@pytest.fixture(scope="module")
def scored(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """Both forms imported as one run by `import otlp`, the event form's log records beside its spans, and scored."""
    root = tmp_path_factory.mktemp("golden")
    golden_root(root, "ga", CORPUS, GOLDEN)
    run = ImportRun(
        run_id="ga-1", data_root=root, dataset_version="golden-ga", environment_version="env-ga", corpus_version="kb-ga"
    )
    summary = import_otlp([files["current"], files["events"], files["logs"]], run, Matching())
    code, warehouse, printed = evaluate(root, "ga-1")
    return summary, code, warehouse, printed


def _rows(warehouse, table: str, *columns: str) -> dict[str, tuple]:
    return {row["case_id"]: tuple(row[c] for c in columns) for row in warehouse.read(table, "ga-1").to_dicts()}


@pytest.mark.slow
def test_imported_traces_are_scored_in_their_lanes(scored) -> None:
    summary, code, warehouse, printed = scored
    assert (summary.traces, summary.cases, summary.rejects) == (7, 0, [])
    assert summary.incomplete == [{"trace_id": "ga-1:cur-broken#1", "reason": "RuntimeError: answer parser failed"}]
    assert code == 0, printed
    assert _rows(
        warehouse, "retrieval_scores", "first_hit_rank", "recall_at_10", "mrr", "n_retrieved", "failure_class", "status"
    ) == {
        "cur-rag": (1, 1.0, 1.0, 2, None, "scored"),
        "cur-miss": (None, 0.0, 0.0, 2, "embedding_miss", "scored"),
        "cur-broken": (None, None, None, 1, None, "incomplete"),
        "old-rag": (2, 1.0, 0.5, 2, None, "scored"),
    }
    assert _rows(warehouse, "context_scores", "context_recall", "context_precision", "n_chunks")["old-rag"] == (
        1.0,
        0.5,
        2,
    )
    assert _rows(
        warehouse, "tool_scores", "tool_call_precision", "tool_call_recall", "tool_call_f1", "n_calls", "missing_calls"
    ) == {
        "cur-agent": (1.0, 1.0, 1.0, 2, []),
        "cur-overpay": (0.5, 0.5, 0.5, 2, ['issue_refund({"amount":20,"order_id":"A2"})']),
        "old-agent": (1.0, 1.0, 1.0, 2, []),
    }
    assert _rows(warehouse, "outcome_scores", "input_tokens", "output_tokens")["old-agent"] == (180, 18)
    assert {
        k: v for k, v in _rows(warehouse, "attribution", "outcome", "first_failing_stage").items() if v[0] != "pass"
    } == {
        "cur-miss": ("fail", "retrieval"),
        "cur-broken": ("incomplete", None),
        "cur-overpay": ("fail", "tool_arguments"),  # the right tools, 99 refunded where 20 was asked
    }
