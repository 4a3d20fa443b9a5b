"""Work on forked workers: a batch split into parts that run on processes inheriting its payload (never sent)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections.abc import Callable
from typing import Any

_inherited: tuple = ()


def fork_workers() -> int:
    """How many forked workers a large batch may use (1: none)."""
    # A daemonic process may not start children: a step in a Celery prefork worker (or any pool worker) runs in one.
    if "fork" not in mp.get_all_start_methods() or mp.current_process().daemon:
        return 1
    return min(os.cpu_count() or 1, 8)


def _inherit(payload: tuple) -> None:
    global _inherited
    _inherited = payload
    # Forked inside a Dagster step, a worker inherits the handler with which Dagster defers SIGTERM: it would
    # survive Pool.terminate(). The default action makes it stoppable again.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_part(task: tuple) -> object:
    part, start, stop = task
    return part(_inherited, start, stop)


class Forked:
    """part(payload, start, stop) for ranges covering `count` items, on forked workers that inherit the payload (never
    sent), started at once and collected by results(), so the caller works meanwhile.

    Parts run Python only: a worker must not start the thread pools of polars or pyarrow, whose locks the fork may
    have copied while held.
    """

    def __init__(self, part: Callable[[tuple, int, int], Any], payload: tuple, count: int):
        workers = fork_workers()
        size = max(1, -(-count // (workers * 4)))
        self._pool = mp.get_context("fork").Pool(workers, initializer=_inherit, initargs=(payload,))
        self._collected = False
        try:
            self._parts = self._pool.map_async(
                _run_part, [(part, i, min(i + size, count)) for i in range(0, count, size)]
            )
        except BaseException:
            self.close()
            raise

    def results(self) -> list:
        """Each part's result, in order."""
        try:
            parts = self._parts.get()
            self._pool.close()  # workers leave on their own once the queue is drained; no signal is needed
        except BaseException:
            self.close()
            raise
        self._pool.join()
        self._collected = True
        self._parts = None  # the payload goes with the pool
        return parts

    def close(self) -> None:
        """Stop the workers (when the results are not wanted)."""
        if not self._collected:
            self._collected = True
            self._pool.terminate()
            self._pool.join()

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def run_parts(part: Callable[[tuple, int, int], Any], payload: tuple, count: int, parallel_from: int) -> Forked | list:
    """part(payload, ...) over `count` items: on forked workers (a Forked) from `parallel_from` items on and with
    cores to spare, else at once in this process (a list of one result)."""
    if count >= parallel_from and fork_workers() > 1:
        return Forked(part, payload, count)
    return [part(payload, 0, count)]


def results_of(parts: Forked | list) -> list:
    """The results of run_parts."""
    return parts.results() if isinstance(parts, Forked) else parts
