"""`import langfuse`: observations with the columns Langfuse documents for its blob-storage export (snake_case) and
its public API (camelCase). The `langfuse` package is not installed in the test environment and nothing may be
downloaded, so the rows are built here with exactly those field names and the payload shapes its integrations log
(LangChain `Document` dicts, OpenAI chat messages, LangChain tool calls, @observe's args/kwargs). The same rows are
read from JSONL, CSV and Parquet, field by field, then imported into a golden data root and scored."""

from __future__ import annotations

import dataclasses
import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import polars as pl
import pytest

from eval_pipeline.importers import ImportRun
from eval_pipeline.importers.langfuse import import_langfuse, read_langfuse
from eval_pipeline.importers.source import SourceAttempt, SourceDoc, SourceRound, Unreadable
from eval_pipeline_tests.importers.fixtures.pipeline_run import SUPPORT_CASES, evaluate, golden_root

CORPUS = {
    "kb-refunds": "Refunds are issued within 14 days of the return arriving at our warehouse.",
    "kb-shipping": "Standard shipping takes 3 to 5 business days.",
    "kb-returns": "Items can be returned within 30 days of delivery.",
    "kb-warranty": "Defective items are covered for two years, shipping included.",
}
SYSTEM = "Answer from the context only.\nContext:\n"
T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
T0_NS = int(T0.timestamp()) * 10**9


def _time(ms: int) -> str:
    """A timestamp as the blob-storage export writes it: `YYYY-MM-DD HH:MM:SS.ffffff`, UTC."""
    return (T0 + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")


def _obs(trace: str, obs_id: str, kind: str, name: str, start: int, end: int, **fields) -> dict:
    """One enriched-observation row (observations_v2/) with the documented columns."""
    return {
        "id": obs_id,
        "trace_id": trace,
        "project_id": "proj-1",
        "environment": "default",
        "type": kind,
        "name": name,
        "start_time": _time(start),
        "end_time": _time(end),
        "completion_start_time": None,
        "parent_observation_id": fields.pop("parent", None),
        "level": fields.pop("level", "DEFAULT"),
        "status_message": fields.pop("status_message", None),
        "version": None,
        "input": fields.pop("input", None),
        "output": fields.pop("output", None),
        "metadata": fields.pop("metadata", {}),
        "provided_model_name": fields.pop("model", None),
        "model_parameters": {},
        "usage_details": fields.pop("usage", {}),
        "cost_details": fields.pop("cost", {}),
        "trace_name": fields.pop("trace_name", "support-bot"),
        "user_id": None,
        "session_id": None,
        **fields,
    }


def _lc_doc(doc_id: str) -> dict:
    """A LangChain Document as Langfuse's LangChain handler logs a retriever's output."""
    return {
        "page_content": CORPUS[doc_id],
        "metadata": {"doc_id": doc_id, "source": "kb.md"},
        "type": "Document",
        "id": None,
    }


def _rag(trace: str, question: str, docs, answer: str, *, start: int, prompt_docs: list[str], **root) -> list[dict]:
    """A LangChain RAG chain: the chain's span, its retriever, its chat model."""
    top = f"{trace}-chain"
    messages = [
        {"role": "system", "content": SYSTEM + "\n".join(CORPUS[d] for d in prompt_docs)},
        {"role": "user", "content": question},
    ]
    return [
        _obs(
            trace,
            top,
            "SPAN",
            "RunnableSequence",
            start,
            start + 900,
            input={"input": question},
            output={"output": answer},
            **root,
        ),
        _obs(
            trace,
            f"{trace}-ret",
            "RETRIEVER",
            "VectorStoreRetriever",
            start + 10,
            start + 60,
            parent=top,
            input=question,
            output=docs,
        ),
        _obs(
            trace,
            f"{trace}-gen",
            "GENERATION",
            "ChatOpenAI",
            start + 100,
            start + 800,
            parent=top,
            input=messages,
            output={"role": "assistant", "content": answer},
            model="gpt-4o-mini",
            usage={"input": 40, "output": 8, "total": 48},
            cost={"input": 0.0004, "output": 0.00016, "total": 0.00056},
        ),
    ]


def _openai_calls(*calls: tuple[str, str, dict]) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls
        ],
    }


