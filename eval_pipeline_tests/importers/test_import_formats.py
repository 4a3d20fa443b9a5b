"""Import formats: JSON told apart by content, τ²-bench results files, and the message shapes of openai-messages
(τ²-bench, legacy OpenAI function calls, Anthropic content blocks); a call of a tool the registry lacks is a call."""

from __future__ import annotations

import json

import pytest
import yaml

from eval_pipeline.importers import ImporterError, ImportRun, import_openai_messages, import_tau_bench
from eval_pipeline.importers.common import read_records, resolve_registry
from eval_pipeline.importers.openai_messages import messages_to_steps
from eval_pipeline.importers.tau_tools import TAU_TOOL_ROLES
from eval_pipeline_tests.importers.fixtures.importing import (
    SAMPLE,
    TAU2_RESULTS,
    by_trace,
    score_run,
    write_jsonl,
    written_traces,
)

ROAMING = "[mobile_data_issue]user_abroad_roaming_disabled_off[PERSONA:None]"
NO_SERVICE = "[service_issue]airplane_mode_on[PERSONA:None]"
ORDER_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def kinds(trace: dict) -> list[str]:
    return [s["kind"] for s in trace["steps"]]


def calls(trace: dict) -> list[dict]:
    return [s for s in trace["steps"] if s["kind"] == "tool_call"]


# ---------------------------------------------------------------- JSON detected by content


def test_read_records_decides_array_object_or_jsonl_by_content(tmp_path):
    first, second = {"a": 1}, {"b": [1, {"c": None}]}
    array = tmp_path / "array.jsonl"  # the name says JSONL, the content is a pretty-printed array
    array.write_text(json.dumps([first, second], indent=2))
    assert read_records(array) == ([(1, first), (2, second)], [])
    pretty = tmp_path / "pretty.jsonl"  # one pretty-printed object: one record, numbered by the line it starts on
    pretty.write_text("\n" + json.dumps(second, indent=2) + "\n")
    assert read_records(pretty) == ([(2, second)], [])
    single = tmp_path / "single.json"  # a JSONL file of one object line is that one record
    single.write_text(json.dumps(first) + "\n")
    assert read_records(single) == ([(1, first)], [])
    arrays = tmp_path / "arrays.json"  # lines that are each a JSON value (here arrays) stay JSONL
    arrays.write_text("[1, 2]\n\n[3]\n")
    assert read_records(arrays) == ([(1, [1, 2]), (3, [3])], [])
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": 1}\n{oops\n{"b": 2}\n')
    assert read_records(broken) == (
        [(1, {"a": 1}), (3, {"b": 2})],
        [(2, "invalid JSON: Expecting property name enclosed in double quotes at column 2")],
    )
    first_broken = tmp_path / "first_broken.jsonl"
    first_broken.write_text('{"a": \n{"a": 2}\n{"a": 3}\n')
    assert read_records(first_broken) == (
        [(2, {"a": 2}), (3, {"a": 3})],
        [(1, "invalid JSON: Expecting value at column 7")],
    )


def test_read_records_refuses_a_broken_json_document(tmp_path):
    records = [{"task_id": 0, "traj": [{"role": "user", "content": "hi"}]}, {"task_id": 1, "traj": []}]
    array = tmp_path / "array.json"
    array.write_text(json.dumps(records, indent=2)[:-4])
    # the last element lost its closing brace: the JSON breaks at the end, line 14 column 2
    with pytest.raises(
        ImporterError, match=r"array.json is not a valid JSON array: Expecting ',' delimiter at line 14 column 2"
    ):
        read_records(array)
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(records)[:30])
    with pytest.raises(ImporterError, match="compact.json is not a valid JSON array"):
        read_records(compact)
    results = tmp_path / "results.json"  # a pretty-printed object with a missing comma: not one reject per line
    results.write_text(
        json.dumps({"info": {"num_trials": 1}, "tasks": [], "simulations": []}, indent=2).replace("},", "}")
    )
    with pytest.raises(
        ImporterError,
        match=r"results.json is neither valid JSON nor JSONL: Expecting ',' delimiter at line 5 "
        r"column 3 \(7 of 7 lines are not JSON values on their own either\)",
    ):
        read_records(results)


