"""Great Expectations in a validator process (quality.validator): the same verdicts, and the run's own process never
imports it."""

import os
import subprocess
import sys

import polars as pl
import pytest

from eval_pipeline.quality import contracts, remote, validator
from eval_pipeline.quality.tables import STAGE_RESULTS

PASSING = pl.DataFrame(
    {
        "run_id": ["r"] * 3,
        "trace_id": ["a", "b", "c"],
        "case_id": ["x"] * 3,
        "attempt": [1, 1, 2],
        "status": ["pass", "fail", "incomplete"],
        "reason": [None, "wrong tool", "judge unavailable"],
        "lane": ["rag"] * 3,
        "stage": ["retrieval"] * 3,
    }
)


def _request(frame: pl.DataFrame) -> tuple:
    return ("rag/rag_stage_results", STAGE_RESULTS, frame.head(0), frame)


def test_the_validator_process_gives_the_verdicts_this_process_gives():
    failing = PASSING.drop("lane").with_columns(status=pl.Series(["pass", "bogus", "fail"]))
    own = validator.Validator(remote.__name__)
    try:
        for frame in (PASSING, failing):
            there = own.call("validated", *_request(frame))
            assert there == contracts.validated(*_request(frame))
        schema, ranges = own.call("validated", *_request(failing))
        assert not schema.passed and "expect_column_to_exist(lane)" in schema.metadata["failures"]
        assert not ranges.passed and "['bogus']" in ranges.metadata["failures"]
        # several requests in flight are answered in order, while this process goes on
        pending = [own.submit("validated", *_request(f)) for f in (failing, PASSING, failing)]
        assert [p.result()[1].passed for p in pending] == [False, True, False]
        # a call that raises there, or a function it does not serve, is answered None: the caller computes it here
        assert own.call("validated", "t", "not a contract", PASSING.head(0), PASSING) is None and not own.broken
        assert own.call("prepare") is None and own.call("check_no_personal_data", "t", PASSING) is None
        assert not own.broken
    finally:
        own.close()
    # a stopped validator answers nothing: the caller validates in its own process
    assert own.broken and own.call("validated", *_request(PASSING)) is None


PROBE = """
import sys
from eval_pipeline.cli import main
from eval_pipeline.quality import validator
code = main(sys.argv[1:])
print("exit", code, "great_expectations" in sys.modules, validator.current() is not None, file=sys.stderr)
"""


@pytest.mark.slow
def test_a_run_in_process_validates_in_the_validator_and_never_imports_great_expectations(sample_data, tmp_path):
    argv = [
        "run",
        "--data",
        str(sample_data),
        "--run",
        "base-41",
        "--warehouse",
        str(tmp_path / "warehouse"),
        "--reports",
        str(tmp_path / "reports"),
        "--deid-demo",
        "--quiet",
    ]
    (tmp_path / "dagster").mkdir()
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")},
    )
    last = result.stderr.strip().splitlines()[-1]
    # every check ran (exit 0: the evaluation completed), in the validator, which was still up at the end
    assert last == "exit 0 False True", result.stderr[-3000:]


def test_a_table_too_large_to_send_stops_the_validator_and_is_validated_here(monkeypatch):
    own = validator.Validator(remote.__name__)
    monkeypatch.setattr(validator, "_CURRENT", [own])
    try:
        assert own.call("validated", *_request(PASSING))[1].passed  # small: answered there
        monkeypatch.setattr(validator, "SEND_LIMIT_BYTES", PASSING.estimated_size() - 1)
        # too large to send: no answer, the validator stops, and the check gives the same verdicts here
        assert own.call("validated", *_request(PASSING)) is None
        assert own.broken and validator.current() is None
        assert contracts.check_schema_and_ranges(*_request(PASSING)[:2], PASSING) == contracts.validated(
            *_request(PASSING)
        )
    finally:
        own.close()


def test_a_validator_leaves_at_once_when_closed_and_is_stopped_when_never_asked():
    # asked once: it answers, and when its pipe closes it leaves by itself (exit status 0)
    asked = validator.Validator(remote.__name__)
    assert asked.call("validated", *_request(PASSING)) is not None
    asked.close()
    assert asked._process.returncode == 0
    # never asked (a command that stopped at bad input): it is stopped, not waited for while it imports
    idle = validator.Validator(remote.__name__)
    idle.close()
    assert idle._process.returncode == -15 and idle.broken


def test_a_run_refused_before_any_step_stops_the_validator_it_started(tmp_path):
    # `run` starts the validator first, so its import overlaps the command's own start; bad input ends it
    probe = PROBE.replace(
        "print(", "v = validator._CURRENT[0] if validator._CURRENT else None\nv and v.close()\nprint("
    ).replace("validator.current() is not None", "v and v._process.returncode")
    result = subprocess.run(
        [sys.executable, "-c", probe, "run", "--data", str(tmp_path / "missing"), "--deid-demo", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.stderr.strip().splitlines()[-1] == "exit 2 False -15", result.stderr[-2000:]


class _Replies:
    """A reply pipe whose first answer arrives only after the validator was stopped, then the end of the pipe."""

    def __init__(self, stopped) -> None:
        self.stopped = stopped
        self.answers = [(True, "the first request's answer")]

    def recv(self):
        assert self.stopped.wait(5)
        if self.answers:
            return self.answers.pop(0)
        raise EOFError


def test_an_answer_that_arrives_after_the_validator_stopped_is_dropped_not_given_to_another_request():
    import threading

    own = validator.Validator.__new__(validator.Validator)  # its state alone: no process
    stopped = threading.Event()
    own._send_lock, own._waiting_lock = threading.Lock(), threading.Lock()
    own._waiting = validator.deque()
    own.broken = False
    own._replies = _Replies(stopped)
    first, second = validator.Pending(), validator.Pending()
    own._waiting.extend([first, second])
    own._stop()  # close() or a failed send: every request waiting is answered None
    stopped.set()
    own._read()  # the late answer, then the end of the pipe: no error, no answer moved to another request
    assert (first.result(), second.result()) == (None, None)
    later = own.submit("validated", *_request(PASSING))
    assert later.result() is None and own.broken


def test_a_request_that_cannot_be_sent_is_answered_none_and_the_next_gets_its_own_answer():
    import threading

    own = validator.Validator(remote.__name__)
    try:
        unsent = own.submit("validated", threading.Lock())  # a lock cannot be pickled: nothing is sent
        assert unsent.result() is None and not own.broken
        # before, the unsent request stayed first in line: this answer went to it, and this request waited forever
        assert own.call("validated", *_request(PASSING)) == contracts.validated(*_request(PASSING))
    finally:
        own.close()
