"""import ragas / import deepeval: rows written the way Ragas' EvaluationDataset.to_jsonl/to_csv and DeepEval's
EvaluationDataset.save_as write them (the libraries are not installed: the writers below repeat what their code does,
with the field names and shapes of ragas.dataset_schema / ragas.messages and deepeval.dataset / deepeval.test_case),
read field by field, then imported and scored by the whole pipeline with and without golden cases."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.importers import ImportRun, Matching
from eval_pipeline.importers.common import ImporterError
from eval_pipeline.importers.doc_ids import digest_id
from eval_pipeline.importers.flat_rows import (
    import_deepeval,
    import_ragas,
    read_deepeval,
    read_ragas,
)
from eval_pipeline.importers.source import SourceDoc, SourceRound, Unreadable
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline

REFUNDS = "Refunds of annual plans are possible within 30 days of purchase."
SHIPPING = "Orders ship within 5 business days."
WARRANTY = "Hardware carries a two-year warranty."
ORDER_CALLS = [
    {"name": "get_order", "args": {"order_id": "7"}},
    {"name": "issue_refund", "args": {"order_id": "7", "amount": 49.0}},
]


# ---------------------------------------------------------------- the libraries' writers


def ragas_to_jsonl(path: Path, samples: list[dict]) -> Path:
    """EvaluationDataset.to_jsonl: each sample's to_dict() (fields that are None left out), one JSON object a line."""
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples), encoding="utf-8")
    return path


