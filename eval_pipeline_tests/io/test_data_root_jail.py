"""The data root is a jail: a symbolic link to a file or folder outside it is refused by name, never read or written
through (trace files, run, corpus and label folders, cases, policy, warehouse, reports); links inside it still work."""

import json
import os

import polars as pl
import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.defs.resources import EvalConfig, JudgeConfig
from eval_pipeline.io import ingest, inputs, labels, loaders, policy
from eval_pipeline.io.storage import InputError, OutsideRootError, open_location
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import RunnerError, check_data_root, preflight, validate_configuration

SECRET = "root:x:0:0:outside-secret:/root:/bin/bash\n"
CASE = {"case_id": "rag-1", "lanes": ["rag"], "input": "q", "required_doc_ids": ["d1"]}
TRACE = {"trace_id": "t1", "case_id": "rag-1", "attempt": 1, "status": "ok", "answer": {"text": "a"}}


def _data_root(base) -> tuple:
    """(data root, outside folder): a one-run data root and a folder beside it holding a secret file."""
    root, outside = base / "data", base / "outside"
    (root / "cases" / "ds").mkdir(parents=True)
    (root / "cases" / "ds" / "rag-1.yaml").write_text(yaml.safe_dump(CASE))
    (root / "corpus" / "kb").mkdir(parents=True)
    (root / "corpus" / "kb" / "docs.jsonl").write_text('{"doc_id": "d1", "text": "refunds take 5 days"}\n')
    run = root / "traces" / "r1"
    run.mkdir(parents=True)
    (run / "run.yaml").write_text(
        yaml.safe_dump({"run_id": "r1", "candidate": "bot", "corpus_version": "kb", "dataset_version": "ds"})
    )
    (run / "batch.jsonl").write_text(json.dumps(TRACE) + "\n")
    outside.mkdir()
    (outside / "secret.jsonl").write_text(SECRET)
    return root, outside


def _refusal(error, path, root) -> None:
    assert isinstance(error, ValueError) and isinstance(error, InputError)
    assert str(error) == (
        f"refusing {path}: its real path {os.path.realpath(path)} is outside {os.path.realpath(root)} "
        "(a symbolic link may not lead out of the data root)"
    )


def test_a_trace_file_linked_to_a_file_outside_is_refused_and_not_read(tmp_path):
    root, outside = _data_root(tmp_path)
    link = root / "traces" / "r1" / "zz.jsonl"
    link.symlink_to(outside / "secret.jsonl")
    location = open_location(root)
    with pytest.raises(OutsideRootError) as error:
        ingest.read_raw_lines(location, "r1")
    _refusal(error.value, str(link), root)
    with pytest.raises(OutsideRootError):
        loaders.check_input_paths(location, loaders.load_manifest(location, "r1"))
    # without the link the same run reads its one line
    link.unlink()
    raw = ingest.read_raw_lines(location, "r1")
    assert raw.height == 1 and raw["source_file"].to_list() == ["traces/r1/batch.jsonl"]


def test_a_link_to_etc_passwd_is_refused(tmp_path):
    root, _ = _data_root(tmp_path)
    (root / "traces" / "r1" / "passwd.jsonl").symlink_to("/etc/passwd")
    with pytest.raises(OutsideRootError, match=r"its real path /etc/passwd is outside"):
        ingest.read_raw_lines(open_location(root), "r1")


@pytest.mark.parametrize(
    "linked", ["traces/r2", "corpus/kb2", "cases/ds2", "labels/qrels", "labels/grounding", "policy"]
)
def test_a_folder_linked_outside_is_refused(tmp_path, linked):
    root, outside = _data_root(tmp_path)
    (outside / "run.yaml").write_text(
        yaml.safe_dump({"run_id": "r2", "candidate": "bot", "corpus_version": "kb2", "dataset_version": "ds2"})
    )
    (outside / "gates.yaml").write_text("version: 1\ngates: []\n")
    (root / linked).parent.mkdir(parents=True, exist_ok=True)
    (root / linked).symlink_to(outside, target_is_directory=True)
    location = open_location(root)
    with pytest.raises(OutsideRootError) as error:
        if linked == "traces/r2":
            loaders.list_runs(location)
        elif linked == "corpus/kb2":
            inputs.load_corpus(location, "kb2")
        elif linked == "cases/ds2":
            inputs.load_cases(location, "ds2")
        elif linked == "labels/qrels":
            labels.load_judgments(location, grades=(0, 2))
        elif linked == "labels/grounding":
            labels.load_grounding_labels(location)
        else:
            policy.load_gate_policy(location)
    # the folder, or the first file read in it, is named
    message = str(error.value)
    assert message.startswith(f"refusing {root / linked}") and f"its real path {outside}" in message
    assert message.endswith(f"is outside {root} (a symbolic link may not lead out of the data root)")


def test_linked_case_and_policy_files_are_configuration_errors_before_any_step(tmp_path):
    root, outside = _data_root(tmp_path)
    (outside / "gates.yaml").write_text("version: 1\ngates: []\n")
    (root / "policy").mkdir()
    (root / "policy" / "gates.yaml").symlink_to(outside / "gates.yaml")
    with pytest.raises(
        RunnerError, match=r"^refusing .*/policy/gates.yaml: its real path .*/outside/gates.yaml is outside"
    ):
        validate_configuration(open_location(root), ["r1"])
    (root / "policy" / "gates.yaml").unlink()
    (root / "cases" / "ds" / "z.yaml").symlink_to(outside / "secret.jsonl")
    with pytest.raises(RunnerError, match=r"^refusing .*/cases/ds/z.yaml: its real path .*/outside/secret.jsonl"):
        validate_configuration(open_location(root), ["r1"])


