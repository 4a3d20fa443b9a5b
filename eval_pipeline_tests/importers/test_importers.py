"""Importers: τ-bench trajectories and OpenAI chat messages become SPEC §2 runs the pipeline scores like any other."""

from __future__ import annotations

import argparse
import json

import polars as pl
import pytest
import yaml

from eval_pipeline.cli.importers import register
from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.importers import ImportRun, import_openai_messages, import_tau_bench
from eval_pipeline.importers.openai_messages import messages_to_steps
from eval_pipeline.scoring.reliability import suite_reliability
from eval_pipeline_tests.importers.fixtures.importing import SAMPLE, by_trace, score_run, write_jsonl, written_traces

# ---------------------------------------------------------------- τ-bench


def test_tau_bench_sample_imports_and_scores_with_hand_computed_pass_hat_k(tmp_path):
    summary = import_tau_bench(SAMPLE, ImportRun(run_id="tau-4o", data_root=tmp_path))
    assert (summary.records, summary.cases, summary.traces, summary.rejects, summary.incomplete) == (12, 3, 12, [], [])
    run = score_run(tmp_path, "tau-4o")

    # rewards by trial 0..3: task 0 = 0,0,0,0 (c=0); task 1 = 0,1,0,0 (c=1); task 2 = 0,0,1,0 (c=1); n = 4 each
    # pass^1 = c/4; pass^k = C(1,k)/C(4,k) = 0 for k ≥ 2 (one success cannot fill k ≥ 2 draws); task 0 is 0 throughout
    rel = (
        run["reliability"]
        .select(
            "case_id",
            "n_complete",
            "n_incomplete",
            "n_success",
            "pass_at_1",
            "pass_hat_1",
            "pass_hat_2",
            "pass_hat_3",
            "pass_hat_4",
            "flaky",
        )
        .rows()
    )
    assert rel == [
        ("tau-0", 4, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, False),
        ("tau-1", 4, 0, 1, 0.25, 0.25, 0.0, 0.0, 0.0, True),
        ("tau-2", 4, 0, 1, 0.25, 0.25, 0.0, 0.0, 0.0, True),
    ]
    suite = suite_reliability(run["reliability"])["tau-4o"]
    assert suite["pass_hat_1"] == pytest.approx((0 + 0.25 + 0.25) / 3)  # τ-bench's average over tasks: 1/6
    assert suite["pass_hat_2"] == 0.0
    # the flips: the one success of task 1 (trial 1 → attempt 2) and of task 2 (trial 2 → attempt 3)
    assert run["quarantine"].select("case_id", "flipped_trace_ids", "reason").rows() == [
        ("tau-1", ["tau-4o:tau-1#2"], "flaky: 1 of 4 complete attempts succeeded"),
        ("tau-2", ["tau-4o:tau-2#3"], "flaky: 1 of 4 complete attempts succeeded"),
    ]
    # success is the reward milestone, one named boolean per trace
    outcomes = run["outcomes"]
    assert outcomes.filter(pl.col("success"))["trace_id"].to_list() == ["tau-4o:tau-1#2", "tau-4o:tau-2#3"]
    assert by_trace(outcomes, "tau-4o:tau-1#2")["milestones"] == [
        {"name": "tau_bench_reward", "path": "tau_bench.reward", "op": "gte", "passed": True}
    ]