def ragas_to_csv(path: Path, samples: list[dict]) -> Path:
    """EvaluationDataset.to_csv: csv.DictWriter over the first sample's keys; lists and dicts become their str()."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=samples[0].keys())
        writer.writeheader()
        for row in samples:
            writer.writerow(row)
    return path


def deepeval_tool(name: str, params: dict | None = None, output=None) -> dict:
    """ToolCall.model_dump(by_alias=True, exclude_none=True, mode="json").

    That is how save_as dumps tools_called/expected_tools.
    """
    dumped = {"name": name, "type": "FUNCTION"}
    if output is not None:
        dumped["output"] = output
    if params is not None:
        dumped["inputParameters"] = params
    return dumped


DEEPEVAL_COLUMNS = (
    "input",
    "actual_output",
    "expected_output",
    "retrieval_context",
    "context",
    "name",
    "comments",
    "source_file",
    "tools_called",
    "expected_tools",
    "additional_metadata",
    "custom_column_key_values",
)


def deepeval_golden(**fields) -> dict:
    return {column: fields.get(column) for column in DEEPEVAL_COLUMNS}


def deepeval_save_as_json(path: Path, goldens: list[dict]) -> Path:
    """EvaluationDataset.save_as(file_type="json"): a JSON array of goldens, indent 4."""
    path.write_text(json.dumps(goldens, indent=4, ensure_ascii=False), encoding="utf-8")
    return path


def _joined(value: list[str] | None) -> str | None:
    return None if value is None else "|".join(value)


def deepeval_save_as_jsonl(path: Path, goldens: list[dict]) -> Path:
    """save_as(file_type="jsonl"): one golden a line, context and retrieval_context joined with `|`."""
    lines = [
        json.dumps(
            {**g, "retrieval_context": _joined(g["retrieval_context"]), "context": _joined(g["context"])},
            ensure_ascii=False,
        )
        for g in goldens
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def deepeval_save_as_csv(path: Path, goldens: list[dict]) -> Path:
    """save_as(file_type="csv"): contexts joined with `|`, tools and metadata as JSON text, None as an empty cell."""

    def dumped(value):
        return None if value is None else json.dumps(value, ensure_ascii=False)

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(DEEPEVAL_COLUMNS)
        for g in goldens:
            writer.writerow(
                [
                    g["input"],
                    g["actual_output"],
                    g["expected_output"],
                    _joined(g["retrieval_context"]),
                    _joined(g["context"]),
                    g["name"],
                    g["comments"],
                    g["source_file"],
                    dumped(g["tools_called"]) if g["tools_called"] else None,
                    dumped(g["expected_tools"]) if g["expected_tools"] else None,
                    dumped(g["additional_metadata"]),
                    dumped(g["custom_column_key_values"]),
                ]
            )
    return path


def single_turn(user_input: str, **fields) -> dict:
    return {"user_input": user_input, **fields}


def multi_turn(question: str, calls: list[dict], results: list[str], answer: str, **fields) -> dict:
    """A MultiTurnSample.to_dict(): human, ai (with tool_calls), one tool message per call, ai."""
    turns = [{"content": question, "type": "human"}, {"content": "", "type": "ai", "tool_calls": calls}]
    turns += [{"content": r, "type": "tool"} for r in results] + [{"content": answer, "type": "ai"}]
    return {"user_input": turns, **fields}


def assert_same_attempts(got: list, want: list) -> None:
    """The attempts read from two files of one dataset are equal but for their file and record numbers."""
    for attempt, expected in zip(got, want, strict=True):
        attempt.source_file, attempt.record = expected.source_file, expected.record
        assert attempt == expected


# ---------------------------------------------------------------- Ragas rows, field by field


RAGAS_SINGLE = single_turn(
    "How long can I get a refund?",
    retrieved_contexts=[SHIPPING, REFUNDS],
    reference_contexts=[REFUNDS],
    retrieved_context_ids=["kb/shipping", 12],
    reference_context_ids=[12],
    response="Within 30 days.",
    multi_responses=["Within 30 days.", "30 days."],
    reference="30 days from purchase.",
    rubrics={"score1": "wrong"},
)


def test_ragas_single_turn_row_field_by_field(tmp_path):
    (attempt,) = read_ragas(ragas_to_jsonl(tmp_path / "ds.jsonl", [RAGAS_SINGLE]))
    hits = [SourceDoc(id="kb/shipping", text=SHIPPING), SourceDoc(id="12", text=REFUNDS)]
    assert (attempt.source_file, attempt.record, attempt.case_key) == (str(tmp_path / "ds.jsonl"), 1, None)
    assert attempt.input == "How long can I get a refund?"
    assert attempt.rounds == [SourceRound(hits=hits)]
    assert attempt.context == hits
    assert (attempt.answer, attempt.reference_answer) == ("Within 30 days.", "30 days from purchase.")
    assert attempt.reference_docs == [SourceDoc(id="12", text=REFUNDS)]
    assert (attempt.messages, attempt.reference_tool_calls, attempt.tool_match, attempt.defects) == (
        None,
        None,
        None,
        [],
    )


def test_ragas_texts_without_ids_and_the_case_key_field(tmp_path):
    row = single_turn("Q?", retrieved_contexts=[WARRANTY], reference_contexts=[SHIPPING], case_id="case-9")
    (attempt,) = read_ragas(ragas_to_jsonl(tmp_path / "ds.jsonl", [row]))
    assert attempt.rounds == [SourceRound(hits=[SourceDoc(text=WARRANTY)])]
    assert attempt.reference_docs == [SourceDoc(text=SHIPPING)]
    assert attempt.case_key == "case-9"
    (keyed,) = read_ragas(ragas_to_jsonl(tmp_path / "k.jsonl", [{**row, "qid": 31}]), case_key="qid")
    assert keyed.case_key == "31"


def test_ragas_multi_turn_row_becomes_openai_messages(tmp_path):
    row = multi_turn(
        "Refund order 7",
        ORDER_CALLS,
        ['{"order_id": "7"}', "refunded"],
        "Done.",
        reference="Refund issued.",
        reference_tool_calls=ORDER_CALLS,
        reference_topics=["billing"],
    )
    (attempt,) = read_ragas(ragas_to_jsonl(tmp_path / "mt.jsonl", [row]))
    assert attempt.messages == [
        {"role": "user", "content": "Refund order 7"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": {"order_id": "7"}}},
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "issue_refund", "arguments": {"order_id": "7", "amount": 49.0}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"order_id": "7"}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "refunded"},
        {"role": "assistant", "content": "Done."},
    ]
    assert (attempt.input, attempt.answer, attempt.reference_answer) == ("Refund order 7", "Done.", "Refund issued.")
    assert attempt.reference_tool_calls == ORDER_CALLS
    assert attempt.tool_match == "strict_order"  # Ragas ToolCallAccuracy: strict_order=True by default
    assert (attempt.rounds, attempt.context, attempt.defects) == ([], None, [])


def test_ragas_tool_message_without_an_open_call_is_a_defect(tmp_path):
    row = multi_turn("Refund order 7", ORDER_CALLS[:1], ["order", "extra"], "Done.")
    (attempt,) = read_ragas(ragas_to_jsonl(tmp_path / "mt.jsonl", [row]))
    assert attempt.defects == ["message 4: a tool message with no tool call left to answer"]
    assert [m["role"] for m in attempt.messages] == ["user", "assistant", "tool", "assistant"]
    assert (attempt.reference_tool_calls, attempt.tool_match) == (None, None)


def test_ragas_csv_reads_like_jsonl(tmp_path):
    """to_csv writes str() of lists and dicts (Python literals); a cell with a line break spans two lines."""
    rows = [
        {**RAGAS_SINGLE, "response": "Within 30 days.\nSee the policy."},
        single_turn("Second?", retrieved_contexts=["It's 5 days."], response="5"),
    ]
    from_csv = list(read_ragas(ragas_to_csv(tmp_path / "ds.csv", rows)))
    from_jsonl = list(read_ragas(ragas_to_jsonl(tmp_path / "ds.jsonl", rows)))
    assert [a.record for a in from_csv] == [2, 4]  # the line each row starts on; the header is line 1
    assert_same_attempts(from_csv, from_jsonl)
    assert from_csv[1].reference_docs is None and from_csv[1].reference_answer is None  # empty cells: absent fields
    turns = [
        multi_turn(
            "Refund order 7", ORDER_CALLS, ["{'order_id': '7'}", "ok"], "Done.", reference_tool_calls=ORDER_CALLS
        )
    ]
    (multi,) = read_ragas(ragas_to_csv(tmp_path / "mt.csv", turns))
    (same,) = read_ragas(ragas_to_jsonl(tmp_path / "mt.jsonl", turns))
    assert (multi.messages, multi.reference_tool_calls, multi.tool_match) == (
        same.messages,
        ORDER_CALLS,
        "strict_order",
    )


def test_ragas_csv_row_with_more_cells_than_the_header_is_a_reject(tmp_path):
    path = tmp_path / "ds.csv"
    path.write_text('user_input,response\n"Q1",A1\n"Q2",A2,surplus\n')
    refused, attempt = read_ragas(path)
    assert (refused.record, refused.reason) == (3, "the row has 1 cells more than the header")
    assert (attempt.record, attempt.input, attempt.answer) == (2, "Q1", "A1")


def test_ragas_json_array(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps([RAGAS_SINGLE, single_turn("Other?")], indent=2))
    assert [(a.record, a.input) for a in read_ragas(path)] == [(1, RAGAS_SINGLE["user_input"]), (2, "Other?")]


def test_ragas_rows_it_cannot_read_are_rejects_with_reasons(tmp_path):
    rows = [
        {"response": "no question"},
        single_turn("Q", retrieved_contexts="not a list"),
        single_turn("Q", retrieved_contexts=[SHIPPING], retrieved_context_ids=["a", "b"]),
        {"user_input": 42},
        single_turn("Q", response=["a list"]),
        {"user_input": [{"content": "hi", "type": "system"}]},
        {"user_input": [{"content": "x", "type": "ai"}]},
        multi_turn("Q", [{"args": {}}], [], "A"),
        multi_turn("Q", ORDER_CALLS, [], "A", reference_tool_calls=[{"name": "x", "args": "text"}]),
        single_turn("Q", reference_context_ids=[True]),
    ]
    path = ragas_to_jsonl(tmp_path / "bad.jsonl", rows)
    with path.open("a") as handle:
        handle.write("[1, 2]\n{broken\n")
    assert [(r.record, r.reason) for r in read_ragas(path) if isinstance(r, Unreadable)] == [
        (12, "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
        (1, "no user_input"),
        (2, "retrieved_contexts is not a list of strings"),
        (3, "retrieved_context_ids has 2 ids for 1 contexts"),
        (4, "user_input is a int, not a string or a message list"),
        (5, "response is a list, not a string"),
        (6, "user_input message 1 has type 'system', not human, ai or tool"),
        (7, "user_input has no human message"),
        (8, "user_input message 2: a tool call without a name"),
        (9, "reference_tool_calls arguments are a str, not an object"),
        (10, "reference_context_ids is not a list of strings or integers"),
        (11, "the row is a list, not an object"),
    ]


def test_a_missing_file_is_refused_before_any_row(tmp_path):
    with pytest.raises(ImporterError, match="no such file"):
        read_ragas(tmp_path / "absent.jsonl")
    with pytest.raises(ImporterError, match="no such file"):
        read_deepeval(tmp_path / "absent.json")


# ---------------------------------------------------------------- DeepEval rows, field by field


DEEPEVAL_RAG = deepeval_golden(
    input="How long can I get a refund?",
    actual_output="Within 30 days.",
    expected_output="30 days from purchase.",
    retrieval_context=[SHIPPING, f"deepeval_source=kb/refunds,deepeval_context={REFUNDS}"],
    context=[REFUNDS],
    name="refund-window",
    additional_metadata={"case_id": "case-1", "team": "billing"},
)
DEEPEVAL_TOOLS = deepeval_golden(
    input="Refund order 7",
    actual_output="Refunded.",
    tools_called=[
        deepeval_tool("get_order", {"order_id": "7"}, {"order_id": "7", "amount": 49.0}),
        deepeval_tool("issue_refund", {"order_id": "7", "amount": 49.0}, "ok"),
    ],
    expected_tools=[
        deepeval_tool("issue_refund", {"order_id": "7", "amount": 49.0}),
        deepeval_tool("get_order", {"order_id": "7"}),
    ],
)


def test_deepeval_json_rag_row_field_by_field(tmp_path):
    (attempt,) = read_deepeval(deepeval_save_as_json(tmp_path / "cases.json", [DEEPEVAL_RAG]))
    hits = [SourceDoc(text=SHIPPING), SourceDoc(text=REFUNDS, metadata={"source": "kb/refunds"})]
    assert (attempt.record, attempt.key, attempt.case_key) == (1, "refund-window", "case-1")
    assert attempt.input == "How long can I get a refund?"
    assert attempt.rounds == [SourceRound(hits=hits)] and attempt.context == hits
    assert (attempt.answer, attempt.reference_answer) == ("Within 30 days.", "30 days from purchase.")
    assert attempt.reference_docs == [SourceDoc(text=REFUNDS)]
    assert (attempt.messages, attempt.reference_tool_calls, attempt.tool_match, attempt.usage) == (
        None,
        None,
        None,
        None,
    )


def test_deepeval_tool_calls_become_messages_with_results(tmp_path):
    (attempt,) = read_deepeval(deepeval_save_as_json(tmp_path / "cases.json", [DEEPEVAL_TOOLS]))
    assert attempt.messages == [
        {"role": "user", "content": "Refund order 7"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": {"order_id": "7"}}},
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "issue_refund", "arguments": {"order_id": "7", "amount": 49.0}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"order_id": "7", "amount": 49.0}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
        {"role": "assistant", "content": "Refunded."},
    ]
    assert attempt.reference_tool_calls == [ORDER_CALLS[1], ORDER_CALLS[0]]
    assert attempt.tool_match == "unordered"  # DeepEval ToolCorrectnessMetric: should_consider_ordering=False
    assert (attempt.rounds, attempt.context, attempt.reference_docs) == ([], None, None)


def test_deepeval_jsonl_csv_and_test_case_containers_read_like_json(tmp_path):
    goldens = [DEEPEVAL_RAG, DEEPEVAL_TOOLS]
    expected = list(read_deepeval(deepeval_save_as_json(tmp_path / "cases.json", goldens)))
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"test_cases": goldens}))
    for path, records in (
        (deepeval_save_as_jsonl(tmp_path / "cases.jsonl", goldens), [1, 2]),
        (deepeval_save_as_csv(tmp_path / "cases.csv", goldens), [2, 3]),
        (wrapped, [1, 2]),
    ):
        attempts = list(read_deepeval(path))
        assert [a.record for a in attempts] == records
        assert_same_attempts(attempts, expected)


def test_deepeval_camel_case_test_run_fields_and_usage(tmp_path):
    """A test run's test cases (deepeval.test_run) use the camelCase aliases that LLMTestCase also accepts."""
    case = {
        "name": "t1",
        "input": "Q?",
        "actualOutput": "A",
        "expectedOutput": "B",
        "retrievalContext": [SHIPPING],
        "context": [SHIPPING],
        "toolsCalled": [deepeval_tool("get_order", {"order_id": "7"})],
        "expectedTools": [deepeval_tool("get_order", {"order_id": "7"})],
        "additionalMetadata": {"case_id": "c-2"},
        "tokenCost": 0.002,
        "completionTime": 1.5,
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"testCases": [case]}))
    (attempt,) = read_deepeval(path)
    assert (attempt.input, attempt.answer, attempt.reference_answer, attempt.case_key) == ("Q?", "A", "B", "c-2")
    assert attempt.rounds == [SourceRound(hits=[SourceDoc(text=SHIPPING)])]
    assert attempt.reference_tool_calls == [ORDER_CALLS[0]]
    assert [m["role"] for m in attempt.messages] == ["user", "assistant", "assistant"]  # no output: no tool message
    assert attempt.usage == {"cost_usd": 0.002, "latency_ms": 1500.0}


