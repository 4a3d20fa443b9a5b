"""Pure scoring functions that several members call on the very same frames, computed once while those frames live.

A lane's attribution, reliability, slices and report each decide every trace's outcome from the same stage results,
and the lanes and gates each sort cases into the same slices. In a run those frames are the same objects (one read
per step, and the warehouse's read cache across steps), so the result is kept under the identity of the frames and
dropped when any of them is: no frame is kept alive by it, and nothing is kept once the step lets them go.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import polars as pl

from eval_pipeline.scoring import attribution, slices

__all__ = ["lane_outcomes", "same_frames", "slice_membership"]

Result = TypeVar("Result")


def same_frames(function: Callable[..., Result]) -> Callable[..., Result]:
    """`function` (pure, positional arguments: frames and None), answering again from what it returned for the same
    frame objects while they are alive."""
    kept: dict[tuple, tuple[tuple, Any]] = {}
    lock = threading.Lock()

    @functools.wraps(function)
    def call(*args: pl.DataFrame | None) -> Result:
        if any(a is not None and not isinstance(a, pl.DataFrame) for a in args):
            return function(*args)
        key = tuple(None if a is None else id(a) for a in args)
        with lock:
            entry = kept.get(key)
        # an id is reused once its frame is gone: the weak references tell the same frames from new ones
        if entry is not None and all(ref() is arg for ref, arg in zip(entry[0], args, strict=True) if arg is not None):
            return entry[1]
        result = function(*args)

        def forget(_: object, key: tuple = key) -> None:
            with lock:
                kept.pop(key, None)

        refs = tuple(None if a is None else weakref.ref(a, forget) for a in args)
        with lock:
            kept[key] = (refs, result)
        return result

    call.kept = kept  # type: ignore[attr-defined]  # for tests: what is held
    return call


# Four members of a lane decide its outcomes from the same stage results; the lanes and the gates sort the same cases
# into the same slices.
lane_outcomes = same_frames(attribution.lane_outcomes)
slice_membership = same_frames(slices.slice_membership)
