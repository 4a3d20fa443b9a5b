"""Importers never write outside the data root: run ids and versions are names, case file names are slugs."""

from __future__ import annotations

import argparse

import pytest

from eval_pipeline.cli.importers import register
from eval_pipeline.importers import ImporterError, ImportRun, import_openai_messages, import_tau_bench
from eval_pipeline.importers.common import load_registry_file, slug
from eval_pipeline_tests.importers.fixtures.importing import SAMPLE, write_jsonl

SLASH = "must not contain '/' or '\\' (it is a name, not a path)"


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.handler(args)


def files_under(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_import_with_a_path_as_run_id_is_a_usage_error_and_writes_nothing(tmp_path, capsys):
    data = tmp_path / "inside" / "data"
    with pytest.raises(SystemExit) as exit_info:
        cli(["import", "tau-bench", str(SAMPLE), "--run", "../../x", "--data", str(data)])
    assert exit_info.value.code == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == f"eval-pipeline import: error: argument --run: run id '../../x' {SLASH}"
    )
    assert files_under(tmp_path) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"run_id": "../../x"}, f"run id '../../x' {SLASH}"),
        ({"dataset_version": "../ds"}, f"dataset version '../ds' {SLASH}"),
        ({"environment_version": "env/../.."}, f"environment version 'env/../..' {SLASH}"),
        ({"corpus_version": "..\\kb"}, f"corpus version '..\\\\kb' {SLASH}"),
    ],
)
def test_the_importer_api_refuses_paths_before_reading_anything(tmp_path, options, message):
    run_id = options.pop("run_id", "tau-1")
    with pytest.raises(ImporterError) as error:
        import_tau_bench(str(SAMPLE), ImportRun(run_id=run_id, data_root=tmp_path / "data", **options))
    assert str(error.value) == message
    assert files_under(tmp_path) == []


def test_a_source_file_name_never_makes_a_dotted_dataset_version(tmp_path):
    source = write_jsonl(
        tmp_path / "a..b.jsonl",
        [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}],
    )
    summary = import_openai_messages(source, ImportRun(run_id="chat", data_root=tmp_path / "data"))
    assert summary.dataset_version == "openai-messages-a.b"
    assert slug("../../etc/passwd") == "etc-passwd" and slug("x..y") == "x.y" and slug("..") == "import"


def test_two_case_ids_with_one_file_name_are_refused(tmp_path):
    records = [
        {"case_id": case_id, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}
        for case_id in ("a/b", "a b")
    ]
    with pytest.raises(ImporterError) as error:
        import_openai_messages(
            write_jsonl(tmp_path / "two.jsonl", records), ImportRun(run_id="chat", data_root=tmp_path / "data")
        )
    assert (
        str(error.value) == "cases 'a/b' and 'a b' would both be written to a-b.yaml; rename one of them in the source"
    )
    assert not (tmp_path / "data").exists()


def test_a_registry_given_on_the_command_line_is_read_strictly(tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("environment_version: e\ntools:\n- name: get_x\n  read_only: true\n  read_only: false\n")
    with pytest.raises(ImporterError) as error:
        load_registry_file(path)
    assert str(error.value) == (
        f"{path}:5:3: duplicate key 'read_only' (first given at line 4, column 3); a key may appear once in a mapping"
    )
    path.write_text("environment_version: e\ntools:\n- name: get_x\n  readonly: true\n")
    with pytest.raises(ImporterError) as error:
        load_registry_file(path)
    assert str(error.value) == f"{path} is not a valid tool registry: tools.0.readonly: Extra inputs are not permitted"
