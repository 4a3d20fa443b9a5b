"""BFCL import: items become cases with every accepted value, results become traces, and the tool stages give BFCL's
verdict (the benchmark bench/bench_bfcl.py compares them with BFCL's own checker over all live items)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from eval_pipeline.cli.importers import register
from eval_pipeline.importers import IMPORTERS, ImporterError, ImportRun, import_bfcl
from eval_pipeline.importers.bfcl_decode import DecodeError, decode_prompting, decode_result
from eval_pipeline.importers.bfcl_schema import expand_accepted, json_schema, reference_call
from eval_pipeline.io import ingest, inputs, loaders
from eval_pipeline.io.storage import open_location
from eval_pipeline.scoring.tools import score_tools

# A committed subset of ../shared/data/bfcl (same bytes, with its licence): live_parallel and
# live_parallel_multiple whole, the first 60 items of live_simple and live_multiple.
REFERENCE = Path(__file__).resolve().parents[1] / "reference_data" / "bfcl"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "bfcl"
CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple")
STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop")
# every tool stage passes; tool_order is not_applicable for unordered cases without dependencies
PASS = {
    "policy": "pass",
    "tool_selection": "pass",
    "tool_arguments": "pass",
    "tool_order": "not_applicable",
    "loop": "pass",
}
# the 4 live items whose ground truth contradicts their own function (BFCL's checker can pass no call for them)
UNSATISFIABLE = {
    # required, and no accepted value
    "live_simple_106-63-0": "schema: 'auto_loan_payment_start' is a required property",
    "live_simple_112-68-0": "schema: 'acc_routing_start' is a required property",
    "live_multiple_862-181-3": "'journey_start_time' was unexpected",  # the answer names a parameter the function lacks
    "live_multiple_964-207-0": "'question' was unexpected",  # the answer omits the required `statement`
}


def questions(category: str, root: Path = REFERENCE) -> Path:
    return root / f"BFCL_v4_live_{category}.json"


def score_run(data_root: Path, run_id: str) -> pl.DataFrame:
    """tool_scores of an imported run, loaded the way the pipeline loads it."""
    location = open_location(data_root)
    manifest = loaders.load_manifest(location, run_id)
    cases = inputs.load_cases(location, manifest.dataset_version)
    assert cases.rejects == []
    tools = inputs.load_tools(location, manifest.environment_version)
    parsed = ingest.parse_traces(ingest.read_raw_lines(location, run_id), cases.frame, run_id)
    assert parsed.rejects.height == 0
    tool_scores, _ = score_tools(parsed.traces, cases.frame, tools)
    return tool_scores


def stages(row: dict[str, Any]) -> dict[str, str]:
    return {s: row[f"{s}_stage"] for s in STAGES}


def failing(frame: pl.DataFrame) -> pl.DataFrame:
    ok = pl.all_horizontal([pl.col(f"{s}_stage").is_in(["pass", "not_applicable"]) for s in STAGES])
    return frame.filter(~ok)


def write_results(path: Path, lines: list[tuple[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"id": item_id, "result": result}) + "\n" for item_id, result in lines))
    return path


def read_lines(path: Path) -> dict[str, dict[str, Any]]:
    return {json.loads(line)["id"]: json.loads(line) for line in path.read_text().splitlines() if line.strip()}


# ---------------------------------------------------------------- the first accepted answers pass


@pytest.mark.parametrize("category", CATEGORIES)
def test_self_check_of_the_committed_subset_passes_every_tool_stage(tmp_path, category):
    summary = import_bfcl(
        questions(category), ImportRun(run_id=f"self-{category}", data_root=tmp_path), self_check=True
    )
    expected = len(read_lines(questions(category)))
    assert (summary.cases, summary.traces, summary.rejects, summary.incomplete) == (expected, expected, [], [])
    scores = score_run(tmp_path, f"self-{category}")
    assert scores.height == expected
    assert failing(scores).height == 0
    assert all(stages(row) == PASS for row in scores.iter_rows(named=True))


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared BFCL data is not beside the repository")
def test_self_check_of_the_full_live_files_fails_only_the_unsatisfiable_items(tmp_path):
    failed: dict[str, str] = {}
    total = 0
    for category in CATEGORIES:
        summary = import_bfcl(
            questions(category, SHARED), ImportRun(run_id=f"self-{category}", data_root=tmp_path), self_check=True
        )
        total += summary.traces
        scores = score_run(tmp_path, f"self-{category}")
        for row in failing(scores).iter_rows(named=True):
            assert stages(row) == {**PASS, "tool_arguments": "fail"}
            failed[row["case_id"]] = row["tool_arguments_reason"]
        named = [n for n in summary.notes if "breaks their own function's schema" in n]
        assert all(item in " ".join(named) for item in failed if item.startswith(f"live_{category}_")), summary.notes
    assert total == 258 + 1053 + 16 + 24
    assert sorted(failed) == sorted(UNSATISFIABLE)
    for item, reason in UNSATISFIABLE.items():
        assert reason in failed[item]


# ---------------------------------------------------------------- each perturbation gets BFCL's verdict

WEATHER = "live_simple_4-3-0"  # get_current_weather(location: 'Tel Aviv, Israel', unit: ['fahrenheit', ''])
USER = "live_simple_0-0-0"  # get_user_info(user_id: integer 7890, special: 'black')
NESTED = "live_simple_40-17-0"  # ThinQ_Connect(body: a dict of accepted lists)
UBER = "live_multiple_2-1-0"  # offers uber.ride and uber.ride2; expects uber.ride(loc, type='plus', time=10)
UBER_ARGS = "loc='2150 Shattuck Ave, Berkeley, CA', type='plus', time=10"
PARALLEL = "live_parallel_0-0-0"  # get_current_weather for Beijing and for Shanghai, in any order

# kind: (category, item, result, expected stages (PASS with these overridden), a text the failing reason holds)
PERTURBATIONS: dict[str, tuple[str, str, Any, dict[str, str], str | None]] = {
    "first_answer": ("simple", USER, "[get_user_info(user_id=7890, special='black')]", {}, None),
    "wrong_value": (
        "simple",
        USER,
        "[get_user_info(user_id=7891, special='black')]",
        {"tool_arguments": "fail"},
        "args match no reference call",
    ),
    "missing_required": (
        "simple",
        USER,
        "[get_user_info(special='black')]",
        {"tool_arguments": "fail"},
        "'user_id' is a required property",
    ),
    "string_for_integer": (
        "simple",
        USER,
        "[get_user_info(user_id='7890', special='black')]",
        {"tool_arguments": "fail"},
        "'7890' is not of type 'integer'",
    ),
    "whole_float_for_integer": (
        "simple",
        USER,
        "[get_user_info(user_id=7890.0, special='black')]",
        {"tool_arguments": "fail"},
        "strict_types",
    ),
    "extra_argument": (
        "simple",
        USER,
        "[get_user_info(user_id=7890, special='black', verbose=True)]",
        {"tool_arguments": "fail"},
        "'verbose' was unexpected",
    ),
    "argument_of_the_function_not_in_the_answer": (
        "simple",
        WEATHER,
        "[get_current_weather(location='Tel Aviv, Israel', unit='fahrenheit', days=3)]",
        {"tool_arguments": "fail"},
        "'days' was unexpected",
    ),
    "another_offered_function": (
        "multiple",
        UBER,
        f"[uber.ride2({UBER_ARGS})]",
        {"tool_selection": "fail"},
        "path tools never called: uber.ride",
    ),
    # a tool missing from the registry fails its schema check too, and is never a policy breach (scoring/tools/)
    "invented_function": (
        "simple",
        USER,
        "[get_user_details(user_id=7890, special='black')]",
        {"tool_selection": "fail", "tool_arguments": "fail"},
        "get_user_details",
    ),
    "duplicate_call": (
        "simple",
        USER,
        "[get_user_info(user_id=7890, special='black'), get_user_info(user_id=7890, special='black')]",
        {"tool_selection": "fail"},
        "surplus calls",
    ),
    "dropped_parallel_call": (
        "parallel",
        PARALLEL,
        "[get_current_weather(location='Beijing, China')]",
        {"tool_selection": "fail"},
        "path calls not made",
    ),
    "parallel_calls_reordered": (
        "parallel",
        PARALLEL,
        "[get_current_weather(location='Shanghai, China', unit='fahrenheit'), "
        "get_current_weather(location='Beijing, China')]",
        {},
        None,
    ),
    "case_change_of_a_string": (
        "simple",
        WEATHER,
        "[get_current_weather(location='TEL AVIV, ISRAEL', unit='Fahrenheit')]",
        {},
        None,
    ),
    "punctuation_of_a_string": ("simple", WEATHER, "[get_current_weather(location='Tel-Aviv Israel')]", {}, None),
    "omitted_optional_argument": ("simple", WEATHER, "[get_current_weather(location='Tel Aviv, Israel')]", {}, None),
    "another_accepted_value": (
        "simple",
        "live_simple_7-3-3",
        "[get_current_weather(location='Riga, Latvia', unit='celsius')]",
        {},
        None,
    ),
    "empty_string_for_an_optional_argument": (
        "simple",
        WEATHER,
        "[get_current_weather(location='Tel Aviv, Israel', unit='')]",
        {},
        None,
    ),
    "nested_optional_keys_given": (
        "simple",
        NESTED,
        "[ThinQ_Connect(body={'airConJobMode': 'AIR_CLEAN', 'windStrength': 'HIGH', "
        "'monitoringEnabled': True, 'airCleanOperationMode': 'POWER_ON', 'targetTemperature': 22, "
        "'powerSaveEnabled': False})]",
        {},
        None,
    ),
    "nested_wrong_value": (
        "simple",
        NESTED,
        "[ThinQ_Connect(body={'airConJobMode': 'AIR_CLEAN', 'windStrength': 'LOW', "
        "'monitoringEnabled': True, 'airCleanOperationMode': 'POWER_ON'})]",
        {"tool_arguments": "fail"},
        "args match no reference call",
    ),
    "nested_unexpected_key": (
        "simple",
        NESTED,
        "[ThinQ_Connect(body={'airConJobMode': 'AIR_CLEAN', 'windStrength': 'HIGH', "
        "'monitoringEnabled': True, 'airCleanOperationMode': 'POWER_ON', 'fanSpeed': 3})]",
        {"tool_arguments": "fail"},
        "args match no reference call",
    ),
    "dotted_function_name": ("multiple", UBER, f"[uber.ride({UBER_ARGS})]", {}, None),
    "function_calling_form": (
        "multiple",
        UBER,
        [{"uber.ride": json.dumps({"loc": "2150 Shattuck Ave, Berkeley, CA", "type": "plus", "time": 10})}],
        {},
        None,
    ),
    "json_strings_of_calls": (
        "simple",
        USER,
        [json.dumps({"get_user_info": {"user_id": 7890, "special": "black"}})],
        {},
        None,
    ),
    "openai_tool_calls": (
        "simple",
        USER,
        [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_user_info", "arguments": json.dumps({"user_id": 7890, "special": "black"})},
            }
        ],
        {},
        None,
    ),
    "no_call": ("simple", USER, "[]", {"tool_selection": "fail"}, "path tools never called: get_user_info"),
    "undecodable_text": (
        "simple",
        USER,
        "I cannot look up users.",
        {"tool_selection": "fail"},
        "path tools never called: get_user_info",
    ),
}


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """{kind: tool_scores row} of every perturbation, imported with `import bfcl --results` and scored."""
    root = tmp_path_factory.mktemp("bfcl")
    rows: dict[str, dict[str, Any]] = {}
    for category in CATEGORIES:
        kinds = [kind for kind, spec in PERTURBATIONS.items() if spec[0] == category]
        if not kinds:
            continue
        results = write_results(
            root / f"{category}_result.json", [(PERTURBATIONS[k][1], PERTURBATIONS[k][2]) for k in kinds]
        )
        summary = import_bfcl(
            questions(category), ImportRun(run_id=f"perturbed-{category}", data_root=root / "data"), results=results
        )
        assert summary.rejects == []
        scores = score_run(root / "data", f"perturbed-{category}")
        attempts: dict[str, int] = {}
        for kind in kinds:
            item = PERTURBATIONS[kind][1]
            attempts[item] = attempts.get(item, 0) + 1
            rows[kind] = scores.filter((pl.col("case_id") == item) & (pl.col("attempt") == attempts[item])).row(
                0, named=True
            )
    return rows


@pytest.mark.parametrize("kind", sorted(PERTURBATIONS))
def test_each_perturbation_gets_bfcls_verdict(perturbed, kind):
    _, _, _, overrides, reason = PERTURBATIONS[kind]
    row = perturbed[kind]
    assert stages(row) == {**PASS, **overrides}
    for stage in overrides:
        assert reason in row[f"{stage}_reason"], row[f"{stage}_reason"]
    if kind == "invented_function":
        assert row["tool_selection_reason"].startswith("unknown_tool: get_user_details (not in the tool registry)")


def test_a_case_change_passes_under_normalized_strings_and_other_words_do_not(tmp_path):
    item = {
        "id": "hotel_0",
        "question": [[{"role": "user", "content": "Book the Hilton in Paris for 2 nights."}]],
        "function": [
            {
                "name": "book_hotel",
                "description": "Books a hotel.",
                "parameters": {
                    "type": "dict",
                    "required": ["hotel", "nights"],
                    "properties": {"hotel": {"type": "string"}, "nights": {"type": "integer"}},
                },
            }
        ],
    }
    source = tmp_path / "hotels.json"
    source.write_text(json.dumps(item) + "\n")
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer" / "hotels.json").write_text(
        json.dumps({"id": "hotel_0", "ground_truth": [{"book_hotel": {"hotel": ["Hilton"], "nights": [2]}}]}) + "\n"
    )
    results = write_results(
        tmp_path / "results.json",
        [
            ("hotel_0", "[book_hotel(hotel='HILTON', nights=2)]"),
            ("hotel_0", "[book_hotel(hotel='hilton ', nights=2)]"),
            ("hotel_0", "[book_hotel(hotel='Hilton Inn', nights=2)]"),
            ("hotel_0", "[book_hotel(hotel='Hilton', nights=2.0)]"),
        ],
    )
    import_bfcl(source, ImportRun(run_id="hotels", data_root=tmp_path / "data"), results=results)
    scores = score_run(tmp_path / "data", "hotels").sort("attempt")
    assert [stages(r)["tool_arguments"] for r in scores.iter_rows(named=True)] == ["pass", "pass", "fail", "fail"]
    assert all(
        stages(r) == {**PASS, "tool_arguments": stages(r)["tool_arguments"]} for r in scores.iter_rows(named=True)
    )


# ---------------------------------------------------------------- decoding results


def test_the_prompting_form_parser_reads_tricky_strings():
    assert decode_prompting("[f(a=1, b='x')]") == ([("f", {"a": 1, "b": "x"})], 0)
    assert decode_prompting("f(a=-1, b=-2.5, c=+3)") == ([("f", {"a": -1, "b": -2.5, "c": 3})], 0)
    # strings holding commas, brackets, parentheses and quotes stay whole
    assert decode_prompting('[f(s=\'a, b) c[d] "q"\'), g(t="it\'s]")]') == (
        [("f", {"s": 'a, b) c[d] "q"'}), ("g", {"t": "it's]"})],
        0,
    )
    # nested lists and dicts, None / True / False
    assert decode_prompting("[g(l=[[1, 2], [3, [4]]], d={'x': {'y': None, 'z': [True, False]}})]") == (
        [("g", {"l": [[1, 2], [3, [4]]], "d": {"x": {"y": None, "z": [True, False]}}})],
        0,
    )
    # dotted names, several calls, wrapped in backticks and newlines as models write them
    assert decode_prompting(
        "```\n[requests.get(url='https://x.io/a?b=1,2', params={'k': 'v'}), a.b.c(x=(1, 2))]\n```"
    ) == ([("requests.get", {"url": "https://x.io/a?b=1,2", "params": {"k": "v"}}), ("a.b.c", {"x": [1, 2]})], 0)
    # a call without brackets; a call with no arguments; keyword-only calls; arithmetic is computed, never evaluated
    assert decode_prompting("get_time()") == ([("get_time", {})], 0)
    assert decode_prompting("[f(x=2*3, y=1/4, z='a' + 'b')]") == ([("f", {"x": 6, "y": 0.25, "z": "ab"})], 0)
    # BFCL's decoder reads a bare name as its text and a nested call as a {name: args} dict or its source text
    assert decode_prompting("[f(unit=celsius, when=now(), at=point(x=1))]") == (
        [("f", {"unit": "celsius", "when": "now()", "at": {"point": {"x": 1}}})],
        0,
    )
    # positional arguments cannot be named: dropped, as BFCL drops them, and counted
    assert decode_prompting("[f(1, 'two', b=2)]") == ([("f", {"b": 2})], 2)
    assert decode_prompting("[]") == ([], 0)
    # nothing is run: a nested call without keywords is kept as text
    assert decode_prompting("[f(x=__import__('os').system('true'))]") == (
        [("f", {"x": "__import__('os').system('true')"})],
        0,
    )
    for text in (
        "I cannot call a function",
        "[f(x=lambda: 1)]",
        "[f(a=1), 'text']",
        "[f(d={1: 'a'})]",
        "[f(**kw)]",
        "[f(x=open('/etc/passwd').read)]",
        "[f(x=1e999)]",
        "[f()[0](x=1)]",
        "[f(x=b'raw')]",
    ):
        with pytest.raises(DecodeError):
            decode_prompting(text)


def test_function_calling_forms_decode_to_the_same_calls():
    expected = ([("get_weather", {"city": "Paris", "days": 2})], 0)
    assert decode_result([{"get_weather": '{"city": "Paris", "days": 2}'}]) == expected
    assert decode_result([{"get_weather": {"city": "Paris", "days": 2}}]) == expected
    assert decode_result(['{"get_weather": {"city": "Paris", "days": 2}}']) == expected
    assert (
        decode_result(
            [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'},
                }
            ]
        )
        == expected
    )
    assert decode_result('[{"get_weather": "{\\"city\\": \\"Paris\\", \\"days\\": 2}"}]') == expected
    assert decode_result("[get_weather(city='Paris', days=2)]") == expected
    assert decode_result([]) == ([], 0)
    for result in (
        {"get_weather": {}},
        [{"get_weather": "{not json"}],
        [{"a": {}, "b": {}}],
        [{"f": "[1, 2]"}],
        42,
        None,
    ):
        with pytest.raises(DecodeError):
            decode_result(result)


def test_an_undecodable_result_is_a_trace_with_the_raw_text_and_no_call(tmp_path):
    results = write_results(tmp_path / "r.json", [(USER, "Sorry, I need more details."), (USER, {"not": "a list"})])
    summary = import_bfcl(questions("simple"), ImportRun(run_id="raw", data_root=tmp_path / "data"), results=results)
    assert (summary.traces, summary.rejects, summary.incomplete) == (2, [], [])
    assert any(note.startswith("2 results could not be decoded") for note in summary.notes)
    lines = [json.loads(line) for line in (tmp_path / "data/traces/raw/r.jsonl").read_text().splitlines()]
    assert [line["steps"] for line in lines] == [
        [{"index": 1, "kind": "finish", "content": "Sorry, I need more details."}],
        [{"index": 1, "kind": "finish", "content": '{"not": "a list"}'}],
    ]
    assert all(line["status"] == "ok" for line in lines)  # an agent failure, not a harness failure
    scores = score_run(tmp_path / "data", "raw")
    assert [stages(r) for r in scores.iter_rows(named=True)] == [{**PASS, "tool_selection": "fail"}] * 2


def test_result_lines_of_one_id_are_attempts_and_foreign_lines_are_rejects(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "id": USER,
                        "result": "[get_user_info(user_id=7890, special='black')]",
                        "input_token_count": 120,
                        "output_token_count": 9,
                        "latency": 0.5,
                    }
                ),
                json.dumps({"id": USER, "result": "[get_user_info(user_id=1)]"}),
                json.dumps({"id": "live_simple_999-0-0", "result": "[]"}),
                json.dumps({"id": WEATHER}),
                "{broken",
            ]
        )
        + "\n"
    )
    summary = import_bfcl(questions("simple"), ImportRun(run_id="att", data_root=tmp_path / "data"), results=path)
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (3, "result of live_simple_999-0-0, which is not an imported item"),
        (4, "no result"),
        (5, "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
    ]
    # only the attempted item becomes a case; the 59 others are named in a note
    assert (summary.cases, summary.traces) == (1, 2)
    assert any(note.startswith("59 items have no result line") for note in summary.notes)
    lines = [json.loads(line) for line in (tmp_path / "data/traces/att/results.jsonl").read_text().splitlines()]
    assert [(t["trace_id"], t["attempt"]) for t in lines] == [(f"att:{USER}#1", 1), (f"att:{USER}#2", 2)]
    assert lines[0]["usage"] == {"input_tokens": 120, "output_tokens": 9, "cost_usd": None, "latency_ms": 500.0}
    scores = score_run(tmp_path / "data", "att").sort("attempt")
    assert [stages(r)["tool_arguments"] for r in scores.iter_rows(named=True)] == ["pass", "fail"]


def test_underscore_to_dot_resolves_names_of_models_that_cannot_write_dots(tmp_path):
    results = write_results(
        tmp_path / "r.json",
        [(UBER, [{"uber_ride": json.dumps({"loc": "2150 Shattuck Ave, Berkeley, CA", "type": "plus", "time": 10})}])],
    )
    import_bfcl(
        questions("multiple"),
        ImportRun(run_id="dots", data_root=tmp_path / "a"),
        results=results,
        underscore_to_dot=True,
    )
    assert stages(score_run(tmp_path / "a", "dots").row(0, named=True)) == PASS
    import_bfcl(questions("multiple"), ImportRun(run_id="plain", data_root=tmp_path / "b"), results=results)
    row = score_run(tmp_path / "b", "plain").row(0, named=True)
    assert stages(row) == {**PASS, "tool_selection": "fail", "tool_arguments": "fail"}
    assert "unknown_tool: uber_ride" in row["tool_selection_reason"]


# ---------------------------------------------------------------- cases and registry


def test_cases_carry_every_accepted_value_and_the_optional_parameters(tmp_path):
    summary = import_bfcl(
        questions("simple"),
        ImportRun(run_id="self", data_root=tmp_path, dataset_version="bfcl-simple"),
        self_check=True,
    )
    assert summary.dataset_version == summary.environment_version == "bfcl-simple"
    weather = yaml.safe_load((tmp_path / f"cases/bfcl-simple/{WEATHER}.yaml").read_text())
    assert weather == {
        "case_id": WEATHER,
        "case_revision": 1,
        "lanes": ["agent"],
        "input": "What are the current weather conditions in Tel Aviv, "
        "and could you provide that in Fahrenheit, please?",
        "allowed_tools": ["get_current_weather@live_simple_4-3-0"],
        "reference_tool_calls": [
            {
                "name": "get_current_weather@live_simple_4-3-0",
                "args": {"location": "Tel Aviv, Israel", "unit": "fahrenheit"},
                "accepted": {"location": ["Tel Aviv, Israel"], "unit": ["fahrenheit", ""]},
                "optional": ["unit"],
            }
        ],
        "tool_match": "unordered",
    }
    # a first accepted value "" leaves the parameter out of the canonical call
    parallel = import_bfcl(questions("parallel"), ImportRun(run_id="p", data_root=tmp_path / "p"), self_check=True)
    assert parallel.traces == 16
    case = yaml.safe_load((tmp_path / f"p/cases/bfcl-BFCL_v4_live_parallel/{PARALLEL}.yaml").read_text())
    assert [(c["args"], c["optional"]) for c in case["reference_tool_calls"]] == [
        ({"location": "Beijing, China"}, ["unit"]),
        ({"location": "Shanghai, China"}, ["unit"]),
    ]


def test_the_registry_states_bfcls_types_and_checks_every_call(tmp_path):
    import_bfcl(questions("simple"), ImportRun(run_id="self", data_root=tmp_path), self_check=True)
    registry = yaml.safe_load((tmp_path / "tools/bfcl-BFCL_v4_live_simple/tools.yaml").read_text())
    assert registry["value_rules"] == "bfcl"
    tools = {t["name"]: t for t in registry["tools"]}
    # get_* names would be guessed read-only; BFCL checks every call, so none is
    assert not any(t["read_only"] for t in tools.values())
    assert tools["get_user_info"]["args"] == {
        "type": "object",
        "properties": {
            "user_id": {
                "type": "integer",
                "description": tools["get_user_info"]["args"]["properties"]["user_id"]["description"],
            },
            "special": {
                "type": "string",
                "description": tools["get_user_info"]["args"]["properties"]["special"]["description"],
                "default": "none",
            },
        },
        "required": ["user_id"],
        "additionalProperties": False,
    }
    weather = tools["get_current_weather@live_simple_4-3-0"]["args"]["properties"]["unit"]
    assert weather["x-bfcl-enum"] == ["celsius", "fahrenheit"] and "enum" not in weather  # BFCL never checks enums
    body = tools["ThinQ_Connect@live_simple_40-17-0"]["args"]["properties"]["body"]
    assert body["type"] == "object" and body["properties"]["targetTemperature"]["type"] == "integer"


def test_bfcl_types_become_json_schema():
    schema = json_schema(
        {
            "type": "dict",
            "required": ["a"],
            "properties": {
                "a": {"type": "float"},
                "b": {"type": "tuple", "items": {"type": "integer"}},
                "c": {"type": "any", "description": "x"},
                "d": {
                    "type": "array",
                    "items": {"type": "dict", "required": ["k"], "properties": {"k": {"type": "boolean"}}},
                },
                "e": {"type": "string", "enum": ["x", "y"], "default": "x"},
            },
        }
    )
    assert schema == {
        "type": "object",
        "required": ["a"],
        "additionalProperties": False,
        "properties": {
            "a": {"type": "number"},
            "b": {"type": "array", "items": {"type": "integer"}},
            "c": {"description": "x"},
            "d": {
                "type": "array",
                "items": {"type": "object", "properties": {"k": {"type": "boolean"}}, "x-bfcl-required": ["k"]},
            },
            "e": {"type": "string", "default": "x", "x-bfcl-enum": ["x", "y"]},
        },
    }
    with pytest.raises(ImporterError, match="unknown BFCL parameter type 'str'"):
        json_schema({"type": "dict", "properties": {"a": {"type": "str"}}})


def test_answers_of_another_type_widen_only_their_own_items_definition(tmp_path):
    function = {
        "name": "find_hotel",
        "description": "Finds hotels.",
        "parameters": {
            "type": "dict",
            "required": ["city"],
            "properties": {"city": {"type": "string"}, "rooms": {"type": "integer"}},
        },
    }
    items = [
        {"id": f"hotel_{i}", "question": [[{"role": "user", "content": "?"}]], "function": [function]} for i in range(2)
    ]
    source = tmp_path / "hotels.json"
    source.write_text("".join(json.dumps(i) + "\n" for i in items))
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer/hotels.json").write_text(
        json.dumps({"id": "hotel_0", "ground_truth": [{"find_hotel": {"city": ["Paris"], "rooms": ["dontcare"]}}]})
        + "\n"
        + json.dumps({"id": "hotel_1", "ground_truth": [{"find_hotel": {"city": ["Rome"], "rooms": [2]}}]})
        + "\n"
    )
    results = write_results(
        tmp_path / "r.json",
        [
            ("hotel_0", "[find_hotel(city='Paris', rooms='dontcare')]"),
            ("hotel_1", "[find_hotel(city='Rome', rooms='2')]"),
        ],
    )
    summary = import_bfcl(source, ImportRun(run_id="h", data_root=tmp_path / "data"), results=results)
    registry = yaml.safe_load((tmp_path / "data/tools/bfcl-hotels/tools.yaml").read_text())
    assert {t["name"]: t["args"]["properties"]["rooms"]["type"] for t in registry["tools"]} == {
        "find_hotel@hotel_0": ["integer", "string"],
        "find_hotel@hotel_1": "integer",
    }
    assert any("1 function names are defined differently" in note for note in summary.notes)
    scores = score_run(tmp_path / "data", "h").sort("case_id")
    assert [stages(r)["tool_arguments"] for r in scores.iter_rows(named=True)] == ["pass", "fail"]


def test_names_defined_twice_are_qualified_or_refused(tmp_path):
    summary = import_bfcl(questions("parallel"), ImportRun(run_id="p", data_root=tmp_path / "a"), self_check=True)
    assert any(
        note.startswith("3 function names are defined differently by different items: registered as 14 tools")
        for note in summary.notes
    )
    lines = [json.loads(line) for line in (tmp_path / "a/traces/p/self-check.jsonl").read_text().splitlines()]
    first = next(line for line in lines if line["case_id"] == PARALLEL)
    assert [s["tool"] for s in first["steps"]] == ["get_current_weather@live_parallel_0-0-0"] * 2
    with pytest.raises(
        ImporterError,
        match="function get_current_weather is defined differently by items "
        "live_parallel_0-0-0 and live_parallel_1-0-1",
    ):
        import_bfcl(
            questions("parallel"), ImportRun(run_id="p", data_root=tmp_path / "b"), self_check=True, collisions="error"
        )
    # a second file into the environment version of the first is refused: one environment version per file
    import_bfcl(
        questions("simple"),
        ImportRun(run_id="s", data_root=tmp_path / "c", environment_version="bfcl"),
        self_check=True,
    )
    with pytest.raises(ImporterError, match="tools/bfcl/tools.yaml exists with other tools"):
        import_bfcl(
            questions("multiple"),
            ImportRun(run_id="m", data_root=tmp_path / "c", environment_version="bfcl"),
            self_check=True,
        )
    # re-importing the same file (results after the self-check) reuses its registry and cases
    import_bfcl(
        questions("simple"),
        ImportRun(run_id="s2", data_root=tmp_path / "c", environment_version="bfcl"),
        self_check=True,
    )


def test_nested_answers_expand_into_concrete_values_under_a_cap():
    items = read_lines(questions("simple"))
    answers = read_lines(REFERENCE / "possible_answer" / "BFCL_v4_live_simple.json")
    function = items[NESTED]["function"][0]
    answer = answers[NESTED]["ground_truth"][0]["ThinQ_Connect"]
    call = reference_call("ThinQ_Connect", answer, function, NESTED)
    # four keys with one value, three with ['', value]: each of those absent, given, or given as "" → 3^3
    assert len(call["accepted"]["body"]) == 27
    assert call["args"]["body"] == {
        "airConJobMode": "AIR_CLEAN",
        "windStrength": "HIGH",
        "monitoringEnabled": True,
        "airCleanOperationMode": "POWER_ON",
    }
    assert {
        "airConJobMode": "AIR_CLEAN",
        "windStrength": "HIGH",
        "monitoringEnabled": True,
        "airCleanOperationMode": "POWER_ON",
        "powerSaveEnabled": False,
        "coolTargetTemperature": 24,
        "targetTemperature": 22,
    } in call["accepted"]["body"]
    # a list of dicts: each element expanded, the product of the elements
    spec = {"type": "array", "items": {"type": "dict"}}
    assert expand_accepted([[{"n": ["a", "b"]}, {"n": ["c"], "m": ["", 1]}]], spec, "x") == [
        [{"n": "a"}, {"n": "c"}],
        [{"n": "a"}, {"n": "c", "m": 1}],
        [{"n": "a"}, {"n": "c", "m": ""}],
        [{"n": "b"}, {"n": "c"}],
        [{"n": "b"}, {"n": "c", "m": 1}],
        [{"n": "b"}, {"n": "c", "m": ""}],
    ]
    # deeper values are concrete, as BFCL's checker reads them
    assert expand_accepted([{"position": [{"lateral": 10.5}]}], {"type": "dict"}, "x") == [
        {"position": {"lateral": 10.5}}
    ]
    with pytest.raises(
        ImporterError,
        match=f"{NESTED}: ThinQ_Connect.body: the nested accepted values expand to 27 combinations, "
        "more than the cap of 20",
    ):
        reference_call("ThinQ_Connect", answer, function, NESTED, cap=20)


def test_items_bfcl_can_never_pass_are_named(tmp_path):
    function = {
        "name": "record",
        "description": "",
        "parameters": {
            "type": "dict",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "array", "items": {"type": "string"}},
                "b": {"type": "array", "items": {"type": "string"}},
            },
        },
    }
    source = tmp_path / "odd.json"
    source.write_text(
        json.dumps({"id": "odd_0", "question": [[{"role": "user", "content": "?"}]], "function": [function]}) + "\n"
    )
    (tmp_path / "possible_answer").mkdir()
    # BFCL's data writes [] (no accepted value) where [[]] was meant: no call passes BFCL's checker
    (tmp_path / "possible_answer/odd.json").write_text(
        json.dumps({"id": "odd_0", "ground_truth": [{"record": {"a": [["x"]], "b": []}}]}) + "\n"
    )
    summary = import_bfcl(source, ImportRun(run_id="odd", data_root=tmp_path / "data"), self_check=True)
    assert (
        "1 items whose ground truth breaks their own function's schema (BFCL can pass no call for them): odd_0"
        in summary.notes
    )
    results = write_results(tmp_path / "r.json", [("odd_0", "[record(a=['x'], b=[])]")])
    import_bfcl(source, ImportRun(run_id="odd-r", data_root=tmp_path / "data"), results=results)
    for run in ("odd", "odd-r"):
        assert stages(score_run(tmp_path / "data", run).row(0, named=True)) == {**PASS, "tool_arguments": "fail"}


def test_bad_items_are_rejects(tmp_path):
    good = read_lines(questions("simple"))[USER]
    source = tmp_path / "mixed.json"
    source.write_text(
        "\n".join(
            [
                json.dumps(good),
                json.dumps(good),
                json.dumps({**good, "id": "live_simple_x"}),
                json.dumps({**good, "id": "a/b"}),
                json.dumps({"id": "q", "question": []}),
                json.dumps({**good, "id": "other"}),
            ]
        )
        + "\n"
    )
    answers = tmp_path / "answers.json"
    gold = read_lines(REFERENCE / "possible_answer" / "BFCL_v4_live_simple.json")[USER]
    answers.write_text(
        json.dumps(gold) + "\n" + json.dumps({"id": "other", "ground_truth": [{"get_user": {"user_id": [1]}}]}) + "\n"
    )
    summary = import_bfcl(
        source, ImportRun(run_id="mixed", data_root=tmp_path / "data"), answers=answers, self_check=True
    )
    assert summary.traces == 1
    assert [(r["line"], r["reason"]) for r in summary.rejects] == [
        (2, f"duplicate id {USER}"),
        (3, "no possible answer for live_simple_x in answers.json"),
        (4, "id 'a/b' holds '/', which a case id cannot"),
        (5, "no function list of {name, description, parameters}"),
        (6, "the ground truth calls get_user, which the item does not offer"),
    ]


# ---------------------------------------------------------------- the command line


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.handler(args)


def test_the_import_command(tmp_path, capsys):
    assert "bfcl" in IMPORTERS
    data = str(tmp_path / "data")
    assert (
        cli(["import", "bfcl", "--questions", str(questions("parallel")), "--self-check", "--run", "a", "--data", data])
        == 0
    )
    assert "records 16, cases 16, traces 16 (0 incomplete), rejected 0" in capsys.readouterr().out
    # SOURCE works as the question file; the answers default to possible_answer/<same name> beside it
    results = write_results(tmp_path / "r.json", [(PARALLEL, "[get_current_weather(location='Beijing, China')]")])
    assert (
        cli(["import", "bfcl", str(questions("parallel")), "--results", str(results), "--run", "b", "--data", data])
        == 0
    )
    assert score_run(tmp_path / "data", "b").row(0, named=True)["tool_selection_stage"] == "fail"
    capsys.readouterr()
    assert cli(["import", "bfcl", str(questions("parallel")), "--run", "c", "--data", data]) == 2
    assert "give exactly one of --results FILE" in capsys.readouterr().err
    assert (
        cli(
            [
                "import",
                "bfcl",
                "--questions",
                str(questions("parallel")),
                "--self-check",
                "--collisions",
                "error",
                "--run",
                "c",
                "--data",
                data,
            ]
        )
        == 2
    )
    assert "is defined differently by items live_parallel_0-0-0 and live_parallel_1-0-1" in capsys.readouterr().err
    assert cli(["import", "bfcl", "--self-check", "--run", "c", "--data", data]) == 2
    assert "bfcl needs a SOURCE file" in capsys.readouterr().err
    assert (
        cli(
            [
                "import",
                "bfcl",
                str(questions("parallel")),
                "--answers",
                str(tmp_path / "none.json"),
                "--self-check",
                "--run",
                "c",
                "--data",
                data,
            ]
        )
        == 2
    )
    assert "no possible-answer file" in capsys.readouterr().err
    # the other formats keep their command line
    assert cli(["import", "tau-bench", "--run", "c", "--data", data]) == 2
    assert "tau-bench needs a SOURCE file" in capsys.readouterr().err
    assert cli(["import", "tau-bench", "x.json", "--self-check", "--run", "c", "--data", data]) == 2
    assert "bfcl options given to tau-bench: --self-check" in capsys.readouterr().err
