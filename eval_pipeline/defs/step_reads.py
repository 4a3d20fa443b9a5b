"""The reads of a fused step's chain of members (defs.fused): each input table read once, as a frame every member
takes its own columns of, and dropped once no later member needs it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from eval_pipeline.defs.resources import BATCHES_METADATA_KEY, ONLY_COLUMNS_METADATA_KEY, SKIP_COLUMNS_METADATA_KEY
from eval_pipeline.io.warehouse import ORDER_COLUMNS

__all__ = ["Reads", "shared_skips"]


def shared_skips(members: Sequence[Any]) -> dict[dg.AssetKey, frozenset[str]]:
    """Per table read as a frame, the columns no member reading it needs (one read then serves them all)."""
    skips: dict[dg.AssetKey, frozenset[str]] = {}
    for member in members:
        for key, metadata in member.inputs.values():
            if metadata.get(BATCHES_METADATA_KEY):
                continue
            # a member that names the columns it reads skips none here: the one read holds every column
            skip = (
                frozenset()
                if ONLY_COLUMNS_METADATA_KEY in metadata
                else frozenset(metadata.get(SKIP_COLUMNS_METADATA_KEY, ()))
            )
            # the columns that order a table of input lines when it is read are never skipped by a shared read
            if skip & ORDER_COLUMNS:
                raise dg.DagsterInvariantViolationError(f"{member.name} skips a column that orders {key}")
            skips[key] = skips[key] & skip if key in skips else skip
    return skips


class Reads:
    """A chain of members' reads: one per table, kept while a later member still needs it."""

    def __init__(self, io: Any, run_id: str, members: Sequence[Any], restricted: frozenset[dg.AssetKey]):
        """`io`: the warehouse IO manager; `members`: defs.fused members in order (their name and inputs)."""
        self.io = io
        self.run_id = run_id
        self.restricted = restricted
        self.skips = shared_skips(members)
        self.last_use = {key: i for i, m in enumerate(members) for key, _ in m.inputs.values()}
        self.frames: dict[dg.AssetKey, Any] = {}

    def value(self, key: dg.AssetKey, metadata: Mapping[str, Any]) -> Any:
        restricted = key in self.restricted
        if metadata.get(BATCHES_METADATA_KEY):
            return self.io.load(key, self.run_id, restricted=restricted, metadata=metadata)
        if key not in self.frames:
            shared = {SKIP_COLUMNS_METADATA_KEY: sorted(self.skips[key])} if self.skips[key] else None
            self.frames[key] = self.io.load(key, self.run_id, restricted=restricted, metadata=shared)
        frame = self.frames[key]
        skip = set(metadata.get(SKIP_COLUMNS_METADATA_KEY, ()))
        only = metadata.get(ONLY_COLUMNS_METADATA_KEY)
        kept = [c for c in frame.columns if c not in skip and (only is None or c in only)]
        return frame.select(kept) if len(kept) < frame.width else frame

    def stored(self, key: dg.AssetKey) -> Any:
        """Every column of the run's rows of a table the step writes, None if there are none (kept for a later member
        that reads them)."""
        if key in self.frames and not self.skips.get(key):
            return self.frames[key]
        try:
            frame = self.io.load(key, self.run_id, restricted=key in self.restricted)
        except dg.Failure:  # not materialized for this run
            return None
        if key in self.last_use and not self.skips.get(key):
            self.frames[key] = frame
        return frame

    def forget(self, keys: frozenset[dg.AssetKey]) -> None:
        """Drop what was read of tables a member has just written: `stored` may have read them before the member
        computed them (to see whether it could be reused), and a later member must read what it wrote."""
        for key in keys:
            self.frames.pop(key, None)

    def release(self, position: int) -> None:
        """Drop the reads no member after `position` needs."""
        for key in [k for k in self.frames if self.last_use[k] <= position]:
            del self.frames[key]
