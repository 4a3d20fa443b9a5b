"""The OpenInference dialect of `import otlp`: traces recorded from real producers (openinference-instrumentation-
langchain over a LangChain RAG chain and a tool-calling agent, openinference-instrumentation's tracer over a
retrieve-rerank-answer app), read field by field, then imported into a golden data root and scored."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from eval_pipeline.importers import ImportRun, Matching
from eval_pipeline.importers.openinference import is_openinference, openinference_attempt
from eval_pipeline.importers.otlp import import_otlp, read_otlp
from eval_pipeline.importers.source import SourceAttempt, SourceDoc, SourceRound, Span, SpanEvent
from eval_pipeline_tests.importers.fixtures.openinference_apps import (
    CORPUS,
    agent_loop,
    langchain_traced,
    rag_chain,
    rerank_app,
    usage,
    write_traces,
)
from eval_pipeline_tests.importers.fixtures.pipeline_run import SUPPORT_CASES, evaluate, golden_root

REFUNDS, SHIPPING = CORPUS["kb-refunds"], CORPUS["kb-shipping"]
SYSTEM = "Answer from the context only.\nContext:\n"


def _calls(*calls: tuple[str, str, dict], tokens: tuple[int, int]) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"id": i, "name": n, "args": a} for i, n, a in calls], usage_metadata=usage(*tokens)
    )


@pytest.fixture(scope="module")
def otlp_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seven traces of three apps as the Collector's file exporter writes them."""
    with langchain_traced() as (provider, spans):
        rag_chain(REFUNDS).invoke("How long do refunds take?", config={"metadata": {"case_id": "rag-refunds"}})
        rag_chain(SHIPPING).invoke(
            "Is shipping free for defective items?", config={"metadata": {"case_id": "rag-warranty"}}
        )
        with pytest.raises(RuntimeError):
            rag_chain("3 to 5 days", fail=True).invoke("How long does shipping take?")  # no case id: met by its input
        agent_loop(
            [
                _calls(("call_a", "lookup_order", {"order_id": "A1"}), tokens=(50, 5)),
                _calls(("call_b", "issue_refund", {"order_id": "A1", "amount": 20.0}), tokens=(60, 6)),
                AIMessage("Refunded 20 on A1.", usage_metadata=usage(70, 7)),
            ]
        )("Refund 20 on order A1", {"case_id": "agent-refund"})
        agent_loop(
            [
                _calls(("call_c", "issue_refund", {"order_id": "A2", "amount": 99.0}), tokens=(40, 4)),
                AIMessage("Refunded 99 on A2.", usage_metadata=usage(45, 5)),
            ]
        )("Refund 20 on order A2", {"case_id": "agent-overpay"})
        rerank_app(
            provider,
            "When are refunds issued?",
            REFUNDS,
            case_id="rag-rerank",
            keep=["kb-returns", "kb-refunds"],
            session="s-1",
        )
        rerank_app(
            provider,
            "When is a refund issued?",
            CORPUS["kb-returns"],
            case_id="rag-demoted",
            keep=["kb-returns"],
            session="s-1",
        )
    return write_traces(tmp_path_factory.mktemp("otlp") / "traces.jsonl", spans)


@pytest.fixture(scope="module")
def raw_traces(otlp_file: Path) -> list[list[Span]]:
    return list(read_otlp([otlp_file], lambda spans, name, record: spans))


@pytest.fixture(scope="module")
def attempts(otlp_file: Path) -> dict[str, SourceAttempt]:
    """The attempts read from the file, by case key (by input where the trace has none)."""
    read = list(read_otlp([otlp_file], openinference_attempt))
    assert all(isinstance(a, SourceAttempt) for a in read)
    return {a.case_key or a.input: a for a in read}


def _latency_ms(traces: list[list[Span]], trace_id: str) -> float:
    spans = next(t for t in traces if t[0].trace_id == trace_id)
    root = next(s for s in spans if s.parent_id is None)
    return (root.end_ns - root.start_ns) / 1e6


def test_the_langchain_instrumentor_emits_what_the_reader_reads(raw_traces: list[list[Span]]) -> None:
    keys = {k for spans in raw_traces for s in spans for k in s.attributes}
    assert {
        "retrieval.documents.0.document.content",
        "retrieval.documents.0.document.metadata",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
        "llm.input_messages.1.message.content",
        "llm.token_count.prompt",
        "llm.token_count.completion",
        "tool.name",
        "reranker.input_documents.3.document.id",
        "reranker.output_documents.1.document.score",
        "metadata",
    } <= keys
    assert len(raw_traces) == 7 and all(is_openinference(t) for t in raw_traces)
    assert not is_openinference(
        [Span("a" * 32, "b" * 16, None, "x", 1, 2, "UNSET", None, {"gen_ai.operation.name": "chat"}, [])]
    )