def openai_record(attempt: int, amount: int = 49) -> dict:
    return {
        "case_id": "refund-1",
        "attempt": attempt,
        "success": attempt == 1,
        "reference_tool_calls": [{"name": "issue_refund", "args": {"order_id": "88131", "amount": amount}}],
        "messages": [
            {"role": "user", "content": "Please refund order 88131."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "issue_refund", "arguments": '{"order_id": "88131", "amount": 49}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"refund_id": "R-1"}'},
            {"role": "assistant", "content": "Refunded."},
        ],
    }


def test_the_same_records_import_alike_as_json_array_pretty_object_and_jsonl(tmp_path):
    two = [openai_record(1), openai_record(2)]
    shapes = {
        "array": json.dumps(two, indent=2),
        "jsonl": "".join(json.dumps(r) + "\n" for r in two),
        "one-pretty": json.dumps(two[0], indent=2),
        "one-jsonl": json.dumps(two[0]) + "\n",
        "one-array": json.dumps([two[0]]),
    }
    imported = {}
    for shape, text in shapes.items():
        (tmp_path / shape).mkdir()
        (tmp_path / shape / "chats.json").write_text(text)
        summary = import_openai_messages(
            tmp_path / shape / "chats.json", ImportRun(run_id="run", data_root=tmp_path / shape / "data")
        )
        imported[shape] = (
            (summary.records, summary.traces, len(summary.rejects), len(summary.incomplete)),
            written_traces(tmp_path / shape / "data", "run"),
        )
    assert imported["array"][0] == imported["jsonl"][0] == (2, 2, 0, 0)
    assert imported["array"][1] == imported["jsonl"][1]
    assert imported["one-pretty"][0] == imported["one-jsonl"][0] == imported["one-array"][0] == (1, 1, 0, 0)
    assert imported["one-pretty"][1] == imported["one-jsonl"][1] == imported["one-array"][1] == imported["array"][1][:1]
    assert [s["kind"] for s in imported["array"][1][0]["steps"]] == ["user", "tool_call", "finish"]

    # τ-bench records as a JSON array and as JSONL give the same cases and traces
    records = json.loads(SAMPLE.read_text())
    for shape, text in {
        "tau-array": SAMPLE.read_text(),
        "tau-jsonl": "".join(json.dumps(r) + "\n" for r in records),
    }.items():
        (tmp_path / shape).mkdir()
        (tmp_path / shape / "airline.json").write_text(text)
        summary = import_tau_bench(
            tmp_path / shape / "airline.json", ImportRun(run_id="tau", data_root=tmp_path / shape / "data")
        )
        assert (summary.records, summary.cases, summary.traces, summary.rejects) == (12, 3, 12, [])
    assert written_traces(tmp_path / "tau-array/data", "tau") == written_traces(tmp_path / "tau-jsonl/data", "tau")
    case = "cases/tau-bench-airline/tau-1.yaml"
    assert (tmp_path / "tau-array/data" / case).read_text() == (tmp_path / "tau-jsonl/data" / case).read_text()


def test_a_broken_jsonl_line_is_one_reject_and_the_other_records_import(tmp_path):
    lines = [json.dumps(r) for r in json.loads(SAMPLE.read_text())]
    lines[2] = lines[2][:40]  # record 3 (task 2, trial 0) cut short inside a key that starts at column 40
    source = tmp_path / "airline.jsonl"
    source.write_text("\n".join(lines) + "\n")
    summary = import_tau_bench(source, ImportRun(run_id="tau", data_root=tmp_path / "data"))
    assert (summary.records, summary.cases, summary.traces, summary.incomplete) == (12, 3, 11, [])
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (3, "invalid JSON: Unterminated string starting at column 40")
    ]
    assert "tau:tau-2#1" not in {t["trace_id"] for t in written_traces(tmp_path / "data", "tau")}


# ---------------------------------------------------------------- τ²-bench results files