def test_deepeval_rows_it_cannot_read_are_rejects_with_reasons(tmp_path):
    rows = [
        deepeval_golden(actual_output="no input"),
        {"scenario": "A user asks for a refund", "turns": [], "expected_outcome": "refunded"},
        {"turns": [{"role": "user", "content": "Refund me"}], "name": "conversational test case"},
        deepeval_golden(input=["q"]),
        deepeval_golden(input="Q", retrieval_context=[1, 2]),
        deepeval_golden(input="Q", tools_called=[{"input_parameters": {}}]),
        deepeval_golden(input="Q", expected_tools=[deepeval_tool("x", None) | {"inputParameters": ["a"]}]),
        deepeval_golden(input="Q", additional_metadata=["x"]),
        deepeval_golden(input="Q", additional_metadata={"case_id": {"nested": 1}}),
        "a string",
    ]
    reasons = [(r.record, r.reason) for r in read_deepeval(deepeval_save_as_json(tmp_path / "bad.json", rows))]
    assert reasons == [
        (1, "no input"),
        (2, "a conversational golden or test case (scenario, turns): import deepeval reads single-turn test cases"),
        (3, "a conversational golden or test case (scenario, turns): import deepeval reads single-turn test cases"),
        (4, "input is a list, not a string"),
        (5, "retrieval_context is not a list of strings"),
        (6, "tools_called is not a list of tool calls with names"),
        (7, "expected_tools arguments are a list, not an object"),
        (8, "additional_metadata is not an object"),
        (9, "case_id is a dict, not a string"),
        (10, "the row is a str, not an object"),
    ]


