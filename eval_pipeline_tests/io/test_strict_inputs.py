"""Strict inputs: one YAML reader (no duplicate keys, no tabs, file:line:column), configuration checked before any
step runs, and data problems (bad grades, duplicate doc_ids, empty RAG contracts, odd JSON) as reject rows."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eval_pipeline.contracts.policy import GatePolicy, RetrievalPolicy
from eval_pipeline.io import inputs, labels, loaders
from eval_pipeline.io.json_limits import depth_of
from eval_pipeline.io.policy import parse_gate_policy
from eval_pipeline.io.storage import InputError, open_location
from eval_pipeline.io.strict_yaml import YamlError, load_yaml, parse_yaml
from eval_pipeline.judge.base import JudgeConfigError
from eval_pipeline.judge.profile import JudgeProfile
from eval_pipeline.runner import RunnerError, validate_configuration

REPO_ROOT = Path(__file__).resolve().parents[2]
RAG_CASE = {"case_id": "rag-1", "lanes": ["rag"], "input": "q", "required_doc_ids": ["d1"]}
POLICY = "version: 3\ngates:\n- {name: recall, lane: rag, metric: recall_at_10, max_regression_points: 2}\n"


# ---------------------------------------------------------------- the YAML reader


def test_a_duplicate_key_is_an_error_at_its_line_and_column():
    with pytest.raises(YamlError) as error:
        load_yaml("case_id: rag-1\nexpect_refusal: false\nlanes: [rag]\nexpect_refusal: true\n", "c.yaml")
    assert str(error.value) == (
        "c.yaml:4:1: duplicate key 'expect_refusal' (first given at line 2, column 1); "
        "a key may appear once in a mapping"
    )
    assert (error.value.line, error.value.column) == (4, 1)


def test_a_duplicate_key_in_a_nested_mapping_and_a_second_tools_list_are_errors():
    text = "gates:\n- name: recall\n  max_regression_points: 2\n  max_regression_points: 99\n"
    with pytest.raises(
        YamlError, match=r"^gates.yaml:4:3: duplicate key 'max_regression_points' \(first given at line 3, column 3\)"
    ):
        load_yaml(text, "gates.yaml")
    with pytest.raises(YamlError, match=r"^tools.yaml:4:1: duplicate key 'tools' \(first given at line 2, column 1\)"):
        load_yaml("environment_version: e\ntools:\n- {name: a}\ntools: []\n", "tools.yaml")


def test_merge_keys_and_anchors_are_not_duplicates():
    text = "base: &b {read_only: true, x: 1}\ntool:\n  <<: *b\n  x: 2\nother: *b\n"
    assert load_yaml(text, "t.yaml") == {
        "base": {"read_only": True, "x": 1},
        "tool": {"read_only": True, "x": 2},
        "other": {"read_only": True, "x": 1},
    }


def test_a_tab_used_as_indentation_is_an_error_at_its_line_and_column():
    with pytest.raises(YamlError) as error:
        load_yaml("environment_version: e\ntools:\n\t- name: a\n", "tools.yaml")
    assert str(error.value) == "tools.yaml:3:1: tab character used as indentation (YAML indents with spaces only)"
    with pytest.raises(YamlError) as error:
        load_yaml("a:\n  \tb: 1\n", "x.yaml")
    assert str(error.value) == "x.yaml:2:3: tab character used as indentation (YAML indents with spaces only)"
    with pytest.raises(YamlError) as error:
        load_yaml("a:\t1\n", "x.yaml")
    assert str(error.value) == "x.yaml:1:3: tab character where YAML needs a space (use spaces around ':' and '-')"
    # a tab inside a block scalar is content, not indentation
    assert load_yaml("a: |\n  x\n  \ty\n", "x.yaml") == {"a": "x\n\ty\n"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "a: [1, 2\n",
            "x.yaml:2:1: expected ',' or ']', but got '<stream end>'"
            " (while parsing a flow sequence that starts at line 1, column 4)",
        ),
        ("a: b: c\n", "x.yaml:1:5: mapping values are not allowed here"),
        ("a: *nowhere\n", "x.yaml:1:4: found undefined alias 'nowhere'"),
        ("a: 1\nb: \x01\n", "x.yaml:2:4: unacceptable character #x0001: control characters are not allowed"),
        (b"a: 1\nb: caf\xe9\n", "x.yaml:2:7: invalid UTF-8 (byte 0xe9)"),
    ],
)
def test_every_yaml_error_names_file_line_and_column(text, message):
    with pytest.raises(YamlError) as error:
        load_yaml(text, "x.yaml")
    assert str(error.value) == message


def test_a_bom_is_not_content_and_the_document_places_values():
    document = parse_yaml("\ufeffa:\n  - x: 1\n    y: true\n", "d.yaml")
    assert document.value == {"a": [{"x": 1, "y": True}]}
    assert document.where(("a", 0, "y")) == "d.yaml:3:5"
    assert document.where(("a", 7)) == "d.yaml:1:1"  # as deep as the path exists: the key a


def test_the_judge_profile_reader_is_strict_too():
    with pytest.raises(JudgeConfigError) as error:
        JudgeProfile.from_yaml("backend: local\nthresholds: {support: 0.7}\nbackend: model\n", "p.yaml")
    assert str(error.value).startswith("not valid YAML: p.yaml:3:1: duplicate key 'backend'")


# ---------------------------------------------------------------- configuration files


def write_root(
    root: Path,
    tools: str | None = None,
    policy: str = POLICY,
    cases: dict[str, str] | None = None,
    manifest: dict | None = None,
) -> Path:
    """A minimal data root with one run r1."""
    (root / "corpus" / "c").mkdir(parents=True)
    (root / "corpus" / "c" / "docs.jsonl").write_text('{"doc_id": "d1", "text": "t"}\n')
    (root / "tools" / "e").mkdir(parents=True)
    (root / "tools" / "e" / "tools.yaml").write_text(
        tools or "environment_version: e\ntools:\n- name: get_x\n  read_only: true\n"
    )
    (root / "cases" / "ds").mkdir(parents=True)
    for name, text in (cases or {"rag-1.yaml": yaml.safe_dump(RAG_CASE)}).items():
        (root / "cases" / "ds" / name).write_text(text)
    (root / "policy").mkdir()
    (root / "policy" / "gates.yaml").write_text(policy)
    (root / "traces" / "r1").mkdir(parents=True)
    run = {
        "run_id": "r1",
        "candidate": "bot",
        "corpus_version": "c",
        "environment_version": "e",
        "dataset_version": "ds",
        **(manifest or {}),
    }
    (root / "traces" / "r1" / "run.yaml").write_text(yaml.safe_dump(run))
    return root


def test_an_unknown_key_in_tools_yaml_is_an_error_at_its_line(tmp_path):
    tools = "environment_version: e\ntools:\n- name: get_x\n  read_onyl: true\n"
    location = open_location(write_root(tmp_path, tools=tools))
    with pytest.raises(InputError) as error:
        inputs.load_tools(location, "e")
    assert str(error.value) == (
        f"{location.uri_of('tools', 'e', 'tools.yaml')}:4:3: not a valid tool registry: "
        "tools.0.read_onyl: Extra inputs are not permitted"
    )


def test_tools_yaml_with_a_tab_or_a_second_tools_list_is_an_error(tmp_path):
    location = open_location(write_root(tmp_path, tools="environment_version: e\ntools:\n\t- name: get_x\n"))
    with pytest.raises(InputError) as error:
        inputs.load_tools(location, "e")
    assert str(error.value) == (
        f"{location.uri_of('tools', 'e', 'tools.yaml')}:3:1: tab character used as indentation "
        "(YAML indents with spaces only)"
    )
    (tmp_path / "tools" / "e" / "tools.yaml").write_text("environment_version: e\ntools:\n- name: get_x\ntools: []\n")
    with pytest.raises(InputError, match=r"tools.yaml:4:1: duplicate key 'tools'"):
        inputs.load_tools(location, "e")


def test_gates_yaml_duplicate_threshold_and_unknown_key_are_errors():
    duplicate = (
        "version: 3\ngates:\n- name: recall\n  lane: rag\n  metric: recall_at_10\n  max_regression_points: 2\n"
        "  max_regression_points: 99\n"
    )
    with pytest.raises(InputError) as error:
        parse_gate_policy(duplicate, "policy/gates.yaml")
    assert str(error.value) == (
        "policy/gates.yaml:7:3: duplicate key 'max_regression_points' (first given at line 6, "
        "column 3); a key may appear once in a mapping"
    )
    with pytest.raises(InputError) as error:
        parse_gate_policy(POLICY + "baseline: base-41\n", "policy/gates.yaml")
    assert (
        str(error.value) == "policy/gates.yaml:4:1: not a valid gate policy: baseline: Extra inputs are not permitted"
    )
    with pytest.raises(InputError) as error:
        parse_gate_policy("", "policy/gates.yaml")
    assert str(error.value) == "policy/gates.yaml:1:1: not a valid gate policy: expected a mapping, found an empty file"


def test_a_manifest_error_names_its_line(tmp_path):
    location = open_location(write_root(tmp_path))
    (tmp_path / "traces" / "r1" / "run.yaml").write_text(
        "run_id: r1\ncandidate: bot\ncorpus_version: 7\ndataset_version: ds\n"
    )
    with pytest.raises(InputError) as error:
        loaders.load_manifest(location, "r1")
    assert str(error.value) == (
        f"{location.uri_of('traces', 'r1', 'run.yaml')}:3:1: not a valid run manifest: "
        "corpus_version: Input should be a valid string"
    )


def test_preflight_validates_every_configuration_file_of_the_runs(tmp_path):
    root = write_root(tmp_path)
    location = open_location(root)
    validate_configuration(location, ["r1"])  # a sound root passes
    (root / "tools" / "e" / "tools.yaml").write_text("environment_version: e\ntools:\n\t- name: get_x\n")
    with pytest.raises(RunnerError) as error:
        validate_configuration(location, ["r1"])
    assert str(error.value).endswith(
        "tools/e/tools.yaml:3:1: tab character used as indentation (YAML indents with spaces only)"
    )
    (root / "tools" / "e" / "tools.yaml").write_text("environment_version: e\ntools: []\n")
    (root / "policy" / "gates.yaml").write_text(POLICY + "version: 4\n")
    with pytest.raises(RunnerError, match=r"policy/gates.yaml:4:1: duplicate key 'version'"):
        validate_configuration(location, ["r1"])
    (root / "policy" / "gates.yaml").write_text(POLICY)
    shutil.rmtree(root / "cases" / "ds")
    with pytest.raises(RunnerError, match=r"dataset version 'ds' not found"):
        validate_configuration(location, ["r1"])


def test_preflight_reads_no_case_file(tmp_path, monkeypatch):
    # case files are data, read once by the cases step: at a million traces reading them here too took seconds
    root = write_root(tmp_path)

    def refuse(*_):
        raise AssertionError("a case file was read before any step")

    monkeypatch.setattr(inputs, "_jsonl_cases", refuse)
    monkeypatch.setattr(inputs, "_case_of", refuse)
    (root / "cases" / "ds" / "more.jsonl").write_text('{"case_id": "rag-9"}\n')
    validate_configuration(open_location(root), ["r1"])
    with pytest.raises(AssertionError, match="read before any step"):
        inputs.load_cases(open_location(root), "ds")


def test_a_broken_or_duplicate_keyed_case_file_is_a_reject_row_with_its_position(tmp_path):
    cases = {
        "a.yaml": yaml.safe_dump(RAG_CASE),
        "b.yaml": "case_id: rag-2\nlanes: [rag]\nexpect_refusal: false\nexpect_refusal: true\n",
        "c.yaml": "case_id: rag-3\nlanes:\n\t- rag\n",
    }
    root = write_root(tmp_path, cases=cases)
    loaded = inputs.load_cases(open_location(root), "ds")
    assert loaded.frame["case_id"].to_list() == ["rag-1"]
    rows = {r["source_file"]: (r["line"], r["reason"]) for r in loaded.rejects}
    assert rows == {
        "cases/ds/b.yaml": (
            4,
            "invalid YAML: cases/ds/b.yaml:4:1: duplicate key 'expect_refusal' (first given at line 3, "
            "column 1); a key may appear once in a mapping",
        ),
        "cases/ds/c.yaml": (
            3,
            "invalid YAML: cases/ds/c.yaml:3:1: tab character used as indentation (YAML indents with spaces only)",
        ),
    }
    # a case file is data: the run still validates
    validate_configuration(open_location(root), ["r1"])


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=REPO_ROOT,
    )


def test_eval_pipeline_run_with_a_tab_in_tools_yaml_exits_2_before_any_step(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(REPO_ROOT / "data", data, ignore=shutil.ignore_patterns("warehouse", "reports"))
    tools = data / "tools" / "helpdesk-sandbox-7" / "tools.yaml"
    lines = tools.read_text().splitlines(keepends=True)
    line = next(i for i, text in enumerate(lines) if text.startswith("- name: get_ticket"))
    lines[line] = "\t" + lines[line]
    tools.write_text("".join(lines))
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    result = run_cli("run", "--data", str(data), "--deid-demo", env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"eval-pipeline: error: {tools}:{line + 1}:1: tab character used as indentation (YAML indents with spaces only)"
    )
    assert "Traceback" not in result.stderr
    # no Dagster step ran: nothing evaluated, no instance storage written, no warehouse
    assert "Evaluating run" not in result.stderr
    assert list(home.iterdir()) == []
    assert not (data / "warehouse").exists()


# ---------------------------------------------------------------- qrels grades


def write_qrels(root: Path, lines: list[dict | str]) -> None:
    folder = root / "labels" / "qrels"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "human.jsonl").write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )


def test_grades_outside_the_policy_scale_are_reject_rows(tmp_path):
    root = write_root(tmp_path)
    write_qrels(
        root,
        [
            {"query_id": "rag-1", "doc_id": "d1", "grade": 7},
            {"query_id": "rag-1", "doc_id": "d1", "grade": -1},
            {"query_id": "rag-1", "doc_id": "d2", "grade": 2},
            {"query_id": "rag-1", "doc_id": "d3", "grade": 0},
        ],
    )
    loaded = labels.load_judgments(open_location(root))
    assert loaded.frame.select("doc_id", "grade").rows() == [("d2", 2), ("d3", 0)]
    assert [(r["input_kind"], r["source_file"], r["line"], r["reason"]) for r in loaded.rejects] == [
        (
            "qrels_label",
            "labels/qrels/human.jsonl",
            1,
            "grade 7 is outside the grade scale 0..2 (retrieval.grades of the gate policy)",
        ),
        (
            "qrels_label",
            "labels/qrels/human.jsonl",
            2,
            "grade -1 is outside the grade scale 0..2 (retrieval.grades of the gate policy)",
        ),
    ]


def test_the_grade_scale_comes_from_the_gate_policy(tmp_path):
    root = write_root(tmp_path, policy=POLICY + "retrieval: {relevance_threshold: 2, grades: [0, 3]}\n")
    write_qrels(
        root, [{"query_id": "rag-1", "doc_id": "d1", "grade": 3}, {"query_id": "rag-1", "doc_id": "d2", "grade": 4}]
    )
    loaded = labels.load_judgments(open_location(root))
    assert loaded.frame["grade"].to_list() == [3]
    assert [r["reason"] for r in loaded.rejects] == [
        "grade 4 is outside the grade scale 0..3 (retrieval.grades of the gate policy)"
    ]


def test_a_grade_scale_must_hold_the_threshold_and_the_seed_grade():
    assert RetrievalPolicy().grade_scale == (0, 2)
    with pytest.raises(ValueError, match=r"grades \[0, 1\] must hold the seed grade 2 of required_doc_ids"):
        RetrievalPolicy.model_validate({"grades": [0, 1], "relevance_threshold": 1})
    with pytest.raises(ValueError, match=r"relevance_threshold 4 is outside grades \[0, 3\]"):
        RetrievalPolicy.model_validate({"grades": [0, 3], "relevance_threshold": 4})
    with pytest.raises(ValueError, match=r"grades is \[lowest, highest\], got \[3, 0\]"):
        GatePolicy.model_validate({"version": 1, "gates": [], "retrieval": {"grades": [3, 0]}})


def test_the_bundled_sample_judgments_are_all_in_scale(sample_data):
    loaded = labels.load_judgments(open_location(sample_data))
    assert loaded.rejects == [] and loaded.frame.height == 20


# ---------------------------------------------------------------- corpus and cases


def test_a_duplicate_corpus_doc_id_is_a_reject_row_and_the_first_is_kept(tmp_path):
    root = write_root(tmp_path)
    (root / "corpus" / "c" / "docs.jsonl").write_text(
        '{"doc_id": "d1", "text": "first"}\n{"doc_id": "d2", "text": "other"}\n{"doc_id": "d1", "text": "second"}\n'
    )
    loaded = inputs.load_corpus(open_location(root), "c")
    assert loaded.frame.select("doc_id", "text").rows() == [("d1", "first"), ("d2", "other")]
    assert [(r["input_kind"], r["source_file"], r["line"], r["reason"]) for r in loaded.rejects] == [
        (
            "corpus",
            "corpus/c/docs.jsonl",
            3,
            "duplicate doc_id 'd1' (first occurrence kept: corpus/c/docs.jsonl line 1)",
        ),
    ]


def test_a_rag_case_with_nothing_to_retrieve_and_no_refusal_is_a_reject(tmp_path):
    empty = {"case_id": "rag-2", "lanes": ["rag"], "input": "q", "expected_answer_contains": ["x"]}
    refusal = {"case_id": "rag-3", "lanes": ["rag"], "input": "q", "required_doc_ids": [], "expect_refusal": True}
    agent = {"case_id": "agent-1", "lanes": ["agent"], "input": "q", "reference_tool_calls": [{"name": "get_x"}]}
    cases = {f"{c['case_id']}.yaml": yaml.safe_dump(c) for c in (RAG_CASE, empty, refusal, agent)}
    cases["more.jsonl"] = json.dumps({**empty, "case_id": "rag-4", "lanes": ["rag", "agent"]}) + "\n"
    loaded = inputs.load_cases(open_location(write_root(tmp_path, cases=cases)), "ds")
    assert sorted(loaded.frame["case_id"].to_list()) == ["agent-1", "rag-1", "rag-3"]
    reason = (
        "record: a rag case needs required_doc_ids (the documents to retrieve), or expect_refusal: true when "
        "there is nothing to retrieve"
    )
    assert [(r["source_file"], r["line"], r["case_id"], r["reason"]) for r in loaded.rejects] == [
        ("cases/ds/more.jsonl", 1, "rag-4", reason),
        ("cases/ds/rag-2.yaml", 1, "rag-2", reason),
    ]


def test_no_bundled_sample_case_or_document_is_rejected(sample_data):
    location = open_location(sample_data)
    assert inputs.load_cases(location, "golden-2026.03").rejects == []
    assert inputs.load_corpus(location, "kb-2026-03").rejects == []
    validate_configuration(location, loaders.list_runs(location))


# ---------------------------------------------------------------- JSON lines


def test_a_bom_opening_a_jsonl_file_is_stripped(tmp_path):
    root = write_root(tmp_path)
    (root / "corpus" / "c" / "docs.jsonl").write_bytes(b'\xef\xbb\xbf{"doc_id": "d1"}\n{"doc_id": "d2"}\n')
    loaded = inputs.load_corpus(open_location(root), "c")
    assert loaded.rejects == [] and loaded.frame["doc_id"].to_list() == ["d1", "d2"]
    write_qrels(root, ['\ufeff{"query_id": "rag-1", "doc_id": "d1", "grade": 1}'])
    assert labels.load_judgments(open_location(root)).rejects == []
    assert loaders.parse_json_line(b'\xef\xbb\xbf{"a": 1}') == ({"a": 1}, None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"score": NaN}', "invalid JSON: NaN is not a JSON number"),
        (b'{"score": Infinity}', "invalid JSON: Infinity is not a JSON number"),
        (b'{"score": [-Infinity]}', "invalid JSON: -Infinity is not a JSON number"),
        (b'{"score": 1e400}', "number 1e400 is beyond the range of a 64-bit float"),
        (b'{"score": -2.5E+309}', "number -2.5E+309 is beyond the range of a 64-bit float"),
        (b'{"a":' + b"[" * 128 + b"]" * 128 + b"}", "JSON nested deeper than 128 levels"),
        (b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}", "JSON nested deeper than 128 levels"),
        (b'\xef\xbb\xbf{"a": caf\xe9}', "invalid UTF-8 at byte offset 12"),
    ],
)
def test_json_that_python_accepts_and_json_does_not_is_rejected(raw, reason):
    assert loaders.parse_json_line(raw) == (None, reason)


def test_the_depth_limit_is_128_and_brackets_in_strings_do_not_count():
    assert loaders.MAX_JSON_DEPTH == 128
    at_limit = b'{"a":' + b"[" * 127 + b"]" * 127 + b"}"
    assert loaders.parse_json_line(at_limit)[1] is None
    in_strings = json.dumps({"a": "[" * 500, "b": [{"c": ']]]"{{'}], "scores": [1e-5, 2.5e300]}).encode()
    value, reason = loaders.parse_json_line(in_strings)
    assert reason is None and value["scores"] == [1e-5, 2.5e300]
    assert depth_of({"a": [{"b": []}]}) == 4 and depth_of(1) == 0


def test_qrels_and_case_lines_with_nan_are_reject_rows(tmp_path):
    root = write_root(tmp_path, cases={"cases.jsonl": json.dumps(RAG_CASE).replace('"q"', "NaN") + "\n"})
    write_qrels(root, ['{"query_id": "rag-1", "doc_id": "d1", "grade": 1, "annotator": NaN}'])
    location = open_location(root)
    assert [r["reason"] for r in labels.load_judgments(location).rejects] == ["invalid JSON: NaN is not a JSON number"]
    assert [r["reason"] for r in inputs.load_cases(location, "ds").rejects] == [
        "invalid JSON: NaN is not a JSON number"
    ]