def test_tau2_results_file_becomes_cases_attempts_and_rejects(tmp_path):
    summary = import_tau_bench(TAU2_RESULTS, ImportRun(run_id="t2", data_root=tmp_path, dataset_version="telecom"))
    # 4 simulations: 2 of the roaming task (trial 0, and trial 1 lost to an infrastructure error), 1 of the
    # no-service task, 1 of a task missing from `tasks`
    assert (summary.records, summary.cases, summary.traces) == (4, 2, 3)
    assert [(r["line"], r["reason"], r["case_id"]) for r in summary.rejects] == [
        (
            4,
            "simulation '71d3e5f9-mms-0': task '[mms_issue]bad_network_preference[PERSONA:None]' "
            "is not among the tasks of the results file",
            "tau-[mms_issue]bad_network_preference[PERSONA:None]",
        )
    ]
    assert summary.incomplete == [
        {
            "trace_id": f"t2:tau-{ROAMING}#2",
            "reason": "τ²-bench termination_reason infrastructure_error: the simulation did not run to an end",
        }
    ]

    roaming = yaml.safe_load(
        (
            tmp_path / "cases/telecom/tau--mobile_data_issue-user_abroad_roaming_disabled_off-PERSONA-None.yaml"
        ).read_text()
    )
    # the user's own action (toggle_roaming on their phone) is not the agent's: only enable_roaming is the reference
    assert roaming["reference_tool_calls"] == [
        {"name": "enable_roaming", "args": {"customer_id": "C1001", "line_id": "L1002"}}
    ]
    assert (roaming["tool_match"], roaming["escalation_tools"]) == ("unordered", ["transfer_to_human_agents"])
    assert roaming["input"] == (
        "Reason for call: Your mobile data is not working while you are travelling abroad.\n"
        "Known info: You are John Smith with phone number 555-123-2002. You are currently in France.\n"
        "Task instructions: Follow the agent's guidance. You consider the issue resolved when mobile data works."
    )
    assert roaming["milestones"] == {"tau_bench_reward": {"path": "tau_bench.reward", "gte": 0.999999}}
    no_service = yaml.safe_load(
        (tmp_path / "cases/telecom/tau--service_issue-airplane_mode_on-PERSONA-None.yaml").read_text()
    )
    # its only action is the user's, and its reward_basis [ENV_ASSERTION] never judges the agent's calls
    assert (no_service["reference_tool_calls"], no_service["tool_match"]) == ([], "goal_only")
    assert no_service["input"].startswith("You are John Smith (555-123-2002). Your phone shows no service.")

    traces = {t["trace_id"]: t for t in written_traces(tmp_path, "t2")}
    assert sorted(traces) == [f"t2:tau-{ROAMING}#1", f"t2:tau-{ROAMING}#2", f"t2:tau-{NO_SERVICE}#1"]
    solved = traces[f"t2:tau-{ROAMING}#1"]
    # greeting, user, call, message, [the user's toggle_roaming and its result: no steps], user, call, finish, user
    assert kinds(solved) == ["message", "user", "tool_call", "message", "user", "tool_call", "finish", "user"]
    assert [(c["tool"], c["status"]) for c in calls(solved)] == [
        ("get_customer_by_phone", "ok"),
        ("enable_roaming", "ok"),
    ]
    assert calls(solved)[0]["result"]["line_ids"] == ["L1001", "L1002"]  # matched by the tool message's `id`
    assert calls(solved)[1]["result"] == "Roaming enabled successfully for line L1002"
    assert "Data Roaming is now ON." not in json.dumps(solved)
    assert (solved["status"], solved["final_state"]) == (
        "ok",
        {"tau_bench": {"termination_reason": "user_stop", "reward": 1.0}},
    )
    # token usage summed over the assistant messages (2100+2300+2500+2600, 25+30+28+20), duration 42.5 s
    assert solved["usage"] == {"input_tokens": 9500, "output_tokens": 103, "cost_usd": 0.0123, "latency_ms": 42500.0}
    failed = traces[f"t2:tau-{NO_SERVICE}#1"]
    assert [(c["tool"], c["status"]) for c in calls(failed)] == [
        ("get_customer_by_phone", "error"),
        ("transfer_to_human_agents", "ok"),
    ]
    assert failed["final_state"]["tau_bench"]["reward"] == 0.0
    lost = traces[f"t2:tau-{ROAMING}#2"]
    assert (lost["attempt"], lost["status"]) == (2, "error")

    registry = yaml.safe_load((tmp_path / "tools/telecom/tools.yaml").read_text())
    # the user's tools (toggle_roaming, toggle_airplane_mode) are not agent tools: not in the registry
    assert {t["name"]: t["read_only"] for t in registry["tools"]} == {
        "enable_roaming": False,
        "get_customer_by_phone": True,
        "transfer_to_human_agents": True,
    }


