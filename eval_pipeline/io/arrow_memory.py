"""Arrow's memory pool for this process: the system allocator, unless the environment named another."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["choose_pool"]


def choose_pool(named_in_environment: str | None) -> None:
    """Make the system allocator Arrow's default pool, unless ARROW_DEFAULT_MEMORY_POOL (passed in) named one."""
    # pyarrow's default, mimalloc, advises its 1 GiB arenas for transparent huge pages: the JSON reads of trace
    # ingestion then fault in fresh 2 MiB pages that the kernel zeroes whole. On the 2-core reference VM that was
    # most of `raw_traces` and `parsed_traces` at 100k (docs/benchmarks/pipeline.md).
    if not named_in_environment:
        pa.set_memory_pool(pa.system_memory_pool())