# ---------------------------------------------------------------- end to end: import, run the pipeline, scores


def rag_and_agent_rows() -> list[dict]:
    return [
        # retrieved ids include the reference id at rank 2
        single_turn(
            "How long can I get a refund?",
            retrieved_contexts=[SHIPPING, REFUNDS],
            retrieved_context_ids=["kb/shipping", "kb/refunds"],
            reference_contexts=[REFUNDS],
            reference_context_ids=["kb/refunds"],
            response="Within 30 days.",
            reference="30 days.",
        ),
        # texts only: the reference text meets the identical retrieved text by its content digest, at rank 1
        single_turn(
            "Is there a warranty?",
            retrieved_contexts=[WARRANTY, SHIPPING],
            reference_contexts=[WARRANTY],
            response="Two years.",
            reference="A two-year warranty.",
        ),
        # the retrieval misses the reference
        single_turn(
            "When does my order ship?",
            retrieved_contexts=[WARRANTY],
            reference_contexts=[SHIPPING],
            response="I cannot tell.",
            reference="Within 5 business days.",
        ),
        # the same case twice: in order, then the calls reversed
        multi_turn("Refund order 7", ORDER_CALLS, ["{}", "ok"], "Done.", reference_tool_calls=ORDER_CALLS),
        multi_turn("Refund order 7", ORDER_CALLS[::-1], ["ok", "{}"], "Done.", reference_tool_calls=ORDER_CALLS),
        # a row that cannot be read
        {"response": "no question"},
    ]