def test_tau2_outcome_follows_the_reward(tmp_path):
    import_tau_bench(TAU2_RESULTS, ImportRun(run_id="t2", data_root=tmp_path))
    run = score_run(tmp_path, "t2")
    outcomes = run["outcomes"]
    assert by_trace(outcomes, f"t2:tau-{ROAMING}#1")["success"] is True
    assert by_trace(outcomes, f"t2:tau-{NO_SERVICE}#1")["milestones_failed"] == ["tau_bench_reward"]
    assert by_trace(outcomes, f"t2:tau-{ROAMING}#2")["outcome_stage"] == "incomplete"
    rel = (
        run["reliability"]
        .select("case_id", "n_attempts", "n_complete", "n_incomplete", "n_success", "pass_at_1")
        .rows()
    )
    assert rel == [(f"tau-{ROAMING}", 2, 1, 1, 1, 1.0), (f"tau-{NO_SERVICE}", 1, 1, 0, 0, 0.0)]
    ts = run["tool_scores"]
    solved = by_trace(ts, f"t2:tau-{ROAMING}#1")
    # 2 agent calls (the user's own call is not one), the 1 reference call among them: precision 1/2, recall 1
    assert (solved["n_calls"], solved["tool_call_precision"], solved["tool_call_recall"]) == (2, 0.5, 1.0)
    assert solved["tool_selection_stage"] == "pass"
    assert by_trace(ts, f"t2:tau-{NO_SERVICE}#1")["tool_selection_stage"] == "not_applicable"


# ---------------------------------------------------------------- message shapes of openai-messages


def test_tau2_messages_are_read_by_openai_messages(tmp_path):
    messages = [
        {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None},
        {"role": "user", "content": "Refund order 7, please.", "tool_calls": None},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "name": "get_order", "arguments": {"order_id": "7"}, "requestor": "assistant"},
                {
                    "id": "c2",
                    "name": "issue_refund",
                    "arguments": '{"order_id": "7", "amount": 5}',
                    "requestor": "assistant",
                },
            ],
        },
        # answered out of order: matched by `id`; `error: true` makes a failure whatever the text says
        {"role": "tool", "id": "c2", "content": "refund service unavailable", "requestor": "assistant", "error": True},
        {
            "role": "tool",
            "id": "c1",
            "content": '{"order_id": "7", "total": 5}',
            "requestor": "assistant",
            "error": False,
        },
        {"role": "assistant", "content": "Please restart your app.", "tool_calls": None},
        {
            "role": "user",
            "content": None,
            "tool_calls": [{"id": "u1", "name": "restart_app", "arguments": {}, "requestor": "user"}],
        },
        {"role": "tool", "id": "u1", "content": "App restarted.", "requestor": "user", "error": False},
        {"role": "assistant", "content": "Sorry, I could not refund it.", "tool_calls": None},
    ]
    steps, defects = messages_to_steps(messages)
    assert defects == []
    assert [(s["kind"], s.get("tool")) for s in steps] == [
        ("message", None),
        ("user", None),
        ("tool_call", "get_order"),
        ("tool_call", "issue_refund"),
        ("message", None),
        ("finish", None),
    ]
    assert (steps[2]["status"], steps[2]["result"]) == ("ok", {"order_id": "7", "total": 5})
    assert (steps[3]["args"], steps[3]["status"], steps[3]["error"]) == (
        {"order_id": "7", "amount": 5},
        "error",
        "refund service unavailable",
    )
    summary = import_openai_messages(
        write_jsonl(tmp_path / "tau2.jsonl", [{"messages": messages}]),
        ImportRun(run_id="t", data_root=tmp_path / "data"),
    )
    assert (summary.traces, summary.incomplete, summary.rejects) == (1, [], [])
    assert written_traces(tmp_path / "data", "t")[0]["input"] == "Refund order 7, please."


