"""`eval-pipeline … | head -1`: no BrokenPipeError traceback when the reader goes away, and a meaningful exit status."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[1] / "reference_data" / "trec_eval"
SCRIPT = Path(sys.executable).with_name("eval-pipeline")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "eval_pipeline.cli"]


def _env(buffered: bool) -> dict[str, str]:
    env = dict(os.environ)
    # A terminal user's stdout into a pipe is block-buffered: the last write then comes at interpreter exit.
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _into_gone_reader(argv: list[str], buffered: bool) -> subprocess.CompletedProcess:
    """Run with stdout into a pipe whose reader has already closed it."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [*COMMAND, *argv], stdout=write, stderr=subprocess.PIPE, text=True, env=_env(buffered), timeout=300
        )
    finally:
        os.close(write)


def _clean(stderr: str) -> bool:
    return "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr


@pytest.mark.parametrize("buffered", [True, False])
def test_a_reader_gone_before_the_output_gets_no_traceback(buffered):
    done = _into_gone_reader(["trec-eval", str(REFERENCE / "qrels.test"), str(REFERENCE / "results.test")], buffered)
    assert _clean(done.stderr), done.stderr
    # buffered, trec-eval finished before its output was flushed: its own status; cut off while writing: 1
    assert done.returncode == (0 if buffered else 1)


def test_a_reader_that_stops_after_one_line_of_a_long_output(tmp_path):
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(3000)))
    run.write_text("".join(f"q{i} Q0 d{i} 1 1.0 r\n" for i in range(3000)))
    process = subprocess.Popen(
        [*COMMAND, "trec-eval", str(qrels), str(run), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(buffered=True),
    )
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=300) == 1
    assert first.startswith("num_ret") and _clean(stderr), stderr


def test_the_gate_status_survives_a_reader_that_went_away(scored, capsys):
    from eval_pipeline.cli import main

    argv = [
        "gate",
        "--candidate",
        "cand-42",
        "--baseline",
        "base-41",
        "--data",
        str(scored["data"]),
        "--warehouse",
        scored["warehouse"].root,
    ]
    expected = main(argv)
    capsys.readouterr()
    assert expected == 1  # the candidate's gates fail, as planted
    done = _into_gone_reader(argv, buffered=True)
    assert _clean(done.stderr), done.stderr
    assert done.returncode == expected