def test_tau_bench_tool_metrics_come_from_the_real_calls(tmp_path):
    import_tau_bench(SAMPLE, ImportRun(run_id="tau-4o", data_root=tmp_path))
    run = score_run(tmp_path, "tau-4o")
    ts = run["tool_scores"]
    # independent count of assistant tool calls per record of the source file
    records = json.loads(SAMPLE.read_text())
    counted = {
        f"tau-4o:tau-{r['task_id']}#{r['trial'] + 1}": sum(len(m.get("tool_calls") or []) for m in r["traj"])
        for r in records
    }
    assert dict(ts.select("trace_id", "n_calls").rows()) == counted

    cancel = by_trace(ts, "tau-4o:tau-1#2")
    # get_user_details, get_reservation_details x3 (three ids), cancel_reservation(Z7GOZK); the action is one call
    # matched 1: precision 1/5, recall 1/1, f1 2*1/(5+1); position 1 holds get_user_details, not the cancel: 0/5
    assert (cancel["n_calls"], cancel["n_path_calls"]) == (5, 1)
    assert cancel["tool_call_precision"] == 0.2 and cancel["tool_call_recall"] == 1.0
    assert cancel["tool_call_f1"] == pytest.approx(1 / 3)
    assert (cancel["strict_order_accuracy"], cancel["args_valid_rate"], cancel["unnecessary_call_rate"]) == (
        0.0,
        1.0,
        0.0,
    )
    assert [cancel[f"{s}_stage"] for s in ("policy", "tool_selection", "tool_arguments", "tool_order", "loop")] == [
        "pass",
        "pass",
        "pass",
        "not_applicable",
        "pass",
    ]

    downgrade = by_trace(ts, "tau-4o:tau-2#3")
    # 13 calls (get_user_details, 6 get_reservation_details, 5 update_reservation_flights, calculate); the 5 updates
    # are exactly the 5 actions: precision 5/13, recall 5/5, f1 2*5/(13+5) = 10/18
    assert (downgrade["n_calls"], downgrade["n_path_calls"], downgrade["missing_calls"]) == (13, 5, [])
    assert downgrade["tool_call_precision"] == pytest.approx(5 / 13)
    assert downgrade["tool_call_f1"] == pytest.approx(10 / 18)

    partial = by_trace(ts, "tau-4o:tau-2#4")
    # the agent stopped after 2 of the 5 updates: recall 2/5, 13 calls → precision 2/13
    assert partial["tool_call_recall"] == 0.4 and partial["tool_call_precision"] == pytest.approx(2 / 13)
    assert len(partial["missing_calls"]) == 3 and all(
        k.startswith("update_reservation_flights(") for k in partial["missing_calls"]
    )

    silent = by_trace(ts, "tau-4o:tau-1#1")
    assert (silent["n_calls"], silent["tool_call_precision"], silent["tool_call_recall"], silent["tool_call_f1"]) == (
        0,
        None,
        0.0,
        0.0,
    )
    assert silent["tool_selection_reason"] == "path tools never called: cancel_reservation"

    booking = by_trace(ts, "tau-4o:tau-0#4")
    # 13 calls, 7 of them book_reservation with args that differ from the action: 6 valid of 13; the path holds one
    # booking, so 7 are a surplus (SPEC §11: a duplicate is a surplus); a stray cancellation of a reservation it had
    # just made is a write outside the path
    assert booking["n_calls"] == 13 and booking["args_valid_rate"] == pytest.approx(6 / 13)
    assert booking["tool_selection_reason"] == (
        "surplus calls: book_reservation (7 made, the path holds 1); "
        "non-read-only tools outside the path called: cancel_reservation"
    )
    assert booking["tool_call_f1"] == 0.0

    handoff = by_trace(ts, "tau-4o:tau-1#3")
    # transfer_to_human_agents is read-only in the τ-bench tool table (it changes no state): never a surplus
    assert handoff["tool_selection_reason"] == "path tools never called: cancel_reservation"


def test_tau_bench_files_follow_the_spec_contracts(tmp_path):
    summary = import_tau_bench(SAMPLE, ImportRun(run_id="tau-4o", data_root=tmp_path, dataset_version="airline-v1"))
    assert summary.files == [
        "cases/airline-v1/tau-0.yaml",
        "cases/airline-v1/tau-1.yaml",
        "cases/airline-v1/tau-2.yaml",
        "tools/airline-v1/tools.yaml",
        "corpus/none/docs.jsonl",
        "traces/tau-4o/gpt-4o-airline.sample.jsonl",
        "traces/tau-4o/run.yaml",
    ]
    records = json.loads(SAMPLE.read_text())
    task0 = yaml.safe_load((tmp_path / "cases/airline-v1/tau-0.yaml").read_text())
    # the action kwargs survive YAML (e.g. insurance: "no" stays a string, not a boolean)
    assert canonical_json(task0["reference_tool_calls"]) == canonical_json(
        [{"name": a["name"], "args": a["kwargs"]} for a in records[0]["info"]["task"]["actions"]]
    )
    assert task0["tool_match"] == "unordered" and task0["escalation_tools"] == ["transfer_to_human_agents"]
    registry = yaml.safe_load((tmp_path / "tools/airline-v1/tools.yaml").read_text())
    read_only = {t["name"]: t["read_only"] for t in registry["tools"]}
    assert read_only["get_user_details"] and read_only["think"] and not read_only["book_reservation"]
    assert read_only["transfer_to_human_agents"] and read_only["calculate"] and read_only["get_reservation_details"]
    assert not any(read_only[n] for n in ("cancel_reservation", "update_reservation_flights"))
    transfer = next(t for t in registry["tools"] if t["name"] == "transfer_to_human_agents")
    assert transfer["value_rules"] == {"args": {"summary": "any"}}
    lines = (tmp_path / "traces/tau-4o/gpt-4o-airline.sample.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert (first["trace_id"], first["attempt"], first["final_state"]["tau_bench"]["reward"]) == (
        "tau-4o:tau-0#1",
        1,
        0.0,
    )
    # the agent's last message is the finish step; the simulated user's ###STOP### turn follows it
    assert [s["kind"] for s in first["steps"][-2:]] == ["finish", "user"]
    tool_steps = [s for s in first["steps"] if s["kind"] == "tool_call"]
    # the system prompt is not a step; user, message, user, message, user come before the first call
    assert tool_steps[0] == {
        "index": 6,
        "kind": "tool_call",
        "tool": "get_user_details",
        "args": {"user_id": "mia_li_3668"},
        "status": "ok",
        "result": tool_steps[0]["result"],
        "error": None,
    }
    # τ-bench reports a failed call as a tool message starting with "Error"
    assert tool_steps[4]["status"] == "error" and tool_steps[4]["error"].startswith(
        "Error: payment amount does not add up"
    )


