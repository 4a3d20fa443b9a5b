"""How a report writes one value: the formatter behind table cells, case stories and metric lines."""

from __future__ import annotations

import json

# What a report shows where a value is missing (None): in table cells, story lines and metric lines alike.
MISSING = "–"


def format_value(value, digits: int = 4, missing: str = MISSING) -> str:
    """A value as a report shows it: floats with `digits` decimals, yes/no, the items of a list joined, a JSON object as
    JSON text (never Python's repr, which writes None and single quotes), `missing` for none and for an empty list."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, list | tuple):
        return ", ".join(format_value(v, digits, missing) for v in value) if value else missing
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def format_number(value: float | None, digits: int = 4, missing: str = MISSING) -> str:
    """A number (a mean, a rate) with `digits` decimals, an int or bool as a number too; `missing` for none."""
    return missing if value is None else f"{value:.{digits}f}"
