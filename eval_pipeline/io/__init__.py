"""Inputs and storage: one reader for the data root, input loaders with reject rows, trace ingestion, the warehouse.

`__all__` names the modules the other layers import (import the names from them); the rest of the package serves
these: columnar and case_columnar (columnar reading of JSON lines and case lines), trace_schema, trace_per_line and
trace_columnar (the two paths of the trace ingestion), forked (work on forked workers) and json_limits.
"""

__all__ = [
    "arrow_memory",
    "fingerprints",
    "ingest",
    "inputs",
    "json_errors",
    "labels",
    "loaders",
    "policy",
    "storage",
    "strict_yaml",
    "warehouse",
]