def test_tau_bench_bad_records_become_rejects(tmp_path):
    records = json.loads(SAMPLE.read_text())[:2]
    broken = {**records[0], "trial": 1, "info": {"task": {"actions": "book it"}}}
    duplicate = dict(records[0])
    source = tmp_path / "mixed.json"
    source.write_text(
        json.dumps([*records, broken, duplicate, "not a record", {**records[1], "reward": "yes", "trial": 5}])
    )
    summary = import_tau_bench(source, ImportRun(run_id="mixed", data_root=tmp_path / "data"))
    assert summary.traces == 2
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (3, "no info.task.actions: the task's ground-truth actions are missing"),
        (4, "duplicate trial 0 of task 0"),
        (5, "not a JSON object: a str"),
        (6, "reward is a str, not a number"),
    ]
    written = json.loads((tmp_path / "data/traces/mixed/import_rejects.json").read_text())
    assert [r["line"] for r in written] == [3, 4, 5, 6] and written[0]["input_kind"] == "import:tau-bench"


def test_tau_bench_calls_of_tools_missing_from_a_given_registry_are_agent_failures_not_incomplete(tmp_path):
    records = json.loads(SAMPLE.read_text())
    seen = sorted(
        {tc["function"]["name"] for r in records for m in r["traj"] for tc in m.get("tool_calls") or []}
        | {a["name"] for r in records for a in r["info"]["task"]["actions"]}
    )
    registry = tmp_path / "tools.yaml"
    registry.write_text(
        yaml.safe_dump(
            {
                "environment_version": "x",
                "tools": [{"name": name, "read_only": name.startswith("get_")} for name in seen if name != "think"],
            }
        )
    )
    summary = import_tau_bench(SAMPLE, ImportRun(run_id="tau-4o", data_root=tmp_path / "data", tools=registry))
    # think is called once in trials (0,0), (0,1), (0,2) and twice in (0,3) and (2,1): 7 calls, all written as calls
    assert (summary.traces, summary.incomplete, summary.rejects) == (12, [], [])
    assert summary.notes[-1] == (
        "calls of tools missing from the tool registry, imported as calls (the pipeline fails them "
        "at tool_selection, reason unknown_tool): think (7 calls)"
    )
    traces = written_traces(tmp_path / "data", "tau-4o")
    assert {t["status"] for t in traces} == {"ok"}
    assert sum(s["tool"] == "think" for t in traces for s in t["steps"] if s["kind"] == "tool_call") == 7
    run = score_run(tmp_path / "data", "tau-4o")
    rel = run["reliability"].select("case_id", "n_attempts", "n_complete", "n_incomplete").rows()
    assert rel == [("tau-0", 4, 4, 0), ("tau-1", 4, 4, 0), ("tau-2", 4, 4, 0)]
    # the scorer fails them at tool_selection with reason unknown_tool (scoring/tools/)
    ts = run["tool_scores"]
    unknown = ts.filter(pl.col("tool_selection_reason").str.starts_with("unknown_tool: think"))["trace_id"].to_list()
    assert sorted(unknown) == ["tau-4o:tau-0#1", "tau-4o:tau-0#2", "tau-4o:tau-0#3", "tau-4o:tau-0#4", "tau-4o:tau-2#2"]


