"""How a story writes a value, a delta and a long text.

Values through the reports' one value formatter (`reporting.values`), costs with six decimals, texts cut to a preview.
"""

from __future__ import annotations

from eval_pipeline.reporting.case_story.arguments import ABSENT
from eval_pipeline.reporting.case_story.model import TEXT_PREVIEW
from eval_pipeline.reporting.values import format_value

# Costs are fractions of a cent: four decimals would hide every change.
DIGITS = {"cost_usd": 6}


def fmt(value, digits: int = 4) -> str:
    """A value as a report shows it (`reporting.values.format_value`): `digits` decimals, yes/no, – for none or
    ABSENT."""
    return format_value(None if value is ABSENT else value, digits)


def _delta_text(delta: float | None, metric: str) -> str:
    if delta is None:
        return ""
    if float(delta).is_integer() and metric not in DIGITS:
        return f" ({int(delta):+d})"
    return f" ({delta:+.{DIGITS.get(metric, 4)}f})"


def delta_cell(delta: float | None, metric: str) -> str | None:
    """A delta as the side-by-side table shows it: whole numbers as counts, costs with six decimals."""
    text = _delta_text(delta, metric)
    return text.strip()[1:-1] if text else None


def short_text(text: str | None, width: int = TEXT_PREVIEW) -> str:
    """Text on one line (runs of white space as one space), cut with … past `width` characters."""
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"