def _agent(trace: str, question: str, turns: list, *, start: int, metadata: dict) -> list[dict]:
    """A tool-calling agent: the agent's span, then per turn a generation and the tools it called."""
    top = f"{trace}-agent"
    rows = [
        _obs(
            trace,
            top,
            "AGENT",
            "support-agent",
            start,
            start + 100 * len(turns) + 50,
            input={"messages": [{"role": "user", "content": question}]},
            metadata=metadata,
        )
    ]
    for n, (output, tokens, tools) in enumerate(turns):
        at = start + 100 * n + 10
        rows.append(
            _obs(
                trace,
                f"{trace}-gen{n}",
                "GENERATION",
                "ChatOpenAI",
                at,
                at + 40,
                parent=top,
                input=[{"role": "user", "content": question}],
                output=output,
                model="gpt-4o-mini",
                usage={"input": tokens[0], "output": tokens[1], "total": sum(tokens)},
                cost={"total": 0.001},
            )
        )
        for m, (name, args, result) in enumerate(tools):
            rows.append(
                _obs(
                    trace,
                    f"{trace}-tool{n}{m}",
                    "TOOL",
                    name,
                    at + 50 + m,
                    at + 60 + m,
                    parent=top,
                    input=args,
                    output=result,
                )
            )
    return rows


REFUND_TURNS = [
    (
        _openai_calls(("call_a", "lookup_order", {"order_id": "A1"})),
        (50, 5),
        [("lookup_order", {"order_id": "A1"}, {"status": "delivered"})],
    ),
    (
        _openai_calls(("call_b", "issue_refund", {"order_id": "A1", "amount": 20.0})),
        (60, 6),
        [("issue_refund", {"order_id": "A1", "amount": 20.0}, "refunded 20.0 on A1")],
    ),
    ({"role": "assistant", "content": "Refunded 20 on A1."}, (70, 7), []),
]
# LangChain's form: the call as {name, args, id}, the tool's input as the Python dict text the handler logs, its
# output a ToolMessage
OVERPAY_TURNS = [
    (
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "name": "issue_refund",
                    "args": {"order_id": "A2", "amount": 99.0},
                    "id": "call_c",
                    "type": "tool_call",
                }
            ],
        },
        (40, 4),
        [
            (
                "issue_refund",
                "{'order_id': 'A2', 'amount': 99.0}",
                {"content": "refunded 99.0 on A2", "tool_call_id": "call_c", "type": "tool"},
            )
        ],
    ),
    ({"role": "assistant", "content": "Refunded 99 on A2."}, (45, 5), []),
]


def _export_rows() -> list[dict]:
    """The export: eight traces (one errors, one meets no case) and an observation without a trace id."""
    return [
        # the repeat of rag-refunds that started later comes first in the file: it is attempt 2
        *_rag(
            "t-late",
            "How long do refunds take?",
            [_lc_doc("kb-shipping"), _lc_doc("kb-refunds")],
            "Within 14 days.",
            start=60_000,
            prompt_docs=["kb-shipping", "kb-refunds"],
            metadata={"case_id": "rag-refunds"},
        ),
        *_rag(
            "t-early",
            "How long do refunds take?",
            [_lc_doc("kb-refunds"), _lc_doc("kb-shipping")],
            "Within 14 days.",
            start=0,
            prompt_docs=["kb-refunds"],
            metadata={"case_id": "rag-refunds"},
        ),
        # no case id: it meets its case by its input; the documents under `documents` with their ids and scores
        *_rag(
            "t-warranty",
            "Is shipping free for defective items?",
            {
                "documents": [
                    {"id": "kb-shipping", "content": CORPUS["kb-shipping"], "score": 0.71},
                    {"id": "kb-returns", "content": CORPUS["kb-returns"], "score": 0.42},
                ]
            },
            "Shipping takes 3 to 5 days.",
            start=1_000,
            prompt_docs=["kb-shipping"],
        ),
        *_rag(
            "t-broken",
            "How long does shipping take?",
            [_lc_doc("kb-shipping")],
            "3 to 5 days",
            start=2_000,
            prompt_docs=["kb-shipping"],
            level="ERROR",
            status_message="RateLimitError: quota exceeded",
        ),
        *_agent("t-refund", "Refund 20 on order A1", REFUND_TURNS, start=3_000, metadata={"case_id": "agent-refund"}),
        # the case id where Langfuse's OpenTelemetry endpoint keeps span attributes
        *_agent(
            "t-overpay",
            "Refund 20 on order A2",
            OVERPAY_TURNS,
            start=4_000,
            metadata={"attributes": {"eval.case_id": "agent-overpay"}},
        ),
        *_rag(
            "t-stray",
            "What is the meaning of life?",
            [],
            "42",
            start=5_000,
            prompt_docs=[],
            metadata={"case_id": "nope"},
        ),
        {**_obs("t-x", "orphan", "EVENT", "log", 6_000, 6_000), "trace_id": None},
    ]