# ---------------------------------------------------------------- openai-messages


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    },
    {"type": "function", "function": {"name": "issue_refund", "parameters": {"type": "object"}}},
]


def conversation(
    refund_arguments: str = '{"order_id": "88131", "amount": 49}',
    answer_id: str = "call_2",
    refund_tool: str = "issue_refund",
) -> list[dict]:
    return [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Please refund order 88131."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id":"88131"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"order_id": "88131", "charges": [49, 49]}'},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Refunding the duplicate charge."}],
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": refund_tool, "arguments": refund_arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": answer_id, "content": "Error: refund service unavailable"},
        {"role": "assistant", "content": "Sorry, I could not issue the refund."},
    ]


def test_messages_become_steps():
    steps, defects = messages_to_steps(conversation())
    assert defects == []
    assert [(s["index"], s["kind"]) for s in steps] == [
        (1, "user"),
        (2, "tool_call"),
        (3, "message"),
        (4, "tool_call"),
        (5, "finish"),
    ]
    assert steps[1] == {
        "index": 2,
        "kind": "tool_call",
        "tool": "get_order",
        "args": {"order_id": "88131"},
        "status": "ok",
        "result": {"order_id": "88131", "charges": [49, 49]},
        "error": None,
    }
    assert (steps[3]["status"], steps[3]["error"]) == ("error", "Error: refund service unavailable")
    assert steps[4]["content"] == "Sorry, I could not issue the refund."


def test_openai_messages_import_keeps_every_bad_record_visible(tmp_path):
    reference = [
        {"name": "get_order", "args": {"order_id": "88131"}},
        {"function": {"name": "issue_refund", "arguments": '{"order_id":"88131","amount":49}'}},
    ]
    base = {"case_id": "refund-1", "tools": TOOLS, "reference_tool_calls": reference}
    source = write_jsonl(
        tmp_path / "support.jsonl",
        [
            {
                **base,
                "messages": conversation(),
                "success": False,
                "usage": {"prompt_tokens": 900, "completion_tokens": 80},
            },
            {**base, "messages": conversation(answer_id="call_9"), "success": False},  # tool message answers no call
            {
                **base,
                "messages": conversation(refund_arguments="{order_id: 88131"),
                "success": False,
            },  # arguments not JSON
            {
                **base,
                "messages": conversation(refund_tool="drop_tables"),
                "success": False,
            },  # tool not in the definitions: a call
            "{not json",
            {"case_id": "refund-2"},
            {
                **base,
                "reference_tool_calls": [],
                "messages": conversation(),
                "success": True,
            },  # contradicts refund-1's case
        ],
    )
    summary = import_openai_messages(source, ImportRun(run_id="chat-1", data_root=tmp_path / "data"))
    assert (summary.records, summary.cases, summary.traces, len(summary.incomplete)) == (7, 1, 4, 2)
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (5, "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
        (6, "no `messages` list"),
        (7, "the case fields differ from the first record of case 'refund-1'"),
    ]
    assert summary.incomplete == [
        {
            "trace_id": "chat-1:refund-1#2",
            "reason": "import: message 6: tool message answers tool_call_id 'call_9', which no earlier call has open",
        },
        {
            "trace_id": "chat-1:refund-1#3",
            "reason": "import: message 5: call of issue_refund: arguments are not valid JSON "
            "(Expecting property name enclosed in double quotes at column 2)",
        },
    ]
    assert summary.notes == [
        "tool registry: the source's tool definitions",
        "calls of tools missing from the tool registry, imported as calls (the pipeline fails them at "
        "tool_selection, reason unknown_tool): drop_tables (1 call)",
    ]

    run = score_run(tmp_path / "data", "chat-1")
    ts = run["tool_scores"]
    first = by_trace(ts, "chat-1:refund-1#1")
    # both reference calls made with the reference args (the refund failed, but a failed call is a call)
    assert (first["status"], first["tool_call_f1"], first["args_valid_rate"]) == ("scored", 1.0, 1.0)
    assert ts.filter(pl.col("status") == "incomplete")["reason"].to_list() == [
        f"harness status error: {row['reason']}" for row in summary.incomplete
    ]
    outcome = by_trace(run["outcomes"], "chat-1:refund-1#1")
    # the record's success: false became the milestone reported_success
    assert (outcome["success"], outcome["milestones_failed"], outcome["input_tokens"]) == (
        False,
        ["reported_success"],
        900,
    )
    rel = run["reliability"].row(0, named=True)
    # the call of drop_tables is the agent's failure, scored (scoring/tools/), not an incomplete trace
    dropped = by_trace(ts, "chat-1:refund-1#4")
    assert (dropped["status"], dropped["tool_selection_stage"]) == ("scored", "fail")
    assert dropped["tool_selection_reason"].startswith("unknown_tool: drop_tables")
    assert (rel["n_attempts"], rel["n_complete"], rel["n_incomplete"], rel["n_success"]) == (4, 2, 2, 0)
    registry = yaml.safe_load((tmp_path / "data/tools/openai-messages-support/tools.yaml").read_text())
    assert registry["tools"][0]["args"] == TOOLS[0]["function"]["parameters"]


