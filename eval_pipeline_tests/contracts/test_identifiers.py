"""Identifiers are names, never paths (SPEC §11): run ids and version strings are refused at every entry point."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.contracts.base import IDENTIFIER_PATTERN
from eval_pipeline.contracts.cases import ToolRegistry
from eval_pipeline.contracts.identifiers import identifier_problem, validate_identifier
from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.contracts.traces import RunManifest
from eval_pipeline.io import loaders
from eval_pipeline.io.storage import InputError, open_location

REPO_ROOT = Path(__file__).resolve().parents[2]
SLASH = "must not contain '/' or '\\' (it is a name, not a path)"
DOTS = "must not contain '..' (it is a name, not a path)"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("../../evil", f"corpus version '../../evil' {SLASH}"),
        ("a/b", f"corpus version 'a/b' {SLASH}"),
        ("a\\b", f"corpus version 'a\\\\b' {SLASH}"),
        ("..", f"corpus version '..' {DOTS}"),
        ("v1..2", f"corpus version 'v1..2' {DOTS}"),
        ("", "corpus version '' must not be empty"),
        (" kb", "corpus version ' kb' must not start or end with whitespace"),
        ("kb\n", "corpus version 'kb\\n' must not start or end with whitespace"),
        ("k\x00b", "corpus version 'k\\x00b' must not contain control characters (found U+0000)"),
        ("k\u200bb", "corpus version 'k\\u200bb' must not contain control characters (found U+200B)"),
    ],
)
def test_a_bad_identifier_is_refused_naming_what_and_why(value, message):
    with pytest.raises(ValueError) as error:
        validate_identifier(value, "corpus version")
    assert str(error.value) == message


@pytest.mark.parametrize("value", ["cand-42", "kb-2026-03", "golden-2026.03", "2.4.0-rc1", "run_7", "ünïcode", "a b"])
def test_ordinary_names_are_identifiers_and_match_the_schema_pattern(value):
    assert validate_identifier(value, "run id") == value
    assert re.match(IDENTIFIER_PATTERN, value)


@pytest.mark.parametrize("value", ["a/b", "a\\b", "a..b", " a", "a ", "a\x01", "a\x7f", ""])
def test_the_schema_pattern_refuses_what_the_validator_refuses(value):
    assert identifier_problem(value) is not None
    assert not re.match(IDENTIFIER_PATTERN, value)


MANIFEST = {"run_id": "r1", "candidate": "bot", "corpus_version": "kb", "dataset_version": "ds"}


@pytest.mark.parametrize(
    "field", ["run_id", "corpus_version", "dataset_version", "environment_version", "prompt_version", "index_version"]
)
def test_every_version_of_a_manifest_is_an_identifier(field):
    with pytest.raises(ValueError) as error:
        RunManifest.model_validate({**MANIFEST, field: "../../evil"})
    assert loaders.describe_validation_error(error.value) == f"{field}: '../../evil' {SLASH}"
    assert RunManifest.model_validate({**MANIFEST, "locale": "de-DE"}).locale == "de-DE"


def test_gate_policy_version_and_baseline_and_registry_environment_are_identifiers():
    with pytest.raises(ValueError) as error:
        GatePolicy.model_validate({"version": "../v3", "baseline_run_id": "../base", "gates": []})
    assert loaders.describe_validation_error(error.value) == (
        f"version: '../v3' {SLASH}; baseline_run_id: '../base' {SLASH}"
    )
    assert GatePolicy.model_validate({"version": 3, "gates": []}).version == 3
    with pytest.raises(ValueError) as error:
        ToolRegistry.model_validate({"environment_version": "env/..", "tools": []})
    assert loaders.describe_validation_error(error.value) == f"environment_version: 'env/..' {SLASH}"


def test_a_manifest_naming_a_corpus_outside_the_root_is_an_input_error(tmp_path):
    run = tmp_path / "traces" / "r1"
    run.mkdir(parents=True)
    (run / "run.yaml").write_text(yaml.safe_dump({**MANIFEST, "corpus_version": "../../evil"}, sort_keys=False))
    with pytest.raises(InputError) as error:
        loaders.load_manifest(open_location(tmp_path), "r1")
    assert str(error.value) == (
        f"{run / 'run.yaml'}:3:1: not a valid run manifest: corpus_version: '../../evil' {SLASH}"
    )


def test_storage_refuses_path_parts_that_leave_the_root(tmp_path):
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "judge.yaml").write_text("x")
    location = open_location(tmp_path)
    assert location.read_text("policy/judge.yaml") == "x"  # a relative path inside the root is fine
    for parts in (("corpus", "..", "docs.jsonl"), ("corpus", "../../evil", "docs.jsonl"), ("a\\..\\b",), ("x\x00",)):
        with pytest.raises(InputError) as error:
            location.read_bytes(*parts)
        bad = next(p for p in parts if ".." in p.split("/") or "\\" in p or "\x00" in p)
        assert str(error.value) == f"refusing path part {bad!r}: it could point outside the data root"
    assert location.join("corpus", "kb..2") == f"{tmp_path}/corpus/kb..2"  # '..' inside a name is not a segment


@pytest.mark.parametrize(
    ("argv", "flag", "what", "value"),
    [
        (["run", "--run", "../x"], "--run", "run id", "../x"),
        (["gate", "--candidate", "a/b"], "--candidate", "run id", "a/b"),
        (["gate", "--candidate", "c", "--baseline", "../b"], "--baseline", "run id", "../b"),
        (["compare", "retrieval_scores", "recall_at_10", "--run", "../x"], "--run", "run id", "../x"),
        (["judge-estimate", "--data", "d", "--run", "../x"], "--run", "run id", "../x"),
        (["import", "tau-bench", "s.json", "--run", "../../x"], "--run", "run id", "../../x"),
        (
            ["import", "tau-bench", "s.json", "--run", "r", "--dataset-version", "../ds"],
            "--dataset-version",
            "dataset version",
            "../ds",
        ),
        (
            ["import", "tau-bench", "s.json", "--run", "r", "--environment-version", "e/v"],
            "--environment-version",
            "environment version",
            "e/v",
        ),
        (
            ["import", "tau-bench", "s.json", "--run", "r", "--corpus-version", ".."],
            "--corpus-version",
            "corpus version",
            "..",
        ),
    ],
)
def test_cli_flags_refuse_paths_as_usage_errors(argv, flag, what, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    reason = DOTS if value == ".." else SLASH
    assert (
        capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: argument {flag}: {what} {value!r} {reason}")
    )


def test_eval_pipeline_run_refuses_a_manifest_corpus_version_outside_the_root(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(REPO_ROOT / "data", data, ignore=shutil.ignore_patterns("warehouse", "reports"))
    manifest = data / "traces" / "cand-42" / "run.yaml"
    text = manifest.read_text().replace("corpus_version: kb-2026-03", "corpus_version: ../../evil")
    manifest.write_text(text)
    line = text.splitlines().index("corpus_version: ../../evil") + 1
    result = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "run", "--data", str(data), "--deid-demo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"eval-pipeline: error: {manifest}:{line}:1: not a valid run manifest: corpus_version: '../../evil' {SLASH}"
    )
