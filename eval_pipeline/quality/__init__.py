"""Table contracts: the columns, types and ranges of every warehouse table, checked with Great Expectations."""

__all__ = ["contracts", "tables"]
