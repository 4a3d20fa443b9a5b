"""Great Expectations in a process of its own, so its import and its validations do not hold this one's interpreter.

`import great_expectations` takes about two seconds of one core (every expectation module, scipy, altair), and a run
in one process would pay it on its critical path: on a background thread it still holds the interpreter lock the
run's own Python needs. Started at the beginning of a run, the validator process imports it on the other core while
the run reads its inputs. Each contract validation is then sent to it (the checked columns only) and its verdicts
come back while the run goes on (defs.deferred): the same suites and verdicts quality.contracts gives in this process.

A validator that cannot start, or stops, leaves validation to this process, as it was. A table too large to send
(SEND_LIMIT_BYTES) stops it: a run that large validates in its own process, where the import is a small part of it.
The process ends when this one closes its pipe (at exit, or when this process dies).
"""

from __future__ import annotations

import atexit
import importlib
import os
import subprocess
import sys
import threading
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

import polars as pl

__all__ = ["Pending", "Validator", "current", "start"]

_CURRENT: list[Validator] = []
# A request is pickled whole in this process and unpickled whole in the validator: past this size the copies cost
# more memory than the import saves time. At a million traces the run's largest tables are over it (sending them took
# the run from 7.7 to 9.0 GiB, over its 8 GiB budget), and by then the import is a small part of the run.
SEND_LIMIT_BYTES = 64 << 20
_START_LOCK = threading.Lock()


class Pending:
    """The answer to one request, once the validator gives it (None when it could not)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: Any = None

    def _set(self, value: Any) -> None:
        self._value = value
        self._done.set()

    def result(self) -> Any | None:
        """What the handler's function returned there; None when the validator stopped or the function raised (the
        caller computes it, and raises, itself)."""
        self._done.wait()
        return self._value


class Validator:
    """A Great Expectations process: submit() sends it a call of one of the functions `handler` (a module with
    prepare() and a REMOTE tuple of function names) lists, and returns its Pending answer at once; answers come back
    in order and are read on a thread, so the caller works meanwhile."""

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
        self._send_lock = threading.Lock()
        # the requests awaiting an answer, and `broken`, are changed under this lock by the reader and by _stop
        self._waiting_lock = threading.Lock()
        self._waiting: deque[Pending] = deque()
        self._asked = False
        self.broken = False
        threading.Thread(target=self._read, name="validator-replies", daemon=True).start()

    def submit(self, function: str, *args: Any) -> Pending:
        """Send `function(*args)` to the validator; its answer comes as the Pending's result. Frames larger than
        SEND_LIMIT_BYTES are not sent: the validator stops, and the caller computes it, and the rest, itself."""
        pending = Pending()
        if sum(a.estimated_size() for a in args if isinstance(a, pl.DataFrame)) > SEND_LIMIT_BYTES:
            self.close()
            pending._set(None)
            return pending
        with self._send_lock:
            with self._waiting_lock:
                if self.broken:
                    pending._set(None)
                    return pending
                self._waiting.append(pending)
            self._asked = True
            try:
                self._requests.send((function, args))
            except (OSError, ValueError):  # the pipe is closed: the process stopped, or close() ran
                self._stop()
            except Exception:  # not sent (arguments that cannot be pickled): no answer will come for it
                with self._waiting_lock:
                    if self._waiting and self._waiting[-1] is pending:  # the last one: others wait for _send_lock
                        self._waiting.pop()
                pending._set(None)
        return pending

    def call(self, function: str, *args: Any) -> Any | None:
        """submit() and wait for the answer."""
        return self.submit(function, *args).result()

    def _read(self) -> None:
        while True:
            try:
                done, value = self._replies.recv()
            except (EOFError, OSError):
                self._stop()
                return
            # answers come in the order asked; none is waiting once _stop answered them all (the reply is dropped)
            with self._waiting_lock:
                pending = self._waiting.popleft() if self._waiting else None
            if pending is not None:
                pending._set(value if done else None)

    def _stop(self) -> None:
        with self._waiting_lock:
            self.broken = True
            stopped = list(self._waiting)
            self._waiting.clear()
        for pending in stopped:
            pending._set(None)

    def close(self) -> None:
        """End the process (it leaves when its pipe closes); requests still waiting get no answer. One never asked
        anything is stopped at once: it may still be importing, and a command that ended early (bad input) would wait
        for that."""
        with self._send_lock:
            with self._waiting_lock:
                self.broken = True
            self._requests.close()
            if not self._asked:
                self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stop()
        self._replies.close()


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
            function, args = requests.recv()
        except (EOFError, OSError):
            # every answer is sent and nothing else is held: leave without tearing down Great Expectations, pandas and
            # scipy module by module (about a second the run's command would wait for in close())
            os._exit(0)
        try:
            if function not in module.REMOTE:
                raise ValueError(f"{handler}.{function} is not served")
            reply = (True, getattr(module, function)(*args))
        except Exception as exc:  # the caller computes it again in its own process, and raises it there
            reply = (False, f"{type(exc).__name__}: {exc}")
        replies.send(reply)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