def deepeval_rows() -> list[dict]:
    return [
        DEEPEVAL_RAG,  # the reference context is the text of the retrieved source kb/refunds, at rank 2
        DEEPEVAL_TOOLS,  # both expected tools, in another order: unordered matches
        deepeval_golden(
            input="Refund order 8",
            actual_output="Looked it up.",
            tools_called=[deepeval_tool("get_order", {"order_id": "8"}, {"order_id": "8"})],
            expected_tools=[
                deepeval_tool("get_order", {"order_id": "8"}),
                deepeval_tool("issue_refund", {"order_id": "8", "amount": 10.0}),
            ],
        ),
    ]


def write_golden(root: Path) -> None:
    """Golden cases golden-1 (one RAG, one agent) over corpus kb-1, the data a team keeps before importing."""
    cases = root / "cases" / "golden-1"
    cases.mkdir(parents=True)
    (cases / "rag-1.yaml").write_text(
        yaml.safe_dump(
            {
                "case_id": "rag-1",
                "case_revision": 2,
                "lanes": ["rag"],
                "input": "What is the refund window?",
                "required_doc_ids": ["policy/refunds"],
                "reference_answer": "30 days.",
            }
        )
    )
    (cases / "agent-1.yaml").write_text(
        yaml.safe_dump(
            {
                "case_id": "agent-1",
                "case_revision": 1,
                "lanes": ["agent"],
                "input": "Please refund order 7",
                "reference_tool_calls": ORDER_CALLS,
                "tool_match": "strict_order",
            }
        )
    )
    corpus = root / "corpus" / "kb-1"
    corpus.mkdir(parents=True)
    docs = [{"doc_id": "policy/refunds", "text": REFUNDS}, {"doc_id": "policy/shipping", "text": SHIPPING}]
    (corpus / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))