def test_rag_chain_one_round_from_the_retriever_prompt_answer_usage(
    attempts: dict[str, SourceAttempt], raw_traces: list[list[Span]]
) -> None:
    attempt = attempts["rag-refunds"]
    assert attempt.input == "How long do refunds take?"
    assert attempt.rounds == [
        SourceRound(
            hits=[SourceDoc(text=REFUNDS, metadata={"doc_id": "kb-refunds"})],
            candidates=None,
            query="How long do refunds take?",
            tool="KeywordRetriever",
        )
    ]
    assert attempt.context is None
    assert attempt.prompt == f"{SYSTEM}{REFUNDS}\nHow long do refunds take?"
    assert attempt.answer == REFUNDS
    assert attempt.messages == [
        {"role": "user", "content": "How long do refunds take?"},
        {"role": "assistant", "content": REFUNDS},
    ]
    assert attempt.usage == {"input_tokens": 40, "output_tokens": 8, "latency_ms": _latency_ms(raw_traces, attempt.key)}
    assert (attempt.status, attempt.error, attempt.source_file, len(attempt.key)) == ("ok", None, "traces.jsonl", 32)
    # the miss: the keyword retriever returns the shipping and returns documents, in corpus order
    assert [d.metadata for d in attempts["rag-warranty"].rounds[0].hits] == [
        {"doc_id": "kb-shipping"},
        {"doc_id": "kb-returns"},
    ]