def test_legacy_function_call_and_function_messages(tmp_path):
    weather = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    messages = [
        {"role": "system", "content": "You answer weather questions."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
        # a function message answers the latest open call of its name: Oslo first, then Paris
        {"role": "function", "name": "get_weather", "content": "Error: no station in Oslo"},
        {"role": "function", "name": "get_weather", "content": '{"city": "Paris", "temp_c": 21}'},
        {"role": "assistant", "content": "Paris is 21°C; Oslo is unavailable."},
    ]
    orphan = [
        *messages[:2],
        {"role": "function", "name": "get_weather", "content": "{}"},
        {"role": "assistant", "content": "Done."},
    ]
    source = write_jsonl(
        tmp_path / "toolbench.jsonl",
        [
            {
                "case_id": "weather",
                "functions": [{"name": "get_weather", "description": "Weather now", "parameters": weather}],
                "messages": messages,
                "success": True,
            },
            {"case_id": "weather", "messages": orphan, "success": False},
        ],
    )
    summary = import_openai_messages(source, ImportRun(run_id="legacy", data_root=tmp_path / "data"))
    assert (summary.records, summary.traces, summary.rejects) == (2, 2, [])
    # the only incomplete trace is the genuinely defective one: a function message answering no open call
    assert summary.incomplete == [
        {
            "trace_id": "legacy:weather#2",
            "reason": "import: message 3: function message answers "
            "a call of 'get_weather', which no earlier call has open",
        }
    ]
    first = written_traces(tmp_path / "data", "legacy")[0]
    assert kinds(first) == ["user", "tool_call", "tool_call", "finish"]
    assert [(c["args"]["city"], c["status"], c["error"]) for c in calls(first)] == [
        ("Paris", "ok", None),
        ("Oslo", "error", "Error: no station in Oslo"),
    ]
    assert calls(first)[0]["result"] == {"city": "Paris", "temp_c": 21}
    registry = yaml.safe_load((tmp_path / "data/tools/openai-messages-toolbench/tools.yaml").read_text())
    assert registry["tools"][0]["args"] == weather  # the legacy `functions` definitions give the schema


def test_anthropic_tool_use_and_tool_result_blocks(tmp_path):
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Refund order 7."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look it up first"},
                {"type": "text", "text": "Looking it up."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "7"}},
                {"type": "text", "text": "Refunding now."},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "issue_refund",
                    "input": {"order_id": "7", "amount": 12.5},
                },
            ],
        },
        # only tool results: not a user step
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "refund service down", "is_error": True},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": '{"order_id": "7", "total": 12.5}'}],
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sorry, the refund failed."}]},
        {"role": "user", "content": [{"type": "text", "text": "OK, thanks."}]},
    ]
    record = {
        "case_id": "anthropic-1",
        "messages": messages,
        "success": False,
        "tools": [
            {"name": "get_order", "description": "Look up an order", "input_schema": ORDER_SCHEMA},
            {"name": "issue_refund", "input_schema": {"type": "object"}},
        ],
        "usage": {"input_tokens": 1200, "output_tokens": 90},
    }
    summary = import_openai_messages(
        write_jsonl(tmp_path / "claude.jsonl", [record]), ImportRun(run_id="claude", data_root=tmp_path / "data")
    )
    assert (summary.traces, summary.incomplete, summary.rejects) == (1, [], [])
    trace = written_traces(tmp_path / "data", "claude")[0]
    assert [(s["kind"], s.get("tool") or s.get("content")) for s in trace["steps"]] == [
        ("user", "Refund order 7."),
        ("message", "Looking it up."),
        ("tool_call", "get_order"),
        ("message", "Refunding now."),
        ("tool_call", "issue_refund"),
        ("finish", "Sorry, the refund failed."),
        ("user", "OK, thanks."),
    ]
    get, refund = calls(trace)
    assert (get["status"], get["result"]) == ("ok", {"order_id": "7", "total": 12.5})
    assert (refund["args"], refund["status"], refund["error"]) == (
        {"order_id": "7", "amount": 12.5},
        "error",
        "refund service down",
    )
    assert (trace["status"], trace["input"], trace["usage"]["input_tokens"]) == ("ok", "Refund order 7.", 1200)
    registry = yaml.safe_load((tmp_path / "data/tools/openai-messages-claude/tools.yaml").read_text())
    assert registry["tools"][0]["args"] == ORDER_SCHEMA  # Anthropic input_schema


def test_a_message_list_the_importer_cannot_read_is_a_reject(tmp_path):
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    source = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            good,
            {"messages": [{"role": "user", "content": "hi"}, {"role": "ipython", "content": "42"}]},
            {"messages": ["hi"]},
            {"info": {}, "tasks": [], "simulations": []},
        ],
    )
    summary = import_openai_messages(source, ImportRun(run_id="mixed", data_root=tmp_path / "data"))
    assert (summary.records, summary.traces, summary.incomplete) == (4, 1, [])
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (2, "message 2 has role 'ipython', which the importer does not read"),
        (3, "message 1 is not an object"),
        (4, "a τ²-bench results file, not a message record: import it with `eval-pipeline import tau-bench`"),
    ]


# ---------------------------------------------------------------- tools missing from the registry, and the τ tool table