def golden_rows() -> list[dict]:
    return [
        # matched by its case_id field; retrieved texts get the corpus ids by exact text
        single_turn("refund window?", retrieved_contexts=[SHIPPING, REFUNDS], response="30 days.", case_id="rag-1"),
        # matched by its exact input text
        multi_turn("Please refund order 7", ORDER_CALLS, ["{}", "ok"], "Done."),
        # neither: a reject with its reason
        single_turn("Something else entirely", retrieved_contexts=[SHIPPING], case_id="rag-404"),
    ]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """One data root, three imports, one pipeline run.

    The imports: Ragas and DeepEval without golden cases, Ragas against golden-1.
    """
    root = tmp_path_factory.mktemp("flat_rows")
    write_golden(root)
    ragas = ragas_to_jsonl(root.parent / "ragas_rows.jsonl", rag_and_agent_rows())
    deepeval = deepeval_save_as_json(root.parent / "deepeval_cases.json", deepeval_rows())
    golden = ragas_to_jsonl(root.parent / "golden_rows.jsonl", golden_rows())
    summaries = {
        "ragas-1": import_ragas(ragas, ImportRun(run_id="ragas-1", data_root=root)),
        "deepeval-1": import_deepeval(deepeval, ImportRun(run_id="deepeval-1", data_root=root)),
        "golden-ragas": import_ragas(
            golden,
            ImportRun(run_id="golden-ragas", data_root=root, dataset_version="golden-1", corpus_version="kb-1"),
            Matching(),
        ),
    }
    out = io.StringIO()
    code = run_pipeline(
        data=str(root),
        run_ids=list(summaries),
        warehouse=str(root / "warehouse"),
        reports=str(root / "reports"),
        deid_demo=True,
        quiet=True,
        instance=dg.DagsterInstance.ephemeral(),
        stream=out,
    )
    return root, summaries, code, Warehouse.at(root / "warehouse"), out.getvalue()


