"""Arrow's memory pool for this process: jemalloc (else the system allocator), unless the environment named one."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["choose_pool"]


def choose_pool(named_in_environment: str | None) -> None:
    """Make jemalloc, or the system allocator where pyarrow was built without it, Arrow's default pool, unless
    ARROW_DEFAULT_MEMORY_POOL (passed in) named one."""
    # pyarrow's default, mimalloc, advises its 1 GiB arenas for transparent huge pages: the JSON reads of trace
    # ingestion then fault in fresh 2 MiB pages that the kernel zeroes whole (13 % of a 100k run's CPU samples on the
    # 2-core reference VM). The system allocator avoids that but keeps freed memory: 8.6 GiB at 1M, over the 8 GiB
    # budget. jemalloc returns it: 7.35 GiB and the fastest 1M run (docs/benchmarks/pipeline.md).
    if named_in_environment:
        return
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # wheels built without jemalloc (Windows)
        pool = pa.system_memory_pool()
    pa.set_memory_pool(pool)