def test_a_call_of_a_tool_missing_from_the_registry_is_an_ordinary_step(tmp_path):
    registry = tmp_path / "tools.yaml"
    registry.write_text(
        yaml.safe_dump(
            {"environment_version": "x", "tools": [{"name": "get_order", "read_only": True, "args": ORDER_SCHEMA}]}
        )
    )
    messages = [
        {"role": "user", "content": "Refund order 7."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "7"}'}},
                {"id": "c2", "type": "function", "function": {"name": "wipe_orders", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"order_id": "7"}'},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
        {"role": "assistant", "content": "Done."},
    ]
    assert messages_to_steps(messages)[1] == []
    source = write_jsonl(
        tmp_path / "wipe.jsonl",
        [
            {
                "case_id": "wipe",
                "messages": messages,
                "success": True,
                "reference_tool_calls": [{"name": "get_order", "args": {"order_id": "7"}}],
            }
        ],
    )
    summary = import_openai_messages(source, ImportRun(run_id="wipe", data_root=tmp_path / "data", tools=registry))
    assert (summary.traces, summary.incomplete) == (1, [])
    assert summary.notes[-1].endswith("reason unknown_tool): wipe_orders (1 call)")
    trace = written_traces(tmp_path / "data", "wipe")[0]
    assert (trace["status"], trace["error"]) == ("ok", None)
    assert calls(trace)[1] == {
        "index": 3,
        "kind": "tool_call",
        "tool": "wipe_orders",
        "args": {},
        "status": "ok",
        "result": "done",
        "error": None,
    }
    ts = score_run(tmp_path / "data", "wipe")["tool_scores"]
    row = by_trace(ts, "wipe:wipe#1")
    assert (row["status"], row["tool_selection_stage"]) == ("scored", "fail")
    assert row["tool_selection_reason"] == "unknown_tool: wipe_orders (not in the tool registry)"


def test_tau_bench_registry_takes_roles_from_the_tau_tool_table(tmp_path):
    summary = import_tau_bench(SAMPLE, ImportRun(run_id="tau", data_root=tmp_path, dataset_version="airline"))
    assert summary.notes == [
        "tool registry: inferred from the calls (read_only from the τ-bench / τ²-bench tool table, "
        "else guessed from names)"
    ]
    tools = {t["name"]: t for t in yaml.safe_load((tmp_path / "tools/airline/tools.yaml").read_text())["tools"]}
    assert {name: t["read_only"] for name, t in tools.items()} == {
        "book_reservation": False,
        "calculate": True,
        "cancel_reservation": False,
        "get_reservation_details": True,
        "get_user_details": True,
        "search_direct_flight": True,
        "search_onestop_flight": True,
        "think": True,
        "transfer_to_human_agents": True,
        "update_reservation_flights": False,
    }
    assert tools["transfer_to_human_agents"]["value_rules"] == {"args": {"summary": "any"}}
    assert all("value_rules" not in t for name, t in tools.items() if name != "transfer_to_human_agents")
    case = yaml.safe_load((tmp_path / "cases/airline/tau-1.yaml").read_text())
    assert case["escalation_tools"] == ["transfer_to_human_agents"]

    # names outside the table fall back to the name heuristics
    registry, known, origin = resolve_registry(
        tmp_path / "other", "env", None, {}, ["lookup_fare", "zap_fare", "think"], TAU_TOOL_ROLES, "the table"
    )
    assert known is None and origin == "inferred from the calls (read_only from the table, else guessed from names)"
    assert [(t["name"], t["read_only"]) for t in registry["tools"]] == [
        ("lookup_fare", True),
        ("think", True),
        ("zap_fare", False),
    ]


def test_tau_tool_table_covers_both_generations():
    writes = {n for n, role in TAU_TOOL_ROLES.items() if not role["read_only"]}
    assert {
        "book_reservation",
        "cancel_reservation",
        "send_certificate",
        "modify_pending_order_items",
        "return_delivered_order_items",
        "enable_roaming",
        "suspend_line",
        "refuel_data",
    } <= writes
    reads = set(TAU_TOOL_ROLES) - writes
    assert {
        "get_flight_status",
        "find_user_id_by_email",
        "list_all_product_types",
        "get_data_usage",
        "calculate",
        "think",
        "transfer_to_human_agents",
    } <= reads
    # τ²-bench's agent tools: airline 15 + retail 17 + telecom 13, less the names counted twice (calculate, think and
    # get_user_details in airline and retail, transfer_to_human_agents in all three): 45 - 5;
    # τ-bench's 14 + 16 are among them
    assert len(TAU_TOOL_ROLES) == 40
