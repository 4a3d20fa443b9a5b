"""A Dagster logger that prints one concise line per finished step: progress on the command line."""

import logging
import sys
import time

import dagster as dg

from eval_pipeline.defs.fused import member_of_message

_DONE = {"STEP_SUCCESS": "done", "STEP_FAILURE": "FAILED", "STEP_SKIPPED": "skipped"}
# The release check is a result, not an error: its failure reads "release blocked"
# (docs/gates.md#exit-codes-and-checks).
RELEASE_CHECK = "release_is_not_blocked"

# Where progress lines go when the command line set it: the terminal as it was before Dagster captured the run's
# stderr for its compute logs. Written through that capture, a line reaches the terminal by a copying process that
# stops with the run, and the run's last line ([30/30]) was sometimes lost on the way.
_console = None


def use_console(stream) -> None:
    """Send progress lines of the runs started after this call to `stream` (None: sys.stderr as the logger finds it)."""
    global _console
    _console = stream


class _StepProgress(logging.Handler):
    def __init__(self, total_steps: int, stream) -> None:
        super().__init__(level=logging.DEBUG)
        self.total = total_steps
        self.finished = 0
        self.started: dict[str, float] = {}
        self.stream = stream
        self.release_announced = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._emit(record)
        except Exception:  # progress output must never fail a run
            self.handleError(record)

    def _emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        if event is None:
            message = record.getMessage()
            member = member_of_message(meta.get("orig_message") or message)
            if member is not None:  # one table group of a fused step is done: progress inside a long step
                self.stream.write(f"         {member[0]:<40} done     {member[1]:6.1f}s\n")
                self.stream.flush()
                return
            if record.levelno >= logging.WARNING and "Not executing" not in message:
                self.stream.write(f"  ! {message.splitlines()[0][:300]}\n")
            return
        kind, step = event.event_type_value, event.step_key
        if kind == "STEP_START":
            self.started[step] = time.perf_counter()
        elif kind in _DONE:
            self.finished += 1
            took = time.perf_counter() - self.started.get(step, time.perf_counter())
            total = f"/{self.total}" if self.total else ""
            self.stream.write(f"  [{self.finished:>2}{total}] {step:<40} {_DONE[kind]:<8} {took:6.1f}s\n")
            if kind == "STEP_FAILURE":
                error = event.event_specific_data.error
                cause = error.cause or error
                self.stream.write(f"      {(cause.message or error.message).strip().splitlines()[-1][:400]}\n")
        elif kind == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            if not data.passed and data.check_name == RELEASE_CHECK:
                if self.release_announced:  # gate_results and gate_report carry the same decision: said once
                    return
                self.release_announced = True
                self.stream.write(
                    f"  ! release blocked: check {data.check_name} on {data.asset_key.to_user_string()} "
                    "failed (a result: the evaluation goes on)\n"
                )
            elif not data.passed:
                self.stream.write(f"  ! check {data.check_name} on {data.asset_key.to_user_string()} failed\n")
        self.stream.flush()


@dg.logger(
    config_schema={"total_steps": dg.Field(int, default_value=0, description="steps in the run, for [n/N] counts")},
    description="Concise step progress for the command line: one line per finished step, failures with their cause.",
)
def progress_logger(init_context) -> logging.Logger:
    """'[n/N] step done 1.2s' lines on stderr."""
    logger = logging.Logger("eval_pipeline.progress", level=logging.DEBUG)
    logger.addHandler(_StepProgress(init_context.logger_config["total_steps"], _console or sys.stderr))
    return logger