def rows_of(warehouse: Warehouse, table: str, run_id: str, *columns: str) -> dict[str, tuple]:
    frame = warehouse.read(table, run_id)
    return {row["trace_id"]: tuple(row[c] for c in columns) for row in frame.iter_rows(named=True)}


@pytest.mark.slow
def test_ragas_rows_write_cases_from_their_gold(imported):
    root, summaries, code, _, printed = imported
    assert code == 0, printed
    summary = summaries["ragas-1"]
    assert (summary.records, summary.cases, summary.traces) == (6, 4, 5)
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [(6, "no user_input")]
    warranty, shipping = digest_id(WARRANTY), digest_id(SHIPPING)
    cases = {p.stem: yaml.safe_load(p.read_text()) for p in (root / "cases" / "ragas-ragas_rows").glob("*.yaml")}
    by_input = {c["input"]: c for c in cases.values()}
    assert by_input["How long can I get a refund?"]["required_doc_ids"] == ["kb/refunds"]
    assert by_input["Is there a warranty?"]["required_doc_ids"] == [warranty]
    # SHIPPING was first seen with id kb/shipping (row 1): the later text-only reference takes that id
    assert by_input["When does my order ship?"]["required_doc_ids"] == ["kb/shipping"]
    agent = by_input["Refund order 7"]
    assert (agent["lanes"], agent["tool_match"], agent["reference_tool_calls"]) == (
        ["agent"],
        "strict_order",
        ORDER_CALLS,
    )
    traces = [json.loads(line) for line in (root / "traces" / "ragas-1" / "ragas.jsonl").read_text().splitlines()]
    warranty_trace = next(t for t in traces if t["input"] == "Is there a warranty?")
    assert [h["doc_id"] for h in warranty_trace["retrieval"][0]["hits"]] == [warranty, "kb/shipping"]
    assert [c["doc_id"] for c in warranty_trace["context"]] == [warranty, "kb/shipping"]
    corpus = [json.loads(line) for line in (root / "corpus" / "ragas-1-docs" / "docs.jsonl").read_text().splitlines()]
    assert {d["doc_id"]: d["text"] for d in corpus} == {
        "kb/shipping": SHIPPING,
        "kb/refunds": REFUNDS,
        warranty: WARRANTY,
    }
    assert {shipping} & {d["doc_id"] for d in corpus} == set()


