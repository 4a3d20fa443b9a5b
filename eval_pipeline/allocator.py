"""Polars' memory allocator for every process of the pipeline, configured before polars is loaded.

Polars allocates with its own jemalloc, which by default hands freed pages back to the kernel within half a second
(`dirty_decay_ms:500`, `muzzy_decay_ms:1000`, from background threads) over 8 arenas. A run allocates and frees
column buffers of hundreds of megabytes member after member, so the kernel zeroed the same memory again and again:
on the 2-core reference VM a 100k run spent 10–11 s of system time, and purging threads and page faults were a
quarter of its CPU samples. Freed pages kept for 2 s in 2 arenas (then returned at once, not lazily): 8.6–8.8 s of
system time at 100k and about the same peak. Longer kept them faster still but larger: 5 s took the 100k bench's
peak from 2.9 to 3.5–3.8 GiB (its forked workers share the retained pages), never returning them a million-trace run
to 12.6 GiB, a 10 s decay to 8.0–8.2 GiB (docs/benchmarks/pipeline.md).

jemalloc reads its options once, when polars' library loads, from `_RJEM_MALLOC_CONF` in the process environment;
polars' own `__init__` writes its defaults there first and appends what it found, so options set before polars loads
win. This module is imported by the package before anything loads polars (eval_pipeline/__init__.py), and child
processes inherit the setting. A value the user set is kept; so are polars' defaults where polars was already loaded
when the package was imported (a notebook that imported polars first).
"""

from __future__ import annotations

import os
import sys

__all__ = ["POLARS_ALLOCATOR_VARIABLE", "POLARS_ALLOCATOR_OPTIONS", "configure_polars_allocator"]

POLARS_ALLOCATOR_VARIABLE = "_RJEM_MALLOC_CONF"
# freed pages stay 2 s for reuse, then go back to the kernel at once; 2 arenas, so a run's threads share them
POLARS_ALLOCATOR_OPTIONS = "narenas:2,dirty_decay_ms:2000,muzzy_decay_ms:0"


def configure_polars_allocator() -> bool:
    """Set POLARS_ALLOCATOR_OPTIONS for polars' jemalloc when polars is not loaded yet and the environment names no
    options of its own; whether it was set."""
    if "polars" in sys.modules or POLARS_ALLOCATOR_VARIABLE in os.environ:
        return False
    os.environ[POLARS_ALLOCATOR_VARIABLE] = POLARS_ALLOCATOR_OPTIONS
    return True
