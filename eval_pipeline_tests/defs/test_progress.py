"""Progress lines reach the terminal even while Dagster captures the run's stderr (file descriptor 2) for its logs."""

import logging
import os
import sys
from types import SimpleNamespace

from eval_pipeline.defs import progress
from eval_pipeline.runner import terminal_stderr


def _finished(step: str) -> logging.LogRecord:
    record = logging.LogRecord("p", logging.DEBUG, __file__, 1, "", (), None)
    record.dagster_meta = {"dagster_event": SimpleNamespace(event_type_value="STEP_SUCCESS", step_key=step)}
    return record


def test_a_progress_line_goes_to_the_terminal_not_to_the_captured_stderr(tmp_path, monkeypatch):
    terminal, captured = tmp_path / "terminal.txt", tmp_path / "captured.txt"
    saved = os.dup(2)
    with terminal.open("w") as terminal_file:
        os.dup2(terminal_file.fileno(), 2)  # the terminal this command was started on
    try:
        # sys.stderr writes to file descriptor 2 itself, as the interpreter's does
        monkeypatch.setattr(sys, "stderr", os.fdopen(2, "w", buffering=1, closefd=False))
        console = terminal_stderr()
        progress.use_console(console)
        handler = progress.progress_logger.logger_fn(SimpleNamespace(logger_config={"total_steps": 1})).handlers[0]
        # what Dagster's compute-log capture does during a run: fd 2 points at its log file
        with captured.open("w") as capture_file:
            os.dup2(capture_file.fileno(), 2)
        handler.handle(_finished("gate_report"))
    finally:
        progress.use_console(None)
        os.dup2(saved, 2)
        os.close(saved)
    console.close()
    assert "[ 1/1] gate_report" in terminal.read_text()
    assert captured.read_text() == ""


def test_without_a_console_the_logger_writes_to_stderr(capsys):
    progress.use_console(None)
    handler = progress.progress_logger.logger_fn(SimpleNamespace(logger_config={"total_steps": 2})).handlers[0]
    handler.handle(_finished("run_manifest"))
    assert "[ 1/2] run_manifest" in capsys.readouterr().err


def test_a_table_group_done_inside_a_fused_step_is_one_indented_line(capsys):
    progress.use_console(None)
    handler = progress.progress_logger.logger_fn(SimpleNamespace(logger_config={"total_steps": 6})).handlers[0]
    record = logging.LogRecord("p", logging.INFO, __file__, 1, "ingest - computed parsed_traces in 3.25s", (), None)
    record.dagster_meta = {"orig_message": "computed parsed_traces in 3.25s"}
    handler.handle(record)
    handler.handle(_finished("ingest"))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].split() == ["parsed_traces", "done", "3.2s"]
    assert lines[1].startswith("  [ 1/6] ingest")