@pytest.mark.slow
def test_ragas_rows_scored(imported):
    _, _, _, warehouse, _ = imported
    case_of = {
        row["trace_id"]: row["case_id"] for row in warehouse.read("retrieval_scores", "ragas-1").iter_rows(named=True)
    }
    scores = rows_of(
        warehouse,
        "retrieval_scores",
        "ragas-1",
        "input",
        "recall_at_1",
        "recall_at_3",
        "first_hit_rank",
        "retrieval_stage",
    )
    assert sorted(scores.values()) == [
        ("How long can I get a refund?", 0.0, 1.0, 2, "pass"),
        ("Is there a warranty?", 1.0, 1.0, 1, "pass"),
        ("When does my order ship?", 0.0, 0.0, None, "fail"),
    ]
    tools = rows_of(
        warehouse, "tool_scores", "ragas-1", "attempt", "tool_call_f1", "strict_order_accuracy", "tool_order_stage"
    )
    assert sorted(tools.values()) == [(1, 1.0, 1.0, "pass"), (2, 1.0, 0.0, "fail")]
    failing = rows_of(warehouse, "attribution", "ragas-1", "lane", "first_failing_stage")
    miss = next(t for t, (i, *_) in scores.items() if i == "When does my order ship?")
    reversed_attempt = next(t for t, (a, *_) in tools.items() if a == 2)
    assert failing[miss] == ("rag", "retrieval")
    assert failing[reversed_attempt] == ("agent", "tool_order")
    assert case_of[miss].startswith("q-")


@pytest.mark.slow
def test_deepeval_rows_scored(imported):
    root, summaries, _, warehouse, _ = imported
    summary = summaries["deepeval-1"]
    assert (summary.records, summary.cases, summary.traces, summary.rejects) == (3, 3, 3, [])
    case = yaml.safe_load((root / "cases" / "deepeval-deepeval_cases" / "case-1.yaml").read_text())
    assert case["required_doc_ids"] == ["kb/refunds"]  # the ideal context's text is the retrieved source's text
    assert case["reference_answer"] == "30 days from purchase."
    (rag,) = rows_of(
        warehouse, "retrieval_scores", "deepeval-1", "case_id", "recall_at_1", "recall_at_3", "first_hit_rank"
    ).values()
    assert rag == ("case-1", 0.0, 1.0, 2)
    tools = rows_of(
        warehouse,
        "tool_scores",
        "deepeval-1",
        "tool_match",
        "tool_call_precision",
        "tool_call_recall",
        "tool_call_f1",
        "missing_calls",
        "tool_order_stage",
    )
    assert sorted(tools.values()) == [
        ("unordered", 1.0, 0.5, pytest.approx(2 / 3), ['issue_refund({"amount":10,"order_id":"8"})'], "not_applicable"),
        ("unordered", 1.0, 1.0, 1.0, [], "not_applicable"),
    ]
    failing = rows_of(warehouse, "attribution", "deepeval-1", "lane", "first_failing_stage")
    assert sorted(failing.values()) == [("agent", "tool_selection")]


@pytest.mark.slow
def test_rows_meet_golden_cases_and_write_none(imported):
    root, summaries, _, warehouse, _ = imported
    summary = summaries["golden-ragas"]
    assert (summary.cases, summary.traces) == (0, 2)
    assert sorted(p.name for p in (root / "cases" / "golden-1").iterdir()) == ["agent-1.yaml", "rag-1.yaml"]
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (3, "its case_id 'rag-404' is no case of the dataset, and no case has its input text (23 characters)")
    ]
    (rag,) = rows_of(
        warehouse, "retrieval_scores", "golden-ragas", "case_id", "recall_at_1", "first_hit_rank", "n_retrieved"
    ).values()
    assert rag == ("rag-1", 0.0, 2, 2)
    (agent,) = rows_of(warehouse, "tool_scores", "golden-ragas", "case_id", "tool_call_f1", "tool_order_stage").values()
    assert agent == ("agent-1", 1.0, "pass")
    traces = [json.loads(line) for line in (root / "traces" / "golden-ragas" / "ragas.jsonl").read_text().splitlines()]
    assert {t["case_id"]: t["case_revision"] for t in traces} == {"rag-1": 2, "agent-1": 1}
    assert [h["doc_id"] for h in traces[0]["retrieval"][0]["hits"]] == ["policy/shipping", "policy/refunds"]
    assert not (root / "corpus" / "kb-1-golden-ragas").exists()  # every text was in kb-1: no new corpus version