def _table(rows: list[dict]) -> pl.DataFrame:
    """The rows as the CSV and Parquet exports hold them: input, output, metadata and the detail maps as JSON text."""
    return pl.DataFrame(
        [{k: orjson.dumps(v).decode() if isinstance(v, dict | list) else v for k, v in r.items()} for r in rows],
        infer_schema_length=None,
    )


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same export as JSONL, gzip JSONL, CSV and Parquet (with typed timestamps)."""
    folder, rows = tmp_path_factory.mktemp("langfuse"), _export_rows()
    jsonl = folder / "observations.jsonl"
    jsonl.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    (folder / "observations.jsonl.gz").write_bytes(gzip.compress(jsonl.read_bytes()))
    _table(rows).write_csv(folder / "observations.csv")
    timed = _table(rows).with_columns(
        pl.col("start_time", "end_time").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_zone="UTC")
    )
    timed.write_parquet(folder / "observations.parquet")
    return {
        "jsonl": jsonl,
        "gz": folder / "observations.jsonl.gz",
        "csv": folder / "observations.csv",
        "parquet": folder / "observations.parquet",
    }


@pytest.fixture(scope="module")
def attempts(exports: dict[str, Path]) -> dict[str, SourceAttempt]:
    return {a.key: a for a in read_langfuse(exports["jsonl"]) if isinstance(a, SourceAttempt)}


def _anonymous(read: list) -> list:
    return [dataclasses.replace(a, source_file="-") for a in read]


def test_jsonl_csv_parquet_and_gzip_read_the_same(exports: dict[str, Path]) -> None:
    read = {kind: _anonymous(list(read_langfuse(path))) for kind, path in exports.items()}
    assert len(read["jsonl"]) == 8
    assert read["csv"] == read["jsonl"]
    assert read["parquet"] == read["jsonl"]
    assert read["gz"] == read["jsonl"]
    # the orphan observation (row 26 of the file) names no trace
    assert [a for a in read["jsonl"] if isinstance(a, Unreadable)] == [
        Unreadable("-", 26, "an observation without a trace_id")
    ]


def test_a_rag_chain_is_one_round_with_its_prompt_answer_and_usage(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["t-early"]
    assert (attempt.record, attempt.started_ns, attempt.case_key, attempt.input) == (
        4,
        T0_NS,
        "rag-refunds",
        "How long do refunds take?",
    )
    assert attempt.rounds == [
        SourceRound(
            hits=[
                SourceDoc(text=CORPUS["kb-refunds"], metadata={"doc_id": "kb-refunds", "source": "kb.md"}),
                SourceDoc(text=CORPUS["kb-shipping"], metadata={"doc_id": "kb-shipping", "source": "kb.md"}),
            ],
            query="How long do refunds take?",
            tool="VectorStoreRetriever",
        )
    ]
    assert attempt.prompt == f"{SYSTEM}{CORPUS['kb-refunds']}\nHow long do refunds take?"
    assert (attempt.answer, attempt.context, attempt.status, attempt.error) == ("Within 14 days.", None, "ok", None)
    assert attempt.messages == [
        {"role": "user", "content": "How long do refunds take?"},
        {"role": "assistant", "content": "Within 14 days.", "tool_calls": []},
    ]
    # the chain's span runs 900 ms from its start; the generation's details are the only usage
    assert attempt.usage == {"input_tokens": 40, "output_tokens": 8, "cost_usd": 0.00056, "latency_ms": 900.0}
    assert attempts["t-late"].started_ns == T0_NS + 60 * 10**9


def test_documents_with_ids_and_scores_under_a_documents_field(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["t-warranty"]
    assert attempt.case_key is None and attempt.input == "Is shipping free for defective items?"
    assert [(d.id, d.text, d.score) for d in attempt.rounds[0].hits] == [
        ("kb-shipping", CORPUS["kb-shipping"], 0.71),
        ("kb-returns", CORPUS["kb-returns"], 0.42),
    ]


def test_an_error_root_is_an_error_attempt(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["t-broken"]
    assert (attempt.status, attempt.error, attempt.answer) == ("error", "RateLimitError: quota exceeded", "3 to 5 days")


def test_agent_calls_from_the_generations_answered_by_the_tool_observations(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["t-refund"]
    call_a, call_b = (REFUND_TURNS[0][0]["tool_calls"][0], REFUND_TURNS[1][0]["tool_calls"][0])
    assert attempt.messages == [
        {"role": "user", "content": "Refund 20 on order A1"},
        {"role": "assistant", "content": None, "tool_calls": [call_a]},
        {"role": "tool", "tool_call_id": "call_a", "content": '{"status":"delivered"}'},
        {"role": "assistant", "content": None, "tool_calls": [call_b]},
        {"role": "tool", "tool_call_id": "call_b", "content": "refunded 20.0 on A1"},
        {"role": "assistant", "content": "Refunded 20 on A1.", "tool_calls": []},
    ]
    assert (attempt.case_key, attempt.input, attempt.answer, attempt.rounds) == (
        "agent-refund",
        "Refund 20 on order A1",
        "Refunded 20 on A1.",
        [],
    )
    # 50+60+70 and 5+6+7 tokens, 0.001 dollars per generation, the agent's span 350 ms
    assert attempt.usage == {
        "input_tokens": 180,
        "output_tokens": 18,
        "cost_usd": pytest.approx(0.003),
        "latency_ms": 350.0,
    }


def test_langchain_tool_calls_become_openai_calls(attempts: dict[str, SourceAttempt]) -> None:
    attempt = attempts["t-overpay"]
    assert attempt.case_key == "agent-overpay"
    assert attempt.messages[1:3] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "issue_refund", "arguments": {"order_id": "A2", "amount": 99.0}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": "refunded 99.0 on A2"},
    ]


# ---- shapes the export above does not hold ------------------------------------------------------------------------


def _read(tmp_path: Path, rows: list, *, name: str = "obs.jsonl", **options) -> list:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return list(read_langfuse(path, **options))


def test_doc_path_names_the_documents_field(tmp_path: Path) -> None:
    output = {"data": {"matches": [{"id": "kb-refunds", "score": 0.9, "metadata": {"text": CORPUS["kb-refunds"]}}]}}
    rows = [_obs("t", "r", "RETRIEVER", "pinecone", 0, 10, input={"query": "refunds?"}, output=output)]
    (attempt,) = _read(tmp_path, rows, doc_path="data.matches")
    assert attempt.rounds == [
        SourceRound(
            hits=[
                SourceDoc(
                    id="kb-refunds", text=CORPUS["kb-refunds"], score=0.9, metadata={"text": CORPUS["kb-refunds"]}
                )
            ],
            query="refunds?",
            tool="pinecone",
        )
    ]
    (unnamed,) = _read(tmp_path, rows)
    assert (unnamed.rounds, unnamed.defects) == (
        [],
        ["retriever pinecone: its output holds no documents list (name its field with --doc-path)"],
    )
    (wrong,) = _read(tmp_path, rows, doc_path="data.hits")
    assert wrong.defects == ["retriever pinecone: its output holds no list at 'data.hits'"]


def test_llamaindex_nodes_plain_strings_and_unreadable_documents(tmp_path: Path) -> None:
    nodes = {"nodes": [{"node": {"id_": "n-1", "text": "first", "metadata": {}}, "score": 0.5}, "second", 7]}
    (attempt,) = _read(tmp_path, [_obs("t", "r", "SPAN", "VectorIndexRetriever", 0, 10, input="q", output=nodes)])
    assert attempt.rounds[0].hits == [SourceDoc(id="n-1", text="first", score=0.5), SourceDoc(text="second")]
    assert attempt.defects == ["retriever VectorIndexRetriever: document 3 (int) has no id, text or metadata"]


def test_the_api_page_in_camel_case_with_legacy_usage(tmp_path: Path) -> None:
    page = {
        "data": [
            {
                "id": "g",
                "traceId": "t9",
                "type": "GENERATION",
                "name": "llm",
                "startTime": "2026-03-02T09:30:00.250Z",
                "endTime": "2026-03-02T09:30:01.000Z",
                "parentObservationId": "root",
                "level": "DEFAULT",
                "input": {"messages": [{"role": "user", "content": "q9"}], "tools": []},
                "output": {"choices": [{"message": {"role": "assistant", "content": "a9"}}]},
                "usage": {"input": 10, "output": 2, "total": 12, "unit": "TOKENS"},
                "calculatedTotalCost": 0.25,
            },
            {
                "id": "root",
                "traceId": "t9",
                "type": "SPAN",
                "name": "app",
                "startTime": "2026-03-02T10:30:00+01:00",
                "endTime": "2026-03-02T09:30:02Z",
                "metadata": {"case_id": 9},
                "input": {"args": ["q9"], "kwargs": {}},
            },
        ],
        "meta": {"page": 1},
    }
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page, indent=2))
    (attempt,) = read_langfuse(path)
    assert (attempt.key, attempt.record, attempt.case_key, attempt.input, attempt.answer) == ("t9", 1, "9", "q9", "a9")
    assert attempt.started_ns == T0_NS
    assert attempt.usage == {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.25, "latency_ms": 2000.0}
    assert attempt.prompt == "q9"


def test_a_trace_download_with_its_observations_and_tools_without_a_generation(tmp_path: Path) -> None:
    trace = {
        "id": "t5",
        "name": "weather",
        "input": "Weather in Paris?",
        "output": "Sunny.",
        "metadata": {"case_id": "w-1"},
        "observations": [
            _obs(
                "t5",
                "a",
                "TOOL",
                "get_weather",
                10,
                20,
                input={"args": [], "kwargs": {"city": "Paris"}},
                output="sunny",
            ),
            _obs(
                "t5", "b", "TOOL", "get_alerts", 30, 40, input="Paris", level="ERROR", status_message="Error: no feed"
            ),
        ],
    }
    (attempt,) = _read(tmp_path, [trace], name="trace.json")
    assert (attempt.case_key, attempt.input, attempt.answer, attempt.prompt) == (
        "w-1",
        "Weather in Paris?",
        "Sunny.",
        None,
    )
    assert attempt.messages == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "b", "type": "function", "function": {"name": "get_alerts", "arguments": {"input": "Paris"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "Error: no feed", "error": True},
    ]
    assert attempt.status == "ok"  # a failing tool is the call's error, not the attempt's


def test_unreadable_rows_are_rejects_and_their_trace_says_so(tmp_path: Path) -> None:
    good = _obs("t1", "g", "GENERATION", "llm", 0, 10, output="fine")
    read = _read(
        tmp_path,
        [
            good,
            "{not json",
            "[1, 2]",
            {**good, "id": "bad", "start_time": "yesterday"},
            {"name": "x"},
            {**good, "trace_id": "t2", "id": None},
        ],
    )
    assert [(u.record, u.reason, u.trace_id) for u in read if isinstance(u, Unreadable)] == [
        # in Python's JSON reader's words, never orjson's ("unexpected character, expected a string key")
        (2, "invalid JSON: Expecting property name enclosed in double quotes at column 2", None),
        (3, "not a JSON object: a list", None),
        (5, "a row with no trace_id, type or id: neither an observation nor a trace", None),
        (4, "observation bad: 'yesterday' is not a timestamp", "t1"),
        (6, "an observation without an id", "t2"),
    ]
    (attempt,) = [a for a in read if isinstance(a, SourceAttempt)]
    assert (attempt.key, attempt.answer, attempt.defects) == (
        "t1",
        "fine",
        ["row 4 could not be read: observation bad: 'yesterday' is not a timestamp"],
    )


def test_values_of_a_shape_the_reader_does_not_expect_make_their_trace_a_reject_not_a_crash(tmp_path: Path) -> None:
    good = _obs("t1", "g", "GENERATION", "llm", 0, 10, output="fine")
    odd = [
        _obs("t2", "a", "GENERATION", "llm", 0, 10, output="x") | {"input": {"kwargs": ["x"]}},
        _obs("t3", "b", "GENERATION", "llm", 0, 10, output={"content": "x", "additional_kwargs": "oops"}),
    ]
    read = _read(tmp_path, [good, *odd])
    assert [(u.record, u.trace_id, u.reason.split(":")[0]) for u in read if isinstance(u, Unreadable)] == [
        (2, "t2", "trace t2 could not be read"),
        (3, "t3", "trace t3 could not be read"),
    ]
    assert [a.key for a in read if isinstance(a, SourceAttempt)] == ["t1"]


# ---- end to end: a golden data root, the import, the pipeline ------------------------------------------------------


@pytest.fixture(scope="module")
def scored(exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("golden")
    golden_root(root, "lf", CORPUS, SUPPORT_CASES)
    run = ImportRun(
        run_id="lf-1", data_root=root, dataset_version="golden-lf", environment_version="env-lf", corpus_version="kb-lf"
    )
    summary = import_langfuse(exports["parquet"], run)
    code, warehouse, printed = evaluate(root, "lf-1")
    return summary, code, warehouse, printed


def _rows(warehouse, table: str, *columns: str) -> dict[str, tuple]:
    return {
        row["trace_id"].removeprefix("lf-1:"): tuple(row[c] for c in columns)
        for row in warehouse.read(table, "lf-1").to_dicts()
    }


@pytest.mark.slow
def test_imported_traces_are_scored_in_their_lanes(scored) -> None:
    summary, code, warehouse, printed = scored
    assert (summary.records, summary.traces, summary.cases) == (8, 6, 0)
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (23, "its case_id 'nope' is no case of the dataset, and no case has its input text (28 characters)"),
        (26, "an observation without a trace_id"),
    ]
    assert summary.incomplete == [{"trace_id": "lf-1:rag-broken#1", "reason": "RateLimitError: quota exceeded"}]
    assert code == 0, printed
    assert _rows(
        warehouse, "retrieval_scores", "first_hit_rank", "recall_at_10", "mrr", "n_retrieved", "failure_class", "status"
    ) == {
        "rag-refunds#1": (1, 1.0, 1.0, 2, None, "scored"),  # t-early, second in the file, started first
        "rag-refunds#2": (2, 1.0, 0.5, 2, None, "scored"),
        "rag-warranty#1": (None, 0.0, 0.0, 2, "embedding_miss", "scored"),
        "rag-broken#1": (None, None, None, 1, None, "incomplete"),
    }
    # the prompt of attempt 1 holds the refunds document only, that of attempt 2 both retrieved documents
    assert {
        k: v
        for k, v in _rows(warehouse, "context_scores", "context_recall", "context_precision", "n_chunks").items()
        if k.startswith("rag-refunds")
    } == {"rag-refunds#1": (1.0, 1.0, 1), "rag-refunds#2": (1.0, 0.5, 2)}
    assert _rows(
        warehouse, "tool_scores", "tool_call_precision", "tool_call_recall", "tool_call_f1", "n_calls", "missing_calls"
    ) == {
        "agent-refund#1": (1.0, 1.0, 1.0, 2, []),
        "agent-overpay#1": (
            0.0,
            0.0,
            0.0,
            1,
            ['lookup_order({"order_id":"A2"})', 'issue_refund({"amount":20,"order_id":"A2"})'],
        ),
    }
    assert _rows(warehouse, "outcome_scores", "input_tokens", "output_tokens")["agent-refund#1"] == (180, 18)
    # attribution lists the attempts that did not pass: the refunds, the refund agent pass
    assert _rows(warehouse, "attribution", "outcome", "first_failing_stage", "reason") == {
        "rag-warranty#1": (
            "fail",
            "retrieval",
            "no relevant doc in the top 10; failure_class embedding_miss (kb-warranty); "
            "candidates not logged, so reranker_demotion could not be tested",
        ),
        "rag-broken#1": (
            "incomplete",
            None,
            "retrieval incomplete: harness status error: RateLimitError: quota exceeded",
        ),
        "agent-overpay#1": (
            "fail",
            "tool_arguments",
            'invalid calls: issue_refund({"amount":99,"order_id":"A2"}) '
            "(args match no reference call of issue_refund: amount 99, expected 20)",
        ),
    }
