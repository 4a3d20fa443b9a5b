"""Great Expectations in a process of its own, so its import and its validations do not hold this one's interpreter.

`import great_expectations` takes about two seconds of one core (every expectation module, scipy, altair), and a run
in one process would pay it on its critical path: on a background thread it still holds the interpreter lock the
run's own Python needs. Started at the beginning of a run, the validator process imports it on the other core while
the run reads its inputs; each contract validation is then sent to it (the checked columns only) and its verdicts
come back. The suites and the verdicts are the ones the handler (quality.contracts) gives in this process.

A validator that cannot start, or stops, leaves validation to this process, as it was. The process ends when this
one closes its pipe (at exit, or when this process dies).
"""

from __future__ import annotations

import atexit
import importlib
import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["Validator", "current", "start"]

_CURRENT: list[Validator] = []
_START_LOCK = threading.Lock()


class Validator:
    """A Great Expectations process: validate() sends it a request for `handler` (a module with prepare() and
    validated()) and returns what validated() gives there."""

    def __init__(self, handler: str) -> None:
        down_read, down_write = os.pipe()
        up_read, up_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__, handler, str(down_read), str(up_write)],
                pass_fds=(down_read, up_write),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            for fd in (down_read, down_write, up_read, up_write):
                os.close(fd)
            raise
        os.close(down_read)
        os.close(up_write)
        self._requests = Connection(down_write, readable=False)
        self._replies = Connection(up_read, writable=False)
        self._lock = threading.Lock()
        self.broken = False

    def validate(self, *request: Any) -> Any | None:
        """What the handler's validated(*request) gives in the validator process; None when it could not give it (it
        stopped, or validation raised there: this process validates, and raises, itself)."""
        with self._lock:
            if self.broken:
                return None
            try:
                self._requests.send(request)
                done, value = self._replies.recv()
            except (OSError, EOFError):
                self.broken = True
                return None
        return value if done else None

    def close(self) -> None:
        """End the process (it leaves when its pipe closes)."""
        with self._lock:
            self.broken = True
            for connection in (self._requests, self._replies):
                connection.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def start(handler: str) -> Validator | None:
    """The process's validator for `handler`, started once (None where it could not be)."""
    with _START_LOCK:
        if not _CURRENT:
            try:
                validator = Validator(handler)
            except OSError:
                return None
            atexit.register(validator.close)
            _CURRENT.append(validator)
        return _CURRENT[0]


def current() -> Validator | None:
    """The validator start() started, while it works."""
    return _CURRENT[0] if _CURRENT and not _CURRENT[0].broken else None


def _serve(handler: str, read_fd: int, write_fd: int) -> None:
    module = importlib.import_module(handler)
    module.prepare()
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            request = requests.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, module.validated(*request))
        except Exception as exc:  # the caller validates again in its own process, and raises it there
            reply = (False, f"{type(exc).__name__}: {exc}")
        replies.send(reply)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
