"""Report sections rendered twice from one source: Markdown (files and Dagster metadata) and a self-contained HTML page.

Text in a report comes from traces (answers, queries, reasons), so both renderings escape it: HTML through
`html.escape`, Markdown by writing `&`, `<` and `>` as entities, which Markdown viewers show as the characters and
never read as markup (raw HTML in Markdown, such as a `<script>` in an answer, would otherwise be rendered).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

import polars as pl

MAX_ROWS = 200


@dataclass
class Section:
    """One report section: prose lines, an optional table and an optional SVG chart."""

    title: str
    lines: list[str] = field(default_factory=list)
    table: pl.DataFrame | None = None
    chart: str | None = None
    level: int = 2


def _text(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value) if value else "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def markdown_text(text: str) -> str:
    """Text made inert in Markdown: `&`, `<` and `>` as HTML entities, so no raw HTML reaches a viewer."""
    return escape(text, quote=False)


def _cell(value) -> str:
    return markdown_text(_text(value)).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_table(frame: pl.DataFrame, max_rows: int = MAX_ROWS) -> str:
    """A Markdown table of a frame (values formatted and escaped; long tables cut with a note)."""
    if frame.height == 0:
        return "_none_"
    header = "| " + " | ".join(_cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.head(max_rows).iter_rows()]
    more = [f"\n_{frame.height - max_rows} more rows in the table_"] if frame.height > max_rows else []
    return "\n".join([header, rule, *rows, *more])


def html_table(frame: pl.DataFrame, max_rows: int = MAX_ROWS) -> str:
    """An HTML table of a frame."""
    if frame.height == 0:
        return "<p><em>none</em></p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_text(v))}</td>" for v in row) + "</tr>" for row in frame.head(max_rows).iter_rows()
    )
    more = f"<p><em>{frame.height - max_rows} more rows in the table</em></p>" if frame.height > max_rows else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def render_markdown(title: str, sections: list[Section]) -> str:
    """The report as Markdown."""
    out = [f"# {markdown_text(title)}", ""]
    for section in sections:
        out.append(f"{'#' * section.level} {markdown_text(section.title)}")
        out.append("")
        out.extend(markdown_text(line) for line in section.lines)
        if section.lines:
            out.append("")
        if section.table is not None:
            out.append(markdown_table(section.table))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f1f3f6} h1{font-size:1.5rem} h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.chart{margin:.5rem 0 1rem} code{background:#f4f4f4;padding:0 .2rem}
"""


def render_html(title: str, sections: list[Section]) -> str:
    """The report as one self-contained HTML page with inline SVG charts."""
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>"]
    for section in sections:
        level = min(section.level, 4)
        parts.append(f"<h{level}>{escape(section.title)}</h{level}>")
        for line in section.lines:
            parts.append(f"<p>{escape(line.lstrip('- '))}</p>")
        if section.chart:
            parts.append(f'<div class="chart">{section.chart}</div>')
        if section.table is not None:
            parts.append(html_table(section.table))
    parts.append("</body></html>")
    return "\n".join(parts)