def test_a_run_folder_linked_outside_stops_eval_pipeline_run(tmp_path):
    root, outside = _data_root(tmp_path)
    (root / "traces" / "r2").symlink_to(outside, target_is_directory=True)
    with pytest.raises(
        RunnerError, match=r"^refusing .*/traces/r2/run.yaml: its real path .*/outside/run.yaml is outside "
    ):
        check_data_root(str(root))


def test_links_that_stay_inside_the_root_are_followed(tmp_path):
    root, _ = _data_root(tmp_path)
    (root / "cases" / "current").symlink_to(root / "cases" / "ds", target_is_directory=True)
    (root / "traces" / "r1" / "again.jsonl").symlink_to("batch.jsonl")
    location = open_location(root)
    assert inputs.load_cases(location, "current").frame["case_id"].to_list() == ["rag-1"]
    assert ingest.read_raw_lines(location, "r1")["source_file"].to_list() == [
        "traces/r1/again.jsonl",
        "traces/r1/batch.jsonl",
    ]
    # a data root that is itself a link is its own real path
    (tmp_path / "alias").symlink_to(root, target_is_directory=True)
    assert loaders.list_runs(open_location(tmp_path / "alias")) == ["r1"]


def test_object_store_locations_have_no_jail():
    location = open_location("mock:///bucket/data")
    assert location.jail is None
    assert location.join("traces", "r1", "a.jsonl") == "bucket/data/traces/r1/a.jsonl"


def test_a_reports_or_warehouse_link_out_of_the_data_root_is_refused(tmp_path):
    root, outside = _data_root(tmp_path)
    (root / "reports").symlink_to(outside, target_is_directory=True)
    (root / "warehouse").symlink_to(outside, target_is_directory=True)
    config = EvalConfig(data_root=str(root))
    for folder in (config.reports, config.warehouse):
        with pytest.raises(OutsideRootError) as error:
            folder()
        assert str(error.value).startswith(f"refusing {root}/") and f"is outside {root} " in str(error.value)
    # named explicitly, a folder elsewhere is the user's choice
    assert EvalConfig(data_root=str(root), reports_root=str(outside)).reports().root == str(outside)


def test_a_judge_cache_link_out_of_the_data_root_is_refused_before_the_judge_is_made(tmp_path):
    root, outside = _data_root(tmp_path)
    (root / ".judge_cache").symlink_to(outside, target_is_directory=True)
    with pytest.raises(
        OutsideRootError, match=r"/data/.judge_cache/verdicts.sqlite: its real path .*/outside/verdicts.sqlite"
    ):
        JudgeConfig(backend="openai", model="m").make(str(root))
    with pytest.raises(RunnerError, match=r"^refusing .*/data/.judge_cache: its real path .*/outside is outside"):
        preflight(EvalConfig(data_root=str(root), deid_demo=True))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.jsonl"]


def test_a_report_folder_of_a_run_linked_outside_is_never_written(tmp_path):
    root, outside = _data_root(tmp_path)
    (root / "reports").mkdir()
    (root / "reports" / "r1").symlink_to(outside, target_is_directory=True)
    reports = EvalConfig(data_root=str(root)).reports()
    with pytest.raises(OutsideRootError):
        reports.write_bytes(b"<html>", "r1", "rag.html")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.jsonl"]
    reports.write_bytes(b"<html>", "r0", "rag.html")
    assert (root / "reports" / "r0" / "rag.html").read_bytes() == b"<html>"


def test_a_warehouse_table_linked_outside_is_neither_read_nor_written(tmp_path):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    warehouse.write_partition("claims", pl.DataFrame({"trace_id": ["t1"]}), "r1")
    (tmp_path / "warehouse" / "_restricted").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "warehouse" / "_restricted" / "raw_traces").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(OutsideRootError, match="_restricted/raw_traces: its real path .*/elsewhere is outside"):
        warehouse.write_partition("raw_traces", pl.DataFrame({"raw": [b"x"]}), "r1", restricted=True)
    with pytest.raises(OutsideRootError):
        warehouse.read("raw_traces", "r1", restricted=True)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert warehouse.read("claims", "r1")["trace_id"].to_list() == ["t1"]


@pytest.mark.parametrize("link", ["trace", "reports"])
def test_eval_pipeline_run_exits_2_with_one_line_naming_the_path_and_the_root(tmp_path, capsys, link):
    root, outside = _data_root(tmp_path)
    if link == "trace":
        linked = root / "traces" / "r1" / "zz.jsonl"
        linked.symlink_to(outside / "secret.jsonl")
    else:
        linked = root / "reports"
        linked.symlink_to(outside, target_is_directory=True)
    assert main(["run", "--data", str(root), "--deid-demo", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"eval-pipeline: error: refusing {linked}: its real path ")
    assert err[-1].endswith(f"is outside {root} (a symbolic link may not lead out of the data root)")
    assert not any("Traceback" in line for line in err)
    # nothing was written outside, and no step ran (no warehouse)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.jsonl"]
    assert not (root / "warehouse").exists()