def test_an_error_root_is_an_error_attempt_with_the_exception(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["How long does shipping take?"]
    assert (attempt.status, attempt.error, attempt.case_key) == (
        "error",
        "RuntimeError: answer parser failed: quota exceeded",
        None,
    )
    assert attempt.answer == "3 to 5 days"  # the model answered before the parser raised
    assert [d.metadata for d in attempt.rounds[0].hits] == [{"doc_id": "kb-shipping"}]


def test_agent_calls_from_the_model_results_from_the_tool_spans(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["agent-refund"]
    assert attempt.messages == [
        {"role": "user", "content": "Refund 20 on order A1"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "A1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "order A1: delivered", "error": False},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "issue_refund", "arguments": '{"order_id": "A1", "amount": 20.0}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_b", "content": "refunded 20.0 on A1", "error": False},
        {"role": "assistant", "content": "Refunded 20 on A1."},
    ]
    assert (attempt.answer, attempt.rounds, attempt.status) == ("Refunded 20 on A1.", [], "ok")
    assert {k: attempt.usage[k] for k in ("input_tokens", "output_tokens")} == {
        "input_tokens": 180,
        "output_tokens": 18,
    }
    assert (
        attempt.prompt == "Refund 20 on order A1\norder A1: delivered\nrefunded 20.0 on A1"
    )  # the last model call's input


def test_a_reranker_reranks_the_round_before_it(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["rag-rerank"]
    assert attempt.input == "When are refunds issued?"  # from the root's JSON input {"question": ...}
    (round_,) = attempt.rounds
    assert (round_.tool, round_.query) == ("vector_search", "When are refunds issued?")
    assert [(d.id, d.score) for d in round_.hits] == [("kb-returns", 0.9), ("kb-refunds", 0.8)]
    assert [(d.id, d.score, d.metadata) for d in round_.candidates] == [
        ("kb-refunds", 1.0, {"section": "refunds"}),
        ("kb-shipping", 0.5, {"section": "shipping"}),
        ("kb-warranty", pytest.approx(1 / 3), {"section": "warranty"}),
        ("kb-returns", 0.25, {"section": "returns"}),
    ]
    assert attempt.prompt == f"Context:\n{CORPUS['kb-returns']}\n{REFUNDS}\nWhen are refunds issued?"
    assert {k: attempt.usage[k] for k in ("input_tokens", "output_tokens")} == {"input_tokens": 30, "output_tokens": 10}


def test_the_case_key_may_name_any_attribute(raw_traces: list[list[Span]]) -> None:
    reranked = [t for t in raw_traces if any(s.name == "cross_encoder" for s in t)]
    assert [openinference_attempt(t, "f", 1, case_key="session.id").case_key for t in reranked] == ["s-1", "s-1"]
    assert [openinference_attempt(t, "f", 1, case_key="ls_retriever_name").case_key for t in raw_traces[:3]] == [
        "keyword",
        "keyword",
        "keyword",
    ]


# ---- hand-built spans: the shapes the recorded apps do not produce ------------------------------------------


def _span(span_id: str, kind: str, attrs: dict, *, parent: str | None = "r", start: int = 0, **fields) -> Span:
    return Span(
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent,
        name=fields.pop("name", span_id),
        start_ns=start,
        end_ns=fields.pop("end", start + 1),
        status=fields.pop("status", "OK"),
        status_message=fields.pop("message", None),
        attributes={"openinference.span.kind": kind, **attrs},
        events=fields.pop("events", []),
    )


def _call(message: int, call: int, name: str, arguments: str) -> dict:
    prefix = f"llm.output_messages.{message}.message.tool_calls.{call}.tool_call.function"
    return {f"{prefix}.name": name, f"{prefix}.arguments": arguments}


def test_calls_without_ids_take_tool_results_by_name_in_order_and_inner_llm_spans_count_once() -> None:
    spans = [
        _span(
            "r", "AGENT", {"input.value": '{"input": "two lookups"}', "eval.case_id": "c-7"}, parent=None, end=3_000_000
        ),
        _span(
            "l1",
            "LLM",
            {
                **_call(0, 0, "lookup", '{"id": 1}'),
                **_call(0, 1, "lookup", '{"id": 2}'),
                "llm.token_count.prompt": 10,
                "llm.token_count.completion": 2,
                "llm.cost.total": 0.5,
            },
            start=1,
        ),
        _span(
            "inner", "LLM", {**_call(0, 0, "lookup", '{"id": 1}'), "llm.token_count.prompt": 10}, parent="l1", start=2
        ),
        _span("t1", "TOOL", {"tool.name": "lookup", "output.value": "one"}, start=3),
        _span("t2", "TOOL", {"tool.name": "lookup"}, start=4, status="ERROR", message="not found"),
        _span(
            "l2",
            "LLM",
            {
                "llm.output_messages.0.message.contents.0.message_content.type": "text",
                "llm.output_messages.0.message.contents.0.message_content.text": "done",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "two lookups",
            },
            start=5,
        ),
    ]
    attempt = openinference_attempt(spans, "f.jsonl", 3)
    calls = attempt.messages[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["l1-0-0", "l1-0-1"]
    assert attempt.messages[2:] == [
        {"role": "tool", "tool_call_id": "l1-0-0", "content": "one", "error": False},
        {"role": "tool", "tool_call_id": "l1-0-1", "content": "Error: not found", "error": True},
        {"role": "assistant", "content": "done"},
    ]
    assert (attempt.input, attempt.case_key, attempt.answer, attempt.prompt) == (
        "two lookups",
        "c-7",
        "done",
        "two lookups",
    )
    assert attempt.usage == {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5, "latency_ms": 3.0}


def test_without_llm_spans_the_root_output_is_the_answer_and_a_lone_reranker_is_a_round() -> None:
    doc = {
        "reranker.output_documents.0.document.id": "d9",
        "reranker.output_documents.0.document.content": "nine",
        "reranker.output_documents.0.document.metadata": "not json",
    }
    spans = [
        _span(
            "r",
            "CHAIN",
            {"input.value": "q?", "output.value": '{"answer": "nine"}', "metadata": '{"case_id": 42}'},
            parent=None,
            status="ERROR",
            message="",
            events=[SpanEvent("exception", 5, {"exception.message": "boom"})],
        ),
        _span("k", "RERANKER", {**doc, "reranker.query": "q?"}, start=1),
    ]
    attempt = openinference_attempt(spans, "f.jsonl", 1)
    assert attempt.rounds == [SourceRound(hits=[SourceDoc(id="d9", text="nine")], candidates=[], query="q?", tool="k")]
    assert (attempt.answer, attempt.messages[-1], attempt.prompt) == (
        "nine",
        {"role": "assistant", "content": "nine"},
        None,
    )
    assert (attempt.case_key, attempt.status, attempt.error) == ("42", "error", "boom")
    assert openinference_attempt([], "f.jsonl", 2).reason == "a trace without spans"


@pytest.mark.parametrize(
    "value",
    [
        '{"messages": [{"type": "human", "data": {"content": "hi", "type": "human"}}]}',  # LangChain message dumps
        '{"messages": [["system", "be brief"], ["user", "hi"]]}',
        '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]',
        '{"question": {"text": "hi"}}',
    ],
)
def test_the_input_is_the_user_text_of_a_json_root_input(value: str) -> None:
    assert openinference_attempt([_span("r", "CHAIN", {"input.value": value}, parent=None)], "f", 1).input == "hi"


def test_a_legacy_function_call_is_a_tool_call() -> None:
    llm = _span(
        "l",
        "LLM",
        {
            "llm.output_messages.0.message.function_call_name": "lookup",
            "llm.output_messages.0.message.function_call_arguments_json": '{"id": 3}',
        },
        start=1,
    )
    attempt = openinference_attempt([_span("r", "CHAIN", {"input.value": "q"}, parent=None), llm], "f", 1)
    assert attempt.messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "l-0-0", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 3}'}}],
    }


# ---- end to end: a golden data root, the import, the pipeline ------------------------------------------------

_RAG = {"lanes": ["rag"], "expected_answer_contains": ["14 days"]}
GOLDEN = {
    **SUPPORT_CASES,
    "rag-rerank": {"input": "When are refunds issued?", "required_doc_ids": ["kb-refunds"], **_RAG},
    "rag-demoted": {"input": "When is a refund issued?", "required_doc_ids": ["kb-refunds"], **_RAG},
}


@pytest.fixture(scope="module")
def scored(otlp_file: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("golden")
    golden_root(root, "oi", CORPUS, GOLDEN)
    run = ImportRun(
        run_id="oi-1", data_root=root, dataset_version="golden-oi", environment_version="env-oi", corpus_version="kb-oi"
    )
    summary = import_otlp([otlp_file], run, Matching())
    code, warehouse, printed = evaluate(root, "oi-1")
    return summary, code, warehouse, printed


def _rows(warehouse, table: str, *columns: str) -> dict[str, tuple]:
    frame = warehouse.read(table, "oi-1")
    return {row["case_id"]: tuple(row[c] for c in columns) for row in frame.to_dicts()}


@pytest.mark.slow
def test_imported_traces_are_scored_in_their_lanes(scored) -> None:
    summary, code, warehouse, printed = scored
    assert (summary.traces, summary.cases, summary.rejects) == (7, 0, [])
    assert summary.incomplete == [
        {"trace_id": "oi-1:rag-broken#1", "reason": "RuntimeError: answer parser failed: quota exceeded"}
    ]
    assert code == 0, printed
    assert _rows(
        warehouse, "retrieval_scores", "first_hit_rank", "recall_at_10", "mrr", "n_retrieved", "failure_class", "status"
    ) == {
        "rag-refunds": (1, 1.0, 1.0, 1, None, "scored"),
        "rag-warranty": (None, 0.0, 0.0, 2, "embedding_miss", "scored"),
        "rag-rerank": (2, 1.0, 0.5, 2, None, "scored"),
        "rag-demoted": (None, 0.0, 0.0, 1, "reranker_demotion", "scored"),
        "rag-broken": (None, None, None, 1, None, "incomplete"),
    }
    assert _rows(warehouse, "context_scores", "context_recall", "context_precision", "n_chunks")["rag-rerank"] == (
        1.0,
        0.5,
        2,
    )
    assert _rows(
        warehouse, "tool_scores", "tool_call_precision", "tool_call_recall", "tool_call_f1", "n_calls", "missing_calls"
    ) == {
        "agent-refund": (1.0, 1.0, 1.0, 2, []),
        # its one call refunds 99, not 20: it equals no reference call, so 0 of 1 calls and 0 of 2 references match
        "agent-overpay": (
            0.0,
            0.0,
            0.0,
            1,
            ['lookup_order({"order_id":"A2"})', 'issue_refund({"amount":20,"order_id":"A2"})'],
        ),
    }
    assert _rows(warehouse, "outcome_scores", "input_tokens", "output_tokens")["agent-refund"] == (180, 18)
    assert _rows(warehouse, "attribution", "outcome", "first_failing_stage", "reason") == {
        "rag-warranty": (
            "fail",
            "retrieval",
            (
                "no relevant doc in the top 10; failure_class embedding_miss (kb-warranty); "
                "candidates not logged, so reranker_demotion could not be tested"
            ),
        ),
        # the reranker's input had the refunds document; its output dropped it
        "rag-demoted": (
            "fail",
            "retrieval",
            "no relevant doc in the top 10; failure_class reranker_demotion (kb-refunds)",
        ),
        "rag-broken": (
            "incomplete",
            None,
            "retrieval incomplete: harness status error: RuntimeError: answer parser failed: quota exceeded",
        ),
        "agent-overpay": (
            "fail",
            "tool_arguments",
            (
                'invalid calls: issue_refund({"amount":99,"order_id":"A2"}) '
                "(args match no reference call of issue_refund: amount 99, expected 20)"
            ),
        ),
    }


def test_read_in_a_second_process_the_import_is_byte_for_byte_the_same(otlp_file: Path, tmp_path: Path) -> None:
    """Large exports are read in a child process while this one writes: the run it writes is the same."""
    written = {}
    for child in (False, True):
        root = tmp_path / str(child)
        golden_root(root, "oi", CORPUS, GOLDEN)
        run = ImportRun(
            run_id="oi-1",
            data_root=root,
            dataset_version="golden-oi",
            environment_version="env-oi",
            corpus_version="kb-oi",
        )
        summary = import_otlp([otlp_file], run, Matching(), reader_process=child)
        written[child] = (
            summary.traces,
            summary.rejects,
            (root / "traces" / "oi-1" / "otlp.jsonl").read_bytes(),
            sorted(p.name for p in (root / "corpus").iterdir()),
        )
    assert written[True] == written[False] and written[True][0] == 7
