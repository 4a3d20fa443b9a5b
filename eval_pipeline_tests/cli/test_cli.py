"""The command line as a user runs it: help, clear errors with exit codes, the gate command's exit codes."""

import subprocess
import sys

import pytest

from eval_pipeline.cli import main


def run_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize(
    "command", ["run", "gate", "trec-eval", "import", "calibrate", "judge-estimate", "compare", "ui", "schemas"]
)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert len(capsys.readouterr().out) > 200


def test_missing_data_directory_is_one_clear_error(tmp_path):
    result = run_cli("run", "--data", str(tmp_path / "nowhere"), "--deid-demo")
    assert result.returncode == 2
    assert "data directory" in result.stderr and "does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_data_without_traces_and_unknown_run_are_clear_errors(tmp_path, sample_copy):
    result = run_cli("run", "--data", str(tmp_path), "--deid-demo")
    assert result.returncode == 2 and "has no traces/ folder" in result.stderr
    result = run_cli("run", "--data", str(sample_copy), "--run", "ghost", "--deid-demo")
    assert result.returncode == 2 and "run(s) ghost not found" in result.stderr


def test_no_key_and_no_demo_mode_refuses_to_run(sample_copy):
    import os

    env = {k: v for k, v in os.environ.items() if k != "EVAL_PIPELINE_DEID_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", "run", "--data", str(sample_copy)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2 and "EVAL_PIPELINE_DEID_KEY" in result.stderr


def test_gate_command_exit_codes(scored):
    warehouse = scored["warehouse"].root
    data = str(scored["data"])
    failing = run_cli(
        "gate", "--candidate", "cand-42", "--baseline", "base-41", "--data", data, "--warehouse", warehouse
    )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "retrieval_recall_at_10" in failing.stdout and "rag-020" in failing.stdout
    same = run_cli("gate", "--candidate", "base-41", "--baseline", "base-41", "--data", data, "--warehouse", warehouse)
    assert same.returncode == 2
    reverse = run_cli(
        "gate", "--candidate", "base-41", "--baseline", "cand-42", "--data", data, "--warehouse", warehouse
    )
    assert reverse.returncode in (0, 1)
    latest = run_cli(
        "gate", "--candidate", "cand-42", "--baseline", "latest-passing", "--data", data, "--warehouse", warehouse
    )
    assert "latest passing run = base-41" in latest.stdout and latest.returncode == 1
    unscored = run_cli("gate", "--candidate", "ghost", "--data", data, "--warehouse", warehouse)
    assert unscored.returncode == 2 and "has not been scored" in unscored.stderr


def test_the_celery_executor_without_a_broker_is_one_clear_error(sample_copy):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_CELERY_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval_pipeline.cli",
            "run",
            "--data",
            str(sample_copy),
            "--deid-demo",
            "--executor",
            "celery",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "--executor celery needs DAGSTER_CELERY_BROKER_URL and DAGSTER_CELERY_BACKEND_URL" in result.stderr
    assert "Traceback" not in result.stderr