def test_openai_messages_without_reference_calls_are_goal_only(tmp_path):
    source = write_jsonl(tmp_path / "plain.jsonl", [{"messages": conversation(), "final_state": {"refunds": {}}}])
    summary = import_openai_messages(source, ImportRun(run_id="plain", data_root=tmp_path / "data"))
    case = yaml.safe_load((tmp_path / "data/cases/openai-messages-plain/plain-1.yaml").read_text())
    assert (case["tool_match"], case["input"], "milestones" in case) == (
        "goal_only",
        "Please refund order 88131.",
        False,
    )
    run = score_run(tmp_path / "data", "plain")
    assert summary.notes == ["tool registry: inferred from the calls (read_only guessed from names)"]
    assert by_trace(run["outcomes"], "plain:plain-1#1")["outcome_stage"] == "not_applicable"


# ---------------------------------------------------------------- command line


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_cli_imports_refuses_to_overwrite_and_reports_exit_codes(tmp_path, capsys):
    data = str(tmp_path / "data")
    assert cli(["import", "tau-bench", str(SAMPLE), "--run", "tau-4o", "--data", data]) == 0
    out = capsys.readouterr().out
    assert "records 12, cases 3, traces 12 (0 incomplete), rejected 0" in out
    assert "wrote traces/tau-4o/run.yaml" in out
    assert cli(["import", "tau-bench", str(SAMPLE), "--run", "tau-4o", "--data", data]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli(["import", "tau-bench", str(SAMPLE), "--run", "tau-4o", "--data", data, "--force"]) == 0
    assert cli(["import", "tau-bench", str(tmp_path / "missing.json"), "--run", "x", "--data", data]) == 2
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{oops", {"case_id": "x"}])
    assert cli(["import", "openai-messages", str(bad), "--run", "bad", "--data", data]) == 1
    out = capsys.readouterr().out
    assert "rejected bad.jsonl record 2: no `messages` list" in out
    assert not (tmp_path / "data/traces/bad").exists()


def test_cli_help_names_formats(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli(["import", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "tau-bench" in text and "openai-messages" in text and "--run RUN_ID" in text


def test_cli_help_documents_each_trace_format_and_the_matching_rules(capsys):
    with pytest.raises(SystemExit):
        cli(["import", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in (
        "otlp OpenTelemetry traces as OTLP/JSON",
        "OpenInference",
        "GenAI conventions",
        "langfuse Langfuse observations",
        "ragas a Ragas EvaluationDataset",
        "deepeval DeepEval test cases",
        "--case-key KEY",
        "--doc-id-key KEY",
        "--doc-path PATH",
        "doc_id, id, source",
        "new corpus version",
    ):
        assert words in text, words


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["import", "ragas", "a.jsonl", "b.jsonl"], "ragas reads one SOURCE file, got 2"),
        (["import", "otlp", "x.jsonl", "--doc-path", "docs"], "--doc-path is an option of langfuse, not of otlp"),
        (["import", "otlp"], "otlp needs a SOURCE file"),
        (["import", "otlp", "missing.jsonl"], "no such file or directory: missing.jsonl"),
        (["import", "deepeval", "x.json", "--tool-match", "unordered"], "options not read by deepeval: --tool-match"),
        (
            ["import", "tau-bench", "x.json", "--case-key", "id"],
            "options of otlp, langfuse, ragas and deepeval given to tau-bench: --case-key",
        ),
        (["import", "openai-messages", "a.jsonl", "b.jsonl"], "openai-messages reads one SOURCE file, got 2"),
    ],
)
def test_cli_refuses_options_a_format_does_not_read(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli([*argv, "--run", "r1", "--data", str(tmp_path / "data")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data" / "traces").exists()
