"""Frames read from the warehouse, kept by table version for the next reader in the same process.

A Delta table's version never changes once committed, so a read repeated at the same version (the same table,
created once, and the same rows and columns asked for) is the same frame. A run's steps read the same inputs again and
again (the de-identified cases by each lane and the gates, the run manifest by most members, a re-score's qrels), and
each read decodes the Parquet files anew. The table's id is part of the key: a table deleted and created again
at the same place starts again at version 0 with other rows and another id.

Bounded: only frames up to `entry_bytes` are kept, and the least recently used go once `budget_bytes` is held. A
million-trace run's large tables are never kept (they would raise its peak memory), its small ones still are. Frames
are shared, not copied: polars frames are not changed in place by this code base.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import polars as pl

__all__ = ["ReadCache", "READS"]


class ReadCache:
    """A least-recently-used store of frames by key, holding at most `budget_bytes` (polars' estimated size)."""

    def __init__(self, *, budget_bytes: int, entry_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.entry_bytes = entry_bytes
        self._frames: OrderedDict[Hashable, tuple[pl.DataFrame, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: Hashable) -> pl.DataFrame | None:
        """The frame kept under `key`, None when there is none."""
        with self._lock:
            entry = self._frames.get(key)
            if entry is None:
                return None
            self._frames.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: Hashable, frame: pl.DataFrame) -> None:
        """Keep `frame` under `key` when it is small enough, dropping the least recently used beyond the budget."""
        size = frame.estimated_size()
        if size > self.entry_bytes:
            return
        with self._lock:
            if key in self._frames:
                self._held -= self._frames.pop(key)[1]
            self._frames[key] = (frame, size)
            self._held += size
            while self._held > self.budget_bytes:
                _, (_, dropped) = self._frames.popitem(last=False)
                self._held -= dropped

    def held_bytes(self) -> int:
        """The estimated size of the frames kept."""
        return self._held

    def clear(self) -> None:
        """Drop every frame kept."""
        with self._lock:
            self._frames.clear()
            self._held = 0


# 256 MiB in all, 64 MiB a frame: at 100k traces every input a step reads again fits (the de-identified cases are
# 38 MB); at a million only the small tables do, and the peak rises by at most the budget.
READS = ReadCache(budget_bytes=256 << 20, entry_bytes=64 << 20)
