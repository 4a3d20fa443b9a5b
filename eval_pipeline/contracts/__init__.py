"""Input contracts (docs/inputs.md) and the canonical frames and table docs built on them; import from the modules."""

__all__ = [
    "base",
    "cases",
    "column_docs",
    "frames",
    "identifiers",
    "labels",
    "policy",
    "schemas",
    "table_docs",
    "traces",
]
