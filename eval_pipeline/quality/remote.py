"""Great Expectations checks evaluated on the validator process when one runs (quality.validator), else here.

The validator process serves this module: prepare() imports Great Expectations there, and it answers the functions
REMOTE names. A check asked `…_later` starts at once and is answered by the function it returns; where the
validator is not running, could not answer, or raised, the check is evaluated in this process, with the same result.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import polars as pl

from eval_pipeline.quality import validator
from eval_pipeline.quality.contracts import (
    TableContract,
    Verdict,
    prepare,
    schema_and_ranges_request,
    validated,
)

__all__ = ["REMOTE", "prepare", "schema_and_ranges_later", "warm_up_in_background"]

# What the validator process may be asked. The personal data scans stay in the run's process: the table with the most
# to scan (deid_cases) comes last in its step, where nothing is left to overlap with, and in the validator the first
# scan would also pay the detectors' imports and compiled patterns again (measured at 10k: the ingest step 2.5 s ->
# 4.6 s when the scans were sent too).
REMOTE = ("validated",)


def warm_up_in_background(*, own_process: bool = True) -> None:
    """Get Great Expectations ready off the critical path: with `own_process`, a validator process imports it on
    another core and checks there; else, or where that process cannot start, this process imports it on a daemon
    thread. The first check needs it, and the import takes seconds."""
    if own_process and "great_expectations" not in sys.modules and validator.start(__name__) is not None:
        return
    threading.Thread(target=prepare, name="great-expectations-import", daemon=True).start()


def schema_and_ranges_later(
    name: str, contract: TableContract, frame: pl.DataFrame
) -> Callable[[], tuple[Verdict, Verdict]]:
    """contracts.check_schema_and_ranges started now: a function giving its two verdicts."""
    return _later("validated", validated, schema_and_ranges_request(name, contract, frame))


def _later(name: str, function: Callable, args: tuple) -> Callable:
    remote = validator.current()
    if remote is None:
        value = function(*args)
        return lambda: value
    pending = remote.submit(name, *args)

    def answer():
        value = pending.result()
        return value if value is not None else function(*args)

    return answer
