"""Checks answered while a fused step goes on: a table's Great Expectations validation runs on the validator process
(quality.validator) while this process writes the table and computes the next one.

Inside a fused step, when a validator process runs, checks.results sends the `schema` and `value_ranges` checks to it
and registers them here instead of waiting. The step yields their results (as separate check results of the same
step) before the first member that reads the table, and at its end; so a failed blocking check still holds back
every reader, exactly as when the result came with the materialization. Elsewhere (an asset called directly, no
validator) they are evaluated at once, as before.

The personal data scan of such a table is deferred the same way, to a thread of the step (Deferred.run): it stays in
this process, where the detectors' patterns are compiled, and its regexes run in polars, which releases the
interpreter, while the step writes the table and computes the next member.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import dagster as dg

from eval_pipeline.quality import validator

__all__ = ["Deferred", "current", "deferring"]


@dataclass(frozen=True)
class _Entry:
    key: dg.AssetKey
    check_name: str
    answer: Callable[[], dg.AssetCheckResult]


class Deferred:
    """The checks of one step whose answers are still coming, in the order they were asked."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._worker: ThreadPoolExecutor | None = None

    def run(self, function: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """function(*args) started on the step's check thread, one after another in the order asked: a function that
        waits for its value (and raises what it raised). The thread is the step's own, made when first needed."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="deferred-checks")
        return self._worker.submit(function, *args).result

    def close(self) -> None:
        """End the check thread once what it was given is done (the step is over)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._worker = None

    def add(self, key: dg.AssetKey, check_name: str, answer: Callable[[], dg.AssetCheckResult]) -> None:
        """A check of table `key` whose result answer() gives."""
        self._entries.append(_Entry(key, check_name, answer))

    def add_running(self, key: dg.AssetKey, check_name: str, check: Callable[[], dg.AssetCheckResult]) -> None:
        """A check of table `key` evaluated by check() on the step's check thread, started now (see run)."""
        self.add(key, check_name, self.run(check))

    def has(self, key: dg.AssetKey, check_name: str) -> bool:
        """Whether a check of table `key` is registered and not yet taken."""
        return any(e.key == key and e.check_name == check_name for e in self._entries)

    def take(self, keys: Collection[dg.AssetKey] | None = None) -> list[dg.AssetCheckResult]:
        """The results of the checks of `keys` (of every table when None), waiting for them; they leave the list."""
        taken = [e for e in self._entries if keys is None or e.key in keys]
        self._entries = [e for e in self._entries if e not in taken]
        return [e.answer() for e in taken]

    def drop(self, keys: Collection[dg.AssetKey]) -> None:
        """Forget the checks of `keys` (their member failed: its tables were not written)."""
        self._entries = [e for e in self._entries if e.key not in keys]


_deferred: ContextVar[Deferred | None] = ContextVar("eval_pipeline_deferred_checks", default=None)


def current() -> Deferred | None:
    """Where checks are registered to be answered later: the running fused step's, when a validator process runs."""
    deferred = _deferred.get()
    return deferred if deferred is not None and validator.current() is not None else None


@contextmanager
def deferring(deferred: Deferred | None) -> Iterator[None]:
    """Checks asked within are registered with `deferred` (None: answered at once)."""
    token = _deferred.set(deferred)
    try:
        yield
    finally:
        _deferred.reset(token)
